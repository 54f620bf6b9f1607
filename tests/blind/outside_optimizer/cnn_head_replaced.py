"""Small ResNet-style CNN on noisy gratings, transfer learning, DataLoader epochs, SGD, head late.

The network is first trained on a source task (10 orientation bins) and then fine-tuned on this
5-class task with discriminative learning rates (backbone 0.003, head 0.03, SGD + momentum),
its head adapted the torchvision way, ``model.fc = nn.Linear(in_features, 5)``. The buggy
program replaces the head after the fine-tuning optimizer was built: the optimizer holds the
old 10-class head, which no longer takes part, and not the new one, which gets a gradient every
step and stays at its random init (its ``.grad`` piling up, as the loop clears with
``optimizer.zero_grad()``); the slow backbone cannot make up for a random head in 3 epochs.
The fixed twin replaces the head first and then builds the optimizer.

Measured (held-out accuracy, higher is better, chance 0.2): buggy 0.58, fixed 1.00.
"""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

EXPECTED = "PARAMS_NOT_IN_OPTIMIZER"

CLASSES = 5
SOURCE_CLASSES = 10
PRETRAIN_EPOCHS = 3
EPOCHS = 3
BATCH = 32


def make_textures(n, gen, *, classes, offset=0.0):
    """Noisy gratings: the class is the orientation bin (``classes`` bins over 180 degrees)."""
    y = torch.randint(0, classes, (n,), generator=gen)
    angle = (y.float() + offset) * (3.14159 / classes) + 0.1 * torch.randn(n, generator=gen)
    freq = 1.0 + 0.1 * torch.randn(n, generator=gen)
    phase = 6.283 * torch.rand(n, generator=gen)
    coords = torch.arange(12).float()
    yy, xx = torch.meshgrid(coords, coords, indexing="ij")
    proj = (torch.cos(angle)[:, None, None] * xx + torch.sin(angle)[:, None, None] * yy)
    img = torch.sin(freq[:, None, None] * proj + phase[:, None, None])
    img = img + 0.8 * torch.randn(n, 12, 12, generator=gen)
    return img.unsqueeze(1), y


class Block(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)

    def forward(self, x):
        out = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(x + self.bn2(self.conv2(out)))


class TinyResNet(nn.Module):
    def __init__(self, num_classes=10):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1, bias=False),
                                  nn.BatchNorm2d(16), nn.ReLU())
        self.layer1 = Block(16)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(16, num_classes)

    def forward(self, x):
        return self.fc(self.pool(self.layer1(self.stem(x))).flatten(1))


def backbone_parameters(model):
    return [p for name, p in model.named_parameters() if not name.startswith("fc.")]


def pretrain(model, gen):
    """The source task: 10 orientation bins, trained from scratch (the 'pretrained' weights)."""
    x, y = make_textures(1024, gen, classes=SOURCE_CLASSES)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    loader = DataLoader(TensorDataset(x, y), batch_size=BATCH, shuffle=True,
                        generator=torch.Generator().manual_seed(9))
    model.train()
    for epoch in range(PRETRAIN_EPOCHS):
        for images, labels in loader:
            optimizer.zero_grad()
            nn.functional.cross_entropy(model(images), labels).backward()
            optimizer.step()


def run(*, fixed: bool, monitor: bool = True):
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(7)
    model = TinyResNet(num_classes=SOURCE_CLASSES)
    pretrain(model, gen)

    x_train, y_train = make_textures(512, gen, classes=CLASSES, offset=0.5)
    x_test, y_test = make_textures(512, gen, classes=CLASSES, offset=0.5)
    loader = DataLoader(TensorDataset(x_train, y_train), batch_size=BATCH, shuffle=True,
                        generator=torch.Generator().manual_seed(8))

    def fine_tune_optimizer():
        # discriminative learning rates: the pretrained backbone moves 10x slower than the head
        return torch.optim.SGD([{"params": backbone_parameters(model), "lr": 0.003},
                                {"params": model.fc.parameters(), "lr": 0.03}], momentum=0.9)

    if fixed:
        model.fc = nn.Linear(model.fc.in_features, CLASSES)    # fix: adapt the head first
        optimizer = fine_tune_optimizer()
    else:
        optimizer = fine_tune_optimizer()
        model.fc = nn.Linear(model.fc.in_features, CLASSES)    # bug: after the optimizer
    loss_fn = nn.CrossEntropyLoss()

    mon = None
    if monitor:
        from gradhunt import Monitor
        mon = Monitor(model, optimizer=optimizer)

    for epoch in range(EPOCHS):
        model.train()
        for images, labels in loader:
            optimizer.zero_grad()
            loss = loss_fn(model(images), labels)
            loss.backward()
            optimizer.step()
            if mon is not None:
                mon.step(loss)

    model.eval()
    with torch.no_grad():
        accuracy = (model(x_test).argmax(1) == y_test).float().mean().item()
    report = None
    if mon is not None:
        report = mon.report()
        mon.close()
    return {"report": report, "metric": accuracy, "higher_is_better": True}
