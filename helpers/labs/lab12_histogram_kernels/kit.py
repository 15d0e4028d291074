"""Lab 12 on the student's side: run a histogram kernel traced in the simulator (the shared traced runs),
judge exact counts, data races, privatised bins and the calibrators' amax; the GPU speed checks; and what
the lab shows (amax from your kernel, GPU timings in interleaved rounds with their spread, stored H200 numbers,
speed-up sentences that say "not resolved" inside the noise). No answers live here.

Serves: lab12.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from helpers import findings
from helpers.grading import kernel_perf, speed_of_light
from helpers.grading.traced import Run, decode, launch, race_free, values
from helpers.kernels import histogram

NAMES = ("x", "counts")
SPEEDUPS = {"lab12.shared_over_global": ("shared", "global"), "lab12.shared_over_histc": ("shared", "torch_histc")}
EXERCISES = {"global": "lab12.global_atomics", "shared": "lab12.shared_bins"}  # the speed-of-light rows
LIGHT_SHAPE = f"{histogram.GPU_N >> 20}M values, {histogram.MAX_BINS} bins"  # the speed check's shape
RATE_NAMES = {"shared": "privatised (shared-memory) kernel", "global": "the global-atomics kernel",
              "torch_histc": "torch.histc"}


def run(fn: Any, x: np.ndarray, num_bins: int) -> dict:
    """kernel[blocks, 256](x, counts, width), traced; the bin width is the course Histogram's."""
    width = np.float64(histogram.reference(x, num_bins).bin_width)
    blocks, threads = histogram.grid(x.size)
    return launch(fn, blocks, threads, (x, np.zeros(num_bins, np.int32), width), 1)


def same_amax(run_: Run, expected: dict) -> None:
    """Fail unless the calibrators give the same amax from your counts as from the course's histogram."""
    yours = histogram.amaxes(histogram.from_counts(run_.out, float(expected["max_abs"])))
    bad = {k: (yours[k], v) for k, v in expected["amax"].items() if yours[k] != v}
    if bad:
        raise AssertionError(f"your counts give other amax values (yours, expected): {bad}.")


def privatised(run_: Run) -> None:
    """Fail unless bins are counted in shared memory and global memory gets at most one update per bin a block."""
    updates = sum(1 for a in run_.trace.accesses if a.space == "global" and a.write)
    blocks = len({a.block for a in run_.trace.accesses})
    nbins, n = run_.out.size, int(run_.out.sum())
    if not any(a.space == "shared" for a in run_.trace.accesses) or updates > blocks * nbins:
        raise AssertionError(
            f"the counts are right, but your kernel made {updates} updates to global bins for {n} values. "
            f"Count in a block's own bins in shared memory, then add each bin to global memory once: at "
            f"most {blocks} blocks x {nbins} bins = {blocks * nbins} updates.")


def compare_global(got: Any, expected: dict) -> None:
    """Exact counts, no races, same calibrated amax."""
    r = decode(got, NAMES)
    values(r, expected["counts"])
    race_free(r)
    same_amax(r, expected)


def compare_shared(got: Any, expected: dict) -> None:
    """Exact counts, no races, privatised bins, same calibrated amax."""
    r = decode(got, NAMES)
    values(r, expected["counts"])
    race_free(r)
    privatised(r)
    same_amax(r, expected)


def _perf(fn: Any, variant: str) -> tuple[float, float, str]:
    """Your histogram kernel vs the reference of the same kind, 16M values into 2048 bins."""
    from numba import cuda

    x = histogram.activations(np.random.default_rng(0), histogram.GPU_N)
    width = histogram.reference(x, histogram.MAX_BINS).bin_width
    xd, counts = cuda.to_device(x), cuda.device_array(histogram.MAX_BINS, np.int32)
    blocks, threads = histogram.grid(histogram.GPU_N)
    ref = histogram.KERNELS[variant]
    return kernel_perf.perf_ratio(lambda: fn[blocks, threads](xd, counts, width),
                                  lambda: ref[blocks, threads](xd, counts, width), 0.8,
                                  f"16M values, {histogram.MAX_BINS} bins ({variant} reference)",
                                  lambda s: speed_of_light.note(EXERCISES[variant], LIGHT_SHAPE, s))


def perf_global(fn: Any) -> tuple[float, float, str]:
    """Speed against the global-atomics reference."""
    return _perf(fn, "global")


def perf_shared(fn: Any) -> tuple[float, float, str]:
    """Speed against the shared-bins reference."""
    return _perf(fn, "shared")


