"""Tiny models and data shared by the chapter 9 tests (no downloads, a few ms each)."""

from __future__ import annotations

import torch
from torch import nn


def tiny_cnn(seed: int = 0) -> nn.Module:
    """A Conv2d-BN-ReLU x2 + Linear classifier on 1x12x12 inputs, with settled BatchNorm."""
    torch.manual_seed(seed)
    m = nn.Sequential(
        nn.Conv2d(1, 8, 3, padding=1),
        nn.BatchNorm2d(8),
        nn.ReLU(),
        nn.Conv2d(8, 16, 3, stride=2, padding=1),
        nn.BatchNorm2d(16),
        nn.ReLU(),
        nn.Flatten(),
        nn.Linear(16 * 6 * 6, 32),
        nn.ReLU(),
        nn.Linear(32, 10),
    )
    m.train()
    with torch.no_grad():
        m(torch.randn(64, 1, 12, 12))
    return m.eval()


def tiny_inputs(n: int = 64, seed: int = 1) -> torch.Tensor:
    """Random inputs of the tiny CNN's shape."""
    return torch.randn(n, 1, 12, 12, generator=torch.Generator().manual_seed(seed))


def tiny_bert() -> tuple[nn.Module, list[dict], dict]:
    """A two-layer BERT (d 64, 4 heads, FFN 128, vocab 97, 16 tokens): the model, two calibration batches, inputs."""
    from helpers.models.bert import bert_base, bert_inputs

    torch.manual_seed(0)
    m = bert_base(16, n_layers=2, d_model=64, n_heads=4, d_ff=128, vocab=97)
    return m, [bert_inputs(4, 16, vocab=97, seed=s) for s in (1, 2)], bert_inputs(3, 16, vocab=97, seed=3)
