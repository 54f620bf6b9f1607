"""Cross-rank bugs of a data-parallel loop (torch.distributed), each beside its fixed twin.

They live in the training loop of every rank, not in a single-process bench, so they are not
in the catalogue (``catalog.py``) that ``gradhunt hunt`` walks; the ``distributed`` scenario
and the Monitor's multi-process tests plant them from here.
"""


def all_reduce_gradients(model, *, average=True):
    """The manual all-reduce of a data-parallel loop: every gradient summed over the ranks,
    then divided by the world size. ``average=False`` is the bug: the division is forgotten,
    so the step is world_size times too large."""
    import torch.distributed as dist

    world = dist.get_world_size()
    for param in model.parameters():
        if param.grad is not None:
            dist.all_reduce(param.grad, op=dist.ReduceOp.SUM)
            if average:
                param.grad /= world


def all_reduce_buffers(model):
    """The fix of buffers that drift apart when nothing broadcasts them (DDP with
    ``broadcast_buffers=False``, or a manual all-reduce of the gradients only): every
    floating-point buffer (batch-norm running statistics) averaged over the ranks."""
    import torch.distributed as dist

    world = dist.get_world_size()
    for buffer in model.buffers():
        if buffer.is_floating_point():
            dist.all_reduce(buffer, op=dist.ReduceOp.SUM)
            buffer /= world


def summed_all_reduce(model):
    """The bug: ``all_reduce_gradients`` without the division by the world size."""
    all_reduce_gradients(model, average=False)


def rank_batches(features, targets, batch_size, *, rank, world, shard=True, seed=0):
    """The batches one rank reads in an epoch: a shuffled shard of its own, as a
    ``DistributedSampler`` gives. ``shard=False`` is the bug (the sampler forgotten): every
    rank reads the whole data set in the same order, the same batches."""
    import torch
    from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

    dataset = TensorDataset(features, targets)
    if shard:
        sampler = DistributedSampler(dataset, num_replicas=world, rank=rank, shuffle=True,
                                     seed=seed)
        return DataLoader(dataset, batch_size=batch_size, sampler=sampler)
    generator = torch.Generator().manual_seed(seed)
    return DataLoader(dataset, batch_size=batch_size, shuffle=True, generator=generator)


def rank_local_reset(model):
    """The bug: a rank changes parameters on its own after DistributedDataParallel has
    broadcast them (e.g. ``if rank == 0: reset the head`` or loading a checkpoint on rank 0
    only, after wrapping): DDP never broadcasts parameters again, so the ranks train different
    models from here on. Resets the last parameter of ``model`` to zeros in place."""
    import torch

    last = list(model.parameters())[-1]
    with torch.no_grad():
        last.zero_()
