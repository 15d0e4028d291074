"""Shared fixtures of the chapter 7-8 tests: MNIST-1D, the cached trained ResNet, a tiny digits CNN."""

from __future__ import annotations

import pytest
import torch

from helpers.data import load_dataset
from helpers.models.train import trained_model


@pytest.fixture(scope="module")
def data():
    """MNIST-1D splits."""
    return load_dataset("mnist1d")


@pytest.fixture(scope="module")
def resnet():
    """The chapter's trained ResNet (from the cache, or trained once)."""
    return trained_model("resnet_small", progress=False)


def tiny_digits_cnn() -> torch.nn.Module:
    """An untrained conv + linear model for 8x8 digits (enough to show entropy collapse)."""
    return torch.nn.Sequential(torch.nn.Conv2d(1, 4, 3), torch.nn.ReLU(), torch.nn.Flatten(),
                               torch.nn.Linear(4 * 36, 10)).eval()
