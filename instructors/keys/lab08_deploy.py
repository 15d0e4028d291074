"""Lab 8: deploy an INT8 model: scales for export, the Q/DQ rules, parity, throughput.

Each visible case is chosen so that a classic mistake changes the answer: scales over the
wrong axis, accepting uint8 or a non-zero zero point, requiring axis 0 of every per-channel weight
(a ConvTranspose reads its output channels on axis 1, a MatMul weight [K, N] on its last axis),
comparing the deployment with the labels instead of the fake-quant reference, averaging latencies
instead of taking the median.

Serves: lab08 (its answer key: specs, visible and hidden cases, hints).
"""

from __future__ import annotations

import numpy as np

from helpers.grading.exercise import Case, Exercise, register


def spec_weight_scales(w: np.ndarray) -> np.ndarray:
    """Per-output-channel (axis 0) symmetric int8 scales: max|w| over the other axes / 127."""
    amax = np.abs(w.reshape(w.shape[0], -1)).max(axis=1).astype(np.float32)
    return np.maximum(amax, np.float32(1e-8)) / np.float32(127)


def spec_qdq_node_ok(zero_point: np.ndarray, axis: int, weight: bool, expected_axis: int | None) -> bool:
    """TensorRT's explicit-quantization rules for one Q/DQ node: int8, zero point 0, and per-channel weight
    scales on the axis that indexes the reading layer's output channels (`expected_axis`, as qdq_nodes()
    gives it; None: no axis rule)."""
    zp = np.asarray(zero_point)
    if zp.dtype != np.int8 or np.any(zp != 0):
        return False
    return not (weight and zp.size > 1 and expected_axis is not None and axis != expected_axis)


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
    """One good node per role and layer, then one broken rule at a time."""
    z = np.zeros
    return [
        Case("activation: int8, zero point 0", (z((), np.int8), 1, False, None)),
        Case("Conv weight: 16 channels on axis 0", (z(16, np.int8), 0, True, 0)),
        Case("ConvTranspose weight: 16 channels on axis 1", (z(16, np.int8), 1, True, 1)),
        Case("uint8 zero point (ONNX Runtime's default activations)", (z((), np.uint8), 1, False, None)),
        Case("zero point 3 (asymmetric)", (np.array(3, np.int8), 1, False, None)),
        Case("Linear weight [N, K] with scales on axis 1", (z(16, np.int8), 1, True, 0)),
        Case("MatMul weight [K, N] with scales on axis 0", (z(16, np.int8), 0, True, 1)),
        Case("per-tensor weight (axis does not matter)", (z((), np.int8), 1, True, 0)),
        Case("int32 zero point (a bias DQ)", (z(16, np.int32), 0, True, 0)),
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


def hidden_scale_cases() -> list[Case]:
    """Hidden: a 3-D weight with one loud channel."""
    w = _rng(88).normal(0, 0.2, (24, 16, 3)).astype(np.float32)
    w[5] *= 10
    return [Case("hidden: (24, 16, 3) with a loud channel", (w,))]


def hidden_agreement_cases() -> list[Case]:
    """Hidden: four rows whose logits are reversed."""
    r = _rng(9).normal(0, 1, (40, 7)).astype(np.float32)
    g = r.copy()
    g[:4] = g[:4, ::-1]
    return [Case("hidden: 4 rows reversed", (r, g))]


register(
    Exercise(
        id="lab08.weight_scales", title="per-channel weight scales for the Q/DQ export", spec=spec_weight_scales,
        cases=scale_cases, hidden=hidden_scale_cases, compare="close", rtol=1e-6, atol=0,
        hint="One symmetric scale per output channel (axis 0): that channel's largest magnitude mapped to 127.",
        hints=("Merge every axis after the first into one, whatever the weight's rank (2-D Linear, 3-D Conv1d, "
               "4-D Conv), then take the largest magnitude along the merged axis; return float32.",),
    ),
    Exercise(
        id="lab08.qdq_rules", title="TensorRT's rules for one Q/DQ node", spec=spec_qdq_node_ok,
        cases=rule_cases, compare="exact",
        hidden=lambda: [Case("hidden: per-channel activation-like on axis 1", (np.zeros(4, np.int8), 1, False, None)),
                        Case("hidden: uint8 weight", (np.zeros(4, np.uint8), 0, True, 0)),
                        Case("hidden: one non-zero channel", (np.array([0, 0, 1], np.int8), 0, True, 0)),
                        Case("hidden: ConvTranspose weight on axis 0", (np.zeros(8, np.int8), 0, True, 1)),
                        Case("hidden: MatMul weight [K, N] on its last axis", (np.zeros(8, np.int8), 1, True, 1)),
                        Case("hidden: a weight not followed to its layer", (np.zeros(8, np.int8), 2, True, None))],
        hint="Three rules, each one a single test: the zero point's type, its values, and, for per-channel "
             "weights, the axis of the layer's output channels.",
        hints=("Look at zero_point.dtype (only int8), whether any zero point is non-zero, and whether a weight "
               "with more than one zero point is quantized along expected_axis (when there is one: None means "
               "no axis rule).",),
    ),
    Exercise(
        id="lab08.agreement", title="parity with the fake-quant reference", spec=spec_agreement,
        cases=agreement_cases, hidden=hidden_agreement_cases, compare="close", rtol=1e-6, atol=1e-9,
        hint="Parity is judged against the model the deployment was built from, not against the labels.",
        hints=("Top-1 agreement: the fraction of rows whose argmax (last axis) is the same in both. Then the "
               "largest absolute difference of any logit.",),
    ),
    Exercise(
        id="lab08.throughput", title="throughput from latencies", spec=spec_throughput, cases=throughput_cases,
        hidden=lambda: [Case("hidden: batch 64", (64, np.array([0.2, 0.1, 0.3])))],
        compare="close", rtol=1e-9, atol=0,
        hint="Items per second from a typical batch latency, one that a single hiccup does not move.",
        hints=("Use the median latency, and remember that each latency covers a whole batch.",),
    ),
)
