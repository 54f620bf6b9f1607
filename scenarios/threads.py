"""Run small torch models on one thread: on small matrices, extra threads cost more than they
give, and on a busy machine their spin-waiting slows a step down many times over."""
from contextlib import contextmanager


@contextmanager
def torch_threads(count=1):
    """torch's intra-op thread count set to ``count`` inside the block, restored after."""
    import torch

    previous = torch.get_num_threads()
    torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(previous)
