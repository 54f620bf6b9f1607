"""IGNORED_CLASS: a loss's ignore_index is one of the output's classes and the positions it
drops are real content (scored positions on both sides), so that class never reaches the loss.
Named for a tag id used as ignore_index (``nn.NLLLoss``, ``F.cross_entropy``, flattened or not)
and for a segmentation background; quiet for an in-range pad id whose positions are trailing or
leading runs, for -100, for a 255 boundary ring, and for 1-D targets (no rows to tell)."""
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from .target_nets import TAGS, alarms, codes, train_segmenter, train_tagger
from .monitor_nets import one_torch_thread  # noqa: F401 (a fixture)

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _pad(tags, value):
    return tags.masked_fill(tags < 0, value)


def test_a_tag_used_as_ignore_index_is_named():
    """Tags padded with "O" (0) and ignore_index=0: every real "O" is dropped too."""
    report = train_tagger(lambda out, tags, n: F.cross_entropy(
        out.reshape(-1, TAGS), _pad(tags, 0).reshape(-1), ignore_index=0))
    assert alarms(report) == ["IGNORED_CLASS"]
    finding = report.findings[0]
    assert finding.location == "loss" and finding.evidence["ignore_index"] == 0
    assert "ignore_index=0" in finding.message and "-100" in finding.suggestion


def test_nll_loss_on_unflattened_logits_is_named():
    """(N, C, T) log-probabilities and (N, T) targets: the class axis is dim 1."""
    report = train_tagger(lambda out, tags, n: nn.NLLLoss(ignore_index=0)(
        torch.log_softmax(out, -1).transpose(1, 2), _pad(tags, 0)))
    assert alarms(report) == ["IGNORED_CLASS"]


def test_a_segmentation_background_used_as_ignore_index_is_named():
    report = train_segmenter(nn.CrossEntropyLoss(ignore_index=0))
    assert "IGNORED_CLASS" in alarms(report)
    assert alarms(report)[0] == "IGNORED_CLASS"


@pytest.mark.parametrize("left", [False, True], ids=["right-padded", "left-padded"])
def test_an_in_range_pad_id_as_ignore_index_is_quiet(left):
    """A pad class of its own (the last one), ignored: its positions are runs at the ends."""
    def loss(out, tags, n):
        tags = _pad(tags, TAGS - 1).masked_fill(tags == TAGS - 1, 1)
        if left:
            tags = tags.flip(1)
        return F.cross_entropy(out.reshape(-1, TAGS), tags.reshape(-1), ignore_index=TAGS - 1)
    report = train_tagger(loss)
    assert "IGNORED_CLASS" not in codes(report)
    assert not alarms(report)


def test_time_major_padding_is_quiet():
    """(T, N) targets, padded along the time axis: padding is a run of each column."""
    def loss(out, tags, n):
        tags = _pad(tags, TAGS - 1).masked_fill(tags == TAGS - 1, 1)
        return F.cross_entropy(out.transpose(0, 1).reshape(-1, TAGS), tags.t().reshape(-1),
                               ignore_index=TAGS - 1)
    assert "IGNORED_CLASS" not in codes(train_tagger(loss))


def test_minus_100_is_quiet():
    report = train_tagger(lambda out, tags, n: F.cross_entropy(
        out.reshape(-1, TAGS), _pad(tags, -100).reshape(-1)))
    assert not alarms(report)


def test_a_255_boundary_ring_is_quiet():
    def ring(masks):
        inner = F.max_pool2d(masks[:, None].float(), 3, 1, 1)[:, 0].long()
        return masks.masked_fill(inner != masks, 255)
    report = train_segmenter(nn.CrossEntropyLoss(ignore_index=255), masks_of=ring)
    assert not alarms(report)


def test_one_label_per_row_is_not_judged():
    """A classifier's (N,) labels have no rows: an ignored class cannot be told from
    padding there, so nothing is said."""
    torch.manual_seed(0)
    from diagnostics import Monitor
    model = nn.Linear(6, 4)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    with Monitor(model, optimizer, every=5) as monitor:
        for _ in range(30):
            x = torch.randn(32, 6)
            optimizer.zero_grad()
            loss = F.cross_entropy(model(x), x[:, :4].argmax(1), ignore_index=0)
            loss.backward()
            optimizer.step()
            monitor.step(loss)
    assert "IGNORED_CLASS" not in codes(monitor.report())
