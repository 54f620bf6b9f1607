"""A siamese network, as pytorch/examples' siamese_network: one convolutional tower embeds
both images of a pair; the two embeddings, concatenated, go through a small head ending in a
Sigmoid, trained with ``nn.BCELoss`` on "same class or not". Inputs are the raw [0, 1]
pixels. A second, contrastive objective on the cosine similarity of the two embeddings is
added, as metric-learning variants do. The metric: pair accuracy on held-out pairs."""
import torch
import torch.nn.functional as F
from torch import nn

try:
    from .glyphs import glyphs
except ImportError:
    from glyphs import glyphs


class SiameseNetwork(nn.Module):

    def __init__(self, width=16, embedding=32):
        super().__init__()
        self.tower = nn.Sequential(
            nn.Conv2d(1, width, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(width, width, 3, padding=1), nn.ReLU(), nn.Flatten(),
            nn.Linear(width * 16, embedding))
        self.head = nn.Sequential(nn.Linear(2 * embedding, 32), nn.ReLU(), nn.Linear(32, 1),
                                  nn.Sigmoid())

    def forward(self, a, b):
        ea, eb = self.tower(a), self.tower(b)
        return self.head(torch.cat([ea, eb], dim=1)).squeeze(1), F.cosine_similarity(ea, eb)


def pairs(n, generator):
    a, ya = glyphs(n, generator)
    same = torch.rand(n, generator=generator) < 0.5
    b, yb = glyphs(n, generator)
    # half the pairs: redraw b from a's class
    for i in torch.nonzero(same).flatten().tolist():
        while int(yb[i]) != int(ya[i]):
            image, label = glyphs(1, generator)
            b[i], yb[i] = image[0], label[0]
    return a, b, (ya == yb).float()


def contrastive(cosine, target, margin=0.5):
    """Pull same-class embeddings together, push others below ``margin`` cosine similarity."""
    return (target * (1 - cosine) + (1 - target) * F.relu(cosine - margin)).mean()


def main(seed=0, steps=200, batch=32):
    torch.manual_seed(seed)
    data = torch.Generator().manual_seed(seed)
    train_a, train_b, train_y = pairs(1024, data)
    test_a, test_b, test_y = pairs(256, data)
    model = SiameseNetwork()
    optimizer = torch.optim.Adam(model.parameters(), lr=2e-3)
    criterion = nn.BCELoss()

    def accuracy():
        model.eval()
        with torch.no_grad():
            p, _ = model(test_a, test_b)
        model.train()
        return ((p > 0.5).float() == test_y).float().mean().item()

    before = accuracy()
    for step in range(steps):
        i = torch.arange(step * batch, (step + 1) * batch) % len(train_y)
        optimizer.zero_grad()
        p, cosine = model(train_a[i], train_b[i])
        loss = criterion(p, train_y[i]) + contrastive(cosine, train_y[i])
        loss.backward()
        optimizer.step()
    return {"accuracy_before": before, "accuracy_after": accuracy()}


def healthy(metrics):
    return metrics["accuracy_after"] > 0.85


if __name__ == "__main__":
    print(main())
