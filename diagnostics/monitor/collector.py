"""``Collector``: results computed on the device wait here for one transfer to the host."""


class Collector:
    """Queue ``(tensors, receive)`` pairs; ``flush`` gathers every tensor in one transfer and
    hands each ``receive`` its own results as NumPy arrays, in the order they were queued."""

    def __init__(self, kernels):
        self._kernels = kernels
        self._queued = []

    def add(self, tensors, receive):
        self._queued.append((tuple(tensors), receive))

    def clear(self):
        self._queued = []

    def __len__(self):
        return len(self._queued)

    def flush(self):
        queued, self._queued = self._queued, []
        if not queued:
            return
        arrays = self._kernels.gather([t for tensors, _ in queued for t in tensors])
        offset = 0
        for tensors, receive in queued:
            receive(arrays[offset:offset + len(tensors)])
            offset += len(tensors)
