"""Points: the tensors at module boundaries that a check perturbs, and the hooks that reach them.

A point is one tensor at one call of one module: an input it receives or an output it returns.
``Instrument`` puts a forward pre-hook and a forward hook on every module of the (copied)
model. In the recording pass they put an identity (``clone``) in front of each point, whose
tensor hook reads the analytic gradient of the loss with respect to that point: for an input,
the gradient that flows back through this module only; for an output, the gradient the rest
of the network sends it. In later passes they add a perturbation to one point, or keep a copy
of one point's value. Calls are counted per pass, so a module called twice has two points.
A point that is provably the same tensor as a later one, with no other reader, is an *alias*
of it (``aliases``): moving either moves the loss the same way, and their gradients are the same
array, so the check measures only the later one. Two proofs (see ``_alias`` and
``prove_aliases``): inside a plain ``Sequential`` by its type; anywhere else (a residual
block's ``conv1 -> bn1``) by watching every use of the point's identity in the recorded pass.
While the instrument is open, its ``replay`` (see ``replay.py``) lets a perturbed pass skip the
module calls that end before the perturbation.
"""
import contextlib
import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from .. import outputs
from .replay import Replay

INPUT, OUTPUT = "input", "output"


@dataclass(frozen=True)
class Point:
    """One tensor at a module boundary, as seen in one forward pass.

    ``stack``: the module calls running when the point appears, outermost first, as
    ``(module name, call)`` pairs; the point's own call is the last one.
    """

    module: str
    call: int
    kind: str
    index: int
    shape: tuple
    stack: tuple
    calls: int = 1
    tensors: int = 1

    @property
    def key(self):
        return (self.module, self.call, self.kind, self.index)

    @property
    def label(self):
        """``'2' input``, ``'block.act' call 2 output``, ``model output``."""
        where = f"'{self.module}'" if self.module else "model"
        if self.calls > 1:
            where += f" call {self.call + 1}"
        which = f"{self.kind} {self.index}" if self.tensors > 1 else self.kind
        return f"{where} {which}"


