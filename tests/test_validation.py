"""helpers.validation and helpers.errors: every bad input gets an error that names the fix."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from helpers import errors, validation as v


def test_float_checks():
    v.require_float(np.zeros(2, np.float32))
    v.require_float(torch.zeros(2))
    with pytest.raises(errors.InputError, match="floating point.*astype"):
        v.require_float(np.zeros(2, np.int8))
    with pytest.raises(errors.InputError, match="numpy array or torch tensor"):
        v.require_float([1.0, 2.0])


def test_empty_nan_axis_range():
    with pytest.raises(errors.InputError, match="empty"):
        v.require_nonempty(np.zeros((0, 3)))
    with pytest.raises(errors.InputError, match="NaN or Inf"):
        v.require_finite(torch.tensor([1.0, float("nan")]))
    assert v.normalize_axis(-1, 3) == 2
    with pytest.raises(errors.InputError, match="out of range"):
        v.normalize_axis(3, 3)
    with pytest.raises(errors.InputError, match="2..16"):
        v.require_int_range(1, 2, 16, "bits")
    with pytest.raises(errors.InputError, match="int8"):
        v.require_dtype(np.zeros(2, np.float32), ("int8",))


def test_missing_package_error_names_the_install_line():
    with pytest.raises(errors.MissingPackageError, match="pip install nope"):
        errors.require_package("no_such_module_xyz", "pip install nope")
    assert errors.optional_package("no_such_module_xyz") is None


def test_no_gpu_error_says_what_to_do():
    msg = str(errors.NoGPUError("The dp4a kernel"))
    assert "dp4a" in msg and "reference" in msg


def test_skipped_prints_reason(capsys):
    errors.skipped("TensorRT engine build", "TensorRT is not installed", "pip install tensorrt")
    assert "Skipped: TensorRT engine build (TensorRT is not installed)" in capsys.readouterr().out


@pytest.mark.parametrize("value, choices", [(4.0, (4, 8)), (True, (0, 1)), (np.zeros(2), (0, 1)), ("8", (4, 8))])
def test_a_choice_is_not_stood_in_for_by_a_float_a_bool_an_array_or_text(value, choices):
    with pytest.raises(errors.InputError, match="must be one of"):
        v.require_choice(value, choices, "bits")


def test_a_choice_of_the_right_kind_is_taken():
    v.require_choice(np.int64(4), (4, 8), "bits")
    v.require_choice(0.5, (0.5, 1.0), "alpha")
    v.require_choice(True, (True, False), "flag")


@pytest.mark.parametrize("value", [True, 2.0, 0, "3"])
def test_a_size_must_be_a_whole_number_at_least_low(value):
    with pytest.raises(errors.InputError, match="whole number >= 1"):
        v.require_size(value, "n")


def test_a_size_is_returned_as_an_int():
    assert type(v.require_size(np.int32(3), "n")) is int and v.require_size(0, "n", low=0) == 0


@pytest.mark.parametrize("value", [float("nan"), float("inf"), "1", True, -0.5, 1.5])
def test_a_real_must_be_a_finite_number_in_range(value):
    with pytest.raises(errors.InputError, match=r"finite number in \[0, 1\]"):
        v.require_real(value, "q", 0.0, 1.0)


@pytest.mark.parametrize("value", [3, 0, 64, 8.0, True])
def test_a_power_of_two_up_to_high(value):
    with pytest.raises(errors.InputError, match="power of 2 up to 32"):
        v.require_power_of_two(value, "tile", 32)
    assert v.require_power_of_two(16, "tile", 32) == 16


def test_tensors_of_the_wrong_kind_are_refused():
    v.require_finite(torch.arange(4))  # an integer tensor is finite by construction
    with pytest.raises(errors.InputError, match="torch tensor"):
        v.require_tensor(np.zeros(2), "w")
    with pytest.raises(errors.InputError, match="outside 0..15"):
        v.require_values_in(torch.tensor([0, 16]), 0, 15, "codes", "pack 4-bit codes")
    v.require_values_in(torch.zeros(0), 0, 15, "codes", "")  # nothing to be out of range
    with pytest.raises(errors.InputError, match="integer tensor"):
        v.require_int_tensor(torch.zeros(2, dtype=torch.bool), "ids", (1,), "pass token ids")
    with pytest.raises(errors.InputError, match="K=8"):
        v.require_activations(torch.zeros(2, 4), 8)
    with pytest.raises(errors.InputError, match="float16 tensor of 4 values"):
        v.require_vector(torch.zeros(4), "scales", 4, torch.float16, torch.device("cpu"), "cast it")
