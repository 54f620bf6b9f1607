"""Multi-task MLP on tabular features, four classification heads built with ``dict.fromkeys``.

One trunk, one 4-way classification head per task; each task's label is a different function of
the same 20 features. The heads are built as
``nn.ModuleDict(dict.fromkeys(TASKS, nn.Linear(HIDDEN, CLASSES)))``: ``dict.fromkeys`` evaluates
its value once, so all four names ("color", "shape", "size", "material") point to ONE Linear.
Every task gets the same logits, the model can only fit a compromise between the tasks, and the
code that reads like four heads trains one. The fixed twin builds one fresh Linear per task
with a dict comprehension. Trained by a ``train_step`` function, Adam, batch 128.

Measured (mean held-out accuracy over the four tasks, higher is better; chance 0.25): buggy
0.438, fixed 0.812.
"""
import torch
from torch import nn

EXPECTED = "MODULE_REUSED"

FEATURES = 20
HIDDEN = 64
CLASSES = 4
TASKS = ("color", "shape", "size", "material")
N_TRAIN = 4096
N_TEST = 2048
STEPS = 400
BATCH = 128


def make_labels(x, projections):
    return {task: (torch.tanh(x @ a) @ b).argmax(1) for task, (a, b) in projections.items()}


class MultiTaskNet(nn.Module):
    def __init__(self, *, fixed):
        super().__init__()
        self.trunk = nn.Sequential(
            nn.Linear(FEATURES, HIDDEN), nn.ReLU(),
            nn.Linear(HIDDEN, HIDDEN), nn.ReLU(),
        )
        if fixed:
            self.heads = nn.ModuleDict({task: nn.Linear(HIDDEN, CLASSES) for task in TASKS})
        else:
            # bug: fromkeys evaluates nn.Linear(...) once: four names, one head
            self.heads = nn.ModuleDict(dict.fromkeys(TASKS, nn.Linear(HIDDEN, CLASSES)))

    def forward(self, x):
        h = self.trunk(x)
        return {task: head(h) for task, head in self.heads.items()}


def train_step(model, optimizer, loss_fn, x, labels):
    model.train()
    optimizer.zero_grad()
    logits = model(x)
    loss = sum(loss_fn(logits[task], labels[task]) for task in TASKS) / len(TASKS)
    loss.backward()
    optimizer.step()
    return loss


def run(*, fixed: bool, monitor: bool = True):
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(1)
    projections = {task: (torch.randn(FEATURES, 8, generator=gen) / FEATURES ** 0.5 * 2,
                          torch.randn(8, CLASSES, generator=gen)) for task in TASKS}
    x_train = torch.randn(N_TRAIN, FEATURES, generator=gen)
    x_test = torch.randn(N_TEST, FEATURES, generator=gen)
    y_train, y_test = make_labels(x_train, projections), make_labels(x_test, projections)

    model = MultiTaskNet(fixed=fixed)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    loss_fn = nn.CrossEntropyLoss()

    mon = None
    if monitor:
        from gradhunt import Monitor
        mon = Monitor(model, optimizer=optimizer)

    batch_gen = torch.Generator().manual_seed(2)
    for _ in range(STEPS):
        idx = torch.randint(0, N_TRAIN, (BATCH,), generator=batch_gen)
        loss = train_step(model, optimizer, loss_fn, x_train[idx],
                          {task: y[idx] for task, y in y_train.items()})
        if mon is not None:
            mon.step(loss)

    model.eval()
    with torch.no_grad():
        logits = model(x_test)
        accuracy = sum((logits[t].argmax(1) == y_test[t]).float().mean().item()
                       for t in TASKS) / len(TASKS)
    report = None
    if mon is not None:
        report = mon.report()
        mon.close()
    return {"report": report, "metric": accuracy, "higher_is_better": True}
