"""The measurements of chapter 4 (warp execution): divergence times, copy bandwidth vs block size and vs
shared memory per block (beside the theoretical occupancy), and the reductions; the CUDA simulator's traces of
divergence and of the reduction trees. ``experiments`` turns the GPU ones into table rows and records.

Serves: chapter 4.
"""

from __future__ import annotations

from typing import Any

from helpers import bench
from helpers.device import require_gpu
from helpers.chapters.ch03_memory_hierarchy.memory_bench import TIMING as COPY_TIMING
from helpers.kernels.cuda_source import bound_launch, cupy_module

DIVERGENCE_N = 1 << 24
DIVERGENCE_ITERS = 256
OCCUPANCY_N = 1 << 26  # 256 MiB float32
BLOCK_SIZES = (32, 64, 128, 256, 512, 1024)
SHARED_KIB = (0, 8, 16, 24, 32, 48, 64, 100, 160, 226)
REDUCE_N = 1 << 26
CHECK_N = 1 << 20
ATOMIC_TIMING = {"warmup": 1, "repeats": 5, "inner": 1}
TIMING = {"warmup": 3, "repeats": 20}
DIVERGENCE_ROUNDS = 15


def divergence_rounds(n: int = DIVERGENCE_N, iters: int = DIVERGENCE_ITERS,
                      rounds: int = DIVERGENCE_ROUNDS) -> bench.Rounds:
    """Every branch mode and the branch-free rewrite, cupy and numba, timed in interleaved rounds (each round times
    every kernel once, the median of three launches): a slow moment of the GPU touches them all alike, so that a
    slowdown is the median of the rounds' own ratios, with their spread."""
    require_gpu("the divergence benchmark")
    from helpers.kernels import divergence

    cp = cupy_module()
    x, out = cp.ones(n, dtype=cp.float32), cp.empty(n, dtype=cp.float32)
    nx, no = divergence.launch.as_numba(x), divergence.launch.as_numba(out)
    blocks = divergence.launch.blocks_for(n, 256)
    fns, clocks = {}, {}
    for mode in (*divergence.MODES, "branch_free"):
        fns[f"cupy_{mode}"] = lambda m=mode: divergence.cupy_divergence(x, out, iters, m)
        k = (divergence.branch_free if mode == "branch_free" else divergence.BRANCHY[mode])[blocks, 256]
        fns[f"numba_{mode}"] = lambda k=k: k(nx, no, iters)
        clocks[f"cupy_{mode}"], clocks[f"numba_{mode}"] = "cupy", "numba"
    return bench.interleaved(fns, rounds=rounds, clock=clocks, warmup=TIMING["warmup"], per_round=3)


def _registers(k: Any) -> int:
    """Registers per thread of a compiled cupy kernel (32 if the driver does not say)."""
    try:
        return int(k.num_regs) or 32
    except Exception:  # noqa: BLE001 - an attribute some drivers do not report
        return 32


def occupancy_sweep(n: int = OCCUPANCY_N) -> dict[str, Any]:
    """The simple copy's GB/s and theoretical occupancy per block size, and per KiB of shared memory."""
    require_gpu("the occupancy sweep")
    from helpers.kernels import copy
    from helpers.kernels.cuda_source import kernel
    from helpers.kernels.occupancy import limits_for_device, occupancy

    cp = cupy_module()
    src, dst = cp.ones(n, dtype=cp.float32), cp.empty(n, dtype=cp.float32)
    limits = limits_for_device()
    copy.cupy_copy(src, dst, "simple")  # compiles the kernel, so that its registers are known
    regs = _registers(kernel("copy", "copy_simple"))
    blocks: dict[int, dict[str, float]] = {}
    for t in BLOCK_SIZES:
        bw = bench.gbs(copy.cupy_copy_fn(src, dst, "simple", t), 8 * n, "cupy", **COPY_TIMING)
        blocks[t] = {"gbs": bw, "occupancy": occupancy(t, regs, 0, limits).fraction}
    shared: dict[int, dict[str, float]] = {}
    for kib in SHARED_KIB:
        fn = copy.cupy_copy_fn(src, dst, "simple", 256, kib * 1024)
        shared[kib] = {"gbs": bench.gbs(fn, 8 * n, "cupy", **COPY_TIMING),
                       "occupancy": occupancy(256, regs, kib * 1024, limits).fraction}
    return {"block_size": blocks, "shared_kib": shared, "registers": regs}


