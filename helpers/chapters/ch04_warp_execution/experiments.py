"""Chapter 4's GPU measurements as Experiments: each runs here on a GPU (and records), or shows the stored run.

    DIVERGENCE  each branch mode's time, cupy and numba, and its slowdown over the same backend's uniform
                kernel (one timing, two tables)
    OCCUPANCY   the simple copy's GB/s and theoretical occupancy per block size and per KiB of shared memory
                per block; the copy's registers per thread
    REDUCTION   the four reductions, cupy and numba, and torch.sum, as GB/s read

A notebook cell is ``result = experiments.DIVERGENCE.run(); result.bars("slowdown", ...)``.

Serves: chapter 4.
"""

from __future__ import annotations

from typing import Any

from helpers.chapters.ch04_warp_execution import tables
from helpers.chapters.ch04_warp_execution import warp_bench as wb
from helpers.experiment import Experiment, Result, Rows


def _divergence(n: int = wb.DIVERGENCE_N, iters: int = wb.DIVERGENCE_ITERS) -> Rows:
    r = wb.divergence_rounds(n, iters)
    ms = [{"kernel": k, "ms": r.median_s(k) * 1e3, "spread": r.spread(k, lambda s: s * 1e3)} for k in r.seconds]
    slow = []
    for k in r.seconds:  # this kernel's time ÷ its backend's uniform kernel's, round by round
        ratio, noise = r.ratio(k, f"{k.split('_', 1)[0]}_uniform")
        slow.append({"kernel": k, "slowdown": ratio, "spread": noise})
    return {"ms": ms, "slowdown": slow}


DIVERGENCE = Experiment("ch04.divergence", _divergence, {"ms": tables.DIVERGENCE, "slowdown": tables.SLOWDOWN})

SWEEPS = (("block", "block_size", "threads"), ("smem", "shared_kib", "KiB"))  # table stem, sweep key, column


def _occupancy(n: int = wb.OCCUPANCY_N) -> Rows:
    res = wb.occupancy_sweep(n)
    out: Rows = {}
    for stem, sweep, column in SWEEPS:
        out[f"{stem}_gbs"] = [{column: x, "GB/s": d["gbs"]} for x, d in res[sweep].items()]
        out[f"{stem}_occupancy"] = [{column: x, "occupancy": d["occupancy"], "registers": res["registers"]}
                                    for x, d in res[sweep].items()]
    return out


def _registers(rows: Rows) -> dict[str, Any]:
    return {"ch04.copy_registers": rows["block_occupancy"][0]["registers"]}


OCCUPANCY = Experiment("ch04.occupancy", _occupancy,
                       {"block_gbs": tables.BLOCK_GBS, "block_occupancy": tables.BLOCK_OCCUPANCY,
                        "smem_gbs": tables.SMEM_GBS, "smem_occupancy": tables.SMEM_OCCUPANCY},
                       derive=_registers, others={"ch04.copy_registers": "registers/thread"})


def _reduction(n: int = wb.REDUCE_N) -> Rows:
    return {"reduce": [{"kernel": k, "GB/s": v} for k, v in wb.reduction_bandwidth(n).items()]}


REDUCTION = Experiment("ch04.reduction", _reduction, {"reduce": tables.REDUCE})


def occupancy_plots(result: Result) -> list[Any]:
    """Both sweeps' GB/s above their theoretical occupancy (``warp_bench.plot_bandwidth_and_occupancy``), or one
    line per sweep that has no rows."""
    figs = []
    for (stem, _, column), (what, xlabel) in zip(SWEEPS, (("block size", "threads per block"),
                                                          ("shared memory per block", "KiB per block"))):
        occ = {r[column]: r["occupancy"] for r in result[f"{stem}_occupancy"]}
        res = {r[column]: {"gbs": r["GB/s"], "occupancy": occ.get(r[column], float("nan"))}
               for r in sorted(result[f"{stem}_gbs"], key=lambda r: r[column])}
        if not res:
            print(f"Copy bandwidth vs {what}: no rows ({result.where()}).")
            continue
        figs.append(wb.plot_bandwidth_and_occupancy(res, what, xlabel, note=result.note, device=result.device))
    return figs
