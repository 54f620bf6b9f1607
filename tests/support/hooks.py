"""What a diagnostic must leave behind: no hook on the model's modules or parameters."""
from diagnostics.backends import get_backend


def hook_state(model):
    """Every hook dict of every module and parameter, as {owner: {dict name: keys}}."""
    backend = get_backend(model)
    state = {name: {k: sorted(v) for k, v in keys.items()}
             for name, keys in backend.hook_keys().items()}
    for name, param in model.named_parameters():
        hooks = getattr(param, "_backward_hooks", None) if backend.name == "torch" else param._hooks
        state[name] = None if hooks is None else sorted(hooks)
    return state
