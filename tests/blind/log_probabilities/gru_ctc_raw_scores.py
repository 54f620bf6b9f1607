"""Bidirectional GRU recogniser for synthetic "spoken" symbol strings, a ``train_step`` function,
Adam, ``nn.CTCLoss``.

Each utterance is a string of 2-5 symbols (6 symbols, blank = 0); every symbol sounds for 2-4
frames as a noisy 8-d signature, with 0-2 frames of silence between symbols, padded to 32
frames. The recogniser returns per-frame scores of shape (N, T, C); ``train_step`` hands them
to ``nn.CTCLoss`` as ``scores.transpose(0, 1)`` - the (T, N, C) layout CTCLoss wants - but
forgets ``log_softmax(dim=2)``: CTCLoss reads the raw scores as log-probabilities, its value
goes negative, and greedy decoding of the trained model is poor. Fix:
``scores.log_softmax(dim=2).transpose(0, 1)``.

Metric: held-out character error rate of greedy CTC decoding (edit distance / reference
length; lower is better). Measured without gradhunt: see the folder docstring.
"""
import torch
from torch import nn

EXPECTED = "SCORES_AS_LOG_PROBABILITIES"

SYMBOLS = 6          # 1..6; 0 is the CTC blank
FEATURES = 8
FRAMES = 32
STEPS = 180
BATCH = 32


def make_data(n, signatures, gen):
    x = 0.5 * torch.randn(n, FRAMES, FEATURES, generator=gen)
    targets = torch.zeros(n, 5, dtype=torch.long)
    target_lengths = torch.zeros(n, dtype=torch.long)
    input_lengths = torch.zeros(n, dtype=torch.long)
    for i in range(n):
        length = int(torch.randint(2, 6, (1,), generator=gen))
        labels = torch.randint(1, SYMBOLS + 1, (length,), generator=gen)
        t = int(torch.randint(0, 3, (1,), generator=gen))
        for k, label in enumerate(labels.tolist()):
            if k and label == labels[k - 1]:
                t += 1                                   # a pause between repeated symbols
            dur = int(torch.randint(2, 5, (1,), generator=gen))
            x[i, t:t + dur] += signatures[label]
            t += dur + int(torch.randint(0, 3, (1,), generator=gen))
        targets[i, :length] = labels
        target_lengths[i] = length
        input_lengths[i] = min(t + 1, FRAMES)
    return x, targets, input_lengths, target_lengths


class Recogniser(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.GRU(FEATURES, 32, batch_first=True, bidirectional=True)
        self.classify = nn.Linear(64, SYMBOLS + 1)

    def forward(self, x):
        hidden, _ = self.rnn(x)
        return self.classify(hidden)                     # (N, T, C) scores


def greedy_decode(scores, lengths):
    best = scores.argmax(-1)
    out = []
    for row, n in zip(best, lengths.tolist()):
        seq, previous = [], 0
        for s in row[:n].tolist():
            if s != previous and s != 0:
                seq.append(s)
            previous = s
        out.append(seq)
    return out


def edit_distance(a, b):
    d = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        prev, d[0] = d[0], i
        for j, y in enumerate(b, 1):
            prev, d[j] = d[j], min(d[j] + 1, d[j - 1] + 1, prev + (x != y))
    return d[len(b)]


def train_step(model, batch, optimizer, criterion, *, fixed):
    x, targets, input_lengths, target_lengths = batch
    scores = model(x)
    if fixed:
        log_probs = scores.log_softmax(dim=2).transpose(0, 1)   # fix: (T, N, C) log-probs
    else:
        log_probs = scores.transpose(0, 1)            # bug: raw scores read as log-probs
    loss = criterion(log_probs, targets, input_lengths, target_lengths)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss


def run(*, fixed: bool, monitor: bool = True):
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(5)
    signatures = 2.0 * torch.randn(SYMBOLS + 1, FEATURES, generator=gen)
    train = make_data(1024, signatures, gen)
    x_test, y_test, in_test, len_test = make_data(256, signatures, gen)

    model = Recogniser()
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    criterion = nn.CTCLoss(blank=0, zero_infinity=True)

    mon = None
    if monitor:
        from gradhunt import Monitor
        mon = Monitor(model, optimizer)

    batches = torch.Generator().manual_seed(6)
    model.train()
    for _ in range(STEPS):
        idx = torch.randint(0, len(train[0]), (BATCH,), generator=batches)
        loss = train_step(model, [t[idx] for t in train], optimizer, criterion, fixed=fixed)
        if mon is not None:
            mon.step(loss)

    model.eval()
    with torch.no_grad():
        decoded = greedy_decode(model(x_test), in_test)
    errors = sum(edit_distance(d, y[:n].tolist())
                 for d, y, n in zip(decoded, y_test, len_test.tolist()))
    cer = errors / len_test.sum().item()
    report = None
    if mon is not None:
        report = mon.report()
        mon.close()
    return {"report": report, "metric": cer, "higher_is_better": False}
