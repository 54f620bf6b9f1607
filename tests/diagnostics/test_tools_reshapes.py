"""VIEW_SCRAMBLES_AXES: the shape rule (merges and splits never flagged, a permutation of
distinct sizes always), the watcher over one torch forward, and preflight's reshapes item on
the corpus bug, its fixed twin and legitimate reshapes (flatten, heads, unsqueeze)."""
import itertools
import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from diagnostics import preflight
from diagnostics.tools.reshapes import reshape_findings, scrambled_axes, watch_reshapes
from tests.diagnostics.monitor_nets import one_torch_thread  # noqa: F401 (a fixture)
from tests.support.hooks import hook_state

pytestmark = pytest.mark.usefixtures("one_torch_thread")

sizes = st.integers(1, 7)
shapes = st.lists(sizes, min_size=1, max_size=6)


def _merge(shape, cuts):
    """``shape`` with adjacent axes merged at the given cut points."""
    bounds = [0, *sorted({c for c in cuts if 0 < c < len(shape)}), len(shape)]
    return tuple(math.prod(shape[a:b]) for a, b in itertools.pairwise(bounds))


@settings(max_examples=200, deadline=None)
@given(shape=shapes, cuts=st.lists(st.integers(0, 6), max_size=5),
       ones=st.lists(st.integers(0, 6), max_size=2))
def test_merges_and_splits_are_never_flagged(shape, cuts, ones):
    merged = list(_merge(shape, cuts))
    for at in ones:                      # size-1 axes added anywhere change nothing
        merged.insert(min(at, len(merged)), 1)
    assert scrambled_axes(shape, merged) is None
    assert scrambled_axes(merged, shape) is None


# pairwise coprime group sizes: no permutation of them is also a plain merge or split
_PRIMES = (2, 3, 5, 7)


@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_a_permutation_of_distinct_groups_is_always_flagged(data):
    count = data.draw(st.integers(2, 4))
    primes = data.draw(st.permutations(_PRIMES))[:count]
    powers = [data.draw(st.integers(1, 2)) for _ in primes]
    groups = [[p] * k for p, k in zip(primes, powers)]       # each group: its factors
    order = data.draw(st.permutations(range(count)).filter(lambda o: list(o) != sorted(o)))
    before = tuple(f for group in groups for f in group)
    after = tuple(math.prod(groups[g]) for g in order)
    batch = data.draw(st.integers(1, 9))
    found = scrambled_axes((batch,) + before, (batch,) + after)
    assert found is not None and not found.split
    # the suggested permute, then the same reshape, moves the groups as the shapes say
    x = torch.arange(math.prod(before) * batch).reshape((batch,) + before)
    grouped = x.reshape((batch,) + tuple(math.prod(group) for group in groups))
    intended = grouped.permute(0, *[1 + g for g in order])
    assert torch.equal(x.permute(*found.permute).reshape((batch,) + after), intended)
    again = scrambled_axes((batch,) + after, (batch,) + before)   # the other direction
    assert again is not None and again.split == (len(after) < len(before))
    back = torch.arange(math.prod(after) * batch).reshape((batch,) + after)
    assert back.permute(*again.permute).reshape((batch,) + before).shape == x.shape


def test_the_corpus_shapes_and_their_fixes():
    assert scrambled_axes((8, 6, 4, 4), (8, 16, 6)).permute == (0, 2, 3, 1)
    assert scrambled_axes((8, 64, 49), (8, 49, 64)).permute == (0, 2, 1)
    assert scrambled_axes((8, 16, 6), (8, 6, 4, 4)).permute == (0, 2, 1)
    for before, after in [((8, 64, 7, 7), (8, 64, 49)), ((8, 10, 32), (8, 10, 4, 8)),
                          ((8, 10, 4, 8), (8, 10, 32)), ((8, 4, 4), (8, 4, 4)),
                          ((8, 6, 4), (8, 3, 8)), ((2, 2, 2), (4, 2)), ((8, 1, 5), (8, 5)),
                          ((8, 0, 3), (8, 3, 0))]:
        assert scrambled_axes(before, after) is None, (before, after)


class _Features(torch.nn.Module):
    def __init__(self, how):
        super().__init__()
        self.how = how
        self.conv = torch.nn.Conv2d(3, 6, 3, padding=1)
        self.head = torch.nn.Linear(6, 4)

    def forward(self, x):
        f = self.conv(x)
        b, c, h, w = f.shape
        if self.how == "view":
            pixels = f.view(b, h * w, c)
        elif self.how == "reshape":
            pixels = torch.reshape(f, (b, h * w, c))
        else:
            pixels = f.flatten(2).transpose(1, 2)
        return self.head(pixels.mean(1))


