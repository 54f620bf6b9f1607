"""The Monitor's statistics on torch tensors, computed on the tensor's device."""
import functools
import math
import weakref

from .. import call_sites
from .base import GraphMark, Kernels

DOT_TENSORS = 8   # at most this many gradients are normed by a dot each, more by one fused call

class TorchKernels(Kernels):

    def __init__(self, backend):
        super().__init__(backend)
        self.torch = backend.torch
        self._scratch_buffers = {}
        self._views = {}    # id(param) -> (weak ref, data pointer, shape, its sample view)

    def activation_statistics(self, tensor, *, saturation=None, extremes=True):
        torch = self.torch
        x = tensor.detach()
        if x.numel() == 0 or not x.is_floating_point() or not self._dense(x):
            return None
        x = self._reducible(x)
        flat = x.reshape(-1)
        scratch = self._scratch(flat)
        # x != 0 written as 1.0/0.0 into a float buffer, then summed: two passes, 1.5-2x faster
        # than the bool tensor's sum or abs-sign-sum, and count_nonzero is 5-10x slower above
        # 65,536 elements on the CPU; NaN counts as nonzero (NaN != 0)
        stats = (flat.sum(), torch.dot(flat, flat), torch.ne(flat, 0, out=scratch).sum())
        if not extremes:
            return stats
        if x.dim() < 2:
            stats += (flat.amax().reshape(1), flat.amin().reshape(1))
        else:
            dims = 0 if x.dim() == 2 else (0,) + tuple(range(2, x.dim()))
            stats += (x.amax(dim=dims), x.amin(dim=dims))
        if saturation is None:
            return stats
        center, radius = saturation
        saturated = torch.sub(flat, center, out=scratch).abs_().sub_(radius).clamp_(min=0)
        return stats + (saturated.sign_().sum(),)

    def input_statistics(self, tensor):
        x = tensor.detach()
        if x.numel() == 0 or not x.is_floating_point() or not self._dense(x):
            return None
        flat = self._reducible(x).reshape(-1)
        smallest, largest = self.torch.aminmax(flat)   # one pass for both (NaN propagates)
        return (flat.sum(), self.torch.dot(flat, flat), largest.reshape(1), smallest.reshape(1))

    def prediction_entropy(self, tensor):
        x = tensor.detach()
        if (x.numel() == 0 or x.dim() == 0 or x.shape[-1] < 2 or not x.is_floating_point()
                or not self._dense(x)):
            return None
        p = self.torch.softmax(self._reducible(x), dim=-1)   # entr(p) = -p ln p, 0 at p = 0
        return self.torch.special.entr(p).sum() / (p.numel() // p.shape[-1])

    def gradient_statistics(self, grad, *, per_unit=False, inv_scale=None):
        if grad.requires_grad:   # (a gradient of a backward with create_graph=True)
            grad = grad.detach()
        if grad.is_sparse:       # an nn.Embedding(sparse=True): the rows it touched
            return self._sparse_gradient_statistics(grad, per_unit=per_unit,
                                                    inv_scale=inv_scale)
        flat = self._reducible(grad)
        flat = flat if flat.dim() == 1 else flat.reshape(-1)
        if flat.numel() == 0:
            return (flat.new_zeros(()),) * 3
        if inv_scale is not None:   # as GradScaler.unscale_ does: multiply by 1 / scale
            flat = self.torch.mul(flat, inv_scale.to(flat.device, non_blocking=True),
                                  out=self._scratch(flat, slot=1))
        dims = grad.dim()
        if per_unit and dims == 1:          # a bias: |g| itself is the per-unit result
            magnitude = largest = self.torch.abs(flat)
        else:
            magnitude = self.torch.abs(flat, out=self._scratch(flat))
            largest = (magnitude.view(grad.shape[0], -1).amax(dim=1) if per_unit and dims
                       else magnitude.amax())
        return (self.torch.dot(flat, flat), magnitude.sum(), largest)

    def _sparse_gradient_statistics(self, grad, *, per_unit, inv_scale):
        """The statistics of a sparse COO gradient from its (coalesced) stored rows: the
        rows it does not store are 0, which adds nothing to a sum and no maximum."""
        torch = self.torch
        grad = grad.coalesce()
        values = grad.values()
        flat = values.reshape(-1)
        if inv_scale is not None:
            flat = flat * inv_scale.to(flat.device, non_blocking=True)
        magnitude = flat.abs()
        if per_unit and grad.dim():
            largest = flat.new_zeros(grad.shape[0])
            if values.shape[0]:
                row_largest = magnitude.view(values.shape[0], -1).amax(dim=1)
                largest.scatter_reduce_(0, grad.indices()[0], row_largest, "amax")
        else:
            largest = magnitude.amax() if flat.numel() else flat.new_zeros(())
        return (torch.dot(flat, flat), magnitude.sum(), largest)

    def gradient_norms(self, grads):
        torch = self.torch
        grads = [g.coalesce().values() if g.is_sparse else g for g in grads]
        first = grads[0]
        if len(grads) <= DOT_TENSORS and first.device.type == "cpu" and first.dtype in (
                torch.float32, torch.float64) and all(
                g.dtype == first.dtype and g.device == first.device
                and g.layout == torch.strided for g in grads):
            # a few gradients on the CPU: a dot each runs on all intra-op threads, where
            # the fused norm's CPU fallback is slower per element; past a handful of tensors
            # the dispatch of a dot (and reshape) per tensor costs more than it saves. It
            # overflows where torch's own float32 norm does (a square above 3.4e38)
            flats = [g.detach().reshape(-1) for g in grads]
            return torch.stack([torch.dot(f, f) for f in flats]).sqrt_()
        device = first.device
        grads = [g.detach() if g.device == device else g.detach().to(device) for g in grads]
        # one fused pass; norms in float32 also for half gradients (whose 65504 they pass),
        # in float64 when a gradient is (the norm may not narrow its input's dtype)
        wide = torch.float64 if any(g.dtype == torch.float64 for g in grads) else torch.float32
        return torch.stack(torch._foreach_norm(grads, 2, dtype=wide))

    def autocast_dtype(self, tensor):
        torch, device = self.torch, tensor.device.type
        try:
            if not torch.is_autocast_enabled(device):
                return None
            return str(torch.get_autocast_dtype(device)).removeprefix("torch.")
        except (RuntimeError, TypeError, AttributeError):   # a device type without autocast
            return None

    def loss_scale(self, scaler):
        if not scaler.is_enabled():
            return None
        read = getattr(scaler, "_get_scale_async", None)   # the tensor scale() multiplies by
        return read() if read is not None else getattr(scaler, "_scale", None)

    def weight_sample(self, param, *, into=None):
        entries = self._sampled(param)
        fits = (into is not None and into.shape == entries.shape and into.dtype == entries.dtype
                and into.device == entries.device)
        return into.copy_(entries) if fits else entries.clone()

    def weight_samples(self, params, *, into=None):
        views = [self._sample_view(p) for p in params]
        if not _fit(into, views):
            return [v.clone() for v in views]
        self.torch._foreach_copy_(into, views)   # one fused copy per device and dtype
        return into

    def _sample_view(self, param):
        """``_sampled(param)``, kept while ``param`` keeps its storage and shape: the three
        view operations are made once, not at every sampled step. (A non-contiguous tensor's
        flattening is a copy, made afresh each time.)"""
        if not param.is_contiguous():
            return self._sampled(param)
        cached = self._views.get(id(param))
        pointer = param.data_ptr()
        if (cached is not None and cached[0]() is param and cached[1] == pointer
                and cached[2] == param.shape):
            return cached[3]
        view = self._sampled(param)
        self._views[id(param)] = (weakref.ref(param), pointer, param.shape, view)
        return view

    def sample_largest(self, tensor):
        sample = self._sampled(tensor)   # abs-amax of the strided runs: 3x faster than a norm
        return sample.abs().amax() if sample.numel() else sample.new_zeros(())

    def update_statistics(self, param, before):
        now = self._reducible(self._sampled(param))
        delta = self._reducible(before).sub_(now)
        norm = self.torch.linalg.vector_norm
        return (norm(delta), norm(now))

    def update_statistics_many(self, params, befores, *, nows=None):
        torch = self.torch
        views = [self._sample_view(p) for p in params]
        nows = [None] * len(views) if nows is None else nows
        if not _fit(nows, views):   # (one pass when all fit: the case of every step)
            contiguous = torch.contiguous_format
            nows[:] = [b if _fit([b], [v]) else torch.empty_like(v, memory_format=contiguous)
                       for b, v in zip(nows, views)]
        copies = nows
        torch._foreach_copy_(copies, views)   # contiguous: the fused kernels' fast path
        copies = [self._reducible(c) for c in copies]
        deltas = [self._reducible(b) for b in befores]
        torch._foreach_sub_(deltas, copies)  # one fused pass per device and dtype
        return list(torch._foreach_norm(deltas + copies))

    def travel_statistics(self, params, marks):
        torch = self.torch
        nows = [self._reducible(self._sample_view(p)) for p in params]
        deltas = list(torch._foreach_sub([self._reducible(m) for m in marks], nows))   # new
        return list(torch._foreach_norm(deltas + nows))

    def weights_token(self, tensor):
        # the version counter moves with every in-place write (an optimizer's step, copy_
        # under no_grad); the data pointer with ``param.data = ...``
        return (tensor._version, tensor.data_ptr())

    def token_after_writes(self, token, writes):
        version, pointer = token
        return (version + writes, pointer)

    def value_sample(self, tensor, *, limit):
        x = tensor.detach()
        if x.numel() == 0 or not x.is_floating_point() or not self._dense(x):
            return None
        sample = self._sampled(x, limit=limit)
        return sample.float() if sample.dtype in (self.torch.float16, self.torch.bfloat16) \
            else sample.clone()

    def op_recorder(self, record):
        from torch.overrides import TorchFunctionMode

        flags = _training_flags(self.torch)

        class Recorder(TorchFunctionMode):
            """Each torch function and Tensor method called (not inside ``record``: a mode is
            off while its own ``__torch_function__`` runs)."""

            def __torch_function__(self, func, types, args=(), kwargs=None):
                flag = next((f for f in flags.get(getattr(func, "__name__", None), ())
                             if f[0] is func), None)
                written = None if flag is None else _training_written(func, flag)
                output = func(*args, **(kwargs or {}))
                record(_op_name(func), output, written)
                return output
        return Recorder()

    def _sampled(self, param, *, limit=None):
        tensor = param.detach()
        plan = self._sample_stride(math.prod(tensor.shape), limit)
        if plan is None:
            return tensor.reshape(-1)
        blocks, stride = plan
        block = self.SAMPLE_BLOCK
        if tensor.is_contiguous():   # the same entries in one view op instead of four
            runs = -(-blocks // stride)
            return tensor.as_strided((runs, block), (block * stride, 1), tensor.storage_offset())
        flat = tensor.reshape(-1)
        return flat[:blocks * block].view(blocks, block)[::stride]

    def gather(self, results):
        if not results:
            return []
        torch = self.torch
        scalars, vectors, sizes = [], [], []   # sizes: None for a 0-d result, else its length
        for t in results:
            dims = t.dim()
            if dims == 0:
                scalars.append(t)
                sizes.append(None)
                continue
            if dims > 1:
                t = t.reshape(-1)
            vectors.append(t)
            sizes.append(t.shape[0])
        try:
            flat = self._concatenated(scalars, vectors)
        except RuntimeError:   # results on several devices: bring them to the first one's
            device = results[0].device
            flat = self._concatenated([t.to(device) for t in scalars],
                                      [t.to(device) for t in vectors])
        flat = flat.to(torch.float64).cpu().numpy()   # the one synchronisation
        values = iter(flat[:len(scalars)].tolist())
        arrays, offset = [], len(scalars)
        for size in sizes:
            if size is None:
                arrays.append(next(values))
            else:
                arrays.append(flat[offset:offset + size])
                offset += size
        return arrays

    def _concatenated(self, scalars, vectors):
        """The 0-d results stacked, then the others, in one 1-d tensor (widest dtype)."""
        torch = self.torch
        if not scalars:
            return torch.cat(vectors)
        stacked = torch.stack(scalars)
        return torch.cat([stacked, *vectors]) if vectors else stacked

    def release_scratch(self):
        self._scratch_buffers = {}
        self._views = {}

    def _scratch(self, like, *, slot=0):
        """A reusable buffer for elementwise temporaries (no allocation per statistic)."""
        key = (like.dtype, like.device, slot)
        buffer = self._scratch_buffers.get(key)
        size = like.numel()
        if buffer is None or buffer.numel() < size:
            buffer = self._scratch_buffers[key] = self.torch.empty(size, dtype=like.dtype,
                                                                   device=like.device)
        return buffer if buffer.numel() == size else buffer[:size]

    def graph_mark(self, tensor):
        """torch's graph nodes take no weak reference: a no-op hook object on the node lives
        exactly as long as the node, and its handle takes it off without holding the node."""
        node = tensor.grad_fn
        if node is None:
            return None
        hook = _NoOpHook()
        try:
            handle = node.register_hook(hook)
        except (RuntimeError, TypeError, AttributeError):   # a node that takes no hooks
            return None
        return GraphMark(weakref.ref(hook), handle)

    def _node_leaves(self, node):
        leaf = getattr(node, "variable", None)   # AccumulateGrad: the leaf it accumulates into
        if isinstance(leaf, self.torch.Tensor) and leaf.is_leaf and leaf.requires_grad:
            return (leaf,)
        return ()

    def _saved_state(self, node):
        kind = type(node)
        attrs = _SAVED_ATTRS.get(kind)
        if attrs is None:   # dir() of a node is slow: once per node type
            attrs = tuple(a for a in dir(node) if a.startswith("_saved_"))
            if len(_SAVED_ATTRS) < 4096:
                _SAVED_ATTRS[kind] = attrs
        for attr in attrs:
            try:
                value = getattr(node, attr)
            except RuntimeError:  # "... saved tensors after they have already been freed"
                return False
            if isinstance(value, self.torch.Tensor):
                return True
        return None

    def _dense(self, tensor):
        """Whether every element is stored: a sparse COO or CSR tensor (a graph's adjacency)
        holds its nonzeros only and has no flat view to reduce; it gets no statistics."""
        return tensor.layout == self.torch.strided

    def _reducible(self, tensor):
        """float32 for half types, whose sums overflow and which CPU ``dot`` lacks."""
        halves = (self.torch.float16, self.torch.bfloat16)
        return tensor.float() if tensor.dtype in halves else tensor

    def simplex_deviation(self, output, axis):
        rows = self._class_rows(output, axis)
        return (rows.amin(), (rows.sum(dim=1) - 1).abs().amax())

    def cross_entropy_misfit(self, output, grad, axis):
        torch = self.torch
        p = torch.softmax(self._class_rows(output, axis), dim=1)
        g = self._class_rows(grad, axis)
        k = (g / p).amax(dim=1, keepdim=True)
        residual = g - k * p            # zero but at the target, where it is -k
        low = residual.amin(dim=1, keepdim=True)
        misfit = (residual.abs().sum(dim=1, keepdim=True) - low.abs() + (low + k).abs()) / k
        counted = k > 0
        k_high = k.amax()
        k_low = torch.where(counted, k, k_high).amin()
        return (torch.where(counted, misfit, 0.0).amax(), counted.sum().to(misfit.dtype),
                (k_high - k_low) / k_high)

    def pick_misfit(self, grad, axis):
        g = self._class_rows(grad, axis)
        low = g.amin(dim=1)
        misfit = (g.abs().sum(dim=1) + low) / -low
        counted = low < 0
        return (self.torch.where(counted, misfit, 0.0).amax(), counted.sum().to(misfit.dtype))

    def _class_rows(self, tensor, axis):
        """(rows, classes): the first ``CLASS_ROWS`` rows along ``axis``, in float32 or more."""
        x = self._reducible(tensor.detach())
        if axis != x.dim() - 1:
            x = x[:1].movedim(axis, -1)
        return x.reshape(-1, x.shape[-1])[:self.CLASS_ROWS]


_SAVED_ATTRS = {}   # graph node type -> its "_saved_..." attributes


def _fit(buffers, tensors):
    """Whether ``buffers`` (a list, or None) can take a contiguous copy of each of
    ``tensors``."""
    return (buffers is not None and len(buffers) == len(tensors)
            and all(b is not None and b.shape == t.shape and b.dtype == t.dtype
                    and b.device == t.device and b.is_contiguous()
                    for b, t in zip(buffers, tensors)))


@functools.cache
def _training_flags(torch):
    """The functions that drop at random unless told not to, by name: ``{name: [(function,
    its flag's keyword, its position)]}`` (``F.dropout`` and ``torch.dropout`` share one)."""
    F = torch.nn.functional
    found = {}
    for space, keyword, names in (
            (F, "training", ("dropout", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout",
                             "feature_alpha_dropout")),
            (torch, "train", ("dropout", "dropout_", "alpha_dropout", "alpha_dropout_",
                              "feature_dropout", "feature_dropout_", "feature_alpha_dropout",
                              "feature_alpha_dropout_"))):
        for name in names:
            if hasattr(space, name):
                found.setdefault(name, []).append((getattr(space, name), keyword, 2))
    return found


def _training_written(func, flag):
    """True when the code that called ``func`` wrote its training flag (``training=True``,
    ``training=self.training``, or positionally); False when it left it to its default; None
    when unknown or when torch's own code called it (``nn.Dropout`` passes its ``.training``:
    the module's mode is what counts)."""
    frame = call_sites.caller(getattr(func, "__code__", None), ("torch.overrides", __name__))
    if frame is None or frame.f_globals.get("__name__", "").partition(".")[0] == "torch":
        return None
    return call_sites.argument_written(frame, func.__name__, flag[1], flag[2])


def _op_name(func):
    """``F.dropout``, ``Tensor.mul``, ``torch.rand_like``: how the user's code spells ``func``."""
    name = getattr(func, "__name__", None) or repr(func)
    if getattr(func, "__module__", None) in ("torch.nn.functional", "torch._C._nn"):
        return f"F.{name}"
    if getattr(func, "__qualname__", "").split(".")[0] in ("Tensor", "TensorBase", "_TensorBase"):
        return f"Tensor.{name}"
    return f"torch.{name}"
class _NoOpHook:
    """A graph node's post-hook that changes nothing: its life is the node's."""

    def __call__(self, grad_inputs, grad_outputs):
        return None
