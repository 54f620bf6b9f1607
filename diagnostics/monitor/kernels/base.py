"""``Kernels``: what the Monitor computes on a framework's tensors, in one interface."""
import contextlib
import math
import re
import weakref
from abc import ABC, abstractmethod
from types import MappingProxyType


class Kernels(ABC):
    """One framework's statistics for the Monitor.

    Reductions run where the tensor lives and do not synchronise; ``gather`` brings a list of
    their results to the host in one transfer (one synchronisation).
    """

    UPDATE_SAMPLE = 16384  # at most this many entries per parameter measure an update's size
    SAMPLE_BLOCK = 16      # taken in runs of 16 neighbours (a 64-byte cache line of float32)
    GRAPH_NODES_PROBED = 64  # graph_buffers_alive looks no further than this many nodes
    GRAPH_NODES_WALKED = 20_000   # graph walks (squashed_twice, graph_leaves) stop here

    def __init__(self, backend):
        self.backend = backend

    @abstractmethod
    def activation_statistics(self, tensor, *, saturation=None, extremes=True):
        """``(sum, sum of squares, nonzero count, unit max, unit min)``, and the saturated count
        when ``saturation=(center, radius)`` is given (elements with |x - center| > radius);
        ``extremes=False`` leaves the unit extremes out (a ReLU's: they follow from its
        input's).

        Units lie on axis 1 (features of (N, F), channels of (N, C, ...)); a 0-d or 1-d
        tensor is one unit. None for an empty or non-floating tensor.
        """

    @abstractmethod
    def input_statistics(self, tensor):
        """The model input's ``(sum, sum of squares, largest, smallest)``, the extremes over
        the whole tensor as 1-element results (no check reads its per-feature extremes or its
        zeros); None for an empty or non-floating tensor."""

    @abstractmethod
    def prediction_entropy(self, tensor):
        """The mean over rows of the entropy of ``softmax(tensor)`` along the last dimension
        (nats; ln C for a uniform guess over C classes), a 0-d result. None for an empty or
        non-floating tensor, or one with fewer than 2 columns."""

    @abstractmethod
    def gradient_statistics(self, grad, *, per_unit=False, inv_scale=None):
        """``(sum of squares, sum of |g|, max |g|)``; with ``per_unit`` the last is per row
        (dim 0: a layer's output unit; for a bias, each entry's |g|). With ``inv_scale`` (a
        0-d tensor: a GradScaler's 1 / scale) the statistics are those of ``grad * inv_scale``,
        the gradient the optimizer will apply, taken before squaring so that a large scale
        cannot overflow them."""

    @abstractmethod
    def gradient_norms(self, grads):
        """The 2-norm of each of ``grads`` (a list of gradients), as one 1-d result on their
        device; a NaN or inf element makes its norm NaN or inf."""

    def autocast_dtype(self, tensor):
        """The dtype name autocast computes in on ``tensor``'s device ("float16",
        "bfloat16"), or None when autocast is off (or the framework has none)."""
        return None

    def loss_scale(self, scaler):
        """A GradScaler's current scale as a 0-d tensor on its device (no synchronisation), or
        None while it is disabled or before its first ``scale()``."""
        return None

    @abstractmethod
    def weight_sample(self, param, *, into=None):
        """A copy of ``param``'s entries, or for a larger one of at most ``UPDATE_SAMPLE`` of
        them: every k-th run of ``SAMPLE_BLOCK`` neighbours, spread over the whole tensor and
        cheap to read. Written into ``into`` when it fits."""

    def samples_partly(self, tensor):
        """Whether ``weight_sample`` takes only some of ``tensor``'s entries."""
        return self._sample_stride(math.prod(tensor.shape)) is not None

    @abstractmethod
    def sample_largest(self, tensor):
        """The largest |entry| of ``tensor`` over the entries ``weight_sample`` takes of a
        tensor of its shape (a 0-d result): whether a parameter's gradient reached the entries
        its update is measured on (NaN when one of them is NaN)."""

    def weight_samples(self, params, *, into=None):
        """``weight_sample`` of each of ``params`` (a list of copies, in order), written into
        the list ``into`` when every one fits (a framework may fuse the copies)."""
        into = into if into is not None and len(into) == len(params) else [None] * len(params)
        return [self.weight_sample(p, into=b) for p, b in zip(params, into)]

    @abstractmethod
    def update_statistics(self, param, before):
        """``(|w - before|, |w|)`` over the entries ``weight_sample`` took, ``w`` being
        ``param`` now; ``before`` (ours) may be overwritten."""

    def update_statistics_many(self, params, befores, *, nows=None):
        """``update_statistics`` of each pair at once: ``[|w - before| of each, then |w| of
        each]``, in order (a framework may fuse them into a few operations). With ``nows`` (a
        list, one entry per parameter), each entry becomes the ``weight_sample`` of ``w`` now,
        written into the buffer there when it fits, else a new one: while ``weights_token``
        holds, it may serve as the next ``before``."""
        if nows is not None:
            nows[:] = [self.weight_sample(p, into=b) for p, b in zip(params, nows)]
        pairs = [self.update_statistics(p, b) for p, b in zip(params, befores)]
        return [delta for delta, _ in pairs] + [weight for _, weight in pairs]

    @abstractmethod
    def travel_statistics(self, params, marks):
        """``[|w - mark| of each, then |w| of each]``, in order, over the entries
        ``weight_sample`` takes, ``w`` being each of ``params`` now and ``marks`` earlier
        ``weight_samples`` of them, which stay as they are (a mark serves several
        comparisons)."""

    def weights_token(self, tensor):
        """A value that changes whenever ``tensor``'s entries may have changed (written in place,
        a new storage behind it); None when the framework cannot tell (then a copy taken
        earlier is never trusted to still hold them)."""
        return None

    def token_after_writes(self, token, writes):
        """The ``weights_token`` a tensor whose token was ``token`` has after ``writes``
        in-place writes and nothing else (an in-place ReLU's is 1)."""
        return None

    @abstractmethod
    def value_sample(self, tensor, *, limit):
        """A copy of at most ``limit`` of ``tensor``'s entries, taken as ``weight_sample``
        takes them (the same entries for every tensor of one shape), half types as float32;
        None for an empty or non-floating tensor."""

    def op_recorder(self, record):
        """A context manager under which ``record(op name, output, training_written)`` sees
        the output of every framework operation that runs (``F.dropout``, ``Tensor.mul``), or
        one that sees none where the framework offers no such hook. ``training_written``, for
        a dropout function called by the user's code: True when the call writes its training
        flag (``training=True``, ``training=self.training``), False when it leaves it to its
        default; None for other operations, and when unknown."""
        return contextlib.nullcontext()

    def _sample_stride(self, numel, limit=None):
        """(blocks, stride): view the first ``blocks`` runs and keep every ``stride``-th; None
        when the whole tensor fits in the sample (``limit``, by default ``UPDATE_SAMPLE``)."""
        limit = self.UPDATE_SAMPLE if limit is None else limit
        if numel <= limit:
            return None
        blocks = numel // self.SAMPLE_BLOCK
        return blocks, -(-blocks // max(1, limit // self.SAMPLE_BLOCK))

    @abstractmethod
    def gather(self, results):
        """The results of the methods above brought to the host in one transfer, in order:
        a float for each 0-d result, a flat float64 NumPy array for each other."""

    def release_scratch(self):
        """Free buffers kept for statistics."""

    def graph_buffers_alive(self, tensor):
        """True while the graph that made ``tensor`` still holds what backward needs (after
        ``retain_graph=True``, or before any backward); False once backward freed it; None
        when no saved tensor lies within the first nodes."""
        stack, visited = [getattr(tensor, "grad_fn", None)], 0
        while stack and visited < self.GRAPH_NODES_PROBED:
            node = stack.pop()
            if node is None:
                continue
            visited += 1
            saved = self._saved_state(node)
            if saved is not None:
                return saved
            stack.extend(self.backend.node_inputs(node))
        return None

    # a loss op that squashes its input itself -> the squashing that, before it, doubles it
    SQUASHING_LOSSES = MappingProxyType({
        "BinaryCrossEntropyWithLogits": "Sigmoid", "BCEWithLogits": "Sigmoid",
        "LogSoftmax": "Softmax", "CrossEntropy": "Softmax"})
    # ops that move or cast entries without changing their values (torch's and minigrad's)
    VALUE_PRESERVING = frozenset((
        "View", "UnsafeView", "ReshapeAlias", "Reshape", "Squeeze", "Unsqueeze", "Permute",
        "Transpose", "T", "Select", "Slice", "Index", "GetItem", "Expand", "Clone", "ToCopy",
        "Cast", "Alias"))

    def walk_graph(self, tensor):
        """A ``GraphWalk`` of the graph that made ``tensor``: each node once, depth first from
        its ``grad_fn``, at most ``GRAPH_NODES_WALKED`` nodes; the probes that read one loss's
        graph in a step share it (``Context.loss_walk``)."""
        stack, seen, parent, nodes = [getattr(tensor, "grad_fn", None)], set(), {}, []
        node_inputs, node_op = self.backend.node_inputs, self._node_op
        while stack and len(seen) < self.GRAPH_NODES_WALKED:
            node = stack.pop()
            if node is None or id(node) in seen:
                continue
            seen.add(id(node))    # ``nodes`` holds it: an id is not reused by another node
            inputs = node_inputs(node)
            nodes.append((node, node_op(node), inputs))
            for child in inputs:
                if child is not None and id(child) not in seen:
                    parent.setdefault(id(child), node)
                    stack.append(child)
        return GraphWalk(nodes, parent)

    def squashed_twice(self, loss, *, walk=None):
        """Where the graph of ``loss`` feeds a sigmoid's output to a loss that applies its own
        sigmoid (BCE with logits), or a softmax's output to a log-softmax (cross-entropy's),
        through value-preserving ops only: ``[(node labels from the loss op, or the op that
        consumes the log-softmax, down to the sigmoid or softmax; "Sigmoid" or "Softmax";
        that node)]``. Reads ``walk`` (``walk_graph(loss)``) when given; [] without a graph."""
        walk = self.walk_graph(loss) if walk is None else walk
        found = []
        for node, op, inputs in walk.nodes:
            squash = self.SQUASHING_LOSSES.get(op)
            if squash is None or not inputs:
                continue
            chain = self._chain_to(inputs[0], squash)
            if chain:
                above = walk.parent.get(id(node)) if op == "LogSoftmax" else None
                head = [] if above is None else [self._node_label(above)]
                found.append((tuple(head + [self._node_label(node)]
                                    + [self._node_label(n) for n in chain]),
                              squash, chain[-1]))
        return found

    def _chain_to(self, node, op):
        """The nodes from ``node`` down to one whose op is ``op`` through value-preserving ops
        (each followed along its first input), or None."""
        chain = []
        while node is not None and len(chain) < 16:
            chain.append(node)
            name = self._node_op(node)
            if name == op:
                return chain
            inputs = self.backend.node_inputs(node) if name in self.VALUE_PRESERVING else ()
            node = inputs[0] if inputs else None
        return None

    # ops through which a loss scores classes: softmax, log-softmax and what is built on them
    CLASS_SCORING = frozenset(("Softmax", "LogSoftmax", "NllLoss", "NllLoss2d", "CrossEntropy"))

    def scores_classes(self, loss):
        """Whether the graph of ``loss`` holds a softmax-family op (a cross-entropy over
        classes): True, False, or None when ``loss`` has no graph or the walk gave up. Only
        such a loss has a uniform guess at -log(1/C); a regression, a BCE over independent
        outputs or a GAN's losses do not."""
        stack, seen = [getattr(loss, "grad_fn", None)], set()
        if stack[0] is None:
            return None
        while stack:
            if len(seen) >= self.GRAPH_NODES_WALKED:
                return None
            node = stack.pop()
            if node is None or id(node) in seen:
                continue
            seen.add(id(node))
            if self._node_op(node) in self.CLASS_SCORING:
                return True
            stack.extend(self.backend.node_inputs(node))
        return False

    def _node_label(self, node):
        """A graph node as its framework prints it (``SigmoidBackward0``)."""
        return type(node).__name__

    def _node_op(self, node):
        """The op of a graph node without its suffix: ``Sigmoid`` for ``SigmoidBackward0``."""
        label = self._node_label(node)
        op = _NODE_OPS.get(label)
        if op is None:
            op = re.sub(r"Backward\d*$", "", label)
            if len(_NODE_OPS) < 4096:
                _NODE_OPS[label] = op
        return op

    def graph_mark(self, tensor):
        """A ``GraphMark`` that says whether the graph node that made ``tensor`` is still
        alive, without keeping it alive; None when ``tensor`` has no graph."""
        node = getattr(tensor, "grad_fn", None)
        return None if node is None else GraphMark(weakref.ref(node))

    def graph_leaves(self, tensor, *, walk=None):
        """The leaf tensors that require grad which the graph that made ``tensor`` reaches
        (what backward gives a ``.grad``), each once, within ``GRAPH_NODES_WALKED`` nodes;
        read off ``walk`` (``walk_graph(tensor)``) when given."""
        walk = self.walk_graph(tensor) if walk is None else walk
        if walk.leaves is None:   # read once per walk, by every probe that asks
            leaves = {}
            for node, _, _ in walk.nodes:
                for leaf in self._node_leaves(node):
                    leaves.setdefault(id(leaf), leaf)
            walk.leaves = list(leaves.values())
        return list(walk.leaves)

    def graph_sides(self, first, second):
        """How the graphs of two tensors (a loss's prediction and its target) share their
        computation: a ``GraphSides``, or None when either has no graph or a walk gave up
        (``GRAPH_NODES_WALKED``). A node both graphs reach is shared; each side's own nodes are
        the rest, its ``ops`` their ops (value-preserving ones left out), its ``own_leaves``
        the leaves an edge of one of its own nodes reaches (the parameters a computation of
        its own uses, not one it shares with the other side) and ``leaves`` all it reaches."""
        walks = [self.walk_graph(t) if getattr(t, "grad_fn", None) is not None else None
                 for t in (first, second)]
        if any(w is None or len(w.nodes) >= self.GRAPH_NODES_WALKED for w in walks):
            return None
        ids = [{id(node) for node, _, _ in w.nodes} for w in walks]
        sides = []
        for walk, others in ((walks[0], ids[1]), (walks[1], ids[0])):
            ops, own = {}, {}
            for node, op, inputs in walk.nodes:
                if id(node) in others:
                    continue
                if op not in self.VALUE_PRESERVING and not self._node_leaves(node):
                    ops[op] = ops.get(op, 0) + 1
                for child in inputs:
                    for leaf in () if child is None else self._node_leaves(child):
                        own.setdefault(id(leaf), leaf)
            sides.append(GraphSide(MappingProxyType(ops), tuple(own.values()),
                                   tuple(self.graph_leaves(None, walk=walk))))
        return GraphSides(*sides)

    # ops that add or scale the terms of a sum (a constant factor: one input carries a graph)
    SUMMING = frozenset(("Add", "Sub", "Neg"))
    SCALING = frozenset(("Mul", "Div"))
    LOSS_TERMS = 16     # a loss with more terms than this is not split

    def loss_terms(self, loss):
        """The terms of a loss that is a sum, ``a + w * b - c``: for each, its first node and
        the leaves that require grad which its graph reaches, in the order of the sum; [] for
        a loss without a graph, None when it has more than ``LOSS_TERMS`` terms or the walks
        gave up. A sum is split through additions, subtractions, negations and products or
        quotients with a constant (one input that carries a graph); a product of two graphs is
        one term."""
        stack, seen, roots = [getattr(loss, "grad_fn", None)], set(), []
        node_inputs = self.backend.node_inputs
        while stack:
            node = stack.pop()
            if node is None or id(node) in seen:
                continue
            seen.add(id(node))
            op = self._node_op(node)
            inputs = [child for child in node_inputs(node) if child is not None]
            if op in self.SUMMING or (op in self.SCALING and len(inputs) == 1):
                stack.extend(reversed(inputs))
            else:
                roots.append(node)
                if len(roots) > self.LOSS_TERMS:
                    return None
        budget, terms = self.GRAPH_NODES_WALKED, []
        for root in roots:
            leaves, walked = self._leaves_below(root, budget)
            budget -= walked
            if budget <= 0:
                return None
            terms.append((root, leaves))
        return terms

    def _leaves_below(self, root, budget):
        """(The leaves that require grad under ``root``, nodes walked), at most ``budget``."""
        stack, seen, leaves = [root], set(), {}
        while stack and len(seen) < budget:
            node = stack.pop()
            if node is None or id(node) in seen:
                continue
            seen.add(id(node))
            for leaf in self._node_leaves(node):
                leaves.setdefault(id(leaf), leaf)
            stack.extend(self.backend.node_inputs(node))
        return tuple(leaves.values()), len(seen) + len(stack)

    def node_label(self, node):
        """A graph node as its framework prints it (``MseLossBackward0``)."""
        return self._node_label(node)

    @abstractmethod
    def _node_leaves(self, node):
        """The leaf tensors that require grad among one graph node's inputs."""

    CLASS_ROWS = 256       # rows of an output that the probability statistics look at

    @abstractmethod
    def simplex_deviation(self, output, axis):
        """``(smallest entry, largest |row sum - 1|)`` of the first ``CLASS_ROWS`` rows along
        ``axis`` (the classes) of ``output``: both about 0 when the rows are probabilities."""

    @abstractmethod
    def cross_entropy_misfit(self, output, grad, axis):
        """How far ``grad`` (the loss's gradient on ``output``) is from that of cross-entropy
        taking ``output`` as logits, ``k * (softmax(output) - one_hot)`` with ``k > 0`` per
        row, over the first ``CLASS_ROWS`` rows along ``axis``: ``(the largest misfit relative
        to k, the number of rows with k > 0, the spread of k over them relative to its
        largest)``. The misfit is about 0 only for that loss; k is one number for all rows
        without class weights."""

    @abstractmethod
    def pick_misfit(self, grad, axis):
        """How far ``grad`` is from that of a loss that picks one entry per row of the output
        (``NLLLoss``: ``-k * one_hot``), over the first ``CLASS_ROWS`` rows along ``axis``:
        ``(the largest share of a row's |gradient| off its most negative entry, the number of
        rows with a negative entry)``."""

    @abstractmethod
    def _saved_state(self, node):
        """Of one graph node: True if it holds saved tensors, False if backward freed them,
        None if it saved nothing."""


_NODE_OPS = {}   # node label -> its op (a graph walk meets the same few labels every step)


class GraphSide:
    """One side of ``Kernels.graph_sides``: its own nodes' ops (op -> count), the leaves its
    own nodes reach, and every leaf its graph reaches."""

    __slots__ = ("ops", "own_leaves", "leaves")

    def __init__(self, ops, own_leaves, leaves):
        self.ops, self.own_leaves, self.leaves = ops, own_leaves, leaves


class GraphSides:
    """``Kernels.graph_sides`` of two tensors: ``first`` and ``second``, a ``GraphSide`` each."""

    __slots__ = ("first", "second")

    def __init__(self, first, second):
        self.first, self.second = first, second


class GraphWalk:
    """One walk of an autograd graph: ``nodes`` as ``(node, op, inputs)`` in the order visited,
    and ``parent``: id of a node -> the node that reached it first. It holds the nodes: drop
    it once read (a kept walk keeps the graph alive)."""

    def __init__(self, nodes, parent):
        self.nodes, self.parent = nodes, parent
        self.leaves = None    # graph_leaves, once read


class GraphMark:
    """Whether one graph node is still alive (``alive()``), through a weak reference to it or
    to a no-op hook it holds; ``remove()`` takes the hook off, if any (idempotent)."""

    def __init__(self, ref, handle=None):
        self._ref, self._handle = ref, handle

    def alive(self):
        return self._ref() is not None

    def remove(self):
        handle, self._handle = self._handle, None
        if handle is not None:
            handle.remove()
