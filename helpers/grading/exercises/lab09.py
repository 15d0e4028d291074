"""Lab 9: diagnose and fix a broken deployment (wrong GPU architecture flags, a runaway scale update,
and an INT8 ONNX model that is slow and inaccurate on ONNX Runtime's CPU).

Serves: lab09 (its exercises: spec, visible cases, hint).
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from helpers.chapters.ch10_beyond_int8.dynamic_quant import ema_amax
from helpers.grading.exercise import Case, Exercise, register
from helpers.chapters.ch11_troubleshooting import arch_mismatch, lab_deployment

ACCURACY_SLACK_PTS = 1.5  # the fix must be within this many points of the FP32 model
MIN_SPEEDUP = 1.5         # and this much faster than the broken model, measured in the same run


def _gencode_cases() -> list[Case]:
    """Compute capabilities of Turing, Ampere, Ada, Hopper and Blackwell GPUs."""
    return [Case(f"compute capability {m}.{n}", ((m, n),)) for m, n in ((9, 0), (8, 6), (7, 5), (8, 9), (12, 0))]


def _ema_cases() -> list[Case]:
    """Batches whose ranges drift, with two momenta."""
    rng = np.random.default_rng(9)
    batches = [rng.normal(size=128).astype(np.float32) * (1 + 0.3 * i) for i in range(6)]
    return [Case("6 drifting batches, momentum 0.9", (batches, 0.9)),
            Case("6 drifting batches, momentum 0.5", (batches, 0.5)),
            Case("one batch", (batches[:1], 0.9))]


def ema_scales_spec(batches: list[np.ndarray], momentum: float) -> np.ndarray:
    """INT8 scale after each batch: running EMA of the batch amax (first batch initialises it) / 127."""
    return ema_amax(batches, momentum) / 127.0


def _fix_cases() -> list[Case]:
    """The lab's deployment: the FP32 ONNX file and correct calibration batches."""
    setup = lab_deployment.prepare()
    out = Path(tempfile.mkdtemp(prefix="lab09_fix_")) / "fixed_int8.onnx"
    return [Case("MNIST-1D ResNet, ORT CPU", (str(setup["fp32"]), setup["calib"], str(out)))]


def _fix_spec(fp32_path: str, calib: list[np.ndarray], out_path: str) -> str:
    """The reference fix, written beside the student's file."""
    ref = Path(out_path).with_name("reference_int8.onnx")
    return str(lab_deployment.fixed_deploy(fp32_path, calib, ref))


def compare_fix(got: Any, expected: Any) -> None:
    """The student's model must be accurate (vs FP32) and faster than the broken one, in this run."""
    setup = lab_deployment.prepare()
    if not isinstance(got, (str, Path)) or not Path(got).is_file():
        raise AssertionError(f"return the path of the ONNX file you wrote; got {got!r}.")
    x, y = setup["x_test"], setup["y_test"]
    fp32 = lab_deployment.onnx_accuracy(setup["fp32"], x, y)
    mine = lab_deployment.onnx_accuracy(got, x, y)
    if mine < fp32 - ACCURACY_SLACK_PTS:
        broken = lab_deployment.onnx_accuracy(setup["broken"], x, y)
        raise AssertionError(f"accuracy {mine:.1f}% vs FP32 {fp32:.1f}% (broken model {broken:.1f}%): still more "
                             f"than {ACCURACY_SLACK_PTS} points lost. Look at what the calibration data went through.")
    batch = x[:64]
    ratio = lab_deployment.speed_ratio(got, setup["broken"], batch)
    if ratio < MIN_SPEEDUP:
        raise AssertionError(f"accurate ({mine:.1f}%), but only {ratio:.2f}x the broken model's speed at batch 64 "
                             f"(need >= {MIN_SPEEDUP}). Are the activations still int8? Do DQ->Conv->Q fuse?")
    print(f"  accuracy {mine:.1f}% (FP32 {fp32:.1f}%), {ratio:.1f}x faster than the broken model")


register(
    Exercise(
        id="lab09.gencode", title="nvcc flags for this GPU",
        spec=lambda cc: arch_mismatch.gencode_flags(cc), cases=_gencode_cases,
        hint="SASS for the device itself (code=sm_XY) plus its PTX (code=compute_XY) so newer GPUs can JIT it; "
             "XY is major*10 + minor.",
        compare=lambda got, exp: _same_list(got, exp),
    ),
    Exercise(
        id="lab09.ema_scale", title="a correct running scale",
        spec=ema_scales_spec, cases=_ema_cases, compare="close", rtol=1e-5, atol=1e-7,
        hint="Reduce each batch to its amax first; then blend once: s = m*s + (1-m)*amax. Never add the blend "
             "to s. The first batch sets s; divide by 127 at the end.",
    ),
    Exercise(
        id="lab09.fix_deployment", title="fix the slow, inaccurate INT8 deployment",
        spec=_fix_spec, cases=_fix_cases, compare=compare_fix, plot=False,
        hint="Calibrate on inputs preprocessed exactly like the test inputs; on ORT's CPU use uint8 activations "
             "and per-channel weights (helpers.deploy.ort_backend.quantize_static_qdq).",
    ),
)


def _same_list(got: Any, expected: list[str]) -> None:
    """Exact comparison of two lists of command-line options, explained."""
    if not isinstance(got, list) or not all(isinstance(g, str) for g in got):
        raise AssertionError(f"return a list of strings such as {expected}; got {got!r}.")
    if got != expected:
        raise AssertionError(f"yours {got} vs expected {expected}.")
