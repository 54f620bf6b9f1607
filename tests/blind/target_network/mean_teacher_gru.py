"""Mean-teacher semi-supervised sequence regression with a GRU, a small trainer class.

Sequences of 12 noisy 3-d readings; the target is a fixed nonlinear summary of the sequence.
Only 48 sequences are labelled, 2000 are not. The student GRU (Adam) is trained on MSE on the
labelled batch plus a consistency MSE on an unlabelled batch toward an EMA teacher's prediction
on a differently-noised copy (decay 0.97, updated after every step with
``p_t.mul_(m).add_(p_s, alpha=1 - m)``).

Bug: the trainer's ``_ema_step(ema_model, model)`` is called as
``self._ema_step(self.teacher, self.teacher)``: the teacher is averaged with itself, so it
never moves, and the consistency targets come from the random initial GRU forever; the
student is pulled toward that random function on the 2000 unlabelled sequences. Fix: call it
with ``(self.teacher, self.student)``.

Measured (held-out MSE, lower is better; predicting the mean scores ~1.0): buggy 0.67, fixed 0.21.
"""
import copy

import torch
from torch import nn

EXPECTED = "TARGET_NETWORK_FROZEN"

SEQ_LEN = 12
N_LABELLED = 48
N_UNLABELLED = 2000
STEPS = 300
EMA_DECAY = 0.97
CONSISTENCY_WEIGHT = 1.0


class GRURegressor(nn.Module):
    def __init__(self):
        super().__init__()
        self.gru = nn.GRU(3, 32, batch_first=True)
        self.head = nn.Linear(32, 1)

    def forward(self, x):
        out, _ = self.gru(x)
        return self.head(out[:, -1]).squeeze(1)


def make_data(n, w, gen):
    x = torch.randn(n, SEQ_LEN, 3, generator=gen)
    y = torch.tanh(x @ w).sum(1) * 0.5
    return x, y


class MeanTeacherTrainer:
    def __init__(self, student, *, fixed, gen):
        self.student = student
        self.teacher = copy.deepcopy(student).requires_grad_(False)
        self.optimizer = torch.optim.Adam(student.parameters(), lr=3e-3)
        self.fixed, self.gen = fixed, gen

    @torch.no_grad()
    def _ema_step(self, ema_model, model):
        for p_t, p_s in zip(ema_model.parameters(), model.parameters()):
            p_t.mul_(EMA_DECAY).add_(p_s, alpha=1 - EMA_DECAY)

    def _noisy(self, x):
        return x + 0.2 * torch.randn(x.shape, generator=self.gen)

    def train_step(self, xl, yl, xu):
        with torch.no_grad():
            target = self.teacher(self._noisy(xu))
        loss = (nn.functional.mse_loss(self.student(self._noisy(xl)), yl)
                + CONSISTENCY_WEIGHT
                * nn.functional.mse_loss(self.student(self._noisy(xu)), target))
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        if self.fixed:
            self._ema_step(self.teacher, self.student)
        else:
            self._ema_step(self.teacher, self.teacher)     # bug: averaged with itself
        return loss


def run(*, fixed: bool, monitor: bool = True):
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(1)
    w = torch.randn(3, generator=gen)
    xl, yl = make_data(N_LABELLED, w, gen)
    xu_all, _ = make_data(N_UNLABELLED, w, gen)
    x_test, y_test = make_data(1000, w, gen)
    trainer = MeanTeacherTrainer(GRURegressor(), fixed=fixed, gen=gen)

    mon = None
    if monitor:
        from gradhunt import Monitor
        mon = Monitor(trainer.student, optimizer=trainer.optimizer)

    for _ in range(STEPS):
        xu = xu_all[torch.randint(0, N_UNLABELLED, (64,), generator=gen)]
        loss = trainer.train_step(xl, yl, xu)
        if mon is not None:
            mon.step(loss)

    trainer.student.eval()
    with torch.no_grad():
        mse = nn.functional.mse_loss(trainer.student(x_test), y_test).item()
    report = None
    if mon is not None:
        report = mon.report()
        mon.close()
    return {"report": report, "metric": mse, "higher_is_better": False}