class Instrument:
    """Hooks on every module of a model; a context manager that removes them all on exit."""

    def __init__(self, backend):
        self.backend = backend
        self.points = []        # in forward order, filled by a recording pass
        self.gradients = {}     # point key -> analytic gradient (ndarray)
        self.values = {}        # point key -> value in the recording pass (ndarray)
        self.captured = None    # the value kept by a capturing pass
        self.aliases = {}       # point key -> the key of a later point that is the same tensor
        self._handles = []
        self._nodes = {}        # point key -> the graph node of its identity (recording pass)
        self._mode = None
        self._target = self._delta = self._capture = None
        self._counts, self._stack = {}, []
        self._twins = {}        # id(identity) -> (identity, point key, stack): recording pass
        self._chains = set()    # names of the plain Sequentials (see Backend.plain_chain)
        self._uses = {}         # point key -> framework calls given its identity (recording)
        self._handed = {}       # point key -> keys of the points its identity arrived at
        self._watched = False   # whether the recording pass saw every use (use_recorder)
        self._quiet = False     # inside the instrument's own hooks: their uses do not count
        self.replay = None
        self.surrogates = {}    # (module, call) -> Surrogate (declared.py): run passes use it
        self.surrogate_term = 0.0   # the run pass's sum of the surrogates' linear terms
        self._exempt = None     # the surrogate module a run pass leaves as it is

    def __enter__(self):
        try:
            self._chains = {name for name, module in self.backend.named_modules()
                            if self.backend.plain_chain(module)}
            for name, module in self.backend.named_modules():
                self._handles.append(module.register_forward_pre_hook(self._pre_hook(name)))
                self._handles.append(self.backend.add_forward_hook(module,
                                                                   self._post_hook(name)))
            self.replay = Replay(self.backend, self).__enter__()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc):
        if self.replay is not None:
            self.replay.__exit__(None, None, None)
            self.replay = None
        for handle in self._handles:
            handle.remove()
        self._handles = []
        return False

    @property
    def current_module(self):
        """The name of the innermost module call running now (None outside the model)."""
        return self._stack[-1][0] if self._stack else None
    # ----------------------------------------------------------------- calls
    def current_call(self):
        """``(module name, call)`` of the innermost call running now (None outside calls)."""
        return self._stack[-1] if self._stack else None

    def call_counts(self):
        """Calls per module so far in this pass (a copy)."""
        return dict(self._counts)

    def set_call_counts(self, counts):
        """Continue counting from ``counts``: a replayed call's sub-modules did not run."""
        self._counts = dict(counts)

    # ---------------------------------------------------------------- passes
    def start_pass(self, *, record=False, target=None, delta=None, capture=None, exempt=None):
        """Set what the next forward pass does: record points, perturb ``target``, or keep
        the value of ``capture``; a run pass stands in the ``surrogates`` for their modules'
        calls, except ``exempt``'s (a module name)."""
        self._mode = "record" if record else "run"
        self._target, self._delta, self._capture = target, delta, capture
        self._exempt, self.surrogate_term = exempt, 0.0
        self._counts, self._stack = {}, []
        self.captured = None
        if record:
            self.points, self.gradients, self.values = [], {}, {}
            self._nodes, self._twins, self.aliases = {}, {}, {}
            self._uses, self._handed, self._watched = {}, {}, False

    @contextlib.contextmanager
    def uses_watched(self):
        """Around the recording forward pass (and loss): every framework call that is given a
        point's identity counts as a use of that point, except the instrument's own."""
        recorder = self.backend.use_recorder(self._on_use)
        if recorder is None:
            yield
            return
        with recorder:
            yield
        self._watched = True

    def _on_use(self, tensors):
        if self._quiet:
            return
        for tensor in tensors:
            seen = self._twins.get(id(tensor))
            if seen is not None and seen[0] is tensor:
                self._uses[seen[1]] = self._uses.get(seen[1], 0) + 1

    def prove_aliases(self, loss):
        """Add the aliases the recorded pass proves, ``loss`` its loss (before backward).

        A point P is an alias of Q when P's identity (the tensor the model's code got in
        P's place) was, in the whole recorded pass, handed as it is to exactly one module
        hook, Q's (as a module's input, or returned as an enclosing module's output), was
        given to no framework call (``use_recorder``: every op, in-place op, view, ``.data``,
        ``.item()``, a user hook's read, under no_grad too; shape reads aside), and Q's
        identity node is the only edge into P's in the loss's graph (differentiable uses
        that no framework call showed, a C++ extension's). Then the loss is the same function
        of P as of Q, so a perturbation of either moves it the same, and backward's gradient
        at P is Q's passed through one identity: the same array (``check._aliases`` checks
        that too). In-place changes, a tensor read twice, hooks that read or keep it: all
        are uses, and both points are measured. What neither shows is a read outside
        autograd by code that bypasses torch's dispatch (a TorchScript function, a C++
        extension called on the tensor under no_grad): such a read is missed, and the two
        points are taken as one. A framework without a use recorder (minigrad) keeps only
        the plain-Sequential rule."""
        if not self._watched:
            return
        candidates = {source: handed[0] for source, handed in self._handed.items()
                      if len(handed) == 1 and not self._uses.get(source)}
        if not candidates:
            return
        consumers = self.backend.sole_consumers(loss)
        if consumers is None:
            return
        for source, later in candidates.items():
            node = self._nodes[source].grad_fn
            if node is not None and consumers.get(id(node)) is self._nodes[later].grad_fn:
                self.aliases[source] = later

    def finish_recording(self):
        """Give each point its module's call count and its call's tensor count."""
        calls = {}
        tensors = {}
        for point in self.points:
            calls[point.module] = max(calls.get(point.module, 0), point.call + 1)
            slot = (point.module, point.call, point.kind)
            tensors[slot] = tensors.get(slot, 0) + 1
        self.points = [Point(p.module, p.call, p.kind, p.index, p.shape, p.stack,
                             calls[p.module], tensors[(p.module, p.call, p.kind)])
                       for p in self.points]
        self._mode = None

    # ------------------------------------------------------------------ hooks
    def _pre_hook(self, name):
        def hook(module, args):
            call = self._counts.get(name, 0)
            self._counts[name] = call + 1
            self._stack.append((name, call))
            return self._quietly(name, call, INPUT, args, tuple(self._stack))
        return hook

    def _post_hook(self, name):
        def hook(module, args, output):
            call, stack = self._close_call(name)
            return self._quietly(name, call, OUTPUT, output, stack)
        return hook

    def _quietly(self, *args):
        """``_visit``, whose own reads of the tensors are no uses (see ``uses_watched``)."""
        quiet, self._quiet = self._quiet, True
        try:
            return self._visit(*args)
        finally:
            self._quiet = quiet

    def _close_call(self, name):
        """Pop ``name``'s call off the stack: ``(call, stack with that call last)``."""
        for position in range(len(self._stack) - 1, -1, -1):
            if self._stack[position][0] == name:
                stack = tuple(self._stack[:position + 1])
                del self._stack[position:]
                return stack[-1][1], stack
        return max(self._counts.get(name, 1) - 1, 0), tuple(self._stack) + ((name, 0),)

    def _visit(self, name, call, kind, values, stack):
        """Record, perturb or capture the tensors of one call's inputs or output."""
        if self._mode is None:
            return None
        items, rebuild = _tensor_items(values)
        if items is None:
            return None
        surrogate = self.surrogates.get((name, call)) if self._mode == "run" else None
        if surrogate is not None and surrogate.module == self._exempt:
            surrogate = None
        changed = False
        for index, tensor in list(items):
            if not _is_tensor(tensor):
                continue
            key = (name, call, kind, index)
            new = tensor
            if surrogate is not None and kind == OUTPUT and index in surrogate.outputs:
                new = self.backend.from_numpy(surrogate.outputs[index].copy(), like=tensor)
            if self._mode == "record" and getattr(tensor, "requires_grad", False):
                self.points.append(Point(name, call, kind, index, tuple(tensor.shape), stack))
                self.values[key] = self.backend.to_numpy(tensor)
                self._alias(tensor, key, stack, single=len(items) == 1)
                self._hand(tensor, key)
                new = self._watch(key, tensor)
                self._twins[id(new)] = (new, key, stack)
            elif self._mode == "run" and key == self._target:
                new = new + self.backend.from_numpy(self._delta, like=tensor)
            if surrogate is not None and kind == INPUT and index in surrogate.inputs:
                value, gradient = surrogate.inputs[index]
                self.surrogate_term += float(np.vdot(gradient,
                                                     self.backend.to_numpy(new) - value))
            if key == self._capture:
                self.captured = self.backend.to_numpy(new)
            if new is not tensor:
                items[index] = (index, new)
                changed = True
        return rebuild([value for _, value in items]) if changed else None

    def _alias(self, tensor, key, stack, *, single):
        """Record an earlier point as an alias of ``key`` when ``tensor`` is that point's
        identity handed on by a plain Sequential: a child's input that is the container's input
        or the previous child's output, or the container's output that is its last child's."""
        seen = self._twins.get(id(tensor))
        if not single or seen is None or seen[0] is not tensor:
            return
        _, source, source_stack = seen
        module, kind = key[0], key[2]
        if kind == INPUT:
            if len(stack) < 2 or stack[-2][0] not in self._chains:
                return
            container_input = source[2] == INPUT and source[:2] == stack[-2]
            sibling_output = source[2] == OUTPUT and source_stack[:-1] == stack[:-1]
            if container_input or sibling_output:
                self.aliases[source] = key
        elif module in self._chains and source[2] == OUTPUT and source_stack[:-1] == stack:
            self.aliases[source] = key

    def _hand(self, tensor, key):
        """Note that ``tensor``, if a point's identity, arrived at point ``key``."""
        seen = self._twins.get(id(tensor))
        if seen is not None and seen[0] is tensor:
            self._handed.setdefault(seen[1], []).append(key)

    def _watch(self, key, tensor):
        """An identity in front of ``tensor`` whose gradient is stored under ``key``."""
        twin = tensor.clone()

        def store(grad):
            if grad is None:   # a custom backward returned None for it: torch's zero gradient
                return
            array = self.backend.to_numpy(grad)
            previous = self.gradients.get(key)
            self.gradients[key] = array if previous is None else previous + array

        twin.register_hook(store)
        self._nodes[key] = twin
        return twin

    def graph_node(self, key):
        """The graph node of the identity in front of the recorded point ``key``."""
        return self._nodes[key].grad_fn

    def reach(self, keys, stop):
        """``(point keys, leaf ids)`` the graph reaches from the identities of the points
        ``keys``, not walking past the identities of the points ``stop``: what the values
        at ``keys`` were computed from, short of ``stop``."""
        owner = {id(twin.grad_fn): k for k, twin in self._nodes.items()}
        ends = {id(self._nodes[k].grad_fn) for k in stop if k in self._nodes}
        stack = [self._nodes[k].grad_fn for k in keys if k in self._nodes]
        seen, points, leaves = set(), set(), set()
        while stack:
            node = stack.pop()
            if node is None or id(node) in seen:
                continue
            seen.add(id(node))
            if id(node) in owner:
                points.add(owner[id(node)])
            if id(node) in ends:
                continue
            variable = getattr(node, "variable", None)   # torch's AccumulateGrad
            if variable is not None:
                leaves.add(id(variable))
            leaves.update(id(value) for value in getattr(node, "inputs", ()) or ())
            stack.extend(self.backend.node_inputs(node))
        return points, leaves

    def upstream(self, key):
        """The keys of the points the recorded point ``key`` was computed from, itself
        included: a walk of the graph from its identity node back to the inputs."""
        points, _ = self.reach([key], stop=())
        return points


def _tensor_items(values):
    """``(items, rebuild)`` for a tensor, a flat tuple/list holding tensors, or a dict,
    dataclass or namedtuple output (``diagnostics.outputs``), else ``(None, None)``. ``items``
    are ``(index, value)`` pairs; ``rebuild`` makes a value of the same kind from the new
    values."""
    if isinstance(values, Mapping) or hasattr(values, "_fields") or (
            dataclasses.is_dataclass(values) and not isinstance(values, type)):
        pairs = outputs.entries(values)
        if not any(_is_tensor(v) for _, v in pairs):
            return None, None

        def rebuild(new):
            result = values
            for (key, old), value in zip(pairs, new):
                if value is not old:
                    result = outputs.replace(result, key, value)
            return result
        return [(index, value) for index, (_, value) in enumerate(pairs)], rebuild
    if isinstance(values, (tuple, list)) and type(values) in (tuple, list):
        kind = type(values)
        if not any(_is_tensor(v) for v in values):
            return None, None
        return list(enumerate(values)), kind
    if _is_tensor(values):
        return [(0, values)], lambda new: new[0]
    return None, None


def _is_tensor(value):
    return hasattr(value, "register_hook") and hasattr(value, "shape")
