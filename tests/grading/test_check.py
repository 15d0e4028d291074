"""check(): correct answers pass, known-wrong ones are rejected with the first differing element; in a
notebook it prints one verdict and never raises; hints come in levels; answers travel as plain data."""

from __future__ import annotations

import importlib

import numpy as np
import pytest

from helpers.errors import InputError
from helpers.grading import Case, CheckFailed, check, get, hint, verify
from helpers.grading import wire
from helpers.grading.check import verdict
from helpers.grading.exercise import from_record
from instructors.batch import visible

check_module = importlib.import_module("helpers.grading.check")


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
    assert "Traceback" not in str(err.value)


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
    assert not v.passed and "ZeroDivisionError: oops" in v.message and v.status == "error"
    v = verdict(get("lab00.scale"), lambda x: None)
    assert not v.passed and "forget to return" in v.message
    v = verdict(get("lab00.quantize"), lambda x, s, z=0: None)
    assert not v.passed and "forget to return" in v.message


def test_a_timer_that_sets_the_call_counter_instead_of_calling_is_rejected() -> None:
    def forged(fn, cuda, warmup=3, repeats=10):
        fn.calls = warmup + repeats
        return [fn.ms] * repeats

    v = verdict(get("lab01.timer"), forged)
    assert not v.passed and "call fn() instead of changing its counter" in v.message


def test_stub_is_not_done_yet_and_non_callable_is_explained() -> None:
    def stub(x, scale, zero_point=0):
        raise NotImplementedError()

    assert verdict(get("lab00.quantize"), stub).status == "todo"
    with pytest.raises(NotImplementedError, match="not done yet"):
        check("lab00.quantize", stub, plot=False)
    v = verdict(get("lab00.quantize"), q_right(np.ones(2, np.float32), 1.0))
    assert not v.passed and "without calling it" in v.message


def test_in_a_notebook_check_prints_one_verdict_and_never_raises(monkeypatch, capsys) -> None:
    monkeypatch.setattr(check_module, "_in_notebook", lambda: True)

    def stub(x, scale, zero_point=0):
        raise NotImplementedError()

    def boom(x, scale, zero_point=0):
        return x / undefined_name  # noqa: F821 - the student's own bug

    assert check("lab00.quantize", stub) is None
    out = capsys.readouterr().out
    assert out.startswith("… lab00.quantize (quantize to INT8): not done yet. Write stub where it says YOUR CODE HERE")
    assert "Traceback" not in out and out.count("\n") == 1
    assert check("lab00.quantize", q_no_clamp, plot=False) is None
    out = capsys.readouterr().out
    assert out.startswith("✗ lab00.quantize") and "yours 12 vs expected -128" in out and "Hint:" in out
    assert "check.py" not in out and "Verdict(" not in out
    check("lab00.quantize", boom, plot=False)
    out = capsys.readouterr().out
    assert "NameError: name 'undefined_name' is not defined" in out and "in boom: return x / undefined_name" in out
    assert "helpers/grading" not in out and "exercise.py" not in out
    assert check("lab00.quantize", q_right) is None
    assert capsys.readouterr().out == "✓ lab00.quantize (quantize to INT8): all 6 visible case(s) pass.\n"


def test_hints_come_in_levels(capsys) -> None:
    hint("lab00.quantize")
    first = capsys.readouterr().out
    hint("lab00.quantize", 2)
    second = capsys.readouterr().out
    assert first.startswith("Hint 1/2 for lab00.quantize") and 'hint("lab00.quantize", 2)' in first
    assert second.startswith("Hint 2/2") and "np.rint" in second and "np.rint" not in first
    hint("lab00.quantize", 9)
    assert "here is the last one" in capsys.readouterr().out
    with pytest.raises(InputError, match="start at 1"):
        hint("lab00.quantize", 0)


def test_verify_runs_the_hidden_cases() -> None:
    verify("lab00.quantize", q_right)
    def visible_only(x, scale, zero_point=0):  # right on the visible cases, wrong with a zero point near -100
        return q_right(x, scale, max(zero_point, -20))
    check("lab00.quantize", visible_only, plot=False)
    with pytest.raises(CheckFailed, match="hidden: zero point -100"):
        verify("lab00.quantize", visible_only)


