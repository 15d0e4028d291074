"""Lab 8: deploy an INT8 model: scales for export, the Q/DQ rules, parity, throughput.

Each visible case is chosen so that a classic mistake changes the answer: scales over the
wrong axis, accepting uint8 or a non-zero zero point, comparing the deployment with the labels
instead of the fake-quant reference, averaging latencies instead of taking the median.

Serves: lab08 (its exercises: spec, visible cases, hint).
"""

from __future__ import annotations

import numpy as np

from helpers.grading.exercise import Case, Exercise, register


def spec_weight_scales(w: np.ndarray) -> np.ndarray:
    """Per-output-channel (axis 0) symmetric int8 scales: max|w| over the other axes / 127."""
    amax = np.abs(w.reshape(w.shape[0], -1)).max(axis=1).astype(np.float32)
    return np.maximum(amax, np.float32(1e-8)) / np.float32(127)


def spec_qdq_node_ok(zero_point: np.ndarray, axis: int, weight: bool) -> bool:
    """TensorRT's explicit-quantization rules for one Q/DQ node: int8, zero point 0, weights on axis 0."""
    zp = np.asarray(zero_point)
    if zp.dtype != np.int8 or np.any(zp != 0):
        return False
    return not (weight and zp.size > 1 and axis != 0)


def spec_agreement(reference: np.ndarray, logits: np.ndarray) -> tuple[float, float]:
    """(top-1 agreement, max |logit difference|) of a deployed model against the fake-quant reference."""
    ref, got = np.asarray(reference, np.float64), np.asarray(logits, np.float64)
    return float((ref.argmax(-1) == got.argmax(-1)).mean()), float(np.abs(ref - got).max())


def spec_throughput(batch: int, latencies_s: np.ndarray) -> float:
    """Items per second from per-batch latencies: batch / median latency."""
    return float(batch / np.median(np.asarray(latencies_s, np.float64)))


def _rng(seed: int) -> np.random.Generator:
    """A seeded generator."""
    return np.random.default_rng(seed)


def scale_cases() -> list[Case]:
    """Conv (4-D), Linear (2-D) and Conv1d (3-D) weights; one channel has a negative outlier."""
    conv = _rng(0).normal(0, 0.1, (8, 3, 3, 3)).astype(np.float32)
    conv[2, 1, 0, 0] = -1.5
    lin = _rng(1).normal(0, 0.05, (10, 32)).astype(np.float32)
    lin[:, 0] = 0.9  # a large input column: per-row (axis 0) scales must not all pick it
    lin[3, 0] = 0.2
    return [
        Case("conv weight (8, 3, 3, 3)", (conv,)),
        Case("linear weight (10, 32)", (lin,)),
        Case("conv1d weight (4, 2, 5)", (_rng(2).normal(0, 0.3, (4, 2, 5)).astype(np.float32),)),
    ]


def rule_cases() -> list[Case]:
    """One good node per role, then one broken rule at a time."""
    z = np.zeros
    return [
        Case("activation: int8, zero point 0", (z((), np.int8), 1, False)),
        Case("weight: 16 channels on axis 0", (z(16, np.int8), 0, True)),
        Case("uint8 zero point (ONNX Runtime's default activations)", (z((), np.uint8), 1, False)),
        Case("zero point 3 (asymmetric)", (np.array(3, np.int8), 1, False)),
        Case("weight scales on axis 1", (z(16, np.int8), 1, True)),
        Case("per-tensor weight (axis does not matter)", (z((), np.int8), 1, True)),
        Case("int32 zero point (a bias DQ)", (z(16, np.int32), 0, True)),
    ]


def agreement_cases() -> list[Case]:
    """A perfect copy, a copy off by rounding, and a deployment that is right where the reference is wrong."""
    ref = _rng(3).normal(0, 1, (50, 10)).astype(np.float32)
    noisy = ref + _rng(4).normal(0, 0.01, ref.shape).astype(np.float32)
    shifted = np.roll(ref, 1, axis=1)  # disagrees everywhere, yet some rows still "match labels"
    return [
        Case("identical logits", (ref, ref.copy())),
        Case("rounding noise", (ref, noisy)),
        Case("a different model", (ref, shifted)),
    ]


def throughput_cases() -> list[Case]:
    """Latencies with one slow outlier (a median ignores it, a mean does not)."""
    return [
        Case("batch 32, steady", (32, np.array([0.010, 0.011, 0.010, 0.012, 0.010]))),
        Case("batch 8, one 50 ms hiccup", (8, np.array([0.004, 0.004, 0.050, 0.005, 0.004]))),
        Case("batch 1, even count", (1, np.array([0.002, 0.003, 0.001, 0.004]))),
    ]


register(
    Exercise(
        "lab08.weight_scales",
        "per-channel weight scales for the Q/DQ export",
        spec_weight_scales,
        scale_cases,
        "One scale per output channel: reshape to (w.shape[0], -1), then max of |w| "
        "along axis 1, divided by 127.",
        compare="close",
        rtol=1e-6,
        atol=0,
    ),
    Exercise(
        "lab08.qdq_rules",
        "TensorRT's rules for one Q/DQ node",
        spec_qdq_node_ok,
        rule_cases,
        "Three rules: zero_point.dtype is int8, every zero point is 0, and a per-channel weight "
        "(zero_point.size > 1) uses axis 0.",
        compare="exact",
    ),
    Exercise(
        "lab08.agreement",
        "parity with the fake-quant reference",
        spec_agreement,
        agreement_cases,
        "Compare argmax of the deployed logits with argmax of the REFERENCE logits (not the labels), "
        "then the largest absolute logit difference.",
        compare="close",
        rtol=1e-6,
        atol=1e-9,
    ),
    Exercise(
        "lab08.throughput",
        "throughput from latencies",
        spec_throughput,
        throughput_cases,
        "items/s = batch / median(latencies): the median ignores one-off hiccups.",
        compare="close",
        rtol=1e-9,
        atol=0,
    ),
)
