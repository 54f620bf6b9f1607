"""The README's guard tour: scikit-learn's digits with one corrupt example in the training set
(a NaN pixel, as a parsing error leaves one). Without the guard the optimizer applies the NaN
gradient of the first batch that draws it and the network is lost; with guard="skip" that step
is not applied and the run trains on."""
import torch

from diagnostics import Monitor
from scenarios import digits

torch.set_num_threads(1)
split = digits.load_split()
x, y = digits.as_torch(split.x_train, split.y_train)
x_test, y_test = digits.as_torch(split.x_test, split.y_test)
x[417, 20] = float("nan")                        # one corrupt example among 1,347


def train(guard):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(),
                                torch.nn.Linear(128, 10))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    loss_fn = torch.nn.CrossEntropyLoss()
    order = torch.Generator().manual_seed(0)
    with Monitor(model, opt, guard=guard) as monitor:
        for epoch in range(3):
            for batch in torch.randperm(len(x), generator=order).split(64):
                opt.zero_grad()
                loss = loss_fn(model(x[batch]), y[batch])
                loss.backward()
                opt.step()
                monitor.step(loss)
    with torch.no_grad():
        accuracy = (model(x_test).argmax(1) == y_test).float().mean().item()
    return monitor, accuracy


_, unguarded = train(None)
monitor, guarded = train("skip")
print(f"test accuracy without the guard: {unguarded:.3f}; with guard='skip': {guarded:.3f}")
print("skipped:", [(s.step, s.batches[1], s.source) for s in monitor.skipped_steps])
print(monitor.report())
