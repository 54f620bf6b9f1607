"""The autograd graph kept alive across steps: loss tensors held with their graph."""
from ...findings import Finding


def graph_retained(view):
    """What can be seen: loss tensors passed to ``step`` that are still alive steps later.

    Holding a loss tensor (``losses.append(loss)``, ``best = loss``) keeps its graph's nodes;
    after ``backward(retain_graph=True)`` it also keeps every saved activation. A graph held
    only through a sum (``total = total + loss``) without the loss tensors is not visible.
    """
    if not view.kept_losses:
        return []
    buffers = any(alive for _, alive in view.kept_losses)
    first = view.kept_losses[0][0]
    return [Finding(
        "GRAPH_RETAINED", "error" if buffers else "warning", "loss",
        f"{len(view.kept_losses)} loss tensors from earlier steps (the first from step {first}) "
        f"are still alive with their autograd graph"
        + (", and the graph still holds its saved activations (backward(retain_graph=True) "
           "or no backward at all): memory grows with every step" if buffers else ""),
        "keep numbers, not tensors: losses.append(loss.item()) or loss.detach(); drop "
        "retain_graph=True unless you call backward twice on the same graph",
        {"kept_losses": len(view.kept_losses), "first_step": first,
         "saved_activations_alive": buffers})]


CHECKS = (graph_retained,)
