"""Dropout that ``model.eval()`` does not switch off: a random evaluation pass with dropout's
mark, made in the forward of a module in eval mode. Dropout the user asked for stays quiet
(Monte Carlo dropout): a training flag written in the call (``F.dropout(x, p,
training=True)``), or a dropout module switched back on with ``.train()``."""
from ...findings import Finding
from ..probes.eval_randomness import EvalRandomness


def dropout_ignores_eval(view):
    signal = view.signal(EvalRandomness)
    last = signal.last if signal is not None else None
    if not last or last.dropout is None or last.origin is None or last.deliberate:
        return []
    drop = last.dropout
    origin = _named(last.origin, last.origin_type)
    return [Finding(
        "DROPOUT_IGNORES_EVAL", "warning", last.origin or None,
        f"an evaluation pass (model.eval(), no gradients) at step {last.step} is random: "
        f"run twice on the same batch, {_tensor(last)} had {drop['rate']:.0%} of its non-zero "
        f"entries zeroed in one run and not in the other ({drop['compared']} entries "
        f"compared), and the entries kept in both runs were equal: dropout still drops after "
        f"model.eval(), in the forward of {origin}, whose .training is False",
        f"in the forward of {origin}, pass training=self.training to F.dropout (or use an "
        f"nn.Dropout module): model.eval() only switches the modules' .training flags, so "
        f"F.dropout's default training=True, a flag of your own (self.is_training) or an "
        f"nn.Dropout created inside forward keeps dropping; for Monte Carlo dropout write "
        f"training=True in the call, or switch the nn.Dropout modules on with .train() after "
        f"model.eval(): that stays quiet",
        {"step": last.step, "eval_pass": last.eval_pass, "kind": last.kind,
         "tensor": last.name, "origin": last.origin, "rate": drop["rate"],
         "zeroed": drop["zeroed"], "kept": drop["kept"], "compared": drop["compared"]})]


def _tensor(last):
    if last.kind == "op":
        return f"the output of {last.name}"
    if last.name == "":
        return f"the model's {last.kind}"
    return f"the {last.kind} of {_named(last.name, last.module_type)}"


def _named(name, type_name):
    return f"the model itself ({type_name})" if name == "" else f"'{name}' ({type_name})"


CHECKS = (dropout_ignores_eval,)