def reduction_bandwidth(n: int = REDUCE_N) -> dict[str, float]:
    """GB/s read (4n bytes) by each reduction, cupy and numba, and by torch.sum, checked against n."""
    require_gpu("the reduction benchmark")
    import numpy as np
    import torch

    from helpers.kernels import reduction

    cp = cupy_module()
    x, out = cp.ones(n, dtype=cp.float32), cp.zeros(1, dtype=cp.float32)
    nx, no = reduction.launch.as_numba(x), reduction.launch.as_numba(out)
    res = {}
    for v in reduction.VARIANTS:
        reduction.cupy_sum(x, out, v)  # validates the arguments once
        fn = bound_launch("reduction", f"reduce_{v}", (reduction.blocks(n, v),), (reduction.THREADS,),
                          (x, out, np.int64(n)))
        slow = ATOMIC_TIMING if v == "atomic" else {}  # one address, n atomics: tens of ms a call
        res[f"cupy_{v}"] = bench.gbs(fn, 4 * n, "cupy", **{**COPY_TIMING, **slow})
        k = reduction.NUMBA_KERNELS[v][reduction.blocks(n, v), reduction.THREADS]
        res[f"numba_{v}"] = bench.gbs(lambda k=k: k(nx, no), 4 * n, "numba", **{**COPY_TIMING, **slow})
    small = cp.ones(CHECK_N, dtype=cp.float32)  # sums of ones stay exact in float32 below 2**24
    for v in reduction.VARIANTS:
        for run in (reduction.cupy_sum, reduction.numba_sum):
            out[:] = 0
            run(small, out, v)
            assert float(out[0]) == CHECK_N, f"{run.__name__}({v!r}) summed {float(out[0])}, not {CHECK_N}"
    t = torch.ones(n, device="cuda")
    res["torch_sum"] = bench.gbs(lambda: t.sum(), 4 * n, "torch", **COPY_TIMING)
    return res


def simulated_paths(threads: int = 64, iters: int = 2) -> list[dict]:
    """Per branch mode: the most different paths any warp ran, traced in the CUDA simulator (no GPU needed)."""
    import numpy as np

    from helpers.kernels import divergence, simtrace

    from tqdm.auto import tqdm

    x = np.ones(threads, np.float32)
    rows = []
    kernels = {**divergence.BRANCHY, "branch_free": divergence.branch_free}
    for mode, kern in tqdm(kernels.items(), desc="tracing each branch mode in the CUDA simulator"):
        _, trace = simtrace.run_traced(kern, 1, threads, x, np.zeros_like(x), iters, lines=True)
        rows.append({"mode": mode, "paths per warp": max(trace.paths_per_warp().values())})
    return rows


def simulated_reductions(n: int = 512) -> list[dict]:
    """For the two shared-memory trees: correct?, diverging warps, worst bank conflict (simulator traces)."""
    import numpy as np

    from helpers.perf import access_patterns
    from helpers.kernels import reduction, simtrace

    from tqdm.auto import tqdm

    x = np.arange(n, dtype=np.float32) % 7
    rows = []
    for v in tqdm(("shared", "interleaved"), desc="tracing the two trees in the CUDA simulator"):
        (_, out), trace = simtrace.run_traced(reduction.NUMBA_KERNELS[v], n // reduction.THREADS,
                                              reduction.THREADS, x, np.zeros(1, np.float32), lines=True)
        s = access_patterns.summarize(trace)
        paths = trace.paths_per_warp()
        rows.append({"tree": v, "correct": bool(out[0] == x.sum()),
                     "warps that diverge": f"{sum(p > 1 for p in paths.values())} of {len(paths)}",
                     "worst bank conflict": s["worst_bank_conflict"]})
    return rows


def plot_bandwidth_and_occupancy(res: dict[int, dict[str, float]], what: str, xlabel: str, note: str = "",
                                 device: str | None = None) -> Any:
    """Measured GB/s (top) above theoretical occupancy (bottom) for one sweep."""
    import matplotlib.pyplot as plt

    from helpers import plots

    xs = list(res)
    fig, (top, bottom) = plt.subplots(2, 1, sharex=True, figsize=(6.4, 4.6))
    top.plot(xs, [res[x]["gbs"] for x in xs], marker="o", color=plots.PALETTE[0])
    top.set(ylabel="bandwidth (GB/s)", title=f"Copy bandwidth vs {what}", ylim=(0, None))
    bottom.plot(xs, [res[x]["occupancy"] for x in xs], ls="--", marker="s", color=plots.PALETTE[1])
    bottom.set(xlabel=xlabel, ylabel="theoretical occupancy (fraction)", ylim=(0, 1.05))
    plots.label_device(top, device, note)
    fig.tight_layout()
    plots.save_figure(fig, f"ch04 bandwidth vs {what}")
    return fig
