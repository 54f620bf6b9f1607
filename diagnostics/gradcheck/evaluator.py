"""``Evaluator``: runs the copied model and the loss on the batch, and counts the runs.

Every run starts from the same random state, so dropout draws the same mask each time and the
loss is a deterministic function of the parameters and of whatever a run perturbs. The plain run
that checks this keeps every module call's output, so that a perturbed run asked to ``replay``
computes only the modules from the perturbation on (see ``replay.py``).
"""
from dataclasses import dataclass

import numpy as np

from ..errors import DiagnosticsError
from .calls import broadcasts, check_loss, layout_mismatch
from .declared import surrogate_exempt
from .kinks import ROUNDING
from .points import INPUT


@dataclass(frozen=True)
class Analytic:
    """What one backward pass says: the loss, and the gradients of parameters and points."""

    loss: float
    parameters: dict   # name -> gradient (zeros where backward left none)
    points: list       # Points in forward order
    point_gradients: dict  # point key -> gradient (zeros where none arrived)
    point_values: dict     # point key -> value
    unreached: frozenset = frozenset()   # parameters and point keys with no path to the loss


class Evaluator:
    def __init__(self, backend, instrument, batch):
        self.backend, self.instrument, self.batch = backend, instrument, batch
        self.random_state = backend.rng_state()
        self.parameters = {name: backend.to_numpy(param)
                           for name, param in backend.named_parameters() if param.requires_grad}
        self.forward_evaluations = 0
        self.backward_passes = 0
        self.surrogate_modules = ()   # the modules of instrument.surrogates

    def analytic(self):
        """One recording forward pass and one backward pass; checks the output and the loss."""
        self.backend.zero_grad()
        self.instrument.start_pass(record=True)
        try:
            with self.instrument.uses_watched():
                output, loss = self._run(checked=True)
            reached = _graph_reach(self.backend, loss)
            self.instrument.prove_aliases(loss)
            self.backward_passes += 1
            try:
                self.backend.backward(loss)
            except Exception as error:
                raise DiagnosticsError(
                    f"model: expected a backward pass that runs; loss.backward() raised "
                    f"{type(error).__name__}: {error}") from error
        finally:
            self.instrument.finish_recording()
        gradients = {}
        for name, values in self.parameters.items():
            grad = self.backend.read_gradient(name)
            gradients[name] = np.zeros_like(values) if grad is None else grad.astype(np.float64)
        points = list(self.instrument.points)
        point_gradients = {p.key: self.instrument.gradients.get(p.key, np.zeros(p.shape))
                           for p in points}
        unreached = {name for name, param in self.backend.named_parameters()
                     if name in gradients and id(param) not in reached}
        unreached |= {p.key for p in points
                      if id(self.instrument.graph_node(p.key)) not in reached}
        return Analytic(self.backend.scalar(loss), gradients, points, point_gradients,
                        dict(self.instrument.values), frozenset(unreached))

    def loss(self, *, parameter=None, point=None, delta=None, capture=None, replay=False,
             keep=False):
        """The loss with ``delta`` added to a parameter or a point; ``capture``: a point to keep;
        ``replay``: compute only from the perturbation on; ``keep``: store this run's calls.
        With ``instrument.surrogates`` set, the loss of the surrogate model (declared.py),
        except inside the surrogate module holding the perturbation."""
        target = None if point is None else point.key
        exempt = surrogate_exempt(self.surrogate_modules, parameter=parameter, point=point)
        self.instrument.start_pass(target=target, delta=delta, exempt=exempt,
                                   capture=None if capture is None else capture.key)
        if keep:
            self.instrument.replay.keep()
        elif replay:
            self._start_replay(parameter, point)
        if parameter is not None:
            self.backend.write_parameter(parameter, self.parameters[parameter] + delta)
        try:
            with self.backend.no_grad():
                _, loss = self._run()
            return self.backend.scalar(loss) + self.instrument.surrogate_term
        finally:
            self.instrument.replay.stop()
            if parameter is not None:
                self.backend.write_parameter(parameter, self.parameters[parameter])

    def output_of(self, capture, *, point, delta):
        """The value of the point ``capture`` in a run with ``delta`` added to ``point``."""
        self.loss(point=point, delta=delta, capture=capture)
        return self.instrument.captured

    def check_deterministic(self, analytic_loss):
        """The loss of a plain run; ``DiagnosticsError`` if it differs from the recording run's."""
        loss_0 = self.loss(keep=True)
        bound = 4 * ROUNDING * max(abs(loss_0), abs(analytic_loss), 1e-300)
        if not abs(loss_0 - analytic_loss) <= bound:
            mutating = self._modules_changing_their_input()
            if mutating:
                raise DiagnosticsError(_in_place_message(mutating, analytic_loss, loss_0))
            raise DiagnosticsError(
                f"model: expected the same loss from two runs on the same batch (finite "
                f"differences need a deterministic model), got {analytic_loss!r} and {loss_0!r}; "
                f"does the forward pass draw from a random source other than the global "
                f"generators, or keep state between calls?")
        return loss_0

    def _modules_changing_their_input(self):
        """``[(name, type)]`` of the modules whose forward overwrites its input in place, seen
        in one plain run (values compared before and after each call)."""
        found, before, handles = [], {}, []

        def pre(name):
            def hook(module, args):
                before[name] = [(x, self.backend.to_numpy(x)) for x in args
                                if self.backend.is_tensor(x)]
            return hook

        def post(name):
            def hook(module, args, output):
                changed = any(not np.array_equal(self.backend.to_numpy(x), kept, equal_nan=True)
                              for x, kept in before.pop(name, []))
                if changed and name not in dict(found):
                    found.append((name, type(module).__name__))
            return hook

        try:
            for name, module in self.backend.named_modules():
                handles.append(self.backend.add_forward_pre_hook(module, pre(name)))
                handles.append(self.backend.add_forward_hook(module, post(name)))
            self.loss()
        except Exception:  # the diagnosis is a courtesy: the plain error below still holds
            pass
        finally:
            for handle in handles:
                handle.remove()
        names = [name for name, _ in found]
        return [(name, kind) for name, kind in found if name  # innermost only
                and not any(other.startswith(name + ".") for other in names)]
    def _start_replay(self, parameter, point):
        """A parameter's perturbation starts at its module's first call; a point's at its call's
        start (an input) or end (an output)."""
        if point is not None:
            call = (point.module, point.call)
            if point.kind == INPUT:
                self.instrument.replay.start(before=call)
            else:
                self.instrument.replay.start(after=call)
        elif parameter is not None:
            self.instrument.replay.start(before=(parameter.rpartition(".")[0], 0))

    def _run(self, *, checked=False):
        self.backend.set_rng_state(self.random_state)
        self.forward_evaluations += 1
        output = self._forward(checked)
        loss = self._loss(output, checked)
        if checked:
            check_loss(self.backend, loss)
            self._check_broadcast(output)
        return output, loss

    def _check_broadcast(self, output):
        """Targets of another shape than the logits that the loss broadcasts against them
        (each example compared with every target): the check would differentiate a loss
        that is not the one meant. A loss that squeezes or reshapes by itself is trusted."""
        expected = layout_mismatch(self.backend, output, self.batch)
        if expected is None:
            return
        if broadcasts(self.backend, output, self.batch):
            raise DiagnosticsError(
                f"targets: expected {expected}, got shape {tuple(self.batch.targets.shape)}: "
                f"loss_fn broadcasts them, comparing every example with every target "
                f"(make them equal: output.squeeze(-1) or targets.view_as(output))")

    def _forward(self, checked):
        if not checked:
            return self.batch.forward(self.backend.model)
        try:
            return self.batch.forward(self.backend.model)
        except DiagnosticsError:
            raise
        except Exception as error:
            if _float32_left(error):
                raise DiagnosticsError(_float32_message("the model's forward", error)) from error
            raise DiagnosticsError(
                f"inputs: expected what the model's forward takes; model(*inputs) raised "
                f"{type(error).__name__}: {error}") from error

    def _loss(self, output, checked):
        if not checked:
            return self.batch.loss(output)
        try:
            return self.batch.loss(output)
        except DiagnosticsError:
            raise
        except Exception as error:
            if _float32_left(error):
                raise DiagnosticsError(_float32_message("loss_fn", error)) from error
            expected = layout_mismatch(self.backend, output, self.batch)
            if expected is not None:
                raise DiagnosticsError(
                    f"targets: expected {expected}, got shape "
                    f"{tuple(self.batch.targets.shape)}; loss_fn raised "
                    f"{type(error).__name__}: {error}") from error
            raise DiagnosticsError(
                f"loss_fn: expected loss_fn(output, targets) to run on the model's output; it "
                f"raised {type(error).__name__}: {error}") from error


