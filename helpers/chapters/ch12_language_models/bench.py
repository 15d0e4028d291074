"""Chapter 12's GPU measurements in one command (what the notebook's GPU cells run, plus kernel tuning).

    python -m helpers.chapters.ch12_language_models.bench [--quick] [--tune] [--tune-gemm] [--layers 32] [--out FILE.json]

Checks the kernels against their references, measures the D2D copy rate, the GEMV table, decode tokens/s
and the batch sweep, records the chapter's names through `helpers.bench.record`, and writes every row as
JSON. `--tune` (`--tune-gemm`) also times a grid of launch configurations per GEMV (GEMM) kernel and
shape; `--quick` uses 8 layers and fewer batch sizes.

Serves: chapter 12.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from helpers import bench
from helpers.chapters.ch12_language_models import batch_sweep, decode_bench, gemv_bench
from helpers.kernels import triton_gemv as tg
from helpers.perf.roofline import measure_bandwidth_gbs
from helpers.quant import weight_only as wo


GEMV_NAMES = ["llm.gemv.w8a16_over_fp16", "llm.gemv.w4a16_over_fp16", "llm.gemv.best_over_d2d",
              "ch12.gemv.tinygemm_over_fp16"]
DECODE_NAMES = ["llm.decode.w4a16_over_fp16", "ch12.decode.w8a16_over_fp16", "ch12.decode.w4a16_gemv_share"]


def tune_grid(kind: str, k: int) -> list[tg.Config]:
    """Launch configurations to try for one kernel kind (k unused: a K that block_k does not divide is masked)."""
    bns = (4, 8, 16) if kind == "w4a16" else (2, 4, 8)
    mid = bns[1]
    if kind == "fp16":
        return [tg.Config(bn, 1024, 4, 3, 1) for bn in bns] + [tg.Config(mid, 512, 4, 3, 1), tg.Config(mid, 1024, 8, 3, 1)]
    grid = [tg.Config(bn, 1024, 4, 3, 2) for bn in bns]
    grid += [tg.Config(mid, 2048 if kind == "w4a16" else 512, 4, 3, 2), tg.Config(mid, 1024, 8, 3, 2)]
    return grid + [tg.Config(mid, 1024, 4, 3, 1), tg.Config(mid, 1024, 4, 3, 0)]  # the float32 code paths


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


def tune(shapes: tuple[tuple[int, int], ...] = gemv_bench.SHAPES, budget_s: float = 90.0) -> list[dict]:
    """Microseconds per call of every grid configuration, per kernel and shape (stops at the time budget)."""
    start, rows = time.time(), []
    for n, k in shapes:
        w = (torch.randn(n, k, device="cuda") * 0.02).half()
        x = torch.randn(k, device="cuda").half()
        y = torch.empty(n, device="cuda", dtype=torch.float16)
        for kind, pw in (("fp16", tg.prepare_fp16(w)), ("w8a16", tg.prepare_w8(wo.quantize_w8(w))),
                         ("w4a16", tg.prepare_w4(wo.quantize_w4(w, 128)))):
            ws = [pw] + [gemv_bench._clone(pw) for _ in range(gemv_bench.copies_for(pw.nbytes) - 1)]
            for cfg in tune_grid(kind, k):
                if time.time() - start > budget_s or n % cfg.block_n:
                    continue
                try:
                    s = gemv_bench.time_calls([lambda c=c: tg.gemv(x, c, config=cfg, out=y) for c in ws], 10)
                    rows.append({"shape": f"{n}x{k}", "kind": kind, **cfg.__dict__, "us": s * 1e6,
                                 "gbs": pw.nbytes / s / 1e9})
                except Exception as exc:  # noqa: BLE001 - a config that fails to compile is reported, not fatal
                    rows.append({"shape": f"{n}x{k}", "kind": kind, **cfg.__dict__, "error": str(exc)[:200]})
            del ws
        torch.cuda.empty_cache()
    return rows


def gemv_section(d2d_gbs: float) -> list[dict]:
    """The GEMV table (GPU), recorded: per-kernel times and the headline ratios."""
    rows = gemv_bench.gemv_table()
    for name, v in gemv_bench.headline(rows, d2d_gbs).items():
        bench.record(name, v, "GB/s" if name.endswith("gbs") else "ratio")
    for r in rows:
        bench.record(f"ch12.gemv.{r['kernel'].replace(' ', '_')}.{r['N×K'].replace('×', 'x')}", r["µs"], "µs",
                     gbs=r["weight GB/s"], speedup=r["× fastest FP16"])
    return rows


def math_section() -> list[dict]:
    """The same INT8/INT4 weights through three ways of doing the code math (GPU), recorded."""
    rows = gemv_bench.math_modes()
    gemv_bench.record_math_modes(rows)
    return rows


def decode_section(d2d_gbs: float, layers: int = 32) -> tuple[list[dict], dict[str, Any], dict[str, float]]:
    """Decode tokens/s of every path (GPU), recorded; with the W4A16 step's GPU time split and the logit check."""
    shape = decode_bench.StackShape(layers=layers)
    m = decode_bench.build(shape)
    check = decode_bench.check_paths(m)
    split = decode_bench.kernel_split(m)
    rows = decode_bench.summary(m, decode_bench.tokens_per_second(m), d2d_gbs)
    for r in rows:
        bench.record(f"ch12.decode.tokens_s.{r['path'].split()[0]}_{r['path'].split()[1]}", r["tokens/s"],
                     "tokens/s", layers=layers, context=shape.context, weight_gbs=r["weight GB/s"])
    ratio = {r["path"].split()[0]: r["× fastest FP16"] for r in rows if "fused" in r["path"]}
    bench.record("llm.decode.w4a16_over_fp16", ratio["w4a16"], "ratio", layers=layers)
    bench.record("ch12.decode.w8a16_over_fp16", ratio["w8a16"], "ratio", layers=layers)
    bench.record("ch12.decode.w4a16_gemv_share", split["share"]["GEMV (Triton)"], "ratio")
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


def run_all(quick: bool = False, layers: int = 32, do_tune: bool = False, tune_gemms: bool = False) -> dict[str, Any]:
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
    stage("math", math_section)
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
    ap.add_argument("--layers", type=int, default=32)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    from helpers.device import require_gpu
    from helpers.errors import NoGPUError

    try:
        require_gpu("chapter 12's GPU benchmark")
    except NoGPUError as exc:
        print(exc, file=sys.stderr)
        return 2
    bench.set_notebook("12_language_models")
    res = run_all(args.quick, args.layers, args.tune, args.tune_gemm)
    res["records"] = [r.to_json() for r in bench.session_records()]
    text = json.dumps(res, indent=1, default=str)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)
    print(text[:3000])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
