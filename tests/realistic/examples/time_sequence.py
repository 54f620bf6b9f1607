"""Time-sequence prediction as in pytorch/examples: two LSTMCells learn sine waves, trained
by L-BFGS, whose ``step(closure)`` re-evaluates the loss (``zero_grad``, forward, backward)
up to ``max_iter`` times inside one optimizer step. The metric: the training MSE and the
MSE on held-out waves, before and after."""

import torch
from torch import nn


def waves(n, length, generator):
    shift = torch.randint(-20, 20, (n, 1), generator=generator).float()
    t = torch.arange(length).float()
    return torch.sin((t + shift) / 4.0)


class Sequence(nn.Module):

    def __init__(self, hidden=16):
        super().__init__()
        self.hidden = hidden
        self.lstm1 = nn.LSTMCell(1, hidden)
        self.lstm2 = nn.LSTMCell(hidden, hidden)
        self.linear = nn.Linear(hidden, 1)

    def forward(self, x):
        n = x.size(0)
        h1 = c1 = h2 = c2 = torch.zeros(n, self.hidden)
        outputs = []
        for value in x.split(1, dim=1):
            h1, c1 = self.lstm1(value, (h1, c1))
            h2, c2 = self.lstm2(h1, (h2, c2))
            outputs.append(self.linear(h2))
        return torch.cat(outputs, dim=1)


def main(seed=0, steps=12, length=24):
    torch.manual_seed(seed)
    data = torch.Generator().manual_seed(seed)
    train, test = waves(16, length + 1, data), waves(8, length + 1, data)
    inputs, targets = train[:, :-1], train[:, 1:]
    model = Sequence()
    criterion = nn.MSELoss()
    optimizer = torch.optim.LBFGS(model.parameters(), lr=0.8, max_iter=10)

    def test_loss():
        with torch.no_grad():
            return criterion(model(test[:, :-1]), test[:, 1:]).item()

    before = test_loss()
    losses = []
    for _ in range(steps):
        def closure():
            optimizer.zero_grad()
            loss = criterion(model(inputs), targets)
            loss.backward()
            return loss
        losses.append(optimizer.step(closure).item())
    return {"train_first": losses[0], "train_last": losses[-1], "test_before": before,
            "test_after": test_loss()}


def healthy(metrics):
    return (metrics["train_last"] < 0.1 * metrics["train_first"]
            and metrics["test_after"] < 0.1 * metrics["test_before"])


if __name__ == "__main__":
    print(main())