def _float32_left(error):
    """A dtype clash (torch's words): weights the float64 copy did not convert met it."""
    text = str(error)
    return isinstance(error, RuntimeError) and (
        "must have the same dtype" in text or "expected scalar type" in text
        or ("Double" in text and "Float" in text and "dtype" in text))


def _float32_message(where, error):
    return (f"model: expected every weight the forward and the loss use to be the model's, "
            f"got a dtype clash in {where} on the check's float64 copy "
            f"({type(error).__name__}: {error}). Layers kept in a plain Python list or dict "
            f"(use nn.ModuleList / nn.ModuleDict: model.parameters() and the optimizer miss "
            f"them too), or a module held by loss_fn (a GAN's discriminator, a frozen "
            f"teacher), stay float32 when the model is copied: check the model with them "
            f"registered as submodules")


def _in_place_message(mutating, first, second):
    shown = ", ".join(f"'{name}' ({kind})" for name, kind in mutating[:3])
    return (f"model: expected a forward pass that does not overwrite tensors in place, got "
            f"{shown} changing its input in place (nn.ReLU(inplace=True), x.relu_(), x += ...). "
            f"Another variable that still refers to that input (a skip connection: skip = h; "
            f"h.relu_()) then holds the changed values too, which is rarely what was meant, "
            f"and the gradient check, which reads each module's input through an identity, "
            f"sees two different losses ({first!r} and {second!r}). Use the out-of-place form "
            f"(inplace=False, h = h.relu()) or clone what you keep (skip = h.clone()).")


def _graph_reach(backend, loss):
    """The ids of the graph nodes and leaf tensors the loss's graph reaches (torch's
    ``AccumulateGrad`` nodes hold leaves as ``variable``, minigrad's nodes as ``inputs``): a
    parameter or point outside it was used under no_grad or detached, so backward cannot give
    it a gradient (a custom backward that returns None for it is inside, and still checked)."""
    found, seen = set(), set()
    stack = [getattr(loss, "grad_fn", None)]
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        found.add(id(node))
        variable = getattr(node, "variable", None)
        if variable is not None:
            found.add(id(variable))
        found.update(id(value) for value in getattr(node, "inputs", ()) or ())
        stack.extend(backend.node_inputs(node))
    return found
