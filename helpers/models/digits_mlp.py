"""A tiny MLP on scikit-learn digits, trained in seconds: real weights and activations to quantize.

(The PTQ chapter's CNNs in helpers.models are the fuller models; this one keeps chapters 5-6 fast.)

Serves: core — used by chapters 5, 6.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from helpers.threads import torch_threads
from helpers.validation import require_int_range


@dataclass
class DigitsSplit:
    """Digits pixels scaled to [0, 1] (17 grey levels), split into train/calibration/test tensors."""

    x_train: Any
    y_train: Any
    x_calib: Any
    x_test: Any
    y_test: Any


def digits_split(calib_size: int = 256, seed: int = 0) -> DigitsSplit:
    """Fixed shuffled split of sklearn digits: 70% train (calibration drawn from it), 30% test."""
    import torch
    from sklearn.datasets import load_digits

    require_int_range(calib_size, 1, 1000, "calib_size")
    d = load_digits()
    x = torch.tensor(d.data / 16.0, dtype=torch.float32)
    y = torch.tensor(d.target, dtype=torch.int64)
    idx = torch.randperm(len(x), generator=torch.Generator().manual_seed(seed))
    cut = int(0.7 * len(x))
    tr, te = idx[:cut], idx[cut:]
    return DigitsSplit(x[tr], y[tr], x[tr[:calib_size]], x[te], y[te])


def tiny_mlp(hidden: tuple[int, ...] = (128, 64), seed: int = 0) -> Any:
    """An untrained MLP 64 -> hidden... -> 10 with ReLUs (torch.nn.Sequential)."""
    import torch
    from torch import nn

    torch.manual_seed(seed)
    layers: list[nn.Module] = []
    width = 64
    for h in hidden:
        layers += [nn.Linear(width, h), nn.ReLU()]
        width = h
    layers.append(nn.Linear(width, 10))
    return nn.Sequential(*layers)


def train_tiny_mlp(data: DigitsSplit | None = None, steps: int = 300, seed: int = 0) -> tuple[Any, DigitsSplit]:
    """Train tiny_mlp() full-batch with Adam for `steps` steps (seconds; a progress bar); returns (model, data)."""
    import torch
    from tqdm.auto import tqdm

    require_int_range(steps, 1, 100_000, "steps")
    data = data or digits_split(seed=seed)
    model = tiny_mlp(seed=seed)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    with torch_threads(1):  # tiny matrices: extra threads only spin, and on a busy machine they cost 10x
        for _ in tqdm(range(steps), desc="training the digits MLP", leave=False, mininterval=0.5):
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(data.x_train), data.y_train)
            loss.backward()
            opt.step()
    return model.eval(), data


def accuracy(model: Any, x: Any, y: Any) -> float:
    """Top-1 accuracy in percent."""
    import torch

    with torch.no_grad():
        return float((model(x).argmax(1) == y).float().mean() * 100)


def linear_weights(model: Any) -> dict[str, np.ndarray]:
    """{name: weight as numpy} of every Linear layer (out_features x in_features)."""
    from torch import nn

    return {name: m.weight.detach().numpy().copy() for name, m in model.named_modules()
            if isinstance(m, nn.Linear)}
