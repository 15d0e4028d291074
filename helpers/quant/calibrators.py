"""Calibrators written from scratch: choose the clipping point amax from observed activations.

- max: the largest |x| seen.
- percentile: the |x| below which a fraction p of the values lie (99.9, 99.99, 99.999).
- mse: the amax whose quantization minimises the mean squared error over the histogram.
- entropy: TensorRT's method; the amax whose 128-level (8-bit) quantized histogram has the smallest
  KL divergence from the clipped reference histogram (2048 bins).

Histogram methods share pytorch-quantization's conventions so they can be cross-checked against it:
a histogram of |x| over [0, max] with 2048 bins that grows (same bin width) when a later batch
exceeds the range; candidates start at bin 128.

Serves: core — used by chapters 5–12 and labs 05–09, 12.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from helpers.errors import InputError
from helpers.quant.core import is_torch
from helpers.validation import require_choice, require_finite, require_float, require_int_range, require_nonempty

METHODS = ("max", "percentile", "mse", "entropy")


def _abs_numpy(x: Any) -> np.ndarray:
    """|x| flattened as float64 numpy, after validation."""
    require_float(x)
    require_nonempty(x)
    require_finite(x)
    v = x.detach().cpu().numpy() if is_torch(x) else np.asarray(x)
    return np.abs(v.astype(np.float64)).ravel()


@dataclass
class Histogram:
    """A growing histogram of |x| over [0, edges[-1]] with fixed-width bins."""

    num_bins: int = 2048
    counts: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    edges: np.ndarray = field(default_factory=lambda: np.zeros(0))
    max_seen: float = 0.0
    batches: int = field(default=0)

    def __post_init__(self) -> None:
        """num_bins is a whole number >= 1; given counts and edges must fit each other."""
        require_int_range(self.num_bins, 1, 1 << 24, "num_bins")
        if self.counts.size and len(self.edges) != len(self.counts) + 1:
            raise InputError(f"a histogram with {len(self.counts)} counts needs {len(self.counts) + 1} edges, got "
                             f"{len(self.edges)}. Pass (counts, edges) as np.histogram returns them.")

    def collect(self, x: Any) -> "Histogram":
        """Add one batch; the first batch fixes the bin width, later ones add bins if they go further."""
        a = _abs_numpy(x)
        top = float(a.max())
        self.max_seen = max(self.max_seen, top)
        if self.counts.size == 0:
            hi = top if top > 0 else 1.0
            self.edges = np.linspace(0.0, hi, self.num_bins + 1)
            self.counts = np.zeros(self.num_bins, np.int64)
        elif top > self.edges[-1]:
            width = self.edges[1] - self.edges[0]
            extra = int(np.ceil((top - self.edges[-1]) / width))
            n = len(self.counts) + extra
            self.edges = np.arange(n + 1) * width
            self.counts = np.concatenate([self.counts, np.zeros(extra, np.int64)])
        width = self.edges[1] - self.edges[0]
        idx = np.minimum((a / width).astype(np.int64), len(self.counts) - 1)
        self.counts += np.bincount(idx, minlength=len(self.counts))
        self.batches += 1
        return self

    @property
    def bin_width(self) -> float:
        """Width of one bin."""
        self._require_data()
        return float(self.edges[1] - self.edges[0])

    def _require_data(self) -> None:
        """Raise a clear error when nothing was collected."""
        if self.counts.size == 0:
            raise InputError("the histogram is empty: call collect(x) on some activations first.")


def amax_max(x: Any, axis: int | None = None) -> Any:
    """Max calibration: max |x| (per tensor, or per channel along `axis`)."""
    a = x.detach().cpu().numpy() if is_torch(x) else np.asarray(x)
    require_float(a)
    require_nonempty(a)
    require_finite(a)
    if axis is None:
        return float(np.abs(a).max())
    from helpers.validation import normalize_axis

    ax = normalize_axis(axis, a.ndim)
    others = tuple(d for d in range(a.ndim) if d != ax)
    return np.abs(a).max(axis=others)


def amax_percentile(hist: Histogram, percentile: float = 99.99) -> float:
    """The upper edge of the bin where the cumulative share of |x| first reaches `percentile` %."""
    hist._require_data()
    if not 0 < percentile <= 100:
        raise InputError(f"percentile must be in (0, 100], got {percentile!r} (e.g. 99.99).")
    cdf = np.cumsum(hist.counts) / hist.counts.sum()
    idx = int(np.searchsorted(cdf, percentile / 100 * (1 - 1e-12)))
    return float(min(hist.edges[min(idx + 1, len(hist.edges) - 1)], hist.max_seen))


def _fake_quant_abs(v: np.ndarray, amax: np.ndarray, num_bits: int, unsigned: bool) -> np.ndarray:
    """Symmetric fake quantization of non-negative values v at each candidate amax (rows)."""
    qmax = 2.0 ** (num_bits - 1 + int(unsigned)) - 1
    scale = qmax / amax[:, None]
    return np.minimum(np.rint(v[None, :] * scale), qmax) / scale


def _check_candidates(hist: Histogram, start_bin: int, stride: int, first: int, method: str) -> None:
    """A search needs start_bin >= 1, stride >= 1, and bins from `first` on to have any candidate at all."""
    hist._require_data()
    require_int_range(start_bin, 1, 1 << 24, "start_bin")
    require_int_range(stride, 1, 1 << 24, "stride")
    if len(hist.counts) < first:
        raise InputError(f"{method} calibration evaluates candidates from bin {start_bin} on, but the histogram has "
                         f"only {len(hist.counts)} bins, so there would be no candidate. Use more bins "
                         f"(num_bins=2048, the default) or a smaller start_bin.")


def mse_curve(hist: Histogram, num_bits: int = 8, unsigned: bool = False, start_bin: int = 128,
              stride: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """(candidate amax, histogram-weighted MSE) with candidates at bin centres from start_bin on."""
    _check_candidates(hist, start_bin, stride, start_bin + 1, "MSE")
    require_int_range(num_bits, 2, 16, "num_bits")
    centers = (hist.edges[1:] + hist.edges[:-1]) / 2
    idx = np.arange(start_bin, len(centers), stride)
    cand = centers[idx]
    errs = np.empty(len(cand))
    for lo in range(0, len(cand), 256):  # chunks keep memory small
        q = _fake_quant_abs(centers, cand[lo:lo + 256], num_bits, unsigned)
        errs[lo:lo + 256] = ((q - centers[None, :]) ** 2 * hist.counts[None, :]).mean(axis=1)
    return cand, errs


def amax_mse(hist: Histogram, num_bits: int = 8, unsigned: bool = False, start_bin: int = 128,
             stride: int = 1) -> float:
    """MSE calibration: the candidate amax (a bin centre) with the smallest quantization MSE."""
    cand, errs = mse_curve(hist, num_bits, unsigned, start_bin, stride)
    return float(cand[int(np.argmin(errs))])


def kl_divergence(p: np.ndarray, q: np.ndarray) -> float:
    """KL(p || q) of two unnormalised histograms; inf where p > 0 and q = 0; NaN if q is all zero."""
    p = p / p.sum()
    qs = q.sum()
    if qs == 0:
        return float("nan")
    q = q / qs
    m = p > 0
    if np.any(q[m] == 0):
        return float("inf")
    return float(np.sum(p[m] * np.log(p[m] / q[m])))


def candidate_distributions(bins: np.ndarray, i: int, num_levels: int = 128,
                            tail: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(P, Q) for clipping at bin i: P is bins[:i] with bins[i:] folded into its last bin; Q merges
    bins[:i] into num_levels groups and spreads each group's count evenly over its non-empty bins."""
    b = np.asarray(bins, np.float64)
    p = b[:i].copy()
    p[-1] += b[i:].sum() if tail is None else tail
    level = np.digitize(np.arange(i), np.linspace(0, i, num_levels + 1)) - 1
    nonzero = b[:i] != 0
    sums = np.bincount(level[nonzero], weights=b[:i][nonzero], minlength=num_levels)
    count = np.bincount(level[nonzero], minlength=num_levels)
    q = np.where(nonzero, sums[level] / np.maximum(count[level], 1), 0.0)
    return p, q


