"""Monitor overhead: training-step time with Monitor(every=1) and with the default sampling,
against no monitor, on the CPU: an MLP 784-512-512-10 with batch 128 (``--model mlp``, the
default), or a small causal transformer language model with AdamW (``--model lm``: many
parameter tensors of many sizes, embeddings, layer norms and dropout, the issue's second budget).

The loops run interleaved in the same process, one block of ``DEFAULT_EVERY`` steps at a time
(so every block of the default Monitor holds exactly one sampled step, and all loops see the
same machine load); a ratio is the median block time over the median block time without a
monitor, by the wall clock (the process CPU time is printed beside it: steadier when other
work shares the cores). Two copies of the same loop can differ by 3-10% for the whole run
(where their tensors landed in memory), more than the default's budget: so the blocks are
spread over rounds, each on freshly built loops created in a rotated order, and the first
line after the plain step prints a second no-monitor loop built alongside, whose ratio is
that noise. A fourth loop, "bare statistics", computes the same activation and
gradient reductions in plain hooks with nothing else (no transfer, records, checks or update
sizes): the floor under every=1, whatever the bookkeeping costs. The default Monitor holds
the per-step tier (the gradient norm at every optimizer step); a fifth loop turns it off
(``per_step_gradients=False``), so its cost is printed, and beside it its floor: one norm pass
over the gradients, timed alone. A sixth loop is the default with ``guard="skip"``, whose cost
on healthy steps over the default is printed (budget 1.01). A seventh is a lesson-style
debugger: five
``.item()`` statistics (mean, std, min, max, fraction of zeros) of every layer's activation
and of every parameter's gradient at every step, the way course notebooks watch a network
train. Budgets (issue 14): Monitor(every=1) <= the debugger in the same run, the default <=
1.05. The last lines are every=1 over the debugger, the every=1 ratio and, last, the
default's.
"""
import argparse
import statistics
import time

import torch

from diagnostics.backends import get_backend
from diagnostics.monitor import DEFAULT_EVERY, Monitor
from diagnostics.monitor.kernels import kernels_for


LM_VOCAB, LM_LENGTH = 512, 64


def _mlp(seed):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(784, 512), torch.nn.ReLU(),
                               torch.nn.Linear(512, 512), torch.nn.ReLU(),
                               torch.nn.Linear(512, 10))


class _LanguageModel(torch.nn.Module):
    """A small causal transformer language model (token and position embeddings, pre-norm
    encoder layers under a causal mask, a head): many parameter tensors of many sizes, where
    the per-step tier's cost per tensor shows."""

    def __init__(self, *, width=128, layers=2, heads=4):
        super().__init__()
        self.embed = torch.nn.Embedding(LM_VOCAB, width)
        self.position = torch.nn.Embedding(LM_LENGTH, width)
        layer = torch.nn.TransformerEncoderLayer(width, heads, 4 * width, dropout=0.1,
                                                 batch_first=True, norm_first=True)
        self.blocks = torch.nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.norm = torch.nn.LayerNorm(width)
        self.head = torch.nn.Linear(width, LM_VOCAB)
        self.register_buffer("causal", torch.nn.Transformer.generate_square_subsequent_mask(
            LM_LENGTH), persistent=False)

    def forward(self, tokens):
        positions = torch.arange(tokens.shape[1], device=tokens.device)
        hidden = self.embed(tokens) + self.position(positions)
        hidden = self.blocks(hidden, mask=self.causal, is_causal=True)
        return self.head(self.norm(hidden))


MODELS = {"mlp": _mlp, "lm": lambda seed: (torch.manual_seed(seed), _LanguageModel())[1]}
SETTINGS = {"mlp": "MLP 784-512-512-10, batch 128, SGD momentum",
            "lm": f"causal transformer LM (2 layers, width 128, vocab {LM_VOCAB}), batch 16 x "
                  f"{LM_LENGTH} tokens, AdamW"}
_MODEL = ["mlp"]    # set by --model


def _optimizer(model):
    if _MODEL[0] == "lm":
        return torch.optim.AdamW(model.parameters(), lr=3e-4)
    return torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)


