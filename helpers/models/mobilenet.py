"""A small MobileNet-style model: depthwise-separable blocks (per-channel 3-wide filter, then 1x1 mixing).

Serves: core — used by chapters 7–12 and labs 06–09.
"""

from __future__ import annotations

import torch
from torch import nn

from helpers.models.cnn import conv_layers


class DepthwiseSeparable(nn.Module):
    """Depthwise conv (groups = channels) + BN + ReLU6, then pointwise 1x1 conv + BN + ReLU6."""

    def __init__(self, c_in: int, c_out: int, stride: int, dims: int):
        super().__init__()
        conv, bn, _ = conv_layers(dims)
        self.dw = conv(c_in, c_in, 3, stride=stride, padding=1, groups=c_in, bias=False)
        self.bn1 = bn(c_in)
        self.pw = conv(c_in, c_out, 1, bias=False)
        self.bn2 = bn(c_out)
        self.act = nn.ReLU6()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """act(bn(pw(act(bn(dw(x))))))."""
        return self.act(self.bn2(self.pw(self.act(self.bn1(self.dw(x))))))


class MobileNetSmall(nn.Module):
    """Stem conv, depthwise-separable blocks, global average pool, linear classifier."""

    def __init__(self, in_channels: int = 1, num_classes: int = 10, dims: int = 1,
                 plan: tuple[tuple[int, int], ...] = ((32, 1), (64, 2), (64, 1), (96, 2))):
        super().__init__()
        conv, bn, pool = conv_layers(dims)
        c = plan[0][0]
        self.stem = nn.Sequential(conv(in_channels, c, 3, padding=1, bias=False), bn(c), nn.ReLU6())
        blocks = []
        for c_out, stride in plan:
            blocks.append(DepthwiseSeparable(c, c_out, stride, dims))
            c = c_out
        self.blocks = nn.Sequential(*blocks)
        self.pool = pool(1)
        self.fc = nn.Linear(c, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Class logits for (n, C, L) signals or (n, C, H, W) images."""
        return self.fc(torch.flatten(self.pool(self.blocks(self.stem(x))), 1))
