"""The catalogue: every bug the issue lists, on both backends, with a complete ground truth."""
import pytest

from bug_injection import catalog, get_bug
from bug_injection.reference.bench import SETUPS
from bug_injection.planted.catalog import KINDS
from bug_injection.tools import TOOLS
from bug_injection.reference.models import BACKENDS
from diagnostics.findings import CODES

ISSUE_BUGS = {
    "gradient": ["linear_input_transposed", "linear_weight_transposed", "linear_sign_flip",
                 "linear_wrong_scale", "linear_bias_mean", "relu_mask_dropped",
                 "sigmoid_derivative", "tanh_derivative", "conv_kernel_not_flipped",
                 "cross_entropy_not_divided", "add_broadcast_not_reduced",
                 "layer_norm_no_mean_term", "batch_norm_no_mean_term",
                 # issue 17: transformer-era, planted in the tiny GPT
                 "attention_mask_not_in_backward", "attention_softmax_no_subtraction",
                 "attention_scale_forward_only", "attention_values_untransposed",
                 "embedding_grad_assigned", "cross_entropy_counts_ignored",
                 "tied_weight_gradient_overwritten"],
    "training loop": ["missing_zero_grad", "learning_rate_too_high",
                      "optimizer_other_parameters", "detached_graph", "eval_mode_forgotten",
                      "labels_shuffled", "float_labels", "output_target_broadcast"],
    "init": ["negative_constant_init", "large_init_exploding", "zero_init",
             "deep_sigmoid_vanishing"],
    "numerics": ["softmax_without_max", "log_without_epsilon"],
    "data": ["unnormalized_inputs", "nonfinite_rows", "train_test_duplicates",
             "label_imbalance"],
}
PATTERNS = ("sign flip", "transpose", "scale", "mean instead of sum", "sum instead of mean",
            "zeroed")


def test_every_bug_of_the_issue_is_catalogued_under_its_kind():
    by_kind = {kind: [b.name for b in catalog() if b.kind == kind] for kind in KINDS}
    assert by_kind == ISSUE_BUGS


def test_names_are_unique_and_found_by_name():
    names = [bug.name for bug in catalog()]
    assert len(names) == len(set(names))
    assert all(get_bug(name).name == name for name in names)
    with pytest.raises(KeyError, match="no bug called 'nope'; catalogued: linear_input"):
        get_bug("nope")


@pytest.mark.parametrize("bug", catalog(), ids=lambda b: b.name)
def test_record_is_complete(bug):
    assert bug.setup in SETUPS
    assert bug.tool in TOOLS
    assert bug.codes and all(code in CODES for code in bug.codes)
    assert bug.description
    assert set(bug.backends) == set(BACKENDS)   # every bug of the issue makes sense on both
    assert not bug.unsupported
    if bug.kind == "gradient":
        assert bug.tool == "gradcheck" and bug.codes == ("GRADIENT_MISMATCH",)
        assert bug.culprit is not None and bug.path is not None
        assert bug.pattern is None or bug.pattern in PATTERNS
    if bug.kind == "data":
        assert bug.culprit == "data"


def test_records_are_frozen():
    bug = get_bug("missing_zero_grad")
    with pytest.raises(AttributeError):
        bug.culprit = "0"


def test_planting_checks_backend_and_bench():
    from bug_injection.reference.bench import make_bench

    bench = make_bench("mlp", "minigrad")
    with pytest.raises(ValueError, match="is planted in a 'mixed_mlp' bench, got 'mlp'"):
        get_bug("linear_input_transposed").planted(bench)
