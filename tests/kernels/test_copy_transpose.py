"""Chapter 3 kernels against numpy: numba in the simulator here, cupy (and numba) on a GPU."""

from __future__ import annotations

import numpy as np
import pytest

from helpers.errors import InputError
from helpers.kernels import copy, transpose

RNG = np.random.default_rng(0)


@pytest.mark.parametrize("variant", copy.NUMBA_VARIANTS)
def test_numba_copies_match(variant):
    x = RNG.random(1000, dtype=np.float32)  # not a multiple of the block: tails are handled
    assert np.array_equal(copy.numba_copy(x, np.zeros_like(x), variant), x)


def test_strided_and_offset_copies_touch_only_their_elements():
    src = np.arange(200, dtype=np.float32) + 1
    out = copy.numba_strided(src, np.zeros_like(src), 50, 4)
    assert np.array_equal(out[::4], src[::4]) and not out[1::4].any()
    out = copy.numba_offset(src, np.zeros_like(src), 100, 3)
    assert np.array_equal(out[3:103], src[3:103]) and not out[:3].any() and not out[103:].any()


@pytest.mark.parametrize("variant", transpose.VARIANTS)
def test_numba_transposes_match(variant):
    a = RNG.random((40, 33), dtype=np.float32)  # partial tiles on both edges
    want = a if variant == "copy" else a.T
    assert np.array_equal(transpose.numba_transpose(a, np.zeros(want.shape, np.float32), variant), want)


def test_bad_inputs_are_explained():
    x = np.zeros(10, np.float32)
    with pytest.raises(InputError, match="same dtype"):
        copy.numba_copy(x, np.zeros(10, np.float64))
    with pytest.raises(InputError, match="variant"):
        copy.numba_copy(x, x.copy(), "fast")
    with pytest.raises(InputError, match="reaches element"):
        copy.numba_strided(x, x.copy(), 6, 2)
    with pytest.raises(InputError, match="divisible by 8"):
        copy.numba_copy(np.zeros(3, np.float32), np.zeros(3, np.float32), "ilp4_u64")
    with pytest.raises(InputError, match="shape"):
        transpose.numba_transpose(np.zeros((4, 8), np.float32), np.zeros((4, 8), np.float32), "padded")
    with pytest.raises(InputError, match="multiple of 32"):
        copy.numba_copy(x, x.copy(), threads=100)


def test_stencil_reference():
    x = np.arange(10, dtype=np.float32)
    out = copy.stencil_reference(x, 1)
    assert out[0] == 0 and out[-1] == 0 and out[1] == 3 and out[8] == 24


@pytest.mark.gpu
def test_cupy_copies_and_stencils_match():
    import cupy as cp

    x = cp.asarray(RNG.random(1001, dtype=np.float32))
    for v in copy.CUPY_VARIANTS:
        assert bool((copy.cupy_copy(x, cp.zeros_like(x), v) == x).all()), v
    big = cp.arange(400, dtype=cp.float32)
    out = copy.cupy_strided(big, cp.zeros_like(big), 100, 4)
    assert bool((out[::4] == big[::4]).all()) and not bool(out[1::4].any())
    out = copy.cupy_offset(big, cp.zeros_like(big), 300, 7)
    assert bool((out[7:307] == big[7:307]).all()) and not bool(out[:7].any())
    h = RNG.random(5000, dtype=np.float32)
    for v in ("plain", "restrict", "ldg"):
        got = copy.cupy_stencil(cp.asarray(h), cp.zeros(5000, cp.float32), 4, v).get()
        np.testing.assert_allclose(got, copy.stencil_reference(h, 4), rtol=1e-5, atol=1e-5)


@pytest.mark.gpu
def test_cupy_and_numba_transposes_on_gpu_match():
    import cupy as cp

    a = RNG.random((1000, 777), dtype=np.float32)
    for v in transpose.VARIANTS:
        want = a if v == "copy" else a.T
        got = transpose.cupy_transpose(cp.asarray(a), cp.zeros(want.shape, cp.float32), v)
        assert np.array_equal(got.get(), want), v
        got = transpose.numba_transpose(cp.asarray(a), cp.zeros(want.shape, cp.float32), v)
        assert np.array_equal(got.get(), want), v


@pytest.mark.gpu
def test_numba_copies_on_gpu_arrays():
    import cupy as cp

    x = cp.asarray(RNG.random(1 << 20, dtype=np.float32))
    for v in copy.NUMBA_VARIANTS:
        assert bool((copy.numba_copy(x, cp.zeros_like(x), v) == x).all()), v
