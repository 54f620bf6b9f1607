"""The Monitor's statistics on minigrad tensors (NumPy arrays underneath)."""
import numpy as np

from minigrad.tensor import Tensor

from .base import Kernels


class MinigradKernels(Kernels):

    def activation_statistics(self, tensor, *, saturation=None, extremes=True):
        with np.errstate(over="ignore", invalid="ignore"):   # inf/NaN are what we report
            stats = self._activation_statistics(tensor, saturation)
        return stats if extremes or stats is None else stats[:3]

    def input_statistics(self, tensor):
        x = self._floating(tensor)
        if x is None:
            return None
        flat = x.reshape(-1)
        with np.errstate(over="ignore", invalid="ignore"):
            return (flat.sum(), np.dot(flat, flat), flat.max(keepdims=True),
                    flat.min(keepdims=True))

    @staticmethod
    def _floating(tensor):
        """The array of a non-empty floating tensor, float16 as float32 (its sums of squares
        overflow at 256); None for another."""
        x = tensor.data if isinstance(tensor, Tensor) else np.asarray(tensor)
        if x.size == 0 or not np.issubdtype(x.dtype, np.floating):
            return None
        return x.astype(np.float32) if x.dtype == np.float16 else x

    def _activation_statistics(self, tensor, saturation):
        x = self._floating(tensor)
        if x is None:
            return None
        flat = x.reshape(-1)
        if x.ndim < 2:
            unit_max, unit_min = flat.max(keepdims=True), flat.min(keepdims=True)
        else:
            axes = (0,) + tuple(range(2, x.ndim))
            unit_max, unit_min = x.max(axis=axes), x.min(axis=axes)
        stats = (flat.sum(), np.dot(flat, flat), np.float64(np.count_nonzero(flat)), unit_max,
                 unit_min)
        if saturation is None:
            return stats
        center, radius = saturation
        return stats + (np.float64(np.count_nonzero(np.abs(flat - center) > radius)),)

    def prediction_entropy(self, tensor):
        x = tensor.data if isinstance(tensor, Tensor) else np.asarray(tensor)
        if x.size == 0 or x.ndim == 0 or x.shape[-1] < 2 or not np.issubdtype(x.dtype,
                                                                               np.floating):
            return None
        x = x.astype(np.float64)
        with np.errstate(over="ignore", invalid="ignore"):
            shifted = x - x.max(axis=-1, keepdims=True)
            log_p = shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
            return np.float64(-(np.exp(log_p) * log_p).sum(axis=-1).mean())

    def gradient_statistics(self, grad, *, per_unit=False, inv_scale=None):
        flat = np.asarray(getattr(grad, "data", grad)).reshape(-1)
        if flat.size == 0:
            return (np.float64(0),) * 3
        if flat.dtype == np.float16:   # its sums overflow
            flat = flat.astype(np.float32)
        if inv_scale is not None:
            flat = flat * np.asarray(inv_scale, dtype=flat.dtype)
        magnitude = np.abs(flat)
        rows = np.shape(getattr(grad, "data", grad))
        with np.errstate(over="ignore", invalid="ignore"):
            largest = (magnitude.reshape(rows[0], -1).max(axis=1) if per_unit and rows
                       else magnitude.max())
            return (np.dot(flat, flat), magnitude.sum(), largest)

    def gradient_norms(self, grads):
        with np.errstate(over="ignore", invalid="ignore"):
            return np.array([np.linalg.norm(np.asarray(getattr(g, "data", g), dtype=np.float64))
                             for g in grads])

    def weight_sample(self, param, *, into=None):
        entries = self._sampled(param)
        if into is not None and into.shape == entries.shape and into.dtype == entries.dtype:
            into[...] = entries
            return into
        return entries.copy()

    def sample_largest(self, tensor):
        sample = np.asarray(self._sampled(tensor), dtype=np.float64)
        return np.abs(sample).max() if sample.size else np.float64(0)

    def update_statistics(self, param, before):
        now = self._sampled(param)
        with np.errstate(over="ignore", invalid="ignore"):
            return (np.linalg.norm(before - now), np.linalg.norm(now))

    def travel_statistics(self, params, marks):
        nows = [self._sampled(p) for p in params]
        with np.errstate(over="ignore", invalid="ignore"):
            return ([np.linalg.norm(mark - now) for mark, now in zip(marks, nows)]
                    + [np.linalg.norm(now) for now in nows])

    def value_sample(self, tensor, *, limit):
        x = tensor.data if isinstance(tensor, Tensor) else np.asarray(tensor)
        if x.size == 0 or not np.issubdtype(x.dtype, np.floating):
            return None
        sample = self._sampled(x, limit=limit)
        return sample.astype(np.float32) if x.dtype == np.float16 else sample.copy()

    def _sampled(self, param, *, limit=None):
        flat = (param.data if isinstance(param, Tensor) else param).reshape(-1)
        plan = self._sample_stride(flat.size, limit)
        if plan is None:
            return flat
        blocks, stride = plan
        return flat[:blocks * self.SAMPLE_BLOCK].reshape(blocks, self.SAMPLE_BLOCK)[::stride]

    def gather(self, results):
        arrays = [np.asarray(r.data if isinstance(r, Tensor) else r, dtype=np.float64)
                  for r in results]
        return [float(a) if a.ndim == 0 else a.reshape(-1) for a in arrays]

    def _node_label(self, node):
        return f"{node.name}Backward"
    def _node_leaves(self, node):
        return [x for x in node.inputs
                if isinstance(x, Tensor) and x.requires_grad and x.grad_fn is None]

    def _saved_state(self, node):
        if node.released:
            return False
        return True if node.saved_tensors else None

    def simplex_deviation(self, output, axis):
        rows = self._class_rows(output, axis)
        return (rows.min(), np.abs(rows.sum(axis=1) - 1).max())

    def cross_entropy_misfit(self, output, grad, axis):
        x = self._class_rows(output, axis)
        g = self._class_rows(grad, axis)
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            shifted = np.exp(x - x.max(axis=1, keepdims=True))
            p = shifted / shifted.sum(axis=1, keepdims=True)
            k = (g / p).max(axis=1, keepdims=True)
            residual = g - k * p            # zero but at the target, where it is -k
            low = residual.min(axis=1, keepdims=True)
            misfit = (np.abs(residual).sum(axis=1, keepdims=True) - np.abs(low)
                      + np.abs(low + k)) / k
            counted = k > 0
            k_low = np.where(counted, k, k.max()).min()
            return (np.where(counted, misfit, 0.0).max(), np.float64(counted.sum()),
                    (k.max() - k_low) / k.max())

    def pick_misfit(self, grad, axis):
        g = self._class_rows(grad, axis)
        low = g.min(axis=1)
        with np.errstate(divide="ignore", invalid="ignore"):
            misfit = (np.abs(g).sum(axis=1) + low) / -low
        counted = low < 0
        return (np.where(counted, misfit, 0.0).max(), np.float64(counted.sum()))

    def _class_rows(self, tensor, axis):
        """(rows, classes): the first ``CLASS_ROWS`` rows along ``axis``."""
        x = np.asarray(tensor.data if isinstance(tensor, Tensor) else tensor)
        if axis != x.ndim - 1:
            x = np.moveaxis(x[:1], axis, -1)
        return x.reshape(-1, x.shape[-1])[:self.CLASS_ROWS]
