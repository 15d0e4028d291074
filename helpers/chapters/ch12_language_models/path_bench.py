"""Chapter 12's path to a fast weight-only GEMV, measured: naive -> vector loads -> magic conversion -> rows per warp
-> split-K, each step one change to the CUDA kernel of `helpers.kernels.wo_gemv`; and the same kernel at other group
sizes and small batches.

Each step's row says what the step changes in the counts that set the pace: load instructions per weight and bytes of
activations read per byte of weights (both from the code), and, from an Nsight Compute run (`profile`), the
instructions each weight costs and the bytes that really crossed DRAM, L2 and L1.

    python -m helpers.chapters.ch12_language_models.path_bench --ncu-child N K   (what `profile` runs under ncu)

Serves: chapter 12.
"""

from __future__ import annotations

import csv
import io
import shutil
import subprocess
import sys
from typing import Any

import torch

from helpers.findings import NOT_RESOLVED
from helpers.chapters.ch12_language_models import gemv_bench, timing
from helpers.kernels import wo_gemv as wg
from helpers.quant import weight_only as wo
from helpers.quant import wo_layout

PATH_SHAPES = ((11008, 4096), (28672, 8192))
GROUPS = (32, 64, 128)
NCU_METRICS = ("smsp__inst_executed.sum", "dram__bytes_read.sum", "lts__t_bytes.sum", "l1tex__t_bytes.sum")


def loads_per_weight(bits: int, step: str, rows: int) -> float:
    """Load instructions per weight, from the code: weights, activations and (W4) scales."""
    if step == "naive":  # a byte a load, one FP16 activation a load, W4: a scale a byte
        return 2.0
    per = 128 // bits  # weights a 16-byte load brings
    x_loads = per * 2 // 16  # 16-byte activation loads per piece
    return (rows * (2 if bits == 4 else 1) + x_loads) / (per * rows)


def _step_weights(q: Any) -> dict[str, wg.WoWeight]:
    """The weight in both layouts (the first steps read the natural one)."""
    return {layout: wg.prepare(q, layout) for layout in wg.LAYOUTS}


def path_calls(n: int, k: int) -> tuple[dict[str, list], dict[str, dict[str, Any]]]:
    """Calls and row fields of every step for W8A16 and W4A16 g128, plus FP16 cuBLAS, at one shape."""
    w, x = gemv_bench.random_layer(n, k)
    y = torch.empty(n, device="cuda", dtype=torch.float16)
    calls = {"fp16 cuBLAS": gemv_bench.cublas_calls(x[None, :], w)}
    info = {"fp16 cuBLAS": {"kernel": "fp16", "step": "cuBLAS", "nbytes": w.numel() * 2, "key": "fp16 cuBLAS",
                            "rows": 1}}
    for kind, q in (("w8a16", wo.quantize_w8(w)), ("w4a16", wo.quantize_w4(w, gemv_bench.GROUP))):
        ws = _step_weights(q)
        tuned = wg.default_config(ws["magic"])
        for step in wg.STEPS:
            layout, cfg = wg.step_config(step, tuned.rows, tuned.split)
            key, cs = gemv_bench.cuda_calls(x, ws[layout], cfg, y)
            calls[f"{kind} {step}"] = cs
            info[f"{kind} {step}"] = {"kernel": kind, "step": step, "nbytes": ws[layout].nbytes, "key": key,
                                      "rows": cfg.rows}
    return calls, info


