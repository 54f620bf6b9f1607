"""Transformer-encoder student distilled from a teacher's soft labels, a Trainer class, AdamW,
``nn.KLDivLoss`` with temperature.

Token sequences (vocabulary 50, length 16) are classified into 6 intents; the teacher's scores
are a fixed function of the tokens (as if from a larger model already trained), and the
student - an embedding, one ``nn.TransformerEncoderLayer`` and mean pooling - is distilled
from them at temperature T = 2 with ``nn.KLDivLoss(reduction="batchmean")`` scaled by T^2, the
usual recipe. The bug: the student's input to KLDivLoss is ``student_scores / T`` - the raw
scores with the temperature applied, the ``log_softmax`` missing - where KLDivLoss expects
log-probabilities (its target, ``softmax(teacher / T)``, is right). The loss is
``sum p * (log p - s / T)``, unbounded below: it goes negative and every score is pushed up in
proportion to the teacher's probability, so the student's distribution ends up far too sharp.
Fix: ``F.log_softmax(student_scores / T, dim=-1)``.

Metric: held-out KL(teacher || student) at T = 1 in nats (lower is better). Measured without
gradhunt: see the folder docstring.
"""
import torch
from torch import nn
from torch.nn import functional as F

EXPECTED = "SCORES_AS_LOG_PROBABILITIES"

VOCAB = 50
LENGTH = 16
INTENTS = 6
T = 2.0


class Student(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, 32)
        self.position = nn.Parameter(0.02 * torch.randn(LENGTH, 32))
        self.encoder = nn.TransformerEncoderLayer(32, 4, dim_feedforward=64, dropout=0.0,
                                                  batch_first=True)
        self.head = nn.Linear(32, INTENTS)

    def forward(self, tokens):
        h = self.encoder(self.embed(tokens) + self.position)
        return self.head(h.mean(1))


class DistillTrainer:
    def __init__(self, student, *, fixed, lr=2e-3, epochs=6, batch_size=64):
        self.student = student
        self.fixed = fixed
        self.epochs = epochs
        self.batch_size = batch_size
        self.optimizer = torch.optim.AdamW(student.parameters(), lr=lr, weight_decay=0.01)
        self.kl = nn.KLDivLoss(reduction="batchmean")
        self.callbacks = []

    def distill_loss(self, student_scores, teacher_scores):
        target = F.softmax(teacher_scores / T, dim=-1)
        if self.fixed:
            inputs = F.log_softmax(student_scores / T, dim=-1)   # fix: log-probabilities
        else:
            inputs = student_scores / T                          # bug: raw scores
        return self.kl(inputs, target) * T * T

    def fit(self, tokens, teacher_scores):
        order = torch.Generator().manual_seed(8)
        for _ in range(self.epochs):
            self.student.train()
            perm = torch.randperm(len(tokens), generator=order)
            for start in range(0, len(tokens), self.batch_size):
                idx = perm[start:start + self.batch_size]
                self.optimizer.zero_grad()
                loss = self.distill_loss(self.student(tokens[idx]), teacher_scores[idx])
                loss.backward()
                self.optimizer.step()
                for callback in self.callbacks:
                    callback(loss)


def teacher(tokens, weights):
    counts = F.one_hot(tokens, VOCAB).float().sum(1)
    return counts @ weights


def run(*, fixed: bool, monitor: bool = True):
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(7)
    weights = 0.8 * torch.randn(VOCAB, INTENTS, generator=gen)
    x_train = torch.randint(0, VOCAB, (1536, LENGTH), generator=gen)
    x_test = torch.randint(0, VOCAB, (512, LENGTH), generator=gen)

    student = Student()
    trainer = DistillTrainer(student, fixed=fixed)
    mon = None
    if monitor:
        from gradhunt import Monitor
        mon = Monitor(student, trainer.optimizer)
        trainer.callbacks.append(mon.step)
    trainer.fit(x_train, teacher(x_train, weights))

    student.eval()
    with torch.no_grad():
        p_teacher = F.softmax(teacher(x_test, weights), dim=-1)
        log_q = F.log_softmax(student(x_test), dim=-1)
        kl = (p_teacher * (p_teacher.clamp_min(1e-12).log() - log_q)).sum(1).mean().item()
    report = None
    if mon is not None:
        report = mon.report()
        mon.close()
    return {"report": report, "metric": kl, "higher_is_better": False}
