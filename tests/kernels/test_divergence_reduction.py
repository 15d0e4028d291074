"""Chapter 4 kernels and tools: reductions, divergence, occupancy arithmetic, the simulator tracer."""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda, float32

from helpers.errors import InputError
from helpers.kernels import divergence, reduction, simtrace
from helpers.kernels.occupancy import HOPPER, occupancy

RNG = np.random.default_rng(0)


@pytest.mark.parametrize("variant", ["atomic", "shared", "interleaved"])
def test_numba_reductions_exact_on_integers(variant):
    x = RNG.integers(0, 10, 600).astype(np.float32)
    out = reduction.numba_sum(x, np.zeros(1, np.float32), variant)
    assert out[0] == x.sum()


def test_block_sums_and_shuffle_in_simulator_explained():
    x = RNG.integers(0, 10, 300).astype(np.float32)
    partial = np.zeros(2, np.float32)
    reduction.block_sums[2, reduction.THREADS](x, partial)
    assert np.array_equal(partial, reduction.block_sums_reference(x))
    with pytest.raises(InputError, match="warp shuffles"):
        reduction.numba_sum(x, np.zeros(1, np.float32), "shuffle")


@pytest.mark.parametrize("mode", [*divergence.MODES, "branch_free"])
def test_divergence_kernels_match_reference(mode):
    x = RNG.random(256, dtype=np.float32)
    out = divergence.numba_divergence(x, np.zeros_like(x), 3, mode, threads=128)
    want = divergence.reference(x, 3, "mod2" if mode == "branch_free" else mode, threads=128)
    np.testing.assert_allclose(out, want, rtol=1e-6)


def test_divergence_bad_iters():
    x = np.zeros(64, np.float32)
    with pytest.raises(InputError, match="iters"):
        divergence.numba_divergence(x, x.copy(), -1)


def test_paths_per_warp_counts_divergence():
    x = np.ones(64, np.float32)
    for mode, paths in (("mod2", 2), ("lane0", 2), ("warp_uniform", 1)):
        _, tr = simtrace.run_traced(divergence.BRANCHY[mode], 1, 64, x, np.zeros_like(x), 2, lines=True)
        assert max(tr.paths_per_warp().values()) == paths, mode


@cuda.jit
def _shift_without_barrier(x, out):
    s = cuda.shared.array(64, float32)
    t = cuda.threadIdx.x
    s[t] = x[t]
    out[t] = s[(t + 1) % 64]  # reads a neighbour's slot: needs cuda.syncthreads() before


def test_missing_barrier_fails_deterministically():
    x = np.arange(64, dtype=np.float32)
    for _ in range(5):
        (_, out), _ = simtrace.run_traced(_shift_without_barrier, 1, 64, x, np.zeros_like(x))
        assert np.isnan(out[:63]).all() and out[63] == 0  # every thread ran before its neighbour wrote


def test_simulated_rejects_non_kernels():
    with pytest.raises(InputError, match="@cuda.jit"):
        simtrace.simulated(print)


def test_occupancy_matches_the_calculator():
    assert occupancy(256, 32, 0).fraction == 1.0
    o = occupancy(32, 32, 0)
    assert (o.blocks_per_sm, o.fraction, o.limiter) == (32, 0.5, "block slots")
    o = occupancy(256, 128, 0)  # 128 regs x 256 threads = 32768 per block: two blocks
    assert (o.blocks_per_sm, o.limiter) == (2, "registers")
    o = occupancy(256, 32, 48 * 1024)  # (48 + 1 KiB reserved) per block: 4 in 228 KiB
    assert (o.blocks_per_sm, o.limiter) == (4, "shared memory")
    o = occupancy(1024, 64, 0)  # 64 x 1024 = 65536: exactly one block
    assert o.blocks_per_sm == 1 and o.fraction == 0.5
    with pytest.raises(InputError, match="threads_per_block"):
        occupancy(2048)
    with pytest.raises(InputError, match="shared_per_block"):
        occupancy(256, 32, HOPPER.max_shared_per_block + 1)


@pytest.mark.gpu
def test_cupy_and_numba_reductions_on_gpu():
    import cupy as cp

    x = cp.asarray(RNG.integers(0, 4, 1 << 20).astype(np.float32))
    want = float(x.sum())
    for v in reduction.VARIANTS:
        for run in (reduction.cupy_sum, reduction.numba_sum):
            out = cp.zeros(1, cp.float32)
            run(x, out, v)
            assert float(out[0]) == want, (run.__name__, v)


@pytest.mark.gpu
def test_cupy_divergence_on_gpu():
    import cupy as cp

    h = RNG.random(1 << 16, dtype=np.float32)
    for mode in (*divergence.MODES, "branch_free"):
        want = divergence.reference(h, 16, "mod2" if mode == "branch_free" else mode)
        for run in (divergence.cupy_divergence, divergence.numba_divergence):
            got = run(cp.asarray(h), cp.zeros(h.size, cp.float32), 16, mode)
            np.testing.assert_allclose(got.get(), want, rtol=1e-5)
