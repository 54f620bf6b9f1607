"""The autograd graph kept alive across steps: loss tensors, or sums of them, held with their
graph."""
from ...findings import Finding


def graph_retained(view):
    """What can be seen: loss tensors passed to ``step`` that are still alive steps later, and
    loss graphs still alive after their loss tensor is gone.

    Holding a loss tensor (``losses.append(loss)``, ``best = loss``) keeps its graph's nodes;
    after ``backward(retain_graph=True)`` it also keeps every saved activation. A running sum
    (``total = total + loss``) holds no loss tensor but a node above each loss's graph: the
    graph of a marked loss is still alive steps after the loop let go of the tensor.
    """
    if view.kept_losses:
        return [_kept_losses(view)]
    if not view.held_graphs:
        return []
    first, later = view.held_graphs[0]
    count = len(view.held_graphs)
    graphs = (f"the autograd graph of step {first}'s loss is" if count == 1 else
              f"the autograd graphs of {count} steps' losses (the first of step {first}) are")
    return [Finding(
        "GRAPH_RETAINED", "warning", "loss",
        f"{graphs} still alive {later} steps later, though the loss tensors passed to step() "
        f"are gone: something computed from the loss keeps each step's graph, such as a "
        f"running total (total += loss instead of loss.item()); memory grows every step",
        "add numbers, not tensors: total += loss.item() (or loss.detach()); look for sums, "
        "lists or dicts kept across steps that are built from the loss tensor",
        {"held_graphs": count, "first_step": first, "steps_later": later,
         "saved_activations_alive": False})]


def _kept_losses(view):
    buffers = any(alive for _, alive in view.kept_losses)
    first = view.kept_losses[0][0]
    return Finding(
        "GRAPH_RETAINED", "error" if buffers else "warning", "loss",
        f"{len(view.kept_losses)} loss tensors from earlier steps (the first from step {first}) "
        f"are still alive with their autograd graph"
        + (", and the graph still holds its saved activations (backward(retain_graph=True) "
           "or no backward at all): memory grows with every step" if buffers else ""),
        "keep numbers, not tensors: losses.append(loss.item()), total += loss.item() or "
        "loss.detach(); drop retain_graph=True unless you call backward twice on the same "
        "graph",
        {"kept_losses": len(view.kept_losses), "first_step": first,
         "saved_activations_alive": buffers, "held_graphs": len(view.held_graphs)})


CHECKS = (graph_retained,)
