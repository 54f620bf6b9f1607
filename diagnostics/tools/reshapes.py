"""``view``/``reshape`` calls that move axes instead of regrouping them.

``f.view(B, H * W, C)`` on conv features ``(B, C, H, W)`` runs, has the right shape, and
makes every "pixel" a run of one channel's values: the axes are scrambled inside each example,
so no gradient or batch check can see it. The shapes show it: the output is the input's axes,
grouped (``(B)(C)(H W)``), in another order (``(B)(H W)(C)``). A view or reshape cannot move
axes (that is ``permute``/``transpose``), so a call whose output is a non-identity permutation
of a grouping of the input's adjacent axes (merges only), or whose input is one of the
output's (splits only), with the moved sizes distinct, is almost surely a permute that was
meant. Plain merges (flatten), plain splits (heads), added or removed size-1 axes, and mixed
regroupings (``(B, 6, 4) -> (B, 3, 8)``) are not permutations and stay quiet. So is a view of
a tensor just grown by one zero slice along one axis (``F.pad(x, (1, 0))``, or ``torch.cat``
with a zero slice): that is the relative-position shift of Transformer-XL and Music
Transformer, which views a padded ``(T, R + 1)`` as ``(R + 1, T)`` on purpose.

``watch_reshapes`` records such calls during one forward of a torch model, under a
``torch.overrides.TorchFunctionMode`` that is active only inside the ``with`` block.
"""
import contextlib
import itertools
import linecache
import math
import operator
import sys
from dataclasses import dataclass
from pathlib import Path

from ..findings import Finding

MAX_AXES = 12          # shapes with more axes (size-1 ones left out) are not searched
_WATCHED = ("view", "reshape", "view_as", "reshape_as")
_OWN_FILES = (str(Path(__file__).resolve().parents[1]),)   # diagnostics/: not the user's


@dataclass(frozen=True)
class Scramble:
    """How a view moved axes: ``groups`` of input axes (indices into the input's shape, in the
    input's order), ``order`` in which the output lays them out (group indices), ``split``
    when the output holds more axes than the input (the groups are then of output axes), and
    the ``permute`` of the input's axes that, followed by the same reshape, means what the
    shapes suggest."""

    groups: tuple
    order: tuple
    split: bool
    permute: tuple


def scrambled_axes(before, after):
    """A ``Scramble`` when reshaping ``before`` to ``after`` moves axes (see the module
    docstring), else None."""
    before, after = tuple(int(s) for s in before), tuple(int(s) for s in after)
    if math.prod(before) != math.prod(after) or math.prod(before) == 0:
        return None
    kept_in = [i for i, size in enumerate(before) if size != 1]
    kept_out = [i for i, size in enumerate(after) if size != 1]
    a, b = [before[i] for i in kept_in], [after[i] for i in kept_out]
    if max(len(a), len(b)) > MAX_AXES or _coarsens(a, b) or _coarsens(b, a):
        return None
    if len(a) < len(b):                      # splits only: the input groups output axes
        found = _permuted_grouping(b, a)
        if found is None:
            return None
        groups, order = found                # input axis j holds output group order[j]
        permute = tuple(kept_in[j] for j in sorted(range(len(order)), key=order.__getitem__))
        groups = tuple(tuple(kept_out[i] for i in group) for group in groups)
        return Scramble(groups, order, True, _with_ones(permute, before))
    found = _permuted_grouping(a, b)     # merges only (the output groups input axes), or as
                                         # many axes: a plain permutation of sizes
    if found is None:
        return None
    groups, order = found
    groups = tuple(tuple(kept_in[i] for i in group) for group in groups)
    permute = tuple(i for g in order for i in groups[g])
    return Scramble(groups, order, False, _with_ones(permute, before))


def _coarsens(fine, coarse):
    """``coarse`` merges adjacent axes of ``fine`` (or equals it): its running products are
    among ``fine``'s (sizes >= 2, so running products strictly increase)."""
    return set(itertools.accumulate(coarse, operator.mul)) <= set(
        itertools.accumulate(fine, operator.mul))


def _permuted_grouping(fine, coarse):
    """``(groups of fine's axes, order)``: adjacent axes of ``fine`` grouped into
    ``len(coarse)`` groups whose sizes, laid out in ``order``, are ``coarse``, with ``order``
    not the identity and the moved sizes distinct; equal sizes keep their order. None when
    no grouping fits."""
    n, k = len(fine), len(coarse)
    for cuts in itertools.combinations(range(1, n), k - 1):
        bounds = (0,) + cuts + (n,)
        groups = tuple(tuple(range(bounds[i], bounds[i + 1])) for i in range(k))
        sizes = [math.prod(fine[i] for i in group) for group in groups]
        if sorted(sizes) != sorted(coarse):
            continue
        order, used = [], set()
        for size in coarse:      # the first unused group of that size: equal sizes stay put
            g = next(g for g, s in enumerate(sizes) if s == size and g not in used)
            used.add(g)
            order.append(g)
        if order != sorted(order):
            return groups, tuple(order)
    return None


def _with_ones(permute, before):
    """``permute`` of the kept axes, with the size-1 axes appended (they move nothing)."""
    return permute + tuple(i for i, size in enumerate(before) if size == 1)


