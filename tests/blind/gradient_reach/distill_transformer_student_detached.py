"""Distilling a teacher into a tiny transformer student, ``optimizer.step(closure)``, Adam.

Token sequences (length 10, vocabulary 12) are scored by a fixed teacher (a bag-of-tokens
linear scorer over 4 classes, the ground truth); the student sees the teacher's logits and
labels of which 45% were replaced by a random class. The loss is
``0.8 * T^2 * KL(teacher_T || student_T) + 0.2 * CE(student, noisy label)`` with T = 2.

Bug (kind 2, a term detached from the network it should train): the distillation term is
computed on ``scores`` (the student's logits, detached for the accuracy bookkeeping) instead of
``logits``, so the KL term sends no gradient to the student and only the noisy labels train it.
Fix: compute the distillation term on the student's live logits.

Measured without gradhunt (seeded): held-out agreement with the teacher buggy 0.822 -> fixed
0.957.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

EXPECTED = "TERM_DETACHED"

VOCAB, LENGTH, CLASSES = 12, 10, 4
T = 2.0
ALPHA = 0.8
STEPS = 120


class Student(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, 32)
        self.pos = nn.Parameter(torch.zeros(LENGTH, 32))
        layer = nn.TransformerEncoderLayer(32, 4, dim_feedforward=64, dropout=0.0,
                                           batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 1, enable_nested_tensor=False)
        self.head = nn.Linear(32, CLASSES)

    def forward(self, tokens):
        h = self.encoder(self.embed(tokens) + self.pos)
        return self.head(h.mean(1))


def _data(n, teacher_w, gen):
    tokens = torch.randint(0, VOCAB, (n, LENGTH), generator=gen)
    counts = F.one_hot(tokens, VOCAB).float().sum(1)
    teacher_logits = counts @ teacher_w
    truth = teacher_logits.argmax(1)
    noisy = torch.where(torch.rand(n, generator=gen) < 0.45,
                        torch.randint(0, CLASSES, (n,), generator=gen), truth)
    return tokens, teacher_logits, noisy, truth


def run(*, fixed, monitor=False):
    gen = torch.Generator().manual_seed(4)
    teacher_w = torch.randn(VOCAB, CLASSES, generator=gen)
    tokens, teacher_logits, noisy, _ = _data(512, teacher_w, gen)
    test_tokens, _, _, test_truth = _data(512, teacher_w, gen)
    torch.manual_seed(0)
    student = Student()
    optimizer = torch.optim.Adam(student.parameters(), lr=2e-3)
    mon = None
    if monitor:
        import gradhunt
        mon = gradhunt.Monitor(student, optimizer=optimizer)
    correct = []
    try:
        for step in range(STEPS):
            idx = torch.randint(0, len(tokens), (64,), generator=gen)
            xb, tb, yb = tokens[idx], teacher_logits[idx], noisy[idx]

            def closure():
                optimizer.zero_grad()
                logits = student(xb)
                scores = logits.detach()
                correct.append((scores.argmax(1) == yb).float().mean().item())
                soft = logits if fixed else scores
                kd = F.kl_div(F.log_softmax(soft / T, 1), F.log_softmax(tb / T, 1),
                              reduction="batchmean", log_target=True) * T * T
                loss = ALPHA * kd + (1 - ALPHA) * F.cross_entropy(logits, yb)
                loss.backward()
                return loss

            loss = optimizer.step(closure)
            if mon is not None:
                mon.step(loss)
    finally:
        if mon is not None:
            mon.close()
    with torch.no_grad():
        agreement = (student(test_tokens).argmax(1) == test_truth).float().mean().item()
    return {"report": mon.report() if mon is not None else None,
            "metric": agreement, "higher_is_better": True}
