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
