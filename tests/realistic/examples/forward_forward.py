"""The forward-forward algorithm (Hinton, 2022), written as in mpezeshki/pytorch_forward_forward,
at small CPU scale: each layer is an ``nn.Linear`` with an Adam of its own, trained greedily to
give a high "goodness" (mean squared activation) on positive data (an input with its true label
written in its first units) and a low one on negative data (a wrong label). Training calls
``self.forward(x)`` on each layer directly, never ``layer(x)``; the layers sit in a plain list.
The data: Gaussian clusters, one per class. The metric: accuracy of the label with the most
goodness on held-out points, before and after.

``zero_grad=False`` is the bug: the layers' ``.grad`` accumulate over their steps."""
import torch
from torch import nn


def clusters(generator, *, classes=4, per_class=100, features=16):
    centers = 2.5 * torch.randn(classes, features, generator=generator)
    labels = torch.arange(classes).repeat_interleave(per_class)
    return centers[labels] + torch.randn(len(labels), features, generator=generator), labels


def overlay(x, labels, classes):
    """``x`` with its first ``classes`` entries replaced by the one-hot label."""
    x = x.clone()
    x[:, :classes] = 0.0
    x[range(x.shape[0]), labels] = x.abs().max()
    return x


class Layer(nn.Linear):

    def __init__(self, fan_in, fan_out, *, epochs, threshold=2.0, zero_grad=True):
        super().__init__(fan_in, fan_out)
        self.relu = nn.ReLU()
        self.opt = torch.optim.Adam(self.parameters(), lr=0.03)
        self.threshold, self.epochs, self.zero_grad_each = threshold, epochs, zero_grad

    def forward(self, x):
        direction = x / (x.norm(2, 1, keepdim=True) + 1e-4)
        return self.relu(torch.mm(direction, self.weight.T) + self.bias.unsqueeze(0))

    def train_layer(self, x_pos, x_neg):
        for _ in range(self.epochs):
            g_pos = self.forward(x_pos).pow(2).mean(1)
            g_neg = self.forward(x_neg).pow(2).mean(1)
            loss = torch.log(1 + torch.exp(torch.cat([-g_pos + self.threshold,
                                                      g_neg - self.threshold]))).mean()
            if self.zero_grad_each:
                self.opt.zero_grad()
            loss.backward()
            self.opt.step()
        return self.forward(x_pos).detach(), self.forward(x_neg).detach()


class Net(nn.Module):

    def __init__(self, dims, classes, *, epochs, zero_grad=True):
        super().__init__()
        self.classes = classes
        self.layers = [Layer(dims[d], dims[d + 1], epochs=epochs, zero_grad=zero_grad)
                       for d in range(len(dims) - 1)]

    def predict(self, x):
        goodness = []
        for label in range(self.classes):
            h = overlay(x, torch.full((x.shape[0],), label), self.classes)
            total = 0.0
            for layer in self.layers:
                h = layer.forward(h)
                total = total + h.pow(2).mean(1)
            goodness.append(total)
        return torch.stack(goodness, 1).argmax(1)

    def train_layers(self, x_pos, x_neg):
        h_pos, h_neg = x_pos, x_neg
        for layer in self.layers:
            h_pos, h_neg = layer.train_layer(h_pos, h_neg)


def main(seed=0, epochs=150, zero_grad=True):
    torch.manual_seed(seed)
    generator = torch.Generator().manual_seed(seed)
    x, y = clusters(generator)
    order = torch.randperm(len(y), generator=generator)
    train, test = order[:300], order[300:]
    classes = int(y.max()) + 1
    net = Net([x.shape[1], 64, 64], classes, epochs=epochs, zero_grad=zero_grad)

    def accuracy(index):
        with torch.no_grad():
            return float((net.predict(x[index]) == y[index]).float().mean())

    before = accuracy(test)
    wrong = (y[train] + torch.randint(1, classes, (len(train),), generator=generator)) % classes
    net.train_layers(overlay(x[train], y[train], classes), overlay(x[train], wrong, classes))
    return {"test_before": before, "test_after": accuracy(test)}


def healthy(metrics):
    return metrics["test_after"] > max(0.8, metrics["test_before"] + 0.3)


if __name__ == "__main__":
    print(main())
