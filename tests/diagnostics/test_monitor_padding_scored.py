"""PADDING_SCORED: a padding value (only in the leading or trailing run of each row, the runs'
lengths differing) is scored and makes up most of the scored positions. Named for tags padded
with a class of their own and no ignore_index, and for an inverted mask that scores padding
alone; quiet for padding ignored (-100, ignore_index=pad), for an LM whose padding is a small
share, for SFT prompt masking (a leading run of -100), for a per-position loss masked by the
caller (reduction="none"), and for rows of one length (no varying runs: not padding)."""
import pytest
import torch
import torch.nn.functional as F

from .target_nets import TAGS, alarms, codes, sentences, train_tagger
from .monitor_nets import one_torch_thread  # noqa: F401 (a fixture)

pytestmark = pytest.mark.usefixtures("one_torch_thread")
PAD = TAGS - 1     # the tagger's last class stands for padding in these tests


def _tags(tags):
    """Real tags in 0..PAD-1, padding PAD."""
    return tags.masked_fill(tags == PAD, 1).masked_fill(tags < 0, PAD)


def _long_padding(generator):
    def batch():
        return sentences(16, generator=generator, low=3, high=6, length=24)
    return batch


def test_padding_scored_as_a_class_is_named():
    report = train_tagger(lambda out, tags, n: F.cross_entropy(
        out.reshape(-1, TAGS), _tags(tags).reshape(-1)),
        batches=_long_padding(torch.Generator().manual_seed(1)))
    assert alarms(report) == ["PADDING_SCORED"]
    finding = report.findings[0]
    assert finding.location == "loss" and finding.evidence["padding_value"] == PAD
    assert finding.evidence["padding_share"] > 0.5 and "ignore_index" in finding.suggestion


def test_an_inverted_mask_scores_padding_alone():
    def loss(out, tags, n):
        real = tags >= 0
        labels = _tags(tags).masked_fill(real, -100)     # the mask the wrong way round
        return F.cross_entropy(out.reshape(-1, TAGS), labels.reshape(-1))
    report = train_tagger(loss)
    assert alarms(report)[0] == "PADDING_SCORED"
    assert "only padding is scored" in report.findings[0].message
    # the real classes are then never targets: a consequence, said after its cause
    assert set(alarms(report)) == {"PADDING_SCORED", "LABEL_RANGE"}


@pytest.mark.parametrize("ignore", ["minus_100", "pad_id"])
def test_ignored_padding_is_quiet(ignore):
    def loss(out, tags, n):
        labels = _tags(tags) if ignore == "pad_id" else tags.masked_fill(tags < 0, -100)
        return F.cross_entropy(out.reshape(-1, TAGS), labels.reshape(-1),
                               ignore_index=PAD if ignore == "pad_id" else -100)
    report = train_tagger(loss, batches=_long_padding(torch.Generator().manual_seed(1)))
    assert not alarms(report)


def test_a_small_share_of_padding_is_quiet():
    """Sentences of 10-16 words padded to 16: padding is scored, but it is a small share."""
    generator = torch.Generator().manual_seed(2)
    report = train_tagger(
        lambda out, tags, n: F.cross_entropy(out.reshape(-1, TAGS), _tags(tags).reshape(-1)),
        batches=lambda: sentences(16, generator=generator, low=10, high=16, length=16))
    assert "PADDING_SCORED" not in codes(report)


def test_sft_prompt_masking_is_quiet():
    """A leading run of -100 (the prompt), the response scored, padding -100."""
    def loss(out, tags, n):
        labels = tags.masked_fill(tags < 0, -100).clone()
        labels[:, :3] = -100
        return F.cross_entropy(out.reshape(-1, TAGS), labels.reshape(-1))
    assert not alarms(train_tagger(loss))


def test_a_loss_masked_by_the_caller_is_quiet():
    def loss(out, tags, n):
        per_position = F.cross_entropy(out.reshape(-1, TAGS), _tags(tags).reshape(-1),
                                       reduction="none")
        mask = (tags >= 0).reshape(-1).float()
        return (per_position * mask).sum() / mask.sum()
    report = train_tagger(loss, batches=_long_padding(torch.Generator().manual_seed(1)))
    assert "PADDING_SCORED" not in codes(report)


def test_rows_of_one_length_have_no_padding():
    """A value filling the same tail of every row is part of the data, not padding."""
    def loss(out, tags, n):
        labels = tags.masked_fill(tags < 0, 0).clone()
        labels[:, 4:] = PAD
        return F.cross_entropy(out.reshape(-1, TAGS), labels.reshape(-1))
    assert "PADDING_SCORED" not in codes(train_tagger(loss))


def _shifted_like_a_causal_lm_loss(labels):
    """What Hugging Face's causal-LM loss does with ``labels``: one ignored column appended,
    then shifted by one, flattened as a view of the shifted rows."""
    shifted = F.pad(labels, (0, 1), value=-100)[:, 1:].contiguous()
    return shifted.view(-1)


@pytest.mark.parametrize("masked", [False, True])
def test_padding_before_a_loss_appended_ignored_column_is_judged(masked):
    """The padding run ends one position early (the loss's own -100 column): it is still the
    run at the end of the rows, and named unless the collate masked it."""
    def loss(out, tags, n):
        labels = tags.masked_fill(tags < 0, -100) if masked else _tags(tags)
        return F.cross_entropy(out.reshape(-1, TAGS), _shifted_like_a_causal_lm_loss(labels))
    report = train_tagger(loss, batches=_long_padding(torch.Generator().manual_seed(1)))
    if masked:
        assert not alarms(report)
    else:
        assert alarms(report)[0] == "PADDING_SCORED"
        assert report.findings[0].evidence["padding_value"] == PAD


def test_padding_after_a_masked_prompt_is_named():
    """SFT with the prompt masked (-100) but the padding left as a class: the leading run of
    -100 is transparent, the trailing padding run is judged."""
    def loss(out, tags, n):
        labels = _tags(tags).clone()
        labels[:, :2] = -100
        return F.cross_entropy(out.reshape(-1, TAGS), labels.reshape(-1))
    report = train_tagger(loss, batches=_long_padding(torch.Generator().manual_seed(1)))
    assert alarms(report)[0] == "PADDING_SCORED"
