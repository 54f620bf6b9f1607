"""A classifier that computes its loss inside forward on softmax outputs.

An MLP with LayerNorm returns ``{"loss": ..., "logits": ...}``; a small ``Trainer`` class owns
the optimizer (SGD with momentum) and the epochs. The bug: the head's output goes through
``softmax`` inside forward and that is what ``F.cross_entropy`` receives, and what the dict
calls ``logits``; cross-entropy applies its own log-softmax on top, so the loss is computed on
values squeezed into [0, 1], its gradients are small and nearly uniform, and training crawls.

Data: 20 classes, 32 features: each class is a mixture of two random centres, seen through a
fixed random rotation with Gaussian noise. Metric: held-out accuracy after 3 epochs of 60
batches; measured without gradhunt, buggy 0.415 -> fixed 0.693.
"""
import torch
import torch.nn.functional as F
from torch import nn

EXPECTED = "PROBABILITIES_AS_LOGITS"
CAUSAL = False

CLASSES, FEATURES, BATCH = 20, 32, 64


class Classifier(nn.Module):
    def __init__(self, *, softmax_in_forward):
        super().__init__()
        self.softmax_in_forward = softmax_in_forward
        self.body = nn.Sequential(
            nn.Linear(FEATURES, 128), nn.LayerNorm(128), nn.ReLU(),
            nn.Linear(128, 128), nn.LayerNorm(128), nn.ReLU())
        self.head = nn.Linear(128, CLASSES)

    def forward(self, features, labels=None):
        logits = self.head(self.body(features))
        if self.softmax_in_forward:
            logits = logits.softmax(dim=-1)     # bug: cross_entropy expects raw scores
        loss = F.cross_entropy(logits, labels) if labels is not None else None
        return {"loss": loss, "logits": logits}


def loss_fn(output, labels):
    """What a user hands gradhunt's tools: the loss the model computed."""
    return output["loss"]


def _data(n, generator):
    centres = torch.randn(CLASSES, 2, FEATURES, generator=torch.Generator().manual_seed(3)) * 0.6
    rotation, _ = torch.linalg.qr(torch.randn(FEATURES, FEATURES,
                                              generator=torch.Generator().manual_seed(4)))
    labels = torch.randint(0, CLASSES, (n,), generator=generator)
    which = torch.randint(0, 2, (n,), generator=generator)
    x = centres[labels, which] + torch.randn(n, FEATURES, generator=generator)
    return x @ rotation, labels


class Trainer:
    def __init__(self, model, *, lr, epochs, monitor):
        self.model = model
        self.optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
        self.epochs = epochs
        self.monitor = monitor

    def fit(self, features, labels, generator):
        import gradhunt

        mon = gradhunt.Monitor(self.model, self.optimizer, every=20) if self.monitor else None
        try:
            for _ in range(self.epochs):
                order = torch.randperm(len(features), generator=generator)
                for rows in order.split(BATCH):
                    out = self.model(features=features[rows], labels=labels[rows])
                    self.optimizer.zero_grad()
                    out["loss"].backward()
                    self.optimizer.step()
                    if mon is not None:
                        mon.step(out["loss"])
        finally:
            if mon is not None:
                mon.close()
        return mon.report() if mon is not None else None

    @torch.no_grad()
    def accuracy(self, features, labels):
        self.model.eval()
        predicted = self.model(features=features)["logits"].argmax(-1)
        return (predicted == labels).float().mean().item()


def make(fixed=False):
    torch.manual_seed(0)
    model = Classifier(softmax_in_forward=not fixed)
    x, y = _data(BATCH, torch.Generator().manual_seed(1))
    return model, {"features": x, "labels": y}


def run(fixed=False, monitor=False):
    torch.manual_seed(0)
    generator = torch.Generator().manual_seed(1)
    x, y = _data(BATCH * 60, generator)
    test_x, test_y = _data(1000, generator)
    trainer = Trainer(Classifier(softmax_in_forward=not fixed), lr=0.05, epochs=3,
                      monitor=monitor)
    report = trainer.fit(x, y, generator)
    return {"report": report, "metric": trainer.accuracy(test_x, test_y),
            "higher_is_better": True}
