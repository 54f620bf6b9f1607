"""Knowledge distillation into a small MLP with BatchNorm (tabular features), a small Trainer
class, Adam, ``nn.KLDivLoss(reduction="batchmean")`` against a teacher's soft targets.

The teacher (a fixed network) gives temperature-softened class probabilities for 8 classes;
the student is trained to match them. ``KLDivLoss(input, target)`` expects ``input`` as
log-probabilities (and ``target`` as probabilities). The buggy Trainer passes
``F.softmax(student(x) / T, dim=1)``, where ``F.log_softmax`` was meant: the loss it computes is
``sum t * (log t - p)``, which only rewards piling probability on the teacher's top class, so the
student never learns the teacher's soft distribution (what distillation is for) and its
gradients are small. Fix: ``F.log_softmax(student(x) / T, dim=1)``.

Measured (held-out KL(teacher || student) at the distillation temperature, in nats, lower is
better, without gradhunt): buggy 3.749, fixed 0.0157 (top-1 agreement with the
teacher 0.786 vs 0.824: the top class is learnt, the distribution is not).
"""
import torch
from torch import nn
from torch.nn import functional as F

EXPECTED = "PROBABILITIES_AS_LOGITS"

FEATURES = 16
CLASSES = 8
TEMPERATURE = 2.0
STEPS = 300
BATCH = 128


def make_teacher(gen):
    teacher = nn.Sequential(nn.Linear(FEATURES, 64), nn.Tanh(), nn.Linear(64, CLASSES))
    with torch.no_grad():
        for p in teacher.parameters():
            p.copy_(torch.randn(p.shape, generator=gen) * (1.5 / p.shape[-1] ** 0.5))
    return teacher.requires_grad_(False)


class Student(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(FEATURES, 64), nn.BatchNorm1d(64), nn.ReLU(),
            nn.Linear(64, 64), nn.BatchNorm1d(64), nn.ReLU(),
            nn.Linear(64, CLASSES),
        )

    def forward(self, x):
        return self.net(x)


class DistillationTrainer:
    def __init__(self, student, teacher, *, fixed, lr, monitor):
        self.student = student
        self.teacher = teacher
        self.fixed = fixed
        self.optimizer = torch.optim.Adam(student.parameters(), lr=lr)
        self.criterion = nn.KLDivLoss(reduction="batchmean")
        self.mon = None
        if monitor:
            from gradhunt import Monitor
            self.mon = Monitor(student, optimizer=self.optimizer)

    def student_input(self, x):
        scores = self.student(x) / TEMPERATURE
        if self.fixed:
            return F.log_softmax(scores, dim=1)    # fix: log-probabilities
        return F.softmax(scores, dim=1)            # bug: probabilities as KLDivLoss' input

    def fit(self, x_train, *, steps, batch, gen):
        self.student.train()
        for _ in range(steps):
            x = x_train[torch.randint(0, len(x_train), (batch,), generator=gen)]
            with torch.no_grad():
                soft_targets = F.softmax(self.teacher(x) / TEMPERATURE, dim=1)
            self.optimizer.zero_grad()
            loss = self.criterion(self.student_input(x), soft_targets)
            loss.backward()
            self.optimizer.step()
            if self.mon is not None:
                self.mon.step(loss)

    def finish(self):
        if self.mon is None:
            return None
        report = self.mon.report()
        self.mon.close()
        return report


def run(*, fixed: bool, monitor: bool = True):
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(1)
    teacher = make_teacher(gen)
    x_train = torch.randn(4096, FEATURES, generator=gen)
    x_test = torch.randn(1024, FEATURES, generator=gen)

    student = Student()
    trainer = DistillationTrainer(student, teacher, fixed=fixed, lr=2e-3, monitor=monitor)
    trainer.fit(x_train, steps=STEPS, batch=BATCH, gen=torch.Generator().manual_seed(2))
    report = trainer.finish()

    student.eval()
    with torch.no_grad():
        teacher_p = F.softmax(teacher(x_test) / TEMPERATURE, dim=1)
        student_logp = F.log_softmax(student(x_test) / TEMPERATURE, dim=1)
        kl = F.kl_div(student_logp, teacher_p, reduction="batchmean").item()
        agreement = (student_logp.argmax(1) == teacher_p.argmax(1)).float().mean().item()
    return {"report": report, "metric": kl, "higher_is_better": False,
            "top1_agreement": agreement}
