"""HEALTHY: an LSTM (time-major, the layout CTC wants) recognising synthetic symbol strings,
trained with ``F.ctc_loss`` on ``F.log_softmax(scores, dim=2)``: log-probabilities of shape
(T, N, C) where CTC expects them. A ``train_step`` function, Adam, batch 24. Must raise no
warning or error.

Task: strings of 1-4 symbols (5 symbols, blank = 0), each sounding for 3 frames as a noisy
signature, silence between; 24 frames. Measured (held-out greedy CER, without gradhunt): see
the folder docstring.
"""
import torch
from torch import nn
from torch.nn import functional as F

SYMBOLS = 5
FEATURES = 6
FRAMES = 24
STEPS = 400
BATCH = 24


def make_data(n, signatures, gen):
    x = 0.4 * torch.randn(FRAMES, n, FEATURES, generator=gen)
    targets, target_lengths = [], []
    for i in range(n):
        labels = torch.randint(1, SYMBOLS + 1, (int(torch.randint(1, 5, (1,), generator=gen)),),
                               generator=gen)
        for k, label in enumerate(labels.tolist()):
            x[1 + 5 * k:4 + 5 * k, i] += signatures[label]
        targets.append(labels)
        target_lengths.append(len(labels))
    return x, torch.cat(targets), torch.tensor(target_lengths)


class Recogniser(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(FEATURES, 48)
        self.out = nn.Linear(48, SYMBOLS + 1)

    def forward(self, x):                     # x: (T, N, F)
        hidden, _ = self.lstm(x)
        return self.out(hidden)               # (T, N, C) scores


def train_step(model, x, targets, target_lengths, optimizer):
    log_probs = F.log_softmax(model(x), dim=2)
    input_lengths = torch.full((x.shape[1],), FRAMES, dtype=torch.long)
    loss = F.ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss


def cer(model, x, targets, target_lengths):
    with torch.no_grad():
        best = model(x).argmax(-1).T
    refs = targets.split(target_lengths.tolist())
    errors = 0
    for row, ref in zip(best.tolist(), refs):
        hyp = [s for j, s in enumerate(row) if s and (j == 0 or s != row[j - 1])]
        ref = ref.tolist()
        d = list(range(len(ref) + 1))
        for i, a in enumerate(hyp, 1):
            prev, d[0] = d[0], i
            for j, b in enumerate(ref, 1):
                prev, d[j] = d[j], min(d[j] + 1, d[j - 1] + 1, prev + (a != b))
        errors += d[len(ref)]
    return errors / target_lengths.sum().item()


def run(*, monitor: bool = True):
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(15)
    signatures = 2.0 * torch.randn(SYMBOLS + 1, FEATURES, generator=gen)
    x_train, y_train, len_train = make_data(960, signatures, gen)
    x_test, y_test, len_test = make_data(240, signatures, gen)
    offsets = torch.cat([torch.zeros(1, dtype=torch.long), len_train.cumsum(0)])

    model = Recogniser()
    optimizer = torch.optim.Adam(model.parameters(), lr=5e-3)
    mon = None
    if monitor:
        from gradhunt import Monitor
        mon = Monitor(model, optimizer)

    batches = torch.Generator().manual_seed(16)
    model.train()
    for _ in range(STEPS):
        idx = torch.randint(0, x_train.shape[1], (BATCH,), generator=batches)
        targets = torch.cat([y_train[offsets[i]:offsets[i + 1]] for i in idx.tolist()])
        loss = train_step(model, x_train[:, idx], targets, len_train[idx], optimizer)
        if mon is not None:
            mon.step(loss)

    model.eval()
    metric = cer(model, x_test, y_test, len_test)
    report = None
    if mon is not None:
        report = mon.report()
        mon.close()
    return {"report": report, "metric": metric, "higher_is_better": False}
