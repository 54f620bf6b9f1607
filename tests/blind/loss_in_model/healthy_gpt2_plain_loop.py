"""Healthy: a tiny transformers GPT-2 (built from a config) trained by a plain loop.

``GPT2LMHeadModel`` computes its loss inside forward from ``labels=input_ids`` and shifts the
labels itself; batches are full windows of 32 tokens (no padding), AdamW with a linear warm-up,
``out.loss.backward()``. Data: windows of one long Markov-chain stream over 64 tokens (a fixed
successor with probability 0.85). Metric: held-out next-token accuracy; measured without
gradhunt 0.850 (0.85 + 0.15 / 64 is the best possible).
"""
import torch

EXPECTED = None
CAUSAL = True

VOCAB, LENGTH, BATCH, STEPS = 64, 32, 16, 150


def _model():
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    return GPT2LMHeadModel(GPT2Config(n_layer=2, n_embd=32, n_head=2, vocab_size=VOCAB,
                                      n_positions=LENGTH, bos_token_id=VOCAB - 1,
                                      eos_token_id=VOCAB - 1))


def loss_fn(output, labels):
    """What a user hands gradhunt's tools: the loss the model computed."""
    return output.loss


def _windows(n, generator):
    successor = torch.randperm(VOCAB, generator=torch.Generator().manual_seed(9))
    stream = torch.empty(n * LENGTH, dtype=torch.long)
    stream[0] = 0
    follow = torch.rand(len(stream), generator=generator) < 0.85
    noise = torch.randint(0, VOCAB, (len(stream),), generator=generator)
    for i in range(1, len(stream)):
        stream[i] = successor[stream[i - 1]] if follow[i] else noise[i]
    return stream.view(n, LENGTH)


def make(fixed=True):
    windows = _windows(BATCH, torch.Generator().manual_seed(1))
    return _model(), {"input_ids": windows, "labels": windows.clone()}


def run(fixed=True, monitor=False):
    import gradhunt

    generator = torch.Generator().manual_seed(1)
    train = _windows(BATCH * 30, generator)
    held_out = _windows(128, generator)
    model = _model()
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(1.0, (s + 1) / 20))
    mon = gradhunt.Monitor(model, optimizer, every=25) if monitor else None
    try:
        model.train()
        for step in range(STEPS):
            rows = torch.randint(0, len(train), (BATCH,), generator=generator)
            out = model(input_ids=train[rows], labels=train[rows])
            optimizer.zero_grad()
            out.loss.backward()
            optimizer.step()
            schedule.step()
            if mon is not None:
                mon.step(out.loss)
    finally:
        if mon is not None:
            mon.close()
    model.eval()
    with torch.no_grad():
        predicted = model(input_ids=held_out).logits[:, :-1].argmax(-1)
    accuracy = (predicted == held_out[:, 1:]).float().mean().item()
    return {"report": mon.report() if mon is not None else None, "metric": accuracy,
            "higher_is_better": True}