def _batches(generator):
    if _MODEL[0] == "lm":
        tokens = [torch.randint(0, LM_VOCAB, (16, LM_LENGTH + 1), generator=generator)
                  for _ in range(DEFAULT_EVERY)]
        return [(t[:, :-1], t[:, 1:]) for t in tokens]
    return [(torch.randn(128, 784, generator=generator),
             torch.randint(0, 10, (128,), generator=generator)) for _ in range(DEFAULT_EVERY)]


def _loop(seed, every, **options):
    model = MODELS[_MODEL[0]](seed)
    optimizer = _optimizer(model)
    monitor = None if every is None else Monitor(model, optimizer, every=every, **options)
    return model, optimizer, monitor


class _BareStatistics:
    """The floor under Monitor(every=1): the same device reductions (the Monitor's own
    activation and gradient kernels of every layer and parameter, every step), from plain
    hooks, with no transfer, no records and no checks."""

    def __init__(self, model):
        kernels = kernels_for(get_backend(model))
        self._results = []
        keep = self._results.extend
        self._handles = [model.register_forward_pre_hook(
            lambda module, args: keep(kernels.activation_statistics(args[0]))
            if args[0].is_floating_point() else None)]
        self._handles += [layer.register_forward_hook(
            lambda module, args, out: keep(kernels.activation_statistics(out)))
            for layer in model.children()]
        self._handles += [param.register_hook(
            lambda grad: keep(kernels.gradient_statistics(grad)))
            for param in model.parameters()]

    def step(self, loss):
        self._results.clear()

    def close(self):
        for handle in self._handles:
            handle.remove()


class _ItemDebugger:
    """A lesson-style debugger: five ``.item()`` statistics of every layer's output and of
    every parameter's gradient, every step, kept in a list (the baseline every=1 must beat)."""

    def __init__(self, model):
        self._model, self.history, self._current = model, [], {}
        self._handles = [layer.register_forward_hook(self._activation(name))
                         for name, layer in model.named_children()]

    @staticmethod
    def _five(tensor):
        x = tensor.detach().float()
        return (x.mean().item(), x.std().item(), x.min().item(), x.max().item(),
                (x == 0).float().mean().item())

    def _activation(self, name):
        def hook(module, args, out):
            self._current[f"{name} activation"] = self._five(out)
        return hook

    def step(self, loss):
        for name, param in self._model.named_parameters():
            if param.grad is not None:
                self._current[f"{name} gradient"] = self._five(param.grad)
        self._current["loss"] = loss.item()
        self.history.append(self._current)
        self._current = {}

    def close(self):
        for handle in self._handles:
            handle.remove()


def _debugger_loop(seed):
    model, optimizer, _ = _loop(seed, None)
    return model, optimizer, _ItemDebugger(model)


def _bare_loop(seed):
    model, optimizer, _ = _loop(seed, None)
    return model, optimizer, _BareStatistics(model)


def _norm_pass_seconds(model, repeats=200):
    """The least the per-step tier can cost: the Monitor's norm kernel over the gradients."""
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    norms = kernels_for(get_backend(model)).gradient_norms
    norms(grads)
    start = time.perf_counter()
    for _ in range(repeats):
        norms(grads)
    return (time.perf_counter() - start) / repeats


def _block(loop, batches):
    """Run the batches once; (wall-clock seconds, process CPU seconds)."""
    model, optimizer, monitor = loop
    wall, cpu = time.perf_counter(), time.process_time()
    for x, y in batches:
        optimizer.zero_grad()
        scores = model(x)
        loss = torch.nn.functional.cross_entropy(scores.reshape(-1, scores.shape[-1]),
                                                 y.reshape(-1))
        loss.backward()
        optimizer.step()
        if monitor is not None:
            monitor.step(loss)
    return time.perf_counter() - wall, time.process_time() - cpu


def _build_loops():
    return {"no monitor": lambda: _loop(0, None), "no monitor (twin)": lambda: _loop(0, None),
            "bare statistics": lambda: _bare_loop(0),
            ".item() debugger": lambda: _debugger_loop(0), "every=1": lambda: _loop(0, 1),
            f"every={DEFAULT_EVERY}, per_step_gradients=False": lambda: _loop(
                0, DEFAULT_EVERY, per_step_gradients=False),
            f"every={DEFAULT_EVERY}, guard='skip'": lambda: _loop(0, DEFAULT_EVERY,
                                                                 guard="skip"),
            f"every={DEFAULT_EVERY} (default)": lambda: _loop(0, DEFAULT_EVERY)}


