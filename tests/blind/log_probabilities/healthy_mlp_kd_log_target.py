"""HEALTHY: Hinton-style distillation of a BatchNorm MLP student: ``F.kl_div`` on
``F.log_softmax(student / T)`` with the teacher given as log-probabilities
(``log_target=True``), times T^2, plus a hard-label cross-entropy on the raw scores. Every
input is what its loss expects. A trainer class, Adam, batch 128. Must raise no warning or
error.

Task: 8 classes of 20-d tabular points; the teacher's scores are a fixed nonlinear function of
the inputs. Measured (held-out accuracy against the labels, without gradhunt): see the folder
docstring.
"""
import torch
from torch import nn
from torch.nn import functional as F

CLASSES = 8
FEATURES = 20
T = 3.0
ALPHA = 0.7


class KDTrainer:
    def __init__(self, student, teacher, *, epochs=10, batch_size=128):
        self.student, self.teacher = student, teacher
        self.epochs, self.batch_size = epochs, batch_size
        self.optimizer = torch.optim.Adam(student.parameters(), lr=3e-3)
        self.on_step = None

    def loss(self, x, y):
        scores = self.student(x)
        with torch.no_grad():
            teacher_log_probs = F.log_softmax(self.teacher(x) / T, dim=1)
        soft = F.kl_div(F.log_softmax(scores / T, dim=1), teacher_log_probs,
                        reduction="batchmean", log_target=True) * T * T
        return ALPHA * soft + (1 - ALPHA) * F.cross_entropy(scores, y)

    def fit(self, x, y):
        order = torch.Generator().manual_seed(18)
        for _ in range(self.epochs):
            self.student.train()
            for idx in torch.randperm(len(x), generator=order).split(self.batch_size):
                self.optimizer.zero_grad()
                loss = self.loss(x[idx], y[idx])
                loss.backward()
                self.optimizer.step()
                if self.on_step is not None:
                    self.on_step(loss)


def run(*, monitor: bool = True):
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(17)
    w1 = 0.25 * torch.randn(FEATURES, 32, generator=gen)
    w2 = torch.randn(32, CLASSES, generator=gen)

    def teacher(x):
        return torch.tanh(x @ w1) @ w2

    x_train = torch.randn(3000, FEATURES, generator=gen)
    x_test = torch.randn(1000, FEATURES, generator=gen)
    y_train, y_test = teacher(x_train).argmax(1), teacher(x_test).argmax(1)

    student = nn.Sequential(nn.Linear(FEATURES, 64), nn.BatchNorm1d(64), nn.ReLU(),
                            nn.Linear(64, 64), nn.BatchNorm1d(64), nn.ReLU(),
                            nn.Linear(64, CLASSES))
    trainer = KDTrainer(student, teacher)
    mon = None
    if monitor:
        from gradhunt import Monitor
        mon = Monitor(student, trainer.optimizer)
        trainer.on_step = mon.step
    trainer.fit(x_train, y_train)

    student.eval()
    with torch.no_grad():
        accuracy = (student(x_test).argmax(1) == y_test).float().mean().item()
    report = None
    if mon is not None:
        report = mon.report()
        mon.close()
    return {"report": report, "metric": accuracy, "higher_is_better": True}