@dataclass(frozen=True)
class ReshapeCall:
    """One scrambling call seen in a forward."""

    call: str               # "view", "reshape", ...
    before: tuple
    after: tuple
    module: str | None      # as named_modules() spells it; "" is the model itself
    owner: str | None       # that module's class name
    source: str | None      # "file.py:183: `pixels = f.view(b, h * w, c)`"
    scramble: Scramble


@contextlib.contextmanager
def watch_reshapes(model):
    """Record, in the yielded list, the view/reshape calls that move axes while the block
    runs (one forward of the torch ``model``; its modules name the caller)."""
    import torch
    from torch.overrides import TorchFunctionMode

    names = {id(module): (name, type(module).__name__)
             for name, module in model.named_modules()}
    watched = {getattr(torch.Tensor, name) for name in _WATCHED} | {torch.reshape}
    seen, shifted = [], {}     # shifted: id -> tensor grown by one zero slice (kept alive)

    class Watch(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            result = func(*args, **kwargs)
            if func in watched:
                source = args[0] if args else None
                if not (id(source) in shifted and shifted[id(source)] is source):
                    _record(seen, names, func, args, result, torch)
            elif _grown_by_a_zero_slice(func, args, kwargs, result, torch):
                shifted[id(result)] = result
            return result

    with Watch():
        yield seen


def _grown_by_a_zero_slice(func, args, kwargs, result, torch):
    """True for ``F.pad`` with zeros or ``torch.cat`` with an all-zero slice that made
    ``result`` one larger than its input along exactly one axis."""
    if not isinstance(result, torch.Tensor):
        return False
    if func is torch.nn.functional.pad:
        value = kwargs.get("value", args[3] if len(args) > 3 else None)
        mode = kwargs.get("mode", args[2] if len(args) > 2 else "constant")
        return (mode == "constant" and not value and isinstance(args[0], torch.Tensor)
                and _one_larger(args[0].shape, result.shape))
    if func is torch.cat:
        parts = args[0] if args else kwargs.get("tensors", ())
        if len(parts) != 2 or not all(isinstance(t, torch.Tensor) for t in parts):
            return False
        dim = kwargs.get("dim", args[1] if len(args) > 1 else 0)
        return any(t.dim() == result.dim() and t.shape[dim] == 1 and not t.any()
                   and _one_larger(other.shape, result.shape)
                   for t, other in (parts, parts[::-1]))
    return False


def _one_larger(before, after):
    grown = sorted(b - a for a, b in zip(before, after))
    return len(before) == len(after) and grown == [0] * (len(grown) - 1) + [1]


def _record(seen, names, func, args, result, torch):
    source = args[0] if args else None
    if not isinstance(source, torch.Tensor) or not isinstance(result, torch.Tensor):
        return
    if source.dtype != result.dtype:      # view(dtype) reinterprets bytes, not axes
        return
    before, after = tuple(source.shape), tuple(result.shape)
    scramble = scrambled_axes(before, after)
    if scramble is None:
        return
    (module, owner), where = _caller(names)
    call = ReshapeCall(func.__name__, before, after, module, owner, where, scramble)
    if all((c.call, c.before, c.after, c.source) != (call.call, before, after, where)
           for c in seen):
        seen.append(call)


def _caller(names):
    """The innermost module of the model whose ``forward`` is on the stack, and the first
    frame outside torch and gradhunt (the user's line)."""
    module, where = (None, None), None
    frame = sys._getframe(2)
    torch_dir = str(Path(sys.modules["torch"].__file__).resolve().parent)
    while frame is not None and (module[0] is None or where is None):
        if module[0] is None:
            module = names.get(id(frame.f_locals.get("self")), module)
        filename = frame.f_code.co_filename
        if where is None and not filename.startswith((torch_dir,) + _OWN_FILES):
            line = linecache.getline(filename, frame.f_lineno).strip()
            where = f"{Path(filename).name}:{frame.f_lineno}: `{line}`"
        frame = frame.f_back
    return module, where


def reshape_findings(calls):
    """VIEW_SCRAMBLES_AXES, one per call."""
    return [_finding(call) for call in calls]


def _finding(call):
    scramble = call.scramble
    grouped = " ".join("[" + ",".join(map(str, group)) + "]" for group in scramble.groups)
    order = " ".join("[" + ",".join(map(str, scramble.groups[g])) + "]"
                     for g in scramble.order)
    if scramble.split:
        how = (f"its input holds the output's axes grouped as {grouped}, in the order "
               f"{order}")
    else:
        how = f"the output is the input's axes grouped as {grouped}, in the order {order}"
    at = (f" in module '{call.module}' ({call.owner})" if call.module
          else f" in the forward of the model ({call.owner})" if call.owner else "")
    line = f" at {call.source}" if call.source else ""
    permute = ", ".join(map(str, scramble.permute))
    target = ", ".join(map(str, call.after))
    return Finding(
        "VIEW_SCRAMBLES_AXES", "warning", call.module or None,
        f"{call.call}{at}{line} turns {call.before} into {call.after}: {how}. A "
        f"{call.call} cannot move axes, it only regroups the elements in memory order, so "
        f"the values of each example are scrambled across those axes (channels read as "
        f"positions); the shapes fit and nothing raises",
        f"permute (or transpose) the axes into place first, then reshape: "
        f"x.permute({permute}).reshape({target})",
        {"call": call.call, "input_shape": list(call.before), "output_shape": list(call.after),
         "groups": [list(g) for g in scramble.groups], "order": list(scramble.order),
         "permute": list(scramble.permute), "module": call.module, "source": call.source})