class _Wrapper(torch.nn.Module):
    def __init__(self, how):
        super().__init__()
        self.body = _Features(how)

    def forward(self, x):
        return self.body(x)


@pytest.mark.parametrize("how", ["view", "reshape"])
def test_the_watcher_names_the_call_its_module_and_line(how):
    torch.manual_seed(0)
    model = _Wrapper(how)
    before = hook_state(model)
    with torch.no_grad(), watch_reshapes(model) as calls:
        model(torch.randn(5, 3, 4, 4))
    assert hook_state(model) == before
    assert [(c.call, c.before, c.after, c.module) for c in calls] == [
        (how, (5, 6, 4, 4), (5, 16, 6), "body")]
    finding, = reshape_findings(calls)
    assert finding.code == "VIEW_SCRAMBLES_AXES" and finding.severity == "warning"
    assert finding.location == "body" and "test_tools_reshapes.py" in finding.evidence["source"]
    assert "x.permute(0, 2, 3, 1).reshape(5, 16, 6)" in finding.suggestion
    # the mode is gone after the block: a later view is not seen
    torch.randn(5, 6, 4, 4).view(5, 16, 6)
    assert len(calls) == 1


def test_legitimate_reshapes_in_attention_and_heads_are_quiet():
    torch.manual_seed(0)
    attention = torch.nn.TransformerEncoderLayer(16, 4, 32, batch_first=True)
    mha = torch.nn.MultiheadAttention(16, 4)           # (seq, batch, dim) inside
    x = torch.randn(3, 7, 16)
    with torch.no_grad(), watch_reshapes(attention) as calls:
        attention(x)
        mha(x.transpose(0, 1), x.transpose(0, 1), x.transpose(0, 1))
        q = x.view(3, 7, 4, 4).transpose(1, 2)          # head split
        q.transpose(1, 2).reshape(3, 7, 16)              # heads merged back
        x.unsqueeze(1).view(3, 1, 7, 16).flatten(1)
    with torch.no_grad(), watch_reshapes(_Features("permute")) as more:
        _Features("permute")(torch.randn(2, 3, 4, 4))
    assert calls == [] and more == []


def _relative_shift(scores, how):
    """Transformer-XL's shift: grow the last axis by one zero slice, view (T, R+1) as (R+1, T),
    drop the first row, view back: each query row moves by its position, on purpose."""
    b, t, r = scores.shape
    if how == "pad":
        padded = torch.nn.functional.pad(scores, (1, 0))
    else:
        padded = torch.cat([scores.new_zeros(b, t, 1), scores], dim=-1)
    return padded.view(b, r + 1, t)[:, 1:].view(b, t, r)


@pytest.mark.parametrize("how", ["pad", "cat"])
def test_the_relative_position_shift_is_quiet_and_a_token_prepended_then_viewed_is_not(how):
    model = torch.nn.Linear(4, 4)
    scores = torch.randn(2, 4, 4)
    with torch.no_grad(), watch_reshapes(model) as calls:
        _relative_shift(scores, how)
    assert calls == []
    tokens, cls = torch.randn(2, 5, 8), torch.randn(2, 1, 8)    # a learned class token
    with torch.no_grad(), watch_reshapes(model) as calls:
        torch.cat([cls, tokens], dim=1).view(2, 8, 6)             # bug: transpose meant
        torch.nn.functional.pad(tokens, (1, 1)).view(2, 10, 5)    # grown by two: not a shift
    assert [(c.before, c.after) for c in calls] == [((2, 6, 8), (2, 8, 6)),
                                                    ((2, 5, 10), (2, 10, 5))]


def _case(how, *, rows=8):
    torch.manual_seed(0)
    return _Wrapper(how), torch.randn(rows, 3, 4, 4), torch.arange(rows) % 4


def test_preflight_fails_its_reshapes_item_on_the_bug_and_passes_the_fix():
    model, x, y = _case("view")
    report = preflight(model, torch.nn.functional.cross_entropy, x, y)
    item = report.item("reshapes")
    assert item.status == "FAIL" and [f.code for f in item.findings] == ["VIEW_SCRAMBLES_AXES"]
    assert "(8, 6, 4, 4)" in item.findings[0].message
    model, x, y = _case("permute")
    item = preflight(model, torch.nn.functional.cross_entropy, x, y).item("reshapes")
    assert item.status == "PASS" and not item.findings


def test_preflight_skips_reshapes_on_minigrad():
    import minigrad
    model = minigrad.nn.Sequential(minigrad.nn.Linear(4, 3))
    x = minigrad.tensor(torch.randn(6, 4).numpy())
    y = minigrad.tensor((torch.arange(6) % 3).numpy())
    item = preflight(model, minigrad.functional.cross_entropy, x, y).item("reshapes")
    assert item.status == "SKIP"