def _close(loops):
    for _, _, monitor in loops.values():
        if monitor is not None:
            monitor.close()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", type=int, default=40, help="blocks of steps per loop")
    parser.add_argument("--rounds", type=int, default=4,
                        help="fresh sets of loops the blocks are spread over")
    parser.add_argument("--threads", type=int, default=2, help="torch intra-op threads")
    parser.add_argument("--model", choices=sorted(MODELS), default="mlp",
                        help="the network trained: the MLP, or a transformer language model")
    args = parser.parse_args()
    _MODEL[0] = args.model
    torch.set_num_threads(args.threads)
    batches = _batches(torch.Generator().manual_seed(0))
    builders = _build_loops()
    times = {name: [] for name in builders}
    rounds = max(1, min(args.rounds, args.blocks))
    for round_index in range(rounds):
        names = list(builders)
        shift = round_index * len(names) // rounds
        loops = {name: builders[name]() for name in names[shift:] + names[:shift]}
        for loop in loops.values():   # warm-up, and the monitors' first two sampled steps
            _block(loop, batches)
        blocks = args.blocks // rounds + (round_index < args.blocks % rounds)
        for index in range(blocks):
            order = names[index % len(names):] + names[:index % len(names)]   # rotate
            for name in order:
                times[name].append(_block(loops[name], batches))
        if round_index < rounds - 1:
            _close(loops)
    floor = _norm_pass_seconds(loops["no monitor"][0])
    _close(loops)
    wall = {name: statistics.median(t[0] for t in runs) for name, runs in times.items()}
    cpu = {name: statistics.median(t[1] for t in runs) for name, runs in times.items()}
    base = "no monitor"
    print(f"{SETTINGS[args.model]}, {args.threads} torch thread(s); "
          f"median of {args.blocks} interleaved blocks of {DEFAULT_EVERY} steps over {rounds} "
          f"rounds of freshly built loops")
    print(f"{base}: {wall[base] / DEFAULT_EVERY * 1e3:.3f} ms per step "
          f"(process CPU {cpu[base] / DEFAULT_EVERY * 1e3:.3f} ms)")
    for name in list(builders)[1:]:
        label = name if name.startswith(("no monitor", "bare", ".item()")) else f"Monitor({name})"
        print(f"{label}: {wall[name] / DEFAULT_EVERY * 1e3:.3f} ms per step, "
              f"ratio {wall[name] / wall[base]:.3f} (CPU-time ratio {cpu[name] / cpu[base]:.3f})")
    default, untiered, guarded = (list(builders)[-1], list(builders)[-3],
                                  list(builders)[-2])
    print(f"per-step tier: {(wall[default] - wall[untiered]) / DEFAULT_EVERY * 1e6:.0f} us "
          f"per step, the default over the default without it: "
          f"{wall[default] / wall[untiered]:.3f} (CPU-time ratio "
          f"{cpu[default] / cpu[untiered]:.3f})")
    print(f"guard='skip' on healthy steps over the default: "
          f"{wall[guarded] / wall[default]:.3f} (CPU-time ratio "
          f"{cpu[guarded] / cpu[default]:.3f}; budget <= 1.01)")
    print(f"per-step tier floor: one fused norm pass over the gradients alone takes "
          f"{floor * 1e6:.0f} us, {floor / (wall[base] / DEFAULT_EVERY):.3f} of a plain step "
          f"(room under the default's budget: "
          f"{1.05 - wall[default] / wall[base]:+.3f})")
    debugger = ".item() debugger"
    print(f"Monitor(every=1) / .item() debugger: {wall['every=1'] / wall[debugger]:.3f} "
          f"(CPU time {cpu['every=1'] / cpu[debugger]:.3f}; budget <= 1.0)")
    print(f"every=1 ratio: {wall['every=1'] / wall[base]:.3f}")
    print(f"{wall[default] / wall[base]:.3f}")


if __name__ == "__main__":
    main()
