"""helpers.model_quant.diagnose: the drop carries its paired-bootstrap spread over the test samples, and a drop
inside its spread is printed as "not resolved at this noise", not as a loss (planted per-sample results, then
the checklist on the fragile ResNet)."""

from __future__ import annotations

import numpy as np
import pytest

from helpers.findings import NOT_RESOLVED
from helpers.model_quant import diagnose
from tests.support.trained import data, resnet  # noqa: F401  (fixtures)


def planted(n: int, fp32_only: int, quant_only: int, both: int) -> diagnose.Diagnosis:
    """A Diagnosis of two models right on `both` samples and each alone on a few others, with no layer rows."""
    a, b = np.zeros(n, bool), np.zeros(n, bool)
    a[:both] = b[:both] = True
    a[both:both + fp32_only] = True
    b[both + fp32_only:both + fp32_only + quant_only] = True
    return diagnose.Diagnosis(100 * a.mean(), 100 * b.mean(), [], fp32_correct=a, quant_correct=b)


def test_a_drop_inside_its_spread_is_not_resolved(capsys):
    """Old behaviour: 'drop 1.5 points' printed, no spread, the table read as a loss to explain."""
    d = planted(1000, fp32_only=80, quant_only=65, both=800)
    assert d.drop == pytest.approx(1.5) and d.drop_spread.contains(0.0) and not d.resolved
    assert d.extra() == {"lo": d.drop_spread.lo, "hi": d.drop_spread.hi,
                         "spread": "paired bootstrap 95% over 1000 test samples"}
    assert NOT_RESOLVED in d.summary() and "resolved loss." not in d.summary()
    d.show()
    out = capsys.readouterr().out
    assert NOT_RESOLVED in out and "no resolved loss to explain" in out and "spread over the model" not in out
    d.recommendations = ["layer2.conv1: use per-channel weights"]
    d.show()
    assert "not the cause of a loss" in capsys.readouterr().out


def test_a_drop_beyond_its_spread_is_a_loss(capsys):
    d = planted(1000, fp32_only=60, quant_only=0, both=900)
    assert d.drop_spread.lo > 0 and d.resolved
    assert d.summary().endswith("a resolved loss.") and NOT_RESOLVED not in d.summary()
    d.show()
    assert "the drop is spread over the model" in capsys.readouterr().out
    gain = planted(1000, fp32_only=0, quant_only=60, both=900)
    assert gain.drop_spread.hi < 0 and "resolved above FP32" in gain.summary()


def test_without_per_sample_results_it_says_the_noise_is_unknown():
    """Backward compatible: the four positional fields still make a Diagnosis (chapter 11 reads .drop)."""
    d = diagnose.Diagnosis(97.0, 90.0, [], [])
    assert d.drop == pytest.approx(7.0) and d.drop_spread is None and not d.resolved and d.extra() == {}
    assert "no spread" in d.summary() and NOT_RESOLVED not in d.summary()


def test_accuracy_gap_is_in_points_over_the_same_samples():
    a, b = np.ones(500, bool), np.ones(500, bool)
    b[:50] = False
    s = diagnose.accuracy_gap(a, b)
    assert s.lo > 5 and s.hi < 15 and "500 test samples" in s.method


def test_diagnose_scores_both_models_on_the_same_test_samples(resnet, data):
    pytest.importorskip("pytorch_quantization")
    from helpers.model_quant import ptq

    bad = diagnose.make_fragile(resnet, "layer2.conv1", "layer2.conv2", factor=64.0)
    report = diagnose.diagnose(bad, ptq.ptq(bad, data, method="max", per_channel=False), data)
    n = len(data.test)
    assert report.fp32_correct.shape == report.quant_correct.shape == (n,)
    assert report.fp32_acc == pytest.approx(100 * report.fp32_correct.mean())
    assert report.quant_acc == pytest.approx(100 * report.quant_correct.mean())
    s = report.drop_spread
    assert s.lo <= report.drop <= s.hi and s.method == f"paired bootstrap 95% over {n} test samples"
    assert s.lo > 0 and report.summary().endswith("a resolved loss.")  # the planted channel costs far more than noise
    assert set(report.extra()) == {"lo", "hi", "spread"}
