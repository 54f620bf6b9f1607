"""The README's Monitor tour: an MLP on scikit-learn's digits whose loop forgot zero_grad()."""
import torch

from diagnostics import Monitor
from scenarios import digits

torch.set_num_threads(1)
torch.manual_seed(0)
split = digits.load_split()
x, y = digits.as_torch(split.x_train, split.y_train)
model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 128),
                            torch.nn.ReLU(), torch.nn.Linear(128, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
loss_fn = torch.nn.CrossEntropyLoss()

with Monitor(model, optimizer=opt) as mon:       # hooks attach here, and are gone after the block
    for step in range(200):
        batch = torch.randint(0, len(x), (64,))
        loss = loss_fn(model(x[batch]), y[batch])
        loss.backward()                          # bug: no opt.zero_grad() anywhere in the loop
        opt.step()
        mon.step(loss)
    print(mon.report())
