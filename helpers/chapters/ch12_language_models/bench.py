"""Chapter 12's GPU measurements in one command (what the notebook's GPU cells run, plus kernel tuning).

    python -m helpers.chapters.ch12_language_models.bench [--quick] [--tune] [--tune-gemm] [--ncu] [--layers 32] [--out FILE.json]

Checks the kernels against their references, measures the D2D copy rate, the GEMV table, the path from the naive
kernel to the fast one, group sizes and small batches, decode tokens/s and the batch sweep, records the chapter's
names through `helpers.bench.record`, and writes every row as JSON. `--tune` also times a grid of (rows, split)
launches per CUDA GEMV and shape (`--tune-gemm`: the Triton GEMM's grid); `--ncu` profiles the path's kernels with
Nsight Compute; `--quick` uses 8 layers and fewer batch sizes.

Serves: chapter 12.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from helpers import bench, spread
from helpers.chapters.ch12_language_models import batch_sweep, decode_bench, gemv_bench, path_bench, timing
from helpers.kernels import wo_gemv as wg
from helpers.perf.roofline import measure_bandwidth_gbs
from helpers.quant import weight_only as wo


GEMV_NAMES = ["llm.gemv.w8a16_over_fp16", "llm.gemv.w4a16_over_fp16", "llm.gemv.best_over_d2d",
              "llm.gemv.w4a16_over_tinygemm", "ch12.gemv.tinygemm_over_fp16", "ch12.gemv.w8a16_over_fastest_fp16",
              "ch12.gemv.w4a16_over_fastest_fp16", "ch12.gemv.fp16_cuda_over_cublas"]
DECODE_NAMES = ["llm.decode.w4a16_over_fp16", "llm.decode.w8a16_over_fp16", "ch12.decode.w4a16_gemv_share",
                "ch12.decode.w8a16_gemv_share", "ch12.decode.fp16_fused_over_eager"]


GEMM_GRID = ((16, 32, 128, 4, 3), (16, 64, 128, 4, 4), (32, 64, 128, 4, 3), (64, 64, 64, 4, 4),
             (64, 128, 64, 4, 4), (128, 128, 64, 8, 3), (128, 128, 128, 8, 3), (128, 256, 64, 8, 3))


def tune_gemm(batches: tuple[int, ...] = (1, 4, 16, 64, 256, 1024, 4096), budget_s: float = 60.0) -> list[dict]:
    """Microseconds of the weight-only GEMM per (kind, M, block_m, block_n, block_k, warps, stages)."""
    from helpers.chapters.ch12_language_models.batch_sweep import K, N
    from helpers.kernels import triton_wo_gemm as tw

    start, rows = time.time(), []
    w = (torch.randn(N, K, device="cuda") * 0.02).half()
    for kind, qw in (("w8a16", wo.quantize_w8(w)), ("w4a16", wo.quantize_w4(w, 128))):
        pw = tw.prepare(qw)
        for m in batches:
            a = torch.randn(m, K, device="cuda").half()
            for bm, bn, bk, warps, stages in GEMM_GRID:
                if time.time() - start > budget_s:
                    continue
                try:
                    s = gemv_bench.time_calls([lambda: tw.wo_gemm(a, pw, bm, bn, bk, warps, stages)] * 4, 8)
                    rows.append({"kind": kind, "M": m, "cfg": [bm, bn, bk, warps, stages], "us": s * 1e6})
                except Exception as exc:  # noqa: BLE001 - a config that fails is reported, not fatal
                    rows.append({"kind": kind, "M": m, "cfg": [bm, bn, bk, warps, stages], "error": str(exc)[:200]})
    return rows


CUDA_GRID = tuple((r, s) for r in (2, 4, 8) for s in (1, 2, 4, 8))


def tune(shapes: tuple[tuple[int, int], ...] = gemv_bench.SHAPES, budget_s: float = 120.0) -> list[dict]:
    """µs per call of every (rows, split) launch of the CUDA GEMVs, per kind and shape, interleaved (stops at the budget)."""
    start, rows = time.time(), []
    for n, k in shapes:
        if time.time() - start > budget_s:
            break
        w, x = gemv_bench.random_layer(n, k)
        y = torch.empty(n, device="cuda", dtype=torch.float16)
        calls = {}
        for kind, q in (("fp16", w), ("w8a16", wo.quantize_w8(w)), ("w4a16", wo.quantize_w4(w, 128))):
            pw = wg.prepare(q)
            for r, s in CUDA_GRID:
                calls[(kind, r, s)] = gemv_bench.cuda_calls(x, pw, wg.Config(r, s), y)[1]
        spreads = timing.interleaved(calls, rounds=5)
        rows += [{"shape": f"{n}x{k}", "kind": kind, "rows": r, "split": s, "us": sp.median, **sp.extra()}
                 for (kind, r, s), sp in spreads.items()]
        del calls
        torch.cuda.empty_cache()
    return rows


def gemv_section(d2d_gbs: float) -> list[dict]:
    """The GEMV table (GPU), recorded: per-kernel times with their spread, and the headline ratios."""
    rows = gemv_bench.gemv_table()
    spreads = gemv_bench.headline_spreads(rows)
    for name, v in gemv_bench.headline(rows, d2d_gbs).items():
        bench.record(name, v, "GB/s" if name.endswith("gbs") else "ratio",
                     **(spreads[name].extra() if name in spreads else {}))
    gemv_bench.record_rows(rows, "gemv")
    return rows


def path_section() -> list[dict]:
    """The path from the naive kernel to the fast one (GPU), recorded."""
    rows = path_bench.path_table()
    path_bench.record_path(rows)
    return rows


def groups_batch_section() -> tuple[list[dict], list[dict]]:
    """W4A16 at group sizes 32/64/128 and the kernels at batch 1-8 (GPU), recorded."""
    groups, batches = path_bench.group_table(), path_bench.batch_table()
    path_bench.record_table(groups, "ch12.group", "group")
    path_bench.record_table(batches, "ch12.batch", "batch")
    return groups, batches


def profile_section() -> list[dict]:
    """Nsight Compute counts of the path's kernels (GPU and ncu), recorded."""
    rows = path_bench.profile()
    path_bench.record_profile(rows)
    return rows