def entropy_curve(hist: Histogram, num_bits: int = 8, unsigned: bool = False, start_bin: int = 128,
                  stride: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """(candidate amax, KL divergence) for TensorRT's entropy method over clipping bins i.

    For each i: the reference P is bins[:i] with everything beyond folded into bin i-1; the
    candidate Q merges bins[:i] into 2**(bits-1) levels and spreads each level's count evenly
    over its non-empty bins. Bin 0 is replaced by bin 1 first (zeros from ReLU would dominate).
    A candidate whose bins[:i] are all empty has no Q at all: its divergence is NaN.
    """
    _check_candidates(hist, start_bin, stride, start_bin, "entropy")
    require_int_range(num_bits, 2, 16, "num_bits")
    bins = hist.counts.astype(np.float64).copy()
    if len(bins) > 1:
        bins[0] = bins[1]
    nlevels = 1 << (num_bits - 1 + int(unsigned))
    suffix = np.concatenate([np.cumsum(bins[::-1])[::-1], [0.0]])  # suffix[i] = sum(bins[i:])
    cands, kls = [], []
    for i in range(start_bin, len(bins) + 1, stride):
        cands.append(hist.edges[i])
        kls.append(kl_divergence(*candidate_distributions(bins, i, nlevels, tail=suffix[i])))
    return np.array(cands), np.array(kls)


NAN_POLICIES = ("ignore", "pytorch_quantization")


def amax_entropy(hist: Histogram, num_bits: int = 8, unsigned: bool = False, start_bin: int = 128,
                 stride: int = 1, nan_policy: str = "ignore") -> float:
    """Entropy (KL) calibration: the clipping edge with the smallest divergence (last one on ties).

    nan_policy 'ignore' skips candidates without a Q (NaN divergence). 'pytorch_quantization'
    does what its 2.1.3 release does: np.argmin returns a NaN's position, so the last NaN
    candidate wins. On inputs with few distinct values (digits pixels: 17 levels) that is the
    first candidate, bin 128: amax collapses to 1/16 of the range.
    """
    require_choice(nan_policy, NAN_POLICIES, "nan_policy")
    cand, kls = entropy_curve(hist, num_bits, unsigned, start_bin, stride)
    rev = kls[::-1]
    if nan_policy == "ignore":
        if np.all(np.isnan(rev)):
            return float(hist.max_seen)
        pos = int(np.nanargmin(rev))
    else:
        pos = int(np.argmin(rev))
    return float(cand[len(kls) - 1 - pos])


def calibrate(batches: Any, method: str = "max", *, percentile: float = 99.99, num_bins: int = 2048,
              num_bits: int = 8, unsigned: bool = False) -> float:
    """amax from one array or an iterable of batches with the named method (per tensor)."""
    require_choice(method, METHODS, "method")
    if hasattr(batches, "shape"):
        batches = [batches]
    batches = list(batches)
    if not batches:
        raise InputError("no batches to calibrate on: pass an array or a list of arrays.")
    if method == "max":
        return max(amax_max(b) for b in batches)
    hist = Histogram(num_bins)
    for b in batches:
        hist.collect(b)
    if method == "percentile":
        return amax_percentile(hist, percentile)
    if method == "mse":
        return amax_mse(hist, num_bits, unsigned)
    return amax_entropy(hist, num_bits, unsigned)


def calibrate_all(batches: Any, *, percentiles: tuple[float, ...] = (99.9, 99.99, 99.999),
                  num_bins: int = 2048, num_bits: int = 8, unsigned: bool = False) -> dict[str, float]:
    """Every method's amax from one shared histogram: {'max', 'percentile 99.9', ..., 'mse', 'entropy'}."""
    if hasattr(batches, "shape"):
        batches = [batches]
    batches = list(batches)
    if not batches:
        raise InputError("no batches to calibrate on: pass an array or a list of arrays.")
    hist = Histogram(num_bins)
    for b in batches:
        hist.collect(b)
    out = {"max": hist.max_seen}
    for p in percentiles:
        out[f"percentile {p:g}"] = amax_percentile(hist, p)
    out["mse"] = amax_mse(hist, num_bits, unsigned)
    out["entropy"] = amax_entropy(hist, num_bits, unsigned)
    return out


# --- a running activation range (chapter 10's dynamic scales, lab 09) ---

def _check_momentum(momentum: float) -> None:
    """Momentum must be in [0, 1)."""
    if not isinstance(momentum, (int, float)) or not 0 <= momentum < 1:
        raise InputError(f"momentum must be a number in [0, 1), e.g. 0.9; got {momentum!r}.")


def ema_update(running: float, batch_amax: float, momentum: float = 0.9) -> float:
    """One correct EMA step: momentum * running + (1 - momentum) * batch_amax."""
    _check_momentum(momentum)
    return momentum * running + (1 - momentum) * batch_amax


def ema_amax(batches: Iterable[np.ndarray], momentum: float = 0.9) -> np.ndarray:
    """Running amax after each batch (the first batch initialises it), computed correctly."""
    _check_momentum(momentum)
    out: list[float] = []
    for b in batches:
        b = np.asarray(b, dtype=np.float32)
        require_nonempty(b, "batch")
        require_finite(b, "batch")
        amax = float(np.abs(b).max())
        out.append(amax if not out else ema_update(out[-1], amax, momentum))
    if not out:
        raise InputError("ema_amax needs at least one batch.")
    return np.asarray(out, dtype=np.float32)
