"""The README's tour 4: preflight on a model with a too-confident output layer and a train_step
that forgot ``optimizer.zero_grad()``."""
import torch
import torch.nn.functional as F

from gradhunt import preflight

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10))
with torch.no_grad():
    model[2].weight.mul_(8.0)                # an output layer initialised far too large
x, y = torch.randn(64, 64), torch.randint(0, 10, (64,))


def my_train_step(model, batch, optimizer):
    inputs, targets = batch
    loss = F.cross_entropy(model(inputs), targets)
    loss.backward()                          # optimizer.zero_grad() forgotten
    optimizer.step()
    return loss


print(preflight(model, F.cross_entropy, x, y, train_step=my_train_step))
