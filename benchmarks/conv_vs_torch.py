"""conv2d, max_pool2d and batch_norm (forward + backward, float32, batch 64) minigrad vs torch CPU.

Both frameworks run single-threaded in the same process (BLAS threads on a shared machine
make timings erratic). Each line gives the median of repeated runs; the last line is the
conv2d forward+backward ratio minigrad/torch for a 64x1x28x28 batch, 8 filters of 3x3.

    python benchmarks/conv_vs_torch.py [--repeats N]
"""
import os

for _name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_name, "1")

import argparse  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as TF  # noqa: E402

import minigrad  # noqa: E402
import minigrad.functional as F  # noqa: E402


def _median_ms(fn, repeats):
    for _ in range(3):
        fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return 1e3 * float(np.median(times))


def _forward_backward(framework, op, arrays):
    """A closure running ``op`` on fresh leaves of ``arrays`` and a backward of ones."""
    if framework == "minigrad":
        leaves = [minigrad.tensor(a, requires_grad=True) for a in arrays]

        def run():
            out = op(*leaves)
            out.backward(np.ones(out.shape, dtype=np.float32))
            for leaf in leaves:
                leaf.grad = None
    else:
        leaves = [torch.tensor(a, requires_grad=True) for a in arrays]

        def run():
            out = op(*leaves)
            out.backward(torch.ones_like(out))
            for leaf in leaves:
                leaf.grad = None
    return run


def _cases(rng):
    def array(*shape):
        return rng.standard_normal(shape).astype(np.float32)

    running = (np.zeros(8, np.float32), np.ones(8, np.float32))
    return {
        "conv2d 64x1x28x28 -> 8, 3x3, pad 1": (
            lambda x, w, b: F.conv2d(x, w, b, padding=1),
            lambda x, w, b: TF.conv2d(x, w, b, padding=1),
            [array(64, 1, 28, 28), 0.3 * array(8, 1, 3, 3), array(8)]),
        "conv2d 64x8x14x14 -> 16, 3x3, pad 1": (
            lambda x, w, b: F.conv2d(x, w, b, padding=1),
            lambda x, w, b: TF.conv2d(x, w, b, padding=1),
            [array(64, 8, 14, 14), 0.1 * array(16, 8, 3, 3), array(16)]),
        "max_pool2d 64x8x28x28, 2x2": (
            lambda x: F.max_pool2d(x, 2), lambda x: TF.max_pool2d(x, 2),
            [array(64, 8, 28, 28)]),
        "batch_norm 64x8x28x28, training": (
            lambda x, w, b: F.batch_norm(x, minigrad.tensor(running[0].copy()),
                                         minigrad.tensor(running[1].copy()), w, b, training=True),
            lambda x, w, b: TF.batch_norm(x, torch.from_numpy(running[0].copy()),
                                          torch.from_numpy(running[1].copy()), w, b,
                                          training=True),
            [array(64, 8, 28, 28), array(8), array(8)]),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args()
    torch.set_num_threads(1)
    ratios = {}
    for name, (op, twin_op, arrays) in _cases(np.random.default_rng(0)).items():
        ours = _median_ms(_forward_backward("minigrad", op, arrays), args.repeats)
        theirs = _median_ms(_forward_backward("torch", twin_op, arrays), args.repeats)
        ratios[name] = ours / theirs
        print(f"{name:40s} minigrad {ours:7.2f} ms   torch {theirs:7.2f} ms   "
              f"ratio {ours / theirs:5.2f}")
    first = next(iter(ratios))
    print(f"conv2d forward+backward ratio minigrad/torch (64x1x28x28): {ratios[first]:.2f}")


if __name__ == "__main__":
    main()