def test_students_copy_checks_without_the_answer_key() -> None:
    """The visible cases alone (as shipped) give the same verdicts, with no spec to call."""
    records = wire.loads(visible.render("lab00"))
    ex = from_record(next(r for r in records if r["id"] == "lab00.quantize"))
    assert ex.spec is None and ex.hidden is None
    assert verdict(ex, q_right).passed and verdict(ex, q_float64).passed
    v = verdict(ex, q_no_clamp)
    assert not v.passed and v.case == "outliers beyond the grid"
    with pytest.raises(InputError, match="answer key"):
        ex.expected(Case("new", (np.ones(2, np.float32), 1.0, 0)))


def test_plain_data_round_trip_and_refusals() -> None:
    x = {"a": (np.arange(6, dtype=np.int8).reshape(2, 3), 1.5, float("inf")), "b": [True, None, "s", b"\x00"]}
    y = wire.loads(wire.dumps(x))
    assert y["a"][0].dtype == np.int8 and (y["a"][0] == x["a"][0]).all() and y["a"][1:] == (1.5, float("inf"))
    assert y["b"] == [True, None, "s", b"\x00"]
    with pytest.raises(InputError, match="cannot send"):
        wire.dumps(object())
    with pytest.raises(InputError, match="dtype"):
        wire.dumps(np.array([object()]))
    with pytest.raises(InputError):
        wire.loads('{"$pickle": "x"}')


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
    monkeypatch.setattr(check_module, "_in_notebook", lambda: True)
    monkeypatch.setattr("helpers.grading.feedback.plot_difference",
                        lambda got, exp, title="": drawn.append((got.shape, title)))
    check("lab00.quantize", q_no_clamp)
    assert drawn == [((6,), "lab00.quantize (outliers beyond the grid)")]


def test_plot_difference_draws_three_panels_that_pass_the_figure_check() -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from helpers.figure_check import figure_problems
    from helpers.grading.feedback import plot_difference

    fig = plot_difference(np.array([201, 202, 203], np.uint8), np.array([201, 202, 202], np.uint8), "t")
    assert [ax.get_title() for ax in fig.axes] == ["yours", "expected", "yours − expected"]
    assert [(ax.get_xlabel(), ax.get_ylabel()) for ax in fig.axes][::2] == [
        ("element index", "value (array units)"), ("element index", "difference (array units)")]
    assert [line.get_label() for line in fig.axes[2].lines][-1] == "differs"  # circles on what differs
    assert figure_problems(fig) == []  # labels with units, the device label, y axes that include zero
    fig2 = plot_difference(np.zeros((3, 4)), np.eye(3, 4), "2-D")
    assert len(fig2.axes) == 6 and (fig2.axes[0].get_xlabel(), fig2.axes[0].get_ylabel()) == ("column (index)",
                                                                                             "row (index)")
    assert figure_problems(fig2) == []
    plt.close("all")


def test_ready_says_not_done_yet_for_an_untouched_stub(capsys) -> None:
    """Demo cells ask ready() first: a stub (function or numba kernel) is recognised without calling it."""
    from numba import cuda

    from helpers.grading import ready
    from helpers.grading.unfinished import is_stub

    def stub(x, scale, zero_point=0):
        """A docstring does not make it finished."""
        # YOUR CODE HERE
        raise NotImplementedError()

    @cuda.jit
    def kernel_stub(src, dst):
        raise NotImplementedError()

    @cuda.jit
    def kernel(src, dst):
        dst[0] = src[0]

    assert is_stub(stub) and is_stub(kernel_stub) and not is_stub(kernel) and not is_stub(q_right)
    assert not is_stub(lambda x: x) and not is_stub(np.rint) and not is_stub(3)
    assert ready(q_right, kernel) and capsys.readouterr().out == ""
    assert not ready(q_right, stub, kernel_stub)
    assert capsys.readouterr().out == "… not done yet: finish stub, kernel_stub above first, then run this cell again.\n"
