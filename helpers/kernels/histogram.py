"""The calibration histogram on the GPU: global atomics, then bins privatised in shared memory.

The bins are those of ``helpers.quant.calibrators.Histogram`` (chapter 6): |x| over [0, max |x|]
in fixed-width bins, bin = min(int(|x| / width), bins - 1) computed in float64. A kernel that fills
them exactly feeds the course's percentile, MSE and entropy calibrators unchanged.
Both kernels walk the input with a grid-stride loop and take ``counts`` zeroed, of at most
``MAX_BINS`` int32 bins. ``measure`` times them and torch.histc in interleaved rounds (``helpers.bench.interleaved``, ``Timed``): the rates
and speed-ups are medians over the rounds, with the rounds' spread (``helpers.spread``).

Serves: core — used by lab 12.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from numba import cuda, int32

from helpers.errors import InputError
from helpers.kernels import launch
from helpers.quant.calibrators import Histogram, amax_entropy, amax_percentile
from helpers.spread import INTERLEAVED, Spread, of_samples, paired_ratio
from helpers.validation import (require_array, require_choice, require_dtype, require_finite, require_float,
                                require_instance, require_int_range, require_ndim, require_nonempty, require_positive,
                                require_real, require_size)

MAX_BINS = 2048  # the calibrators' default: 8 KB of int32 bins in shared memory
THREADS = 256
GPU_N = 1 << 24  # 16M activations (64 MB) for the GPU timings
ROUNDS = 5  # interleaved timing rounds: every round times each histogram in turn


@cuda.jit
def hist_global(x, counts, width):
    """Every element adds 1 to its bin in global memory with an atomic."""
    last = counts.shape[0] - 1
    i = cuda.grid(1)
    while i < x.shape[0]:
        cuda.atomic.add(counts, min(int(abs(x[i]) / width), last), 1)
        i += cuda.gridsize(1)


@cuda.jit
def hist_shared(x, counts, width):
    """Each block counts into its own bins in shared memory, then adds its non-zero bins to global."""
    bins = cuda.shared.array(MAX_BINS, int32)
    nbins = counts.shape[0]
    tid = cuda.threadIdx.x
    for j in range(tid, nbins, cuda.blockDim.x):
        bins[j] = 0
    cuda.syncthreads()  # every bin is zero before anyone counts
    i = cuda.grid(1)
    while i < x.shape[0]:
        cuda.atomic.add(bins, min(int(abs(x[i]) / width), nbins - 1), 1)
        i += cuda.gridsize(1)
    cuda.syncthreads()  # every count of this block is in before the bins are read
    for j in range(tid, nbins, cuda.blockDim.x):
        if bins[j] > 0:
            cuda.atomic.add(counts, j, bins[j])


KERNELS = {"global": hist_global, "shared": hist_shared}


def grid(n: int, threads: int = THREADS) -> tuple[int, int]:
    """(blocks, threads): enough blocks to fill every SM (2 in the simulator), grid-stride over n."""
    n = require_size(n, "n")
    require_int_range(threads, 1, 1024, "threads (a block runs at most 1024)")
    return launch.grid_stride_blocks(n, threads, per_thread=4), threads


def activations(rng: np.random.Generator, n: int) -> np.ndarray:
    """Calibration-like float32 values: half of them ReLU zeros (all in bin 0), a heavy tail of outliers."""
    require_instance(rng, np.random.Generator, "rng", "pass np.random.default_rng(0).")
    n = require_size(n, "n")
    x = rng.standard_t(3, n).astype(np.float32)
    return np.where(rng.random(n) < 0.5, np.float32(0), x).astype(np.float32)


def reference(x: Any, num_bins: int = MAX_BINS) -> Histogram:
    """The course's own histogram of one batch (its counts are what a kernel must produce)."""
    if isinstance(num_bins, bool) or not isinstance(num_bins, (int, np.integer)) or not 1 <= num_bins <= MAX_BINS:
        raise InputError(f"num_bins must be an integer in 1..{MAX_BINS} (shared memory holds {MAX_BINS} "
                         f"int32 bins), got {num_bins!r}.")
    return Histogram(int(num_bins)).collect(x)


def from_counts(counts: Any, max_abs: float) -> Histogram:
    """A calibrator Histogram holding a kernel's counts over [0, max_abs], as Histogram.collect lays it out."""
    c = np.asarray(counts.copy_to_host() if hasattr(counts, "copy_to_host") else counts)
    if c.ndim != 1 or c.size == 0 or c.dtype.kind not in "iu" or (c < 0).any():
        raise InputError(f"counts must be a non-empty 1-D array of integer counts >= 0, got {c.dtype} {c.shape}; "
                         "pass the int32 bins the kernel filled (counts.cpu().numpy() for a torch tensor).")
    c = c.astype(np.int64)
    max_abs = require_real(max_abs, "max_abs (the batch's max |x|)", 0.0)
    top = float(max_abs) if max_abs > 0 else 1.0
    return Histogram(c.size, counts=c, edges=np.linspace(0.0, top, c.size + 1), max_seen=float(max_abs), batches=1)


def amaxes(hist: Histogram, percentile: float = 99.99) -> dict[str, float]:
    """The percentile and entropy calibrators' amax from one histogram."""
    require_instance(hist, Histogram, "hist", "build it with reference(x) or from_counts(counts, max_abs).")
    percentile = require_real(percentile, "percentile", 0.0, 100.0)
    return {f"percentile {percentile:g}": amax_percentile(hist, percentile), "entropy": amax_entropy(hist)}


