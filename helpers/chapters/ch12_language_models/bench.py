"""Chapter 12's GPU measurements in one command (what the notebook's GPU cells run, plus kernel tuning).

    python -m helpers.chapters.ch12_language_models.bench [--quick] [--tune] [--tune-gemm] [--ncu] [--layers 32] [--out FILE.json]

Runs the chapter's Experiments (``experiments``: the GEMV table with the kernel check and the D2D copy rate, the
path from the naive kernel to the fast one with the group sizes, decode tokens/s, the batch sweep with the batch
table), each recording its tables and headlines, and writes every row as JSON. `--tune` also times a grid of (rows, split)
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

from helpers import bench
from helpers.chapters.ch12_language_models import batch_sweep, experiments, gemv_bench, timing
from helpers.experiment import Result
from helpers.kernels import wo_gemv as wg
from helpers.quant import weight_only as wo
from helpers.stage_clock import StageClock


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


def run_all(quick: bool = False, layers: int = 32, do_tune: bool = False, tune_gemms: bool = False,
            ncu: bool = False) -> dict[str, Any]:
    """Every GPU measurement of the chapter; records the headline names; returns all rows."""
    import triton

    out: dict[str, Any] = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                           "triton": triton.__version__}

    clock = StageClock()

    def stage(name: str, fn: Callable[[], Any]) -> Any:
        clock.start(name)
        try:
            out[name] = fn()  # an Experiment's Result: its rows are kept below
        except Exception:  # noqa: BLE001 - keep the other stages' results
            out[name] = {"error": traceback.format_exc()[-3000:]}
        out.setdefault("seconds", {})[name] = round(clock.stop(), 1)
        print(f"[ch12 bench] {name}: {out['seconds'][name]} s", flush=True)
        return out[name]

    gemv = stage("gemv", lambda: experiments.GEMV.run(stored=False))
    d2d = gemv.value("ch12.gemv.d2d_gbs") if isinstance(gemv, Result) else None
    if do_tune:
        stage("tune", tune)
    if tune_gemms:
        stage("tune_gemm", tune_gemm)
    stage("path", lambda: experiments.PATH.run(stored=False))
    if ncu:
        stage("ncu", lambda: experiments.PROFILE.run(stored=False))
    stage("decode", lambda: experiments.DECODE.run(stored=False, layers=8 if quick else layers, d2d_gbs=d2d))
    stage("sweep", lambda: experiments.SWEEP.run(stored=False, batches=(1, 2, 4, 8, 16, 64, 256, 1024, 4096)
                                                 if quick else batch_sweep.BATCHES))
    for name, res in list(out.items()):
        if isinstance(res, Result):
            out[name] = res.rows
    print("[ch12 bench] " + clock.line("every stage"), flush=True)
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
