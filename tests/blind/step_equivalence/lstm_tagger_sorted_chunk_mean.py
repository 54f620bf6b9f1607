"""LSTM sequence tagger on padded, length-sorted batches; accumulation over ``torch.chunk`` of
the batch with each chunk's token-mean loss divided by the number of chunks.

Model family: embedding + LSTM tagger over packed sequences (``pack_padded_sequence`` /
``pad_packed_sequence``, lengths from the non-pad ids), a linear tag head; targets (B, T) with
``-100`` on padding.
Idiom: a plain ``train_step`` function; RMSprop; the batch is sorted longest first (as packing
pipelines do) and split with ``torch.chunk`` into 3 accumulation micro-batches, so the first
chunk holds many more real tokens than the last.
The bug: ``nn.CrossEntropyLoss(ignore_index=-100)`` (mean over the chunk's real tokens) divided
by ``len(chunks)`` -- the chunks' means weighted equally whatever their token counts.
The fix: the criterion with ``reduction="sum"`` divided by the whole batch's count of scored
tokens.

Measured (CPU, OMP_NUM_THREADS=1): on the build() batch the buggy step's gradient is the
hand-written equal-weighted objective's (rel. ~1e-7); against the whole batch's token-mean
gradient (chunks of 199, 101, 46 real tokens): scale 1.052, rel. error 0.392, cosine 0.938. The loop's reported loss 1.7900 is
the true 1.7901 to three decimals -- nothing in the printed loss shows it. The fixed twin's
gradient is the objective's (rel. ~1e-7). On quality this task is forgiving: after 200 steps
held-out token-mean loss 0.0065 (buggy) vs 0.0071 (fixed), per-token accuracy 1.000 both
(the buggy run is not worse here); so the test asserts the gradient discrepancy only.
"""
import torch
import torch.nn as nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

EXPECTED = ("STEP_NOT_OBJECTIVE", "weighted equally")
QUALITY_GAP = False

VOCAB, TAGS, T = 30, 6, 30
BATCH, N_CHUNKS = 24, 3


class LSTMTagger(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, 24, padding_idx=0)
        self.lstm = nn.LSTM(24, 48, batch_first=True)
        self.head = nn.Linear(48, TAGS)

    def forward(self, tokens):
        lengths = (tokens != 0).sum(1)
        packed = pack_padded_sequence(self.emb(tokens), lengths, batch_first=True,
                                      enforce_sorted=False)
        out, _ = self.lstm(packed)
        out, _ = pad_packed_sequence(out, batch_first=True, total_length=tokens.shape[1])
        return self.head(out)


def tag_loss(scores, tags):
    return nn.functional.cross_entropy(scores.reshape(-1, TAGS), tags.reshape(-1),
                                       ignore_index=-100)


def make_batch(gen, n=BATCH):
    """Word ids 1..VOCAB-1; a word's tag depends on it and on the previous word. Lengths 2..T,
    sorted longest first."""
    lengths = torch.randint(2, T + 1, (n,), generator=gen).sort(descending=True).values
    words = torch.randint(1, VOCAB, (n, T), generator=gen)
    prev = torch.cat([torch.zeros(n, 1, dtype=torch.long), words[:, :-1]], 1)
    tags = (words % 3) * 2 + (prev > VOCAB // 2).long()
    real = torch.arange(T)[None, :] < lengths[:, None]
    return words * real, torch.where(real, tags, torch.full_like(tags, -100))


def make_train_step(fixed):
    def train_step(model, batch, optimizer):
        tokens, tags = batch
        optimizer.zero_grad()
        if fixed:
            criterion = nn.CrossEntropyLoss(ignore_index=-100, reduction="sum")
            n_scored = (tags != -100).sum()
        else:
            criterion = nn.CrossEntropyLoss(ignore_index=-100)
        chunks = list(zip(torch.chunk(tokens, N_CHUNKS), torch.chunk(tags, N_CHUNKS)))
        total = 0.0
        for tok_c, tag_c in chunks:
            scores = model(tok_c)
            loss = criterion(scores.reshape(-1, TAGS), tag_c.reshape(-1))
            if fixed:
                loss = loss / n_scored
            else:
                loss = loss / len(chunks)
            loss.backward()
            total += loss.item()
        optimizer.step()
        return total
    return train_step


def effective_loss(model, tokens, tags):
    """By hand: each chunk's token-mean (chunks as torch.chunk makes them), weighted 1/K."""
    tok = nn.functional.cross_entropy(model(tokens).reshape(-1, TAGS), tags.reshape(-1),
                                      ignore_index=-100, reduction="none").reshape(tags.shape)
    mask = (tags != -100).float()
    parts = [(lc * mc).sum() / mc.sum()
             for lc, mc in zip(torch.chunk(tok, N_CHUNKS), torch.chunk(mask, N_CHUNKS))]
    return sum(parts) / len(parts)


def build(fixed: bool) -> dict:
    torch.manual_seed(0)
    model = LSTMTagger()
    optimizer = torch.optim.RMSprop(model.parameters(), lr=2e-3)
    inputs, targets = make_batch(torch.Generator().manual_seed(1))
    return {"model": model, "loss_fn": tag_loss, "inputs": inputs, "targets": targets,
            "train_step": make_train_step(fixed), "optimizer": optimizer}


def train(fixed: bool, steps: int = 200) -> dict:
    objs = build(fixed)
    model, opt, step = objs["model"], objs["optimizer"], objs["train_step"]
    gen = torch.Generator().manual_seed(2)
    reported, true = [], []
    for _ in range(steps):
        tokens, tags = make_batch(gen)
        with torch.no_grad():
            true.append(float(tag_loss(model(tokens), tags)))
        reported.append(step(model, (tokens, tags), opt))
    test_gen = torch.Generator().manual_seed(99)
    correct = total = 0
    losses = []
    with torch.no_grad():
        for _ in range(10):
            tokens, tags = make_batch(test_gen)
            scores = model(tokens)
            losses.append(float(tag_loss(scores, tags)))
            m = tags != -100
            correct += int((scores.argmax(-1)[m] == tags[m]).sum())
            total += int(m.sum())
    acc = correct / total
    metric = sum(losses) / len(losses)
    return {"metric": metric, "higher_is_better": False,
            "evidence": f"held-out token-mean loss {metric:.4f}, per-token accuracy {acc:.4f}; "
                        f"over training the loop reported "
                        f"{sum(reported) / steps:.4f} on average where the batches' token-mean "
                        f"was {sum(true) / steps:.4f}"}


if __name__ == "__main__":
    from tests.blind.step_equivalence._common import measure_step
    for fixed in (False, True):
        print(fixed, measure_step(build(fixed), effective_loss), train(fixed))