def decode_section(d2d_gbs: float, layers: int = 32) -> tuple[list[dict], dict[str, Any], dict[str, float]]:
    """Decode tokens/s of every path (GPU, interleaved), recorded; with the GEMV share of the W4A16/W8A16 steps."""
    shape = decode_bench.StackShape(layers=layers)
    m = decode_bench.build(shape)
    check = decode_bench.check_paths(m)
    split = decode_bench.kernel_split(m)
    split8 = decode_bench.kernel_split(m, "w8a16 fused (CUDA)")
    rows = decode_bench.summary(m, decode_bench.tokens_per_second(m), d2d_gbs)
    for r in rows:
        sp = m["spread"][r["path"]]
        bench.record(f"ch12.decode.tokens_s.{r['path'].replace(' (', ' ').rstrip(')').replace(' ', '_')}",
                     r["tokens/s"], "tokens/s", layers=layers, context=shape.context, weight_gbs=r["weight GB/s"],
                     ms_per_token=r["ms/token"], **sp.extra())
    ratio = {r["path"]: r["× fastest FP16"] for r in rows}
    fp16 = min((p for p in m["spread"] if p.startswith("fp16")), key=lambda p: m["spread"][p].median)
    for kind in ("w4a16", "w8a16"):
        path = f"{kind} fused (CUDA)"
        s, base = m["spread"][path].samples_us, m["spread"][fp16].samples_us  # µs per step: lower is faster
        noise = spread.Spread(min(base) / max(s), max(base) / min(s), f"min..max of {len(s)} interleaved rounds")
        bench.record(f"llm.decode.{kind}_over_fp16", ratio[path], "ratio", layers=layers, **noise.extra())
    bench.record("ch12.decode.fp16_fused_over_eager", max(ratio["fp16 fused (CUDA)"], ratio["fp16 fused (Triton)"])
                 / ratio["fp16 eager (cuBLAS)"], "ratio")
    for kind, sp in (("w4a16", split), ("w8a16", split8)):
        bench.record(f"ch12.decode.{kind}_gemv_share", sp["share"]["GEMV"], "ratio", ms=sp["ms/step"])
    split["w8a16"] = split8
    del m
    torch.cuda.empty_cache()
    return rows, split, check