def path_table(shapes: tuple[tuple[int, int], ...] = PATH_SHAPES, rounds: int = timing.ROUNDS) -> list[dict]:
    """One row per (shape, kind, step): µs with spread, GB/s, speed over cuBLAS and over the step before, counts."""
    rows = []
    for n, k in shapes:
        calls, info = path_calls(n, k)
        spreads = timing.interleaved(calls, rounds=rounds)
        cublas = spreads["fp16 cuBLAS"].median
        before: dict[str, float] = {}
        for name, s in spreads.items():
            i = info[name]
            bits = {"fp16": 16, "w8a16": 8, "w4a16": 4}[i["kernel"]]
            rows.append({"N×K": f"{n}×{k}", "kernel": i["kernel"], "step": i["step"], "µs": s.median,
                         "weight GB/s": i["nbytes"] / s.median / 1e3, "× FP16 cuBLAS": cublas / s.median,
                         "× step before": before.get(i["kernel"], s.median) / s.median,
                         "loads / weight": None if bits == 16 else loads_per_weight(bits, i["step"], i["rows"]),
                         "activation B / weight B": None if bits == 16 else
                         wo_layout.traffic(bits, i["rows"])["activations"],
                         "key": f"{i['key']} {n}×{k}", "harness": timing.HARNESS, "spread": s.extra()})
            before[i["kernel"]] = s.median
        del calls
        torch.cuda.empty_cache()
    return rows


def with_traffic(rows: list[dict]) -> list[dict]:
    """Batch rows with the activation bytes each CUDA kernel reads per weight byte (from its key: bits, rows, M)."""
    out = []
    for r in rows:
        r = dict(r)
        key = r.get("key") or ""
        words = key.split()
        if r.get("kernel", "").endswith("CUDA") and any(w.startswith("r") and w[1:].isdigit() for w in words):
            rows_ = int(next(w for w in words if w.startswith("r") and w[1:].isdigit())[1:])
            bits = 4 if r["kernel"].startswith("w4") else 8
            r["activation B / weight B"] = wo_layout.traffic(bits, rows_, int(r.get("M", 1)))["activations"]
        out.append(r)
    return out


def unresolved(a: dict | None, b: dict | None) -> bool | None:
    """True when two rows' µs min..max over the rounds overlap (their difference is noise), None without spreads."""
    sa, sb = (a or {}).get("spread"), (b or {}).get("spread")
    if not sa or not sb:
        return None
    return sa["min_us"] <= sb["max_us"] and sb["min_us"] <= sa["max_us"]


def _order(a: dict, b: dict, a_name: str, b_name: str) -> str:
    """'A ahead of B', 'B ahead of A', or 'not resolved at this noise' (or 'no spread stored') from two timed rows."""
    same = unresolved(a, b)
    if same:
        return f"{a_name} vs {b_name}: {NOT_RESOLVED}"
    first, second = (a_name, b_name) if a["µs"] < b["µs"] else (b_name, a_name)
    return f"{first} ahead of {second}" + (", no spread stored" if same is None else "")


def batch_summary(rows: list[dict]) -> str:
    """Per batch M: the course's W4A16 GEMV, its tensor-core GEMM (from M = 2) and tinygemm over FP16 cuBLAS,
    which is ahead (at the rounds' noise), and the W4A16 GEMV's activation traffic."""
    rows = with_traffic(rows)
    parts = []
    for m in sorted({r["M"] for r in rows}):
        by = {r["kernel"]: r for r in rows if r["M"] == m}
        w4, tiny, fp16 = by.get("w4a16 CUDA"), by.get("w4a16 tinygemm"), by.get("fp16 cuBLAS")
        tc = by.get("w4a16 tensor-core GEMM")
        if w4 and tiny:
            order = [_order(w4, tiny, "CUDA", "tinygemm")] + ([_order(w4, fp16, "CUDA", "FP16")] if fp16 else [])
            order += [_order(tc, tiny, "tensor-core GEMM", "tinygemm")] if tc else []
            gemm = f", tensor-core GEMM {tc['× FP16 cuBLAS']:.2f}×" if tc else ""
            parts.append(f"M = {m}: W4A16 CUDA {w4['× FP16 cuBLAS']:.2f}×{gemm}, tinygemm {tiny['× FP16 cuBLAS']:.2f}× "
                         f"FP16 cuBLAS ({'; '.join(order)}), the CUDA GEMV reading "
                         f"{w4.get('activation B / weight B', float('nan')):.1f} bytes of activations per weight byte")
    return "; ".join(parts) + "."


