"""Does the deployed model compute what the PyTorch fake-quant model computes? And how fast?

The classic trap: "the INT8 engine's accuracy differs from PyTorch". Compare every backend's
logits with the fake-quant model's on the same inputs (top-1 agreement >= 99%, max and mean
logit difference), then with the labels (test accuracy), then time it.

Serves: core — used by chapter 9.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from helpers import plots
from helpers.deploy.base import Backend, Latency
from helpers.errors import InputError
from helpers.validation import require_array, require_nonempty

MIN_AGREEMENT = 0.99


def compare_logits(
    reference: np.ndarray, logits: np.ndarray, labels: np.ndarray | None = None
) -> dict:
    """Top-1 agreement, max/mean |difference| of logits, and accuracy when labels are given."""
    for name, a in (("reference", reference), ("logits", logits)):
        require_array(a, name)
        require_nonempty(a, name)
    ref, got = np.asarray(reference, dtype=np.float64), np.asarray(logits, dtype=np.float64)
    if ref.shape != got.shape:
        raise InputError(
            f"logits shape {got.shape} differs from the reference's {ref.shape}: "
            "run both on the same inputs."
        )
    diff = np.abs(ref - got)
    row = {
        "top-1 agreement": float((ref.argmax(-1) == got.argmax(-1)).mean()),
        "max |diff|": float(diff.max()),
        "mean |diff|": float(diff.mean()),
    }
    if labels is not None:
        labels = np.asarray(labels)
        if labels.shape != got.shape[:1]:
            raise InputError(f"labels must have shape {got.shape[:1]}, got {labels.shape}.")
        row["accuracy"] = float((got.argmax(-1) == labels).mean())
    return row


def parity_rows(
    reference: np.ndarray,
    backends: Mapping[str, Backend],
    x: np.ndarray,
    labels: np.ndarray | None = None,
    sizes_mb: Mapping[str, float] | None = None,
) -> list[dict]:
    """One row per backend: agreement with the reference logits, differences, accuracy, size."""
    rows = []
    for name, be in backends.items():
        row = {"backend": name, "precision": be.precision, "provider": be.provider}
        row.update(compare_logits(reference, be.run(x), labels))
        row["passes (≥ 99% agree)"] = row["top-1 agreement"] >= MIN_AGREEMENT
        if sizes_mb is not None:
            row["size MB"] = sizes_mb.get(name)
        rows.append(row)
    return rows


def latency_rows(
    backends: Mapping[str, Backend],
    make_input: Callable[[int], np.ndarray],
    batch_sizes: Sequence[int] = (1, 8, 32),
    repeats: int = 10,
) -> list[Latency]:
    """p50/p99 latency and throughput of every backend at every batch size."""
    out: list[Latency] = []
    for be in backends.values():
        out += be.benchmark(make_input, batch_sizes, repeats=repeats)
    return out


def plot_throughput(
    latencies: Sequence[Latency],
    *,
    title: str = "Throughput by batch size",
    device: str | None = None,
    note: str = "",
):
    """Throughput (items/s) against batch size, one line per backend."""
    if not latencies:
        raise InputError("no latency measurements to plot.")
    batches = sorted({lat.batch for lat in latencies})
    series: dict[str, list[float]] = {}
    for lat in latencies:
        series.setdefault(lat.backend, [float("nan")] * len(batches))[batches.index(lat.batch)] = (
            lat.items_per_s
        )
    return plots.sweep(
        batches,
        series,
        title=title,
        xlabel="batch size",
        ylabel="items / s",
        logx=True,
        logy=True,
        device=device,
        note=note,
    )


def size_mb(path: str | os.PathLike) -> float:
    """File size in MB."""
    from helpers.deploy.export import file_mb

    return file_mb(path)
