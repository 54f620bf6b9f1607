"""ResNet-18 in plain torch (no torchvision): BasicBlocks [2, 2, 2, 2], CIFAR-style stem.

The stem is a 3x3 convolution with stride 1 and no max-pool, as is usual for 32x32 CIFAR-10
images; ``width`` scales the channels (64 in the original; smaller widths make a
ResNet-18-style net for small images and CPU budgets).
"""
import torch
from torch import nn


class BasicBlock(nn.Module):
    """Two 3x3 conv-BN layers with a shortcut (1x1 conv-BN when the shape changes)."""

    def __init__(self, in_channels, out_channels, *, stride=1):
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, out_channels, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(out_channels)
        self.relu1 = nn.ReLU()
        self.conv2 = nn.Conv2d(out_channels, out_channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(out_channels)
        self.shortcut = nn.Sequential()
        if stride != 1 or in_channels != out_channels:
            self.shortcut = nn.Sequential(
                nn.Conv2d(in_channels, out_channels, 1, stride=stride, bias=False),
                nn.BatchNorm2d(out_channels))
        self.relu2 = nn.ReLU()

    def forward(self, x):
        out = self.relu1(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu2(out + self.shortcut(x))


class ResNet18(nn.Module):
    def __init__(self, *, in_channels=3, num_classes=10, width=64):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(in_channels, width, 3, padding=1, bias=False),
                                  nn.BatchNorm2d(width), nn.ReLU())
        stages, channels = [], width
        for index, stride in enumerate((1, 2, 2, 2)):
            out_channels = width * 2 ** index
            stages.append(nn.Sequential(BasicBlock(channels, out_channels, stride=stride),
                                        BasicBlock(out_channels, out_channels)))
            channels = out_channels
        self.layer1, self.layer2, self.layer3, self.layer4 = stages
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(channels, num_classes)

    def forward(self, x):
        x = self.stem(x)
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.pool(x), 1))