def path_summary(rows: list[dict]) -> str:
    """What each step of the path gained, per kind and shape, from path rows (live or stored)."""
    parts = []
    for (shape, kind) in dict.fromkeys((r["N×K"], r["kernel"]) for r in rows if r["kernel"] != "fp16"):
        sel = [r for r in rows if r["N×K"] == shape and r["kernel"] == kind]
        steps = ", ".join(f"{r['step']} {r['× step before']:.2f}×" + (f" ({NOT_RESOLVED})" if unresolved(b, r) else "")
                          for b, r in zip(sel, sel[1:]))
        parts.append(f"{kind} at {shape}: {steps}; the last step runs {sel[-1]['× FP16 cuBLAS']:.2f}× FP16 cuBLAS "
                     f"and {sel[-1]['× FP16 cuBLAS'] / sel[0]['× FP16 cuBLAS']:.1f}× the naive kernel")
    return "; ".join(parts) + "."


def group_table(n: int = 11008, k: int = 4096, rounds: int = timing.ROUNDS) -> list[dict]:
    """W4A16 at the group sizes chapter 12's quality table studies, beside FP16 cuBLAS: what smaller groups cost."""
    w, x = gemv_bench.random_layer(n, k)
    y = torch.empty(n, device="cuda", dtype=torch.float16)
    calls, info = {"fp16 cuBLAS": gemv_bench.cublas_calls(x[None, :], w)}, {"fp16 cuBLAS": (w.numel() * 2, "fp16 cuBLAS")}
    for g in GROUPS:
        pw = wg.prepare(wo.quantize_w4(w, g))
        key, calls[f"w4a16 g{g}"] = gemv_bench.cuda_calls(x, pw, out=y)
        info[f"w4a16 g{g}"] = (pw.nbytes, key)
    spreads = timing.interleaved(calls, rounds=rounds)
    cublas = spreads["fp16 cuBLAS"].median
    return [{"N×K": f"{n}×{k}", "kernel": name, "µs": s.median, "bits a weight": info[name][0] * 8 / (n * k),
             "weight GB/s": info[name][0] / s.median / 1e3, "× FP16 cuBLAS": cublas / s.median,
             "key": f"{info[name][1]} {n}×{k}", "harness": timing.HARNESS, "spread": s.extra()}
            for name, s in spreads.items()]


def _child_runs(n: int, k: int) -> list[tuple[str, wg.WoWeight, wg.Config]]:
    """The kernels `profile` measures, in launch order: every step of W8A16 and W4A16, then FP16."""
    w, _ = gemv_bench.random_layer(n, k)
    runs = []
    for kind, q in (("w8a16", wo.quantize_w8(w)), ("w4a16", wo.quantize_w4(w, gemv_bench.GROUP))):
        ws = _step_weights(q)
        tuned = wg.default_config(ws["magic"])
        for step in wg.STEPS:
            layout, cfg = wg.step_config(step, tuned.rows, tuned.split)
            runs.append((f"{kind} {step}", ws[layout], cfg))
    pw = wg.prepare(w)
    runs.append(("fp16 CUDA", pw, wg.default_config(pw)))
    return runs


def ncu_child(n: int, k: int) -> None:
    """Launch each profiled kernel twice (a warm-up, then the one ncu measures: --launch-skip skips the first)."""
    _, x = gemv_bench.random_layer(n, k)
    runs = _child_runs(n, k)
    for _ in range(2):
        for _, pw, cfg in runs:
            wg.gemv(x, pw, config=cfg)
        torch.cuda.synchronize()


