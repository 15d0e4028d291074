"""check(): correct answers pass, known-wrong ones are rejected with the first differing element."""

from __future__ import annotations

import numpy as np
import pytest

from helpers.errors import InputError
from helpers.grading import Case, CheckFailed, check, get
from helpers.grading.check import verdict


def q_right(x, scale, zero_point=0):
    return np.clip(np.rint(x / scale) + zero_point, -128, 127).astype(np.int8)


def q_float64(x, scale, zero_point=0):
    v = np.rint(x.astype(np.float64) / np.float64(scale)) + zero_point
    return np.clip(v, -128, 127).astype(np.int8)


def q_zero_point_flipped(x, scale, zero_point=0):
    return np.clip(np.rint(x / scale) - zero_point, -128, 127).astype(np.int8)


def q_no_clamp(x, scale, zero_point=0):
    return (np.rint(x / scale) + zero_point).astype(np.int8)


def q_half_away(x, scale, zero_point=0):
    v = x / scale
    return np.clip(np.sign(v) * np.floor(np.abs(v) + 0.5) + zero_point, -128, 127).astype(np.int8)


def q_truncate(x, scale, zero_point=0):
    return np.clip((x / scale).astype(np.int32) + zero_point, -128, 127).astype(np.int8)


def q_wrong_dtype(x, scale, zero_point=0):
    return np.clip(np.rint(x / scale) + zero_point, -128, 127).astype(np.int32)


def dq_right(q, scale, zero_point=0):
    return (q.astype(np.float32) - zero_point) * scale


def dq_zero_point_flipped(q, scale, zero_point=0):
    return (q.astype(np.float32) + zero_point) * scale


def dq_int8_overflow(q, scale, zero_point=0):
    return ((q - zero_point) * scale).astype(np.float32)


def s_right(x):
    m = float(np.abs(x).max())
    return m / 127 if m else 1.0


def s_over_128(x):
    m = float(np.abs(x).max())
    return m / 128 if m else 1.0


def s_positive_max_only(x):
    m = float(x.max())
    return m / 127 if m else 1.0


def s_zero_for_zeros(x):
    return float(np.abs(x).max()) / 127


@pytest.mark.parametrize("exercise, fn", [
    ("lab00.quantize", q_right), ("lab00.quantize", q_float64),
    ("lab00.dequantize", dq_right), ("lab00.scale", s_right),
])
def test_correct_answers_pass(exercise, fn) -> None:
    assert check(exercise, fn, plot=False).passed


@pytest.mark.parametrize("exercise, fn, case", [
    ("lab00.quantize", q_zero_point_flipped, "zero point 10"),
    ("lab00.quantize", q_no_clamp, "outliers beyond the grid"),
    ("lab00.quantize", q_half_away, "exact ties"),
    ("lab00.quantize", q_truncate, "exact ties"),
    ("lab00.quantize", q_wrong_dtype, "values on the grid"),
    ("lab00.dequantize", dq_zero_point_flipped, "zero point -20"),
    ("lab00.dequantize", dq_int8_overflow, "zero point -20"),
    ("lab00.scale", s_over_128, "largest value positive"),
    ("lab00.scale", s_positive_max_only, "largest magnitude negative"),
    ("lab00.scale", s_zero_for_zeros, "all zeros"),
])
def test_known_wrong_answers_are_rejected(exercise, fn, case) -> None:
    with pytest.raises(CheckFailed) as err:
        check(exercise, fn, plot=False)
    assert case in str(err.value) and "Hint:" in str(err.value)


def test_message_names_the_first_differing_element() -> None:
    v = verdict(get("lab00.quantize"), q_no_clamp)
    assert not v.passed and v.case == "outliers beyond the grid"
    assert "at (0,): yours 12 vs expected -128" in v.message
    v = verdict(get("lab00.quantize"), q_wrong_dtype)
    assert "dtype: yours int32 vs expected int8" in v.message


def test_student_exception_and_missing_return_are_reported() -> None:
    def boom(x, scale, zero_point=0):
        raise ZeroDivisionError("oops")

    v = verdict(get("lab00.quantize"), boom)
    assert not v.passed and "ZeroDivisionError: oops" in v.message
    v = verdict(get("lab00.scale"), lambda x: None)
    assert not v.passed and "forget to return" in v.message
    v = verdict(get("lab00.quantize"), lambda x, s, z=0: None)
    assert not v.passed and "forget to return" in v.message


def test_not_implemented_propagates_and_non_callable_is_explained() -> None:
    def stub(x, scale, zero_point=0):
        raise NotImplementedError("Not implemented yet. Hint: h")

    with pytest.raises(NotImplementedError, match="Hint: h"):
        check("lab00.quantize", stub, plot=False)
    v = verdict(get("lab00.quantize"), q_right(np.ones(2, np.float32), 1.0))
    assert not v.passed and "without calling it" in v.message


def test_own_cases_replace_visible_ones() -> None:
    x = np.array([2.5, 3.5], np.float32)
    with pytest.raises(CheckFailed, match="mine"):
        check("lab00.quantize", q_half_away, plot=False, cases=[Case("mine", (x, 1.0, 0))])
    with pytest.raises(InputError, match="Case"):
        check("lab00.quantize", q_right, cases=[(x, 1.0)])


def test_unknown_exercise_is_a_clear_error() -> None:
    with pytest.raises(InputError, match="no exercise called"):
        get("lab00.nope")
    with pytest.raises(InputError, match="look like"):
        get("quantize")


def test_failed_check_draws_yours_expected_difference(monkeypatch) -> None:
    drawn = []
    monkeypatch.setattr("helpers.grading.feedback.plot_difference",
                        lambda got, exp, title="": drawn.append((got.shape, title)))
    with pytest.raises(CheckFailed):
        check("lab00.quantize", q_no_clamp)
    assert drawn == [((6,), "lab00.quantize (outliers beyond the grid)")]


def test_plot_difference_draws_three_panels() -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from helpers.grading.feedback import plot_difference

    fig = plot_difference(np.array([1, 2, 3], np.int8), np.array([1, 2, 2], np.int8), "t")
    assert [ax.get_title() for ax in fig.axes] == ["yours", "expected", "yours − expected"]
    assert len(fig.axes[2].lines) == 2  # the difference, and circles on the element that differs
    fig2 = plot_difference(np.zeros((3, 4)), np.eye(3, 4), "2-D")
    assert len(fig2.axes) == 6  # three images and their colour bars
    plt.close("all")
