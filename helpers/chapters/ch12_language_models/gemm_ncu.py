"""Nsight Compute's view of the tensor-core weight-only GEMM at small batches: what holds it below the copy rate.

At 11008×4096 (LLaMA-7B's gate projection) and M = 1, 4, 8 and 16, each scheme's GEMM runs the launch this GPU's
measured table picks (``wo_gemm_check.measure_table``, timed first, outside the profiler), and the W4A16 GEMV at
M = 1 runs beside them as the kernel that does stream at the copy rate. Per kernel: registers a thread, the share of
an SM's warp slots the registers allow (theoretical occupancy), the warps the launch's grid gives an SM and the share
it holds (achieved); DRAM throughput and tensor-pipe activity as % of peak; how often the SM's schedulers issue an
instruction, how many cycles pass between two instructions of one warp and how many of those the warp waits for a
global load (ncu's long-scoreboard stall); warp instructions per 32×32 tile of weights; and the duration. ncu runs
with clock control off, as chapter 11's profiles do (the GPU keeps its own clocks), and flushes the caches before
each kernel it measures: read the ratios; the durations are a cold-cache launch's.

    python -m helpers.chapters.ch12_language_models.gemm_ncu --ncu-child TABLE.json   (what ncu launches)

Serves: chapter 12.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

SHAPE = (11008, 4096)
BATCHES = (1, 4, 8, 16)
SCHEMES = ("w4a16", "w8a16")
GEMV = "W4A16 GEMV"
TILE_WEIGHTS = 32 * 32  # weights a warp's 32×32 tile holds (the GEMM's unit of work)
# column: the ncu metric (raw names) or the section's display name (SpeedOfLight, Occupancy); None: derived in parse
COLUMNS = {"registers": "launch__registers_per_thread", "theoretical occupancy %": "Theoretical Occupancy",
           "grid warps / SM": None, "achieved occupancy %": "Achieved Occupancy", "DRAM % of peak": "DRAM Throughput",
           "tensor pipe % active": "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active",
           "issue slots busy %": "smsp__issue_active.avg.pct_of_peak_sustained_active",
           "cycles / instruction": "smsp__average_warp_latency_per_inst_issued.ratio",
           "of which load wait": "smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio",
           "instructions / tile": None, "ncu µs": "Duration"}
INSTRUCTIONS, GRID, BLOCK = "smsp__inst_executed.sum", "launch__grid_size", "launch__block_size"
METRICS = tuple(m for m in COLUMNS.values() if m and "__" in m) + (INSTRUCTIONS, GRID, BLOCK)


def ranges() -> list[tuple[str, str, int]]:
    """(NVTX range, kernel, M) of every profiled launch, in launch order: each scheme's GEMM at each M, then the GEMV."""
    out = [(f"gemm_{s}_m{m}", f"{s.upper()} GEMM", m) for m in BATCHES for s in SCHEMES]
    return out + [("gemv_w4a16_m1", GEMV, 1)]


def runs(kernel: str) -> tuple[str, str]:
    """What one profiled row launches: ('gemv', 'w4a16') for the GEMV, else ('gemm', its scheme)."""
    return ("gemv", "w4a16") if kernel == GEMV else ("gemm", kernel.split()[0].lower())


def parse(text: str, launches: dict[str, str] | None = None, sms: int | None = None) -> list[dict[str, Any]]:
    """Rows from ncu's --csv output (read by chapter 11's ``profiling.parse_ncu_csv``): one per profiled kernel, in
    launch order (a split-K GEMM's separate finishing pass is left out); `launches` names each GEMM's (config,
    split) by its NVTX range; `sms` is the GPU's SM count (for the warps the grid gives each; default an H100 SXM's,
    wo_gemm.SMS)."""
    from helpers.chapters.ch11_troubleshooting.profiling import UNIT_SCALE, parse_ncu_csv
    from helpers.kernels.wo_gemm import SMS

    sms = sms or SMS

    by: dict[int, dict[str, Any]] = {}
    for r in parse_ncu_csv(text):
        if r["value"] is not None:
            row = by.setdefault(r["id"], {"name": r["kernel"]})
            row[r["metric"]] = r["value"] * UNIT_SCALE.get(r["unit"], 1) * 1e6 if r["metric"] == "Duration" \
                else r["value"]
    kernels = [by[i] for i in sorted(by) if "finish" not in by[i]["name"]]
    rows = []
    for (rng, kernel, m), got in zip(ranges(), kernels):
        row = {"kernel": kernel, "M": m, "launch": (launches or {}).get(rng, "")}
        row.update({col: got.get(metric) if metric else None for col, metric in COLUMNS.items()})
        if got.get(GRID) is not None and got.get(BLOCK) is not None:
            row["grid warps / SM"] = got[GRID] * got[BLOCK] / 32 / sms
        if got.get(INSTRUCTIONS) is not None:
            row["instructions / tile"] = got[INSTRUCTIONS] / (SHAPE[0] * SHAPE[1] / TILE_WEIGHTS)
        rows.append(row)
    return rows


