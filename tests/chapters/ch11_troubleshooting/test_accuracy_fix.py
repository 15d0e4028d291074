"""Chapter 11's fix loop is read from its own rows, with the test set's noise (helpers.chapters.ch11_troubleshooting.accuracy_fix)."""

from __future__ import annotations

import numpy as np
import pytest

from helpers.chapters.ch11_troubleshooting.accuracy_fix import reading, step_gains
from helpers.errors import InputError
from helpers.findings import NOT_RESOLVED
from helpers.model_quant.diagnose import Diagnosis

N = 400
FP32 = np.ones(N, dtype=bool)


def _row(step: str, right: int, per_sample: bool = True) -> dict:
    """A fix-loop row whose quantized model gets the first `right` of N samples right."""
    correct = np.arange(N) < right
    d = Diagnosis(100.0, 100.0 * right / N, [], fp32_correct=FP32 if per_sample else None,
                  quant_correct=correct if per_sample else None)
    return {"step": step, "accuracy %": d.quant_acc, "drop pts": d.drop, "diagnosis": d}


def test_a_gain_inside_the_noise_is_not_resolved_and_the_recovering_fix_is_named():
    steps = [_row("start: per-tensor weights, max", 240), _row("per-channel weights", 242),
             _row("keep layer1.conv2 in floating point", 398)]
    gains = step_gains(steps)
    assert [g["resolved"] for g in gains] == [False, True]
    assert gains[1]["gain pts"] == pytest.approx(39.0)
    lines = reading(steps, blown_input="layer1.conv2")
    assert NOT_RESOLVED in lines[0] and "+0.5 points" in lines[0]
    assert "resolved" in lines[1] and NOT_RESOLVED not in lines[1]
    assert "largest resolved gain came from 'keep layer1.conv2 in floating point'" in lines[2]
    assert lines[-1].startswith("After 3 attempt(s): FP32 100.0%  quantized 99.5%")


def test_a_recovery_by_another_layer_is_not_credited_to_the_blown_up_input():
    steps = [_row("start: per-tensor weights, max", 240), _row("keep fc in floating point", 390)]
    assert "not from 'keep layer1.conv2 in floating point'" in reading(steps, blown_input="layer1.conv2")[1]


def test_without_per_sample_results_nothing_is_called_resolved():
    steps = [_row("start", 240, per_sample=False), _row("per-channel weights", 390, per_sample=False)]
    lines = reading(steps, blown_input="layer1.conv2")
    assert "noise is unknown" in lines[0] and lines[1] == "No fix bought a gain larger than the test set's noise."


def test_no_rows_is_a_clear_error():
    with pytest.raises(InputError, match="fix_until_recovered"):
        reading([], blown_input="layer1.conv2")


def test_the_later_steps_are_named_from_the_rows_not_typed():
    """Old text, typed by hand: 'the later steps (a clipping calibrator, a layer kept in floating point) have to'."""
    steps = [_row("start: per-tensor weights, max", 240), _row("per-channel weights", 280),
             _row("percentile calibration", 300), _row("keep layer3.conv1 in floating point", 398)]
    lines = reading(steps, blown_input="layer1.conv2")
    assert ("After 'per-channel weights' (30.0 points still lost) the loop went on with 'percentile calibration', "
            "then 'keep layer3.conv1 in floating point'.") in lines
    from helpers import claims
    from helpers.chapters.ch11_troubleshooting import notes

    evidence = claims.judge(claims.get("ch11.accuracy_checklist"), dict(zip(notes.CLAIMS[2].needs, (40.0, 30.0, 0.5))))
    assert "clipping calibrator" not in evidence["evidence"] and "have to" not in evidence["evidence"]
    assert "later steps (named in its table above) took it to 0.5" in evidence["evidence"]
