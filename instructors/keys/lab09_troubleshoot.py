"""Lab 9: diagnose and fix a broken deployment (wrong GPU architecture flags, a runaway scale update,
and an INT8 ONNX model that is slow and inaccurate on ONNX Runtime's CPU).

The fix is judged by its properties (helpers.labs.lab09_troubleshoot.kit): the file must be an INT8 model,
within 1.5 points of FP32, and 1.5x faster than the broken model, all measured by the grader.

Serves: lab09 (its answer key: specs, visible and hidden cases, hints).
"""

from __future__ import annotations

import numpy as np

from helpers.chapters.ch11_troubleshooting import arch_mismatch
from helpers.grading.exercise import Case, Exercise, register
from helpers.labs.lab09_troubleshoot import kit as deploy
from helpers.quant.calibrators import ema_amax


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


def gencode_spec(cc: tuple[int, int]) -> list[str]:
    """nvcc options: SASS for the device and its PTX."""
    return arch_mismatch.gencode_flags(cc)


def ema_scales_spec(batches: list[np.ndarray], momentum: float) -> np.ndarray:
    """INT8 scale after each batch: running EMA of the batch amax (first batch initialises it) / 127."""
    return ema_amax(batches, momentum) / 127.0


def fix_spec() -> None:
    """The fix is judged by its properties; there is no expected file."""
    return None


register(
    Exercise(
        id="lab09.gencode", title="nvcc flags for this GPU", spec=gencode_spec, cases=_gencode_cases,
        hidden=lambda: [Case("hidden: compute capability 10.0", ((10, 0),))],
        compare="exact", plot=False,
        hint="Ship machine code for this exact GPU and the portable PTX of the same architecture, so that newer "
             "GPUs can compile it at load time.",
        hints=("Two -gencode pairs with the same arch=compute_XY: one with code=sm_XY, one with code=compute_XY. "
               "XY is major·10 + minor.",),
    ),
    Exercise(
        id="lab09.ema_scale", title="a correct running scale", spec=ema_scales_spec, cases=_ema_cases,
        hidden=lambda: [Case("hidden: one batch at 127", ([np.array([127.0], np.float32)], 0.9))],
        compare="close", rtol=1e-5, atol=1e-7,
        hint="Reduce each batch to one number first, then blend it into the running value once per batch.",
        hints=("The first batch's max |x| starts the running amax; afterwards running = m·running + (1−m)·amax. "
               "Replace the running value, never add to it; divide by 127 for the scale.",),
    ),
    Exercise(
        id="lab09.fix_deployment", title="fix the slow, inaccurate INT8 deployment", spec=fix_spec,
        cases=lambda: [Case("MNIST-1D ResNet, ORT CPU")], run=deploy.run_fix, compare=deploy.compare_fix,
        plot=False,
        hint="Two separate bugs: what the calibration data went through, and an INT8 layout that ONNX "
             "Runtime's CPU kernels cannot fuse.",
        hints=("Compare the batches broken_deploy calibrates on with the ones it was given. For the speed, find the "
               "diagnostic's finding about the activations' type, then read the options of quantize_static_qdq "
               "(chapter 9 measured which INT8 layout ORT's CPU kernels fuse).",),
    ),
)