def profile(n: int = 11008, k: int = 4096, timeout: int = 240) -> list[dict]:
    """Nsight Compute counts of every path kernel: instructions per weight and DRAM/L2/L1 bytes per weight byte."""
    from helpers.errors import InputError

    ncu = shutil.which("ncu")
    if ncu is None:
        raise InputError("ncu (Nsight Compute) is not on PATH; install the CUDA toolkit's nsight-compute.")
    count = len(wg.STEPS) * 2 + 1
    cmd = [ncu, "--csv", "--metrics", ",".join(NCU_METRICS), "-k", "regex:wo_", "--launch-skip", str(count),
           "--launch-count", str(count), sys.executable, "-m", __name__, "--ncu-child", str(n), str(k)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    text = done.stdout[done.stdout.find('"ID"'):]
    by: dict[int, dict[str, float]] = {}
    for r in csv.DictReader(io.StringIO(text)):
        by.setdefault(int(r["ID"]), {})[r["Metric Name"]] = float(r["Metric Value"].replace(",", ""))
    rows = []
    for i, (name, pw, cfg) in enumerate(_child_runs(n, k) if by else []):
        m = by[i]
        wbytes = n * k * pw.bits / 8
        rows.append({"N×K": f"{n}×{k}", "kernel": name, "instructions / weight": m[NCU_METRICS[0]] * 32 / (n * k),
                     "DRAM B / weight B": m[NCU_METRICS[1]] / wbytes, "L2 B / weight B": m[NCU_METRICS[2]] / wbytes,
                     "L1 B / weight B": m[NCU_METRICS[3]] / wbytes})
    if not rows:
        raise InputError(f"ncu gave no counts (exit {done.returncode}): {done.stderr[-300:]}")
    return rows


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--ncu-child":
        ncu_child(int(sys.argv[2]), int(sys.argv[3]))
    else:
        print(__doc__)


def _norm(name: str) -> str:
    """A step's name without spaces, dashes and case ('split-K' and 'splitK' meet)."""
    return name.replace(" ", "").replace("-", "").replace("_", "").lower()


def _step_verdict(gain: float, changes: dict[str, float], noise: bool | None = False) -> str:
    """What one step's speed-up says, given how much each count fell (after / before: load instructions, ...);
    `noise` True when the two steps' times overlap over the rounds: then no verdict on the time is given."""
    fell = {k: v for k, v in changes.items() if v < 0.85}
    if noise:
        return NOT_RESOLVED + (f": {', '.join(fell)} fell without a measurable change of time" if fell else "")
    if gain >= 1.05:
        return f"paid ({'fewer ' + min(fell, key=fell.get) if fell else 'more warps in flight'})"
    if gain <= 0.95:
        return "cost time"
    return "changed the time by less than 5 %" + (f" although {', '.join(fell)} fell: not the limit" if fell else "")


def path_reasons(path_rows: list[dict], prof_rows: list[dict]) -> str:
    """Each step's speed-up beside its change in instructions and L1 bytes per weight (profiled shape only)."""
    prof = {_norm(r["kernel"]): r for r in prof_rows}
    parts = []
    for kind in ("w8a16", "w4a16"):
        sel = [r for r in path_rows if r["kernel"] == kind and _norm(f"{kind}{r['step']}") in prof
               and r["N×K"] == prof[_norm(f"{kind}{r['step']}")]["N×K"]]
        steps = []
        for before, after in zip(sel, sel[1:]):
            p0, p1 = prof[_norm(f"{kind}{before['step']}")], prof[_norm(f"{kind}{after['step']}")]
            changes = {"load instructions": after["loads / weight"] / before["loads / weight"],
                       "instructions": p1["instructions / weight"] / p0["instructions / weight"],
                       "L1 bytes": p1["L1 B / weight B"] / p0["L1 B / weight B"]}
            steps.append(f"{after['step']} {after['× step before']:.2f}× (instructions/weight "
                         f"{p0['instructions / weight']:.2f} → {p1['instructions / weight']:.2f}, L1 B/weight B "
                         f"{p0['L1 B / weight B']:.1f} → {p1['L1 B / weight B']:.1f}): "
                         f"{_step_verdict(after['× step before'], changes, unresolved(before, after))}")
        if steps:
            parts.append(f"{kind} at {sel[0]['N×K']}: " + "; ".join(steps))
    return ". ".join(parts) + "." if parts else "No profile to compare the steps with."