def numba_histogram(x: Any, counts: Any, width: float, variant: str = "shared", kernel: Any = None) -> Any:
    """Fill zeroed int32 `counts` with the histogram of |x| (bin width `width`) by one kernel; returns counts.

    `kernel` (same arguments as the reference kernels) replaces the reference kernel `variant`.
    """
    require_choice(variant, tuple(KERNELS), "variant")
    _check_batch(x)
    require_array(counts, "counts")
    require_dtype(counts, ("int32",), "counts")
    require_ndim(counts, (1,), "counts")
    require_nonempty(counts, "counts")
    if int(counts.shape[0]) > MAX_BINS:
        raise InputError(f"at most {MAX_BINS} bins fit in shared memory, got {int(counts.shape[0])}.")
    if not hasattr(counts, "__cuda_array_interface__") and np.asarray(counts).any():
        raise InputError("counts must start at zero (the kernels add to them); pass np.zeros(bins, np.int32).")
    width = require_positive(width, "width (the bin width, max |x| / bins)")
    if kernel is not None and not hasattr(kernel, "__getitem__"):
        raise InputError(f"kernel must be a @cuda.jit kernel taking (x, counts, width), got {type(kernel).__name__}.")
    blocks, threads = grid(int(x.shape[0]))
    kern = KERNELS[variant] if kernel is None else kernel
    kern[blocks, threads](launch.as_numba(x), launch.as_numba(counts), np.float64(width))
    return counts


@dataclass(frozen=True)
class Timed:
    """Seconds per call of each histogram on `n` values, one entry per interleaved round."""

    n: int
    seconds: dict[str, tuple[float, ...]]

    def gvals(self, name: str) -> tuple[float, Spread]:
        """Billions of values a second of `name`: the median over the rounds, and the rounds' spread."""
        rates = [self.n / s / 1e9 for s in self.seconds[name] if s > 0]
        if not rates:
            raise InputError(f"every timed call of {name} took 0 s: time a larger batch.")
        return float(np.median(rates)), of_samples(rates, INTERLEAVED)

    def speedup(self, fast: str, slow: str) -> tuple[float, Spread | None]:
        """How many times faster `fast` ran than `slow`: the median of the rounds' slow ÷ fast time, its spread."""
        return paired_ratio(self.seconds[slow], self.seconds[fast])


def measure(kernels: dict[str, Any], n: int = GPU_N, num_bins: int = MAX_BINS, repeats: int = 20,
            rounds: int = ROUNDS) -> Timed:
    """GPU: time each kernel {name: kernel} and torch.histc on one batch, interleaved over `rounds` rounds of
    max(1, repeats // rounds) calls each (their median per round).

    Every kernel's counts must equal the course's Histogram first (AssertionError otherwise).
    """
    if not isinstance(kernels, dict) or not kernels or not all(hasattr(k, "__getitem__") for k in kernels.values()):
        raise InputError("kernels must be a non-empty {name: @cuda.jit kernel} dict, e.g. {'shared': hist_shared}.")
    n, repeats = require_size(n, "n"), require_size(repeats, "repeats")
    require_int_range(num_bins, 1, MAX_BINS, "num_bins")
    require_int_range(rounds, 2, 1000, "rounds (at least 2 give a spread)")
    import torch

    from helpers import bench
    from helpers.device import require_gpu

    require_gpu("Timing histogram kernels")
    x = activations(np.random.default_rng(0), n)
    ref = reference(x, num_bins)
    xt = torch.from_numpy(x).cuda()
    counts = torch.zeros(num_bins, dtype=torch.int32, device="cuda")
    xd, cd = cuda.as_cuda_array(xt), cuda.as_cuda_array(counts)
    blocks, threads = grid(n)
    width = float(ref.bin_width)
    per_round = max(1, repeats // rounds)
    fns: dict[str, Callable[[], Any]] = {}
    for name, kern in kernels.items():
        def fill(k: Any = kern) -> None:
            counts.zero_()
            k[blocks, threads](xd, cd, width)

        fill()
        cuda.synchronize()
        if not np.array_equal(counts.cpu().numpy(), ref.counts):
            raise AssertionError(f"the {name} kernel's counts differ from the course's Histogram on the GPU.")
        fns[name] = fill
    top = float(ref.max_seen)
    fns["torch_histc"] = lambda: torch.histc(xt.abs(), bins=num_bins, min=0.0, max=top)
    clocks = {k: ("torch" if k == "torch_histc" else "numba") for k in fns}
    # one warm-up round (compilation and clocks settle), then every round: one untimed call, per_round timed
    timed = bench.interleaved(fns, rounds=rounds, clock=clocks, warmup=1 + per_round, settle=1, per_round=per_round)
    return Timed(n, dict(timed.seconds))


def _check_batch(x: Any) -> None:
    """A non-empty 1-D float batch of finite activations (a GPU array's values are left to the kernel)."""
    require_array(x, "x")
    require_float(x, "x")
    require_ndim(x, (1,), "x")
    require_nonempty(x, "x")
    if not hasattr(x, "__cuda_array_interface__"):
        require_finite(x, "x")
