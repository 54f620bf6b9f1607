"""HEALTHY: knowledge distillation from a frozen, pretrained teacher (meant to stay fixed).

A wide MLP teacher is first trained on scikit-learn's digits (its own Adam loop, no gradhunt),
then frozen on purpose: ``eval()``, ``requires_grad_(False)``, used only under
``torch.no_grad()``. A small student is distilled from it with SGD + momentum on
``KL(student / T || teacher / T) * T^2`` plus cross-entropy, with the Monitor on the student.
The teacher never changes and must not: that is the design, not a bug. gradhunt must stay quiet.

``run(fixed=...)`` has the harness's signature; both values run the same healthy program.
Measured: student held-out accuracy 0.966 (the frozen teacher 0.970).
"""
import torch
from sklearn.datasets import load_digits
from torch import nn
from torch.nn import functional as F

EXPECTED = None
TEMPERATURE = 4.0


def run(*, fixed: bool = True, monitor: bool = True):
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(1)
    digits = load_digits()
    x = torch.tensor(digits.data, dtype=torch.float32) / 16.0
    y = torch.tensor(digits.target)
    order = torch.randperm(len(y), generator=gen)
    x, y = x[order], y[order]
    x_train, y_train, x_test, y_test = x[:1300], y[:1300], x[1300:], y[1300:]

    teacher = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(),
                            nn.Linear(256, 10))
    pre_opt = torch.optim.Adam(teacher.parameters(), lr=1e-3)
    for _ in range(300):                                  # "pretraining"
        idx = torch.randint(0, len(y_train), (64,), generator=gen)
        loss = F.cross_entropy(teacher(x_train[idx]), y_train[idx])
        pre_opt.zero_grad()
        loss.backward()
        pre_opt.step()
    teacher.eval().requires_grad_(False)                  # frozen on purpose

    student = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))
    optimizer = torch.optim.SGD(student.parameters(), lr=0.05, momentum=0.9)
    mon = None
    if monitor:
        from gradhunt import Monitor
        mon = Monitor(student, optimizer=optimizer)

    for _ in range(400):
        idx = torch.randint(0, len(y_train), (64,), generator=gen)
        xb, yb = x_train[idx], y_train[idx]
        with torch.no_grad():
            soft = F.softmax(teacher(xb) / TEMPERATURE, dim=1)
        logits = student(xb)
        kd = F.kl_div(F.log_softmax(logits / TEMPERATURE, dim=1), soft,
                      reduction="batchmean") * TEMPERATURE ** 2
        loss = 0.7 * kd + 0.3 * F.cross_entropy(logits, yb)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if mon is not None:
            mon.step(loss)

    with torch.no_grad():
        accuracy = (student(x_test).argmax(1) == y_test).float().mean().item()
        teacher_accuracy = (teacher(x_test).argmax(1) == y_test).float().mean().item()
    report = None
    if mon is not None:
        report = mon.report()
        mon.close()
    return {"report": report, "metric": accuracy, "teacher_metric": teacher_accuracy,
            "higher_is_better": True}
