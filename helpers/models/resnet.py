"""ResNet-50 (and ResNet-18) in plain PyTorch, equivalent to torchvision's, without downloaded weights.

Bottleneck v1.5: the stride sits on the 3x3 convolution (torchvision's choice, also NVIDIA's
and MLPerf's). Parameter names match torchvision, so a torchvision state_dict loads as is.

Serves: core — used by chapters 1, 9–12 and lab 08.
"""

from __future__ import annotations

import torch
from torch import nn

from helpers.validation import require_int_range


def conv3x3(cin: int, cout: int, stride: int = 1) -> nn.Conv2d:
    """3x3 convolution with padding 1 and no bias (a BatchNorm follows)."""
    return nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False)


def conv1x1(cin: int, cout: int, stride: int = 1) -> nn.Conv2d:
    """1x1 convolution without bias."""
    return nn.Conv2d(cin, cout, 1, stride=stride, bias=False)


class BasicBlock(nn.Module):
    """Two 3x3 convolutions with a residual connection (ResNet-18/34)."""

    expansion = 1

    def __init__(self, cin: int, width: int, stride: int = 1, downsample: nn.Module | None = None):
        super().__init__()
        self.conv1, self.bn1 = conv3x3(cin, width, stride), nn.BatchNorm2d(width)
        self.conv2, self.bn2 = conv3x3(width, width), nn.BatchNorm2d(width)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = downsample

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """conv-bn-relu-conv-bn, plus the (downsampled) input, then relu."""
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        return self.relu(self.bn2(self.conv2(out)) + identity)


class Bottleneck(nn.Module):
    """1x1 reduce, 3x3 (carrying the stride: v1.5), 1x1 expand x4, with a residual connection."""

    expansion = 4

    def __init__(self, cin: int, width: int, stride: int = 1, downsample: nn.Module | None = None):
        super().__init__()
        self.conv1, self.bn1 = conv1x1(cin, width), nn.BatchNorm2d(width)
        self.conv2, self.bn2 = conv3x3(width, width, stride), nn.BatchNorm2d(width)
        self.conv3, self.bn3 = conv1x1(width, width * 4), nn.BatchNorm2d(width * 4)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = downsample

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Three conv-bn stages plus the (downsampled) input, then relu."""
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        return self.relu(self.bn3(self.conv3(out)) + identity)


class ResNet(nn.Module):
    """Stem (7x7/2 conv, 3x3/2 max-pool), four stages, global average pool, fully connected."""

    def __init__(self, block: type[BasicBlock] | type[Bottleneck], layers: tuple[int, ...],
                 num_classes: int = 1000):
        super().__init__()
        self.inplanes = 64
        self.conv1 = nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, stride=2, padding=1)
        self.layer1 = self._stage(block, 64, layers[0], 1)
        self.layer2 = self._stage(block, 128, layers[1], 2)
        self.layer3 = self._stage(block, 256, layers[2], 2)
        self.layer4 = self._stage(block, 512, layers[3], 2)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(512 * block.expansion, num_classes)
        for m in self.modules():  # torchvision's initialisation
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)

    def _stage(self, block: type[BasicBlock] | type[Bottleneck], width: int, blocks: int,
               stride: int) -> nn.Sequential:
        """One stage of `blocks` blocks; the first changes stride/width and gets a projection."""
        out = width * block.expansion
        down = None
        if stride != 1 or self.inplanes != out:
            down = nn.Sequential(conv1x1(self.inplanes, out, stride), nn.BatchNorm2d(out))
        mods = [block(self.inplanes, width, stride, down)]
        self.inplanes = out
        mods += [block(out, width) for _ in range(1, blocks)]
        return nn.Sequential(*mods)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(batch, 3, H, W) images -> (batch, num_classes) logits."""
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def resnet50(num_classes: int = 1000) -> ResNet:
    """ResNet-50 v1.5 (25,557,032 parameters with 1000 classes), randomly initialised, in eval mode."""
    require_int_range(num_classes, 1, 1_000_000, "num_classes")
    return ResNet(Bottleneck, (3, 4, 6, 3), num_classes).eval()


def resnet18(num_classes: int = 1000) -> ResNet:
    """ResNet-18 (11,689,512 parameters with 1000 classes), randomly initialised, in eval mode."""
    require_int_range(num_classes, 1, 1_000_000, "num_classes")
    return ResNet(BasicBlock, (2, 2, 2, 2), num_classes).eval()


def image_batch(batch: int, size: int = 224, device: str | torch.device = "cpu", *,
                seed: int = 0) -> torch.Tensor:
    """Random normalised images (batch, 3, size, size) in float32."""
    require_int_range(batch, 1, 1 << 16, "batch")
    require_int_range(size, 32, 4096, "size")
    g = torch.Generator().manual_seed(seed)
    return torch.randn(batch, 3, size, size, generator=g).to(device)


def resnet50_flops(batch: int = 1, size: int = 224) -> float:
    """Multiply-add FLOPs (2 per MAC) of ResNet-50's forward pass: about 8.2 GFLOP per 224x224 image."""
    return 2 * 4.09e9 * batch * (size / 224) ** 2
