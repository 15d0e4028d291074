"""A small ResNet-style CNN (1-D for MNIST-1D signals, 2-D for images): conv stem, residual blocks, linear head.

Serves: core — used by chapters 7–12 and labs 06–09.
"""

from __future__ import annotations

import torch
from torch import nn

from helpers.errors import InputError


def conv_layers(dims: int) -> tuple[type[nn.Module], type[nn.Module], type[nn.Module]]:
    """(Conv, BatchNorm, AdaptiveAvgPool) classes for 1-D or 2-D inputs."""
    if dims == 1:
        return nn.Conv1d, nn.BatchNorm1d, nn.AdaptiveAvgPool1d
    if dims == 2:
        return nn.Conv2d, nn.BatchNorm2d, nn.AdaptiveAvgPool2d
    raise InputError(f"dims must be 1 (signals) or 2 (images), got {dims!r}.")


class BasicBlock(nn.Module):
    """Two 3-wide convolutions with batch norm and a residual connection (1x1 conv when the shape changes)."""

    def __init__(self, c_in: int, c_out: int, stride: int, dims: int):
        super().__init__()
        conv, bn, _ = conv_layers(dims)
        self.conv1 = conv(c_in, c_out, 3, stride=stride, padding=1, bias=False)
        self.bn1 = bn(c_out)
        self.conv2 = conv(c_out, c_out, 3, padding=1, bias=False)
        self.bn2 = bn(c_out)
        self.relu = nn.ReLU()
        self.shortcut: nn.Module = nn.Identity()
        if stride != 1 or c_in != c_out:
            self.shortcut = nn.Sequential(conv(c_in, c_out, 1, stride=stride, bias=False), bn(c_out))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """relu(bn(conv(relu(bn(conv(x))))) + shortcut(x))."""
        out = self.relu(self.bn1(self.conv1(x)))
        return self.relu(self.bn2(self.conv2(out)) + self.shortcut(x))


class ResNetSmall(nn.Module):
    """Stem, three residual stages (widths `widths`, stride 1/2/2), global average pool, linear classifier."""

    def __init__(self, in_channels: int = 1, num_classes: int = 10, dims: int = 1,
                 widths: tuple[int, int, int] = (16, 32, 64)):
        super().__init__()
        conv, bn, pool = conv_layers(dims)
        self.stem = nn.Sequential(conv(in_channels, widths[0], 5 if dims == 1 else 3, padding="same", bias=False),
                                  bn(widths[0]), nn.ReLU())
        self.layer1 = BasicBlock(widths[0], widths[0], 1, dims)
        self.layer2 = BasicBlock(widths[0], widths[1], 2, dims)
        self.layer3 = BasicBlock(widths[1], widths[2], 2, dims)
        self.pool = pool(1)
        self.fc = nn.Linear(widths[2], num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Class logits for a batch of signals (n, C, L) or images (n, C, H, W)."""
        x = self.layer3(self.layer2(self.layer1(self.stem(x))))
        return self.fc(torch.flatten(self.pool(x), 1))
