"""A graph convolutional network (Kipf and Welling, as in pygcn) on a planted-partition graph:
dense node features, a sparse normalised adjacency ``D^-1/2 (A + I) D^-1/2`` (a
``torch.sparse_coo`` tensor, or CSR), full-batch training on a few labelled nodes. Each graph
convolution holds its weight itself and is called ``layer(adjacency, features)``, so the first
tensor a layer sees is the sparse one. The metric: accuracy on the unlabelled nodes."""
import torch
from torch import nn
from torch.nn import functional as F


def planted_graph(generator, *, classes=4, per_class=40, features=24, inside=0.12,
                  across=0.006):
    """Nodes in ``classes`` communities (edges mostly inside), features that tell the class
    only faintly: the graph's structure is what makes the task easy."""
    n = classes * per_class
    labels = torch.arange(classes).repeat_interleave(per_class)
    same = labels[:, None] == labels[None, :]
    chance = torch.where(same, torch.tensor(inside), torch.tensor(across))
    upper = torch.triu(torch.rand(n, n, generator=generator) < chance, diagonal=1)
    edges = (upper | upper.T).float() + torch.eye(n)
    scale = edges.sum(1).rsqrt()
    adjacency = (scale[:, None] * edges * scale[None, :]).to_sparse()
    centers = torch.randn(classes, features, generator=generator)
    x = 0.6 * centers[labels] + torch.randn(n, features, generator=generator)
    return x, adjacency, labels


class GraphConvolution(nn.Module):

    def __init__(self, fan_in, fan_out):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(fan_in, fan_out))
        self.bias = nn.Parameter(torch.zeros(fan_out))
        nn.init.xavier_uniform_(self.weight)

    def forward(self, adjacency, x):
        return torch.sparse.mm(adjacency, x @ self.weight) + self.bias


class GCN(nn.Module):

    def __init__(self, features, hidden, classes, dropout=0.5):
        super().__init__()
        self.gc1 = GraphConvolution(features, hidden)
        self.gc2 = GraphConvolution(hidden, classes)
        self.dropout = nn.Dropout(dropout)

    def forward(self, adjacency, x):
        x = self.dropout(F.relu(self.gc1(adjacency, x)))
        return F.log_softmax(self.gc2(adjacency, x), dim=1)


def main(seed=0, epochs=120, layout="coo", features_scale=1.0):
    torch.manual_seed(seed)
    generator = torch.Generator().manual_seed(seed)
    x, adjacency, labels = planted_graph(generator)
    x = x * features_scale
    if layout == "csr":
        adjacency = adjacency.to_sparse_csr()
    n = labels.shape[0]
    order = torch.randperm(n, generator=generator)
    train, test = order[:32], order[32:]
    model = GCN(x.shape[1], 16, int(labels.max()) + 1)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01, weight_decay=5e-4)

    def accuracy(index):
        model.eval()
        with torch.no_grad():
            predicted = model(adjacency, x).argmax(1)
        return float((predicted[index] == labels[index]).float().mean())

    before = accuracy(test)
    for _ in range(epochs):
        model.train()
        optimizer.zero_grad()
        loss = F.nll_loss(model(adjacency, x)[train], labels[train])
        loss.backward()
        optimizer.step()
    return {"test_before": before, "test_after": accuracy(test)}


def healthy(metrics):
    return metrics["test_after"] > max(0.75, metrics["test_before"] + 0.3)


if __name__ == "__main__":
    print(main())
