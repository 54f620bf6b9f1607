"""Mixed precision on CPU: a classifier's forward under ``torch.autocast("cpu",
dtype=torch.bfloat16)`` (its Linear layers compute in bfloat16, the weights and the optimizer
stay float32), cross-entropy outside the autocast region, SGD with momentum, no GradScaler
(bfloat16 has float32's range). On the glyphs. The metric: held-out accuracy against the 10%
of chance."""
import torch
import torch.nn.functional as F
from torch import nn

try:
    from .glyphs import glyphs
except ImportError:
    from glyphs import glyphs


def main(seed=0, steps=200, batch=32):
    torch.manual_seed(seed)
    data = torch.Generator().manual_seed(seed)
    train_x, train_y = glyphs(2048, data)
    test_x, test_y = glyphs(512, data)
    model = nn.Sequential(nn.Flatten(), nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 128),
                          nn.ReLU(), nn.Linear(128, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    for step in range(steps):
        i = torch.arange(step * batch, (step + 1) * batch) % len(train_y)
        optimizer.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            logits = model(train_x[i])
        loss = F.cross_entropy(logits.float(), train_y[i])
        loss.backward()
        optimizer.step()
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        accuracy = (model(test_x).argmax(1) == test_y).float().mean().item()
    return {"accuracy": accuracy, "chance": 0.1}


def healthy(metrics):
    return metrics["accuracy"] > 0.8


if __name__ == "__main__":
    print(main())
