"""Lab 9: the checks accept the reference answers and reject known-wrong variants."""

from __future__ import annotations

import numpy as np
import pytest

from helpers.chapters.ch10_beyond_int8.dynamic_quant import atomic_add_ema
from helpers.grading import CheckFailed, check
from helpers.chapters.ch11_troubleshooting import arch_mismatch
from helpers.labs.lab09_troubleshoot import deployment as lab_deployment


def test_gencode_accepts_reference_and_rejects_wrong():
    check("lab09.gencode", lambda cc: arch_mismatch.gencode_flags(cc), plot=False)
    wrong = {
        "fixed sm_80": lambda cc: ["-gencode", "arch=compute_80,code=sm_80", "-gencode", "arch=compute_80,code=compute_80"],
        "no PTX": lambda cc: arch_mismatch.gencode_flags(cc, ptx=False),
        "one string": lambda cc: f"-arch=sm_{cc[0]}{cc[1]}",
        "minor and major swapped": lambda cc: arch_mismatch.gencode_flags((cc[1], cc[0])) if cc[1] else ["x"],
    }
    for name, fn in wrong.items():
        with pytest.raises(CheckFailed):
            check("lab09.gencode", fn, plot=False)


def _ema(batches, m):
    out, run = [], None
    for b in batches:
        a = float(np.abs(b).max())
        run = a if run is None else m * run + (1 - m) * a
        out.append(run / 127)
    return np.asarray(out, np.float32)


def test_ema_accepts_reference_and_rejects_wrong():
    check("lab09.ema_scale", _ema, plot=False)
    wrong = {
        "atomicAdd of the EMA (the seed)": lambda b, m: np.minimum(atomic_add_ema(b, m) / 127, 3e38).astype(np.float32),
        "momentum swapped": lambda b, m: _ema(b, 1 - m),
        "no division by 127": lambda b, m: _ema(b, m) * 127,
        "mean |x| instead of amax": lambda b, m: _ema([np.abs(x).mean(keepdims=True) for x in b], m),
        "starts from zero": lambda b, m: _ema([np.zeros(1, np.float32)] + list(b), m)[1:],
    }
    for name, fn in wrong.items():
        with pytest.raises(CheckFailed):
            check("lab09.ema_scale", fn, plot=False)


def test_fix_deployment_reference_passes_and_wrong_fixes_fail():
    setup = lab_deployment.prepare()
    check("lab09.fix_deployment", lab_deployment.fixed_deploy, plot=False)

    def still_miscalibrated(fp32, calib, out):  # fast, but the calibration bug is still there
        return lab_deployment.ort_quantize(fp32, out, [b * lab_deployment.PREPROCESSING_BUG for b in calib],
                                           uint8_activations=True, per_channel=True)

    def accurate_but_trt_style(fp32, calib, out):  # accurate, but still unfused on ORT's CPU
        from helpers.models.train import trained_model

        return lab_deployment.trt_style_qdq(trained_model("resnet_small", progress=False), calib, out)

    for fn in (still_miscalibrated, accurate_but_trt_style):
        with pytest.raises(CheckFailed):
            check("lab09.fix_deployment", fn, plot=False)
    with pytest.raises(CheckFailed, match="not an INT8 model"):  # the FP32 model: fast enough, accurate, not INT8
        check("lab09.fix_deployment", lambda fp32, calib, out: fp32, plot=False)
    with pytest.raises(CheckFailed, match="path"):
        check("lab09.fix_deployment", lambda fp32, calib, out: None, plot=False)
    assert setup["broken"].exists()