def sweep_section(quick: bool = False) -> tuple[list[dict], dict[str, int | None]]:
    """The batch sweep (GPU), recorded, and where weight-only stops paying."""
    rows = batch_sweep.sweep((1, 4, 16, 64, 256, 1024, 4096) if quick else batch_sweep.BATCHES)
    batch_sweep.record(rows)
    cross = batch_sweep.crossovers(rows)
    for k, v in cross.items():
        if v is not None:
            bench.record(f"ch12.sweep.{k}", v, "M")
    return rows, cross


def run_all(quick: bool = False, layers: int = 32, do_tune: bool = False, tune_gemms: bool = False,
            ncu: bool = False) -> dict[str, Any]:
    """Every GPU measurement of the chapter; records the headline names; returns all rows."""
    import triton

    out: dict[str, Any] = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                           "triton": triton.__version__}

    def stage(name: str, fn: Callable[[], Any]) -> Any:
        t0 = time.time()
        try:
            out[name] = fn()
        except Exception:  # noqa: BLE001 - keep the other stages' results
            out[name] = {"error": traceback.format_exc()[-3000:]}
        out.setdefault("seconds", {})[name] = round(time.time() - t0, 1)
        print(f"[ch12 bench] {name}: {out['seconds'][name]} s", flush=True)
        return out[name]

    stage("kernel_errors", gemv_bench.check_kernels)
    d2d = stage("d2d_gbs", lambda: measure_bandwidth_gbs("cuda", nbytes=1 << 30))
    if do_tune:
        stage("tune", tune)
    if tune_gemms:
        stage("tune_gemm", tune_gemm)
    stage("gemv", lambda: gemv_section(d2d))
    stage("path", path_section)
    stage("groups_batch", groups_batch_section)
    if ncu:
        stage("ncu", profile_section)
    stage("decode", lambda: decode_section(d2d, 8 if quick else layers))
    stage("sweep", lambda: sweep_section(quick))
    return out


def main(argv: list[str]) -> int:
    """Command-line entry point."""
    ap = argparse.ArgumentParser(prog="python -m helpers.chapters.ch12_language_models.bench", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--tune", action="store_true", help="time a grid of GEMV launch configurations")
    ap.add_argument("--tune-gemm", action="store_true", help="time a grid of weight-only GEMM configurations")
    ap.add_argument("--ncu", action="store_true", help="profile the path's kernels with Nsight Compute")
    ap.add_argument("--layers", type=int, default=32)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    from helpers import cli
    from helpers.device import require_gpu
    from helpers.errors import InputError, NoGPUError

    if args.out:
        try:  # refused before any measurement: a file the command did not write is never replaced
            cli.check_output_file(args.out, "ch12-bench")
        except InputError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2

    try:
        require_gpu("chapter 12's GPU benchmark")
    except NoGPUError as exc:
        print(exc, file=sys.stderr)
        return 2
    bench.set_notebook("12_language_models")
    res = run_all(args.quick, args.layers, args.tune, args.tune_gemm, args.ncu)
    res["records"] = [r.to_json() for r in bench.session_records()]
    text = json.dumps(res, indent=1, default=str)
    if args.out:
        with cli.replacing(args.out, "ch12-bench") as tmp:
            tmp.write_text(text)
    print(text[:3000])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
