"""The mixed-precision curve (chapters 7 and 10) carries each k's loss against FP32 with its paired bootstrap."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("pytorch_quantization")
from helpers.model_quant import ptq, sensitivity  # noqa: E402
from tests.support.trained import data, resnet  # noqa: E402,F401  (fixtures)


def test_each_k_carries_its_paired_spread_against_fp32(resnet, data):  # noqa: F811
    q = ptq.ptq(resnet, data, method="max", per_channel=False)
    order = sensitivity.ranking(sensitivity.layer_sensitivity(q, data, metric="sqnr"))
    rows = sensitivity.mixed_precision_curve(q, data, order, ks=[0, len(order)])
    every_fp = rows[-1]
    assert every_fp["vs FP32 pts"] == pytest.approx(0.0, abs=1e-6)
    assert every_fp["vs FP32 spread"].lo == every_fp["vs FP32 spread"].hi == pytest.approx(0.0, abs=1e-6)
    all_int8 = rows[0]
    s = all_int8["vs FP32 spread"]
    assert s.lo <= all_int8["vs FP32 pts"] <= s.hi and "paired bootstrap" in s.method
    assert all_int8["accuracy %"] == pytest.approx(every_fp["accuracy %"] + all_int8["vs FP32 pts"], abs=1e-4)
    assert np.array_equal(all_int8["right"], ptq.score(q, data)[1])  # the model is left all-quantized
    ptq.set_quant_enabled(q, False)
    assert np.array_equal(every_fp["right"], ptq.score(q, data)[1])