def ncu_child(table_path: str) -> None:
    """Launch every profiled kernel: a warm-up outside the NVTX ranges, then once inside its range."""
    import torch

    from helpers.kernels import wo_gemm as wm
    from helpers.kernels import wo_gemm_check as wc
    from helpers.kernels import wo_gemv as wg
    from helpers.quant import weight_only as wo

    wm.set_table(json.loads(Path(table_path).read_text(encoding="utf-8")))
    n, k = SHAPE
    w = wc.layer(n, k)
    gemm = {"w4a16": wm.prepare(wo.quantize_w4(w, 128)), "w8a16": wm.prepare(wo.quantize_w8(w))}
    gemv = wg.prepare(wo.quantize_w4(w, 128))
    xs = {m: torch.randn(m, k, device="cuda").half() for m in BATCHES}
    calls = {rng: (lambda x=xs[m]: wg.gemv(x, gemv)) if runs(kernel)[0] == "gemv" else
             (lambda x=xs[m], p=gemm[runs(kernel)[1]]: wm.gemm(x, p)) for rng, kernel, m in ranges()}
    for call in calls.values():
        call()
    torch.cuda.synchronize()
    for rng, call in calls.items():
        with torch.cuda.nvtx.range(rng):
            call()
        torch.cuda.synchronize()


def profile(timeout: int = 240) -> list[dict[str, Any]]:
    """Measure the dispatch table here, then run ``ncu_child`` under Nsight Compute; the rows of ``parse``."""
    from helpers.errors import InputError
    from helpers.kernels import wo_gemm as wm
    from helpers.kernels import wo_gemm_check as wc

    ncu = shutil.which("ncu")
    if ncu is None:
        raise InputError("ncu (Nsight Compute) is not on PATH; install the CUDA toolkit's nsight-compute.")
    n, k = SHAPE
    table = wc.measure_table((SHAPE,), BATCHES)
    launches = {}
    for rng, kernel, m in ranges():
        if "GEMM" in kernel:
            row = table.get(wm.table_key(kernel.split()[0].lower(), n, k, m), {})
            launches[rng] = f"config {row.get('config', '?')}, split {row.get('split', '?')}" + \
                (", swapped" if wm.swapped(m) else "")  # at M <= 8 another instance: weights as the mma's A
    with tempfile.TemporaryDirectory(prefix="course-gemm-ncu-") as tmp:
        path = Path(tmp) / "table.json"
        path.write_text(json.dumps(table), encoding="utf-8")
        cmd = [ncu, "--csv", "--clock-control", "none", "--nvtx", *[a for rng, _, _ in ranges() for a in ("--nvtx-include", f"{rng}/")],
               "--section", "SpeedOfLight", "--section", "Occupancy", "--metrics", ",".join(METRICS),
               sys.executable, "-m", __name__, "--ncu-child", str(path)]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    try:
        rows = parse(done.stdout, launches, wm.sm_count())
    except InputError:
        rows = []
    if len(rows) < len(ranges()):
        raise InputError(f"ncu gave counts for {len(rows)} of {len(ranges())} kernels (exit {done.returncode}): "
                         f"{done.stderr[-300:]}")
    return rows


def sentence(rows: list[dict[str, Any]], m: int = 4, scheme: str = "W4A16 GEMM") -> str:
    """What the counters say about `scheme` at batch `m` beside the GEMV at M = 1: whether its warps wait for memory
    or issue a long stream of instructions with few warps to interleave (from these rows only)."""
    by = {(r["kernel"], r["M"]): r for r in rows}
    g, v = by.get((scheme, m)), by.get((GEMV, 1))
    if not g or not v or any(g.get(c) is None for c in COLUMNS) or any(v.get(c) is None for c in COLUMNS):
        return f"Nsight Compute: no counts of the {scheme} at M = {m} and the GEMV at M = 1 to compare."
    wait, cpi = g["of which load wait"], g["cycles / instruction"]
    text = (f"Nsight Compute: at M = {m} the {scheme} keeps DRAM {g['DRAM % of peak']:.0f} % busy (the {GEMV} at "
            f"M = 1: {v['DRAM % of peak']:.0f} %) and its tensor pipe {g['tensor pipe % active']:.0f} % active. Of the "
            f"{cpi:.1f} cycles between two instructions of one of its warps, {wait:.1f} are a wait for a global load "
            f"(the GEMV's: {v['of which load wait']:.1f} of {v['cycles / instruction']:.1f}); it runs "
            f"{g['instructions / tile']:.0f} warp instructions per 32×32 tile of weights (the GEMV "
            f"{v['instructions / tile']:.0f}), its launch gives an SM {g['grid warps / SM']:.1f} warps "
            f"({g['achieved occupancy %']:.0f} % of the slots held; its {g['registers']:.0f} registers a thread would "
            f"allow {g['theoretical occupancy %']:.0f} %), and the schedulers issue in "
            f"{g['issue slots busy %']:.0f} % of cycles")
    if wait < 0.25 * cpi and v["of which load wait"] > 0.5 * v["cycles / instruction"] \
            and g["issue slots busy %"] < 60 and g["tensor pipe % active"] < 50:
        return text + (": its warps are not starved of bytes; each works through a long stream of instructions, "
                       "and too few warps are there to fill the schedulers' idle cycles. The GEMV's warps, by "
                       "contrast, mostly wait for memory.")
    if wait > 0.5 * cpi:
        return text + ": most of a warp's cycles are waits for loads, so too few loads are in flight to cover the "\
                      "memory's latency."
    return text + "; these counts do not single out one limit."


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--ncu-child":
        ncu_child(sys.argv[2])
    else:
        print(__doc__)