def calibrated(kernel: Any, x: np.ndarray, num_bins: int) -> list[dict]:
    """Run your kernel (simulator or GPU) on x; the calibrators' amax from its counts and from the course's own."""
    ref = histogram.reference(x, num_bins)
    counts = histogram.numba_histogram(x, np.zeros(num_bins, np.int32), ref.bin_width, kernel=kernel)
    yours = histogram.amaxes(histogram.from_counts(counts, ref.max_seen))
    return [{"calibrator": k, "amax from your kernel": f"{yours[k]:.6g}", "amax, course Histogram": f"{v:.6g}",
             "identical": yours[k] == v} for k, v in histogram.amaxes(ref).items()]


def measure_and_show(global_kernel: Any, shared_kernel: Any) -> dict[str, float]:
    """GPU: time both kernels and torch.histc on 16M values in interleaved rounds; record lab12.* (rates and
    speed-ups, each with the rounds' spread) and print them, the speed-ups as sentences from the records."""
    from helpers import bench

    print(f"Histogram of {histogram.GPU_N:,} values into {histogram.MAX_BINS} bins, {histogram.ROUNDS} "
          "interleaved rounds...")
    timed = histogram.measure({"global": global_kernel, "shared": shared_kernel})
    for name in timed.seconds:
        value, rounds = timed.gvals(name)
        bench.record(f"lab12.{name}_gvals", value, "Gvalues/s", **rounds.extra())
        print(f"{name:12s} {value:8.2f} billion values/s (rounds: {rounds.lo:.2f}..{rounds.hi:.2f})")
    out = {}
    for name, (fast, slow) in SPEEDUPS.items():
        out[name], spread = timed.speedup(fast, slow)
        bench.record(name, out[name], "ratio", ratio_of=[fast, slow], **(spread.extra() if spread else {}))
    speedup_sentences()
    return out


RATE_NAMES_ZH = {"shared": "私有化（共享内存）内核", "global": "全局原子操作内核", "torch_histc": "torch.histc"}


def _verdict(values: Mapping[str, float], zh: bool = False) -> str:
    """'faster (interleaved rounds: lo–hi×)', 'not resolved at this noise (…)', or the bare verdict saying that no
    spread is stored (in Chinese with `zh`)."""
    verdict = findings.faster_slower("r")
    word, s = (verdict.zh if zh else verdict)(values), findings.spread_of(values, "r")  # type: ignore[attr-defined]
    if s is None:
        return (f"{word}（仅凭单个数字；没有保存其波动范围，噪声未知）" if zh else
                f"{word} by the bare number; no spread is stored with it, so the noise is unknown")
    return f"{word}（交错轮次：{s.lo:.2f}–{s.hi:.2f} 倍）" if zh else f"{word} (interleaved rounds: {s.lo:.2f}–{s.hi:.2f}×)"


def speedup_sentences() -> list[str]:
    """Print and return one sentence per speed-up, from its record (this run's, else the stored run's), with its
    Chinese twin: a spread that holds 1 is "not resolved at this noise", never a speed-up."""
    return [findings.say(f"The {RATE_NAMES[fast]} runs at {{r:.2f}}× the speed of {RATE_NAMES[slow]}: {{verdict}}.",
                         {"r": name}, _verdict,
                         zh=f"{RATE_NAMES_ZH[fast]}的速度是{RATE_NAMES_ZH[slow]}的 {{r:.2f}} 倍：{{verdict}}。",
                         verdict_zh=lambda v: _verdict(v, zh=True))
            for name, (fast, slow) in SPEEDUPS.items()]


def without_gpu() -> None:
    """No GPU: say once what a GPU run would show, and where this machine's result of your kernels is."""
    print(f"No GPU here, so nothing is timed: on an NVIDIA GPU this cell checks both your kernels on "
          f"{histogram.GPU_N:,} activations and times them beside torch.histc. Your result on this machine is the "
          "simulator's: your checks and the amax table above.")


def show_stored() -> None:
    """No GPU, after your own result: the official solution's stored GPU rates (labelled, never as yours) and
    speed-ups, or say that none are stored yet."""
    from helpers import reference, tables

    card, recs = reference.nearest_holding("lab12.")
    if not recs:
        print("No GPU timings of lab 12 are stored yet (no stored GPU run has a lab12.* record); the next GPU "
              "reference run adds them.")
        return
    tables.show([{"kernel": r.name.removeprefix("lab12.").removesuffix("_gvals"), "rate": f"{r.value:.3g} {r.unit}"}
                 for r in recs if r.name.endswith("_gvals")],
                caption=f"The reference run, not yours: the official solution's kernels ({recs[0].device}, "
                        f"{recs[0].date}; {reference.card_note(card)})")
    speedup_sentences()
