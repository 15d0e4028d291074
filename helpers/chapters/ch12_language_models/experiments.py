"""Chapter 12's GPU measurements as Experiments: each runs here on a GPU (and records), or shows the stored run.

    QUALITY  the held-out perplexity of every scheme on the tiny trained model (runs on any machine)
    GEMV     the batch-1 GEMV table at LLM shapes and the D2D copy rate; the llm.gemv.* headlines
    PATH     the path from the naive CUDA GEMV to the fast one, and W4A16 at three group sizes
    PROFILE  Nsight Compute's counts of the path's kernels (needs ncu)
    SWEEP    one 11008×4096 layer at batch M = 1..4096, every scheme interleaved; the batch table (M <= 8) is
             read from the same timings, so the two show one timing of each kernel
    DECODE   decode tokens/s of a 7B-shaped stack, where a step's GPU time goes, one layer's attention (PyTorch
             against the course's kernel) at batch 1-16, and the step with and without programmatic dependent
             launch; the llm.decode.* headlines
    DECODE_BATCH  decode tokens/s of a batch of 1-16 sequences, tensor-core weight-only GEMMs against cuBLAS FP16
    GEMM_PROFILE  Nsight Compute's counters of the tensor-core GEMM at M = 1-16 beside the GEMV (needs ncu)

A notebook cell is ``result = experiments.GEMV.run(); result.show("gemv", ...)``.

Serves: chapter 12.
"""

from __future__ import annotations

from typing import Any

from helpers.chapters.ch12_language_models import (attention_bench, batch_sweep, decode_bench, decode_timeline, gemm_ncu,
                                                   gemv_bench, path_bench, pdl_bench, quality, tables, timing)
from helpers.experiment import Experiment, Result
from helpers.spread import INTERLEAVED, Spread


QUALITY = Experiment("ch12.ppl", lambda model, heldout, calib: {"quality": quality.quality_table(model, heldout, calib)},
                     {"quality": tables.QUALITY}, needs="cpu")


def _gemv(rounds: int = timing.ROUNDS) -> dict[str, list[dict]]:
    from helpers.perf.roofline import measure_bandwidth_gbs

    errors = gemv_bench.check_kernels()
    print("largest kernel error / max |reference|:", {k: f"{v:.1e}" for k, v in errors.items()})
    d2d = measure_bandwidth_gbs("cuda", nbytes=1 << 30)
    return {"gemv": gemv_bench.gemv_table(rounds=rounds), "d2d": [{"copy": "torch device-to-device", "GB/s": d2d}]}


def _gemv_derive(rows: dict[str, list[dict]]) -> dict[str, Any]:
    spreads = gemv_bench.headline_spreads(rows["gemv"])
    return {name: (v, spreads.get(name)) for name, v in gemv_bench.headline(rows["gemv"], rows["d2d"][0]["GB/s"]).items()}


GEMV = Experiment("ch12.gemv", _gemv, {"gemv": tables.GEMV, "d2d": tables.D2D},
                  headlines=("llm.gemv.w8a16_over_fp16", "llm.gemv.w4a16_over_fp16", "llm.gemv.best_over_d2d",
                             "llm.gemv.w4a16_over_tinygemm"),
                  derive=_gemv_derive,
                  others={"ch12.gemv.tinygemm_over_fp16": "ratio", "ch12.gemv.best_gbs": "GB/s",
                          "ch12.gemv.d2d_gbs": "GB/s", "ch12.gemv.w8a16_over_fastest_fp16": "ratio",
                          "ch12.gemv.w4a16_over_fastest_fp16": "ratio", "ch12.gemv.fp16_cuda_over_cublas": "ratio"})


def _path(rounds: int = timing.ROUNDS) -> dict[str, list[dict]]:
    return {"path": path_bench.path_table(rounds=rounds), "group": path_bench.group_table(rounds=rounds)}


PATH = Experiment("ch12.path", _path, {"path": tables.PATH, "group": tables.GROUP})
PROFILE = Experiment("ch12.path_ncu", lambda: {"profile": path_bench.profile()}, {"profile": tables.PROFILE},
                     needs="ncu")


def _sweep(batches: tuple[int, ...] = batch_sweep.BATCHES, rounds: int = timing.ROUNDS) -> dict[str, list[dict]]:
    rows = batch_sweep.sweep(batches, rounds)
    return {"sweep": rows, "batch": batch_sweep.batch_rows(rows)}


SWEEP = Experiment("ch12.sweep", _sweep, {"sweep": tables.SWEEP, "batch": tables.BATCH},
                   rebuild={"batch": batch_sweep.batch_view})


def _decode(layers: int = 32, d2d_gbs: float | None = None) -> dict[str, list[dict]]:
    import torch

    from helpers.perf.roofline import measure_bandwidth_gbs

    d2d_gbs = d2d_gbs or measure_bandwidth_gbs("cuda", nbytes=1 << 30)
    shape = decode_bench.StackShape(layers=layers)
    attention = attention_bench.attention_rows(shape)
    m = decode_bench.build(shape)
    check = decode_bench.check_paths(m)
    print("logits vs the eager FP16 step (relative max difference; for W8/W4 this is the quantization error of "
          f"random weights over {layers} layers, not a kernel error):", {k: f"{v:.1e}" for k, v in check.items()})
    splits = {"w4a16": decode_bench.kernel_split(m), "w8a16": decode_bench.kernel_split(m, "w8a16 fused (CUDA)")}
    rows = decode_bench.summary(m, decode_bench.tokens_per_second(m), d2d_gbs)
    pdl = pdl_bench.pdl_rows(m)
    rows = [{**r, "layers": layers, "context": shape.context, "spread": m["spread"][r["path"]].extra()} for r in rows]
    split = [{"kind": kind, "part": part, "ms/step": ms, "share": sp["share"][part]}
             for kind, sp in splits.items() for part, ms in sp["ms/step"].items()]
    decode_timeline.record(m)  # one step of each path on a timeline, stored (ch12.timeline.decode.*)
    del m
    torch.cuda.empty_cache()
    return {"decode": rows, "split": split, "attention": attention, "pdl": pdl}


def _decode_derive(rows: dict[str, list[dict]]) -> dict[str, Any]:
    by = {r["path"]: r for r in rows["decode"]}
    fp16 = max((r for r in rows["decode"] if r["path"].startswith("fp16")), key=lambda r: r["tokens/s"])
    out: dict[str, Any] = {}
    for kind in ("w4a16", "w8a16"):
        r, sb, s = by[f"{kind} fused (CUDA)"], fp16["spread"], by[f"{kind} fused (CUDA)"]["spread"]
        noise = Spread(sb["min_us"] / s["max_us"], sb["max_us"] / s["min_us"],
                       f"min..max of {s['rounds']} {INTERLEAVED}")  # µs per step: the ratio's ends
        out[f"llm.decode.{kind}_over_fp16"] = (r["× fastest FP16"], noise)
        share = {x["part"]: x["share"] for x in rows["split"] if x["kind"] == kind}
        if "GEMV" in share:
            out[f"ch12.decode.{kind}_gemv_share"] = share["GEMV"]
    out["ch12.decode.fp16_fused_over_eager"] = max(by["fp16 fused (CUDA)"]["× fastest FP16"],
                                                   by["fp16 fused (Triton)"]["× fastest FP16"]) / \
        by["fp16 eager (cuBLAS)"]["× fastest FP16"]
    return out


DECODE = Experiment("ch12.decode", _decode, {"decode": tables.DECODE, "split": tables.SPLIT,
                                             "attention": tables.ATTENTION, "pdl": tables.PDL},
                    headlines=("llm.decode.w4a16_over_fp16", "llm.decode.w8a16_over_fp16"), derive=_decode_derive,
                    others={"ch12.decode.w4a16_gemv_share": "ratio", "ch12.decode.w8a16_gemv_share": "ratio",
                            "ch12.decode.fp16_fused_over_eager": "ratio"})


def _decode_batch(layers: int = 8, batches: tuple[int, ...] = decode_bench.BATCHES) -> dict[str, list[dict]]:
    import torch
    from tqdm.auto import tqdm

    from helpers.kernels import wo_gemm

    shape = decode_bench.StackShape(layers=layers)
    table, launches = decode_bench.measure_launches(shape, batches)  # dispatch by measurement, on this GPU
    rows: list[dict] = []
    weights = None
    before = wo_gemm.set_table(table)
    try:
        for b in tqdm(batches, desc="batched decode: one batch size at a time", leave=False):
            m = decode_bench.build_batch(shape, b, weights=weights)
            weights = m
            rows += decode_bench.batch_tokens_per_second(m)
    finally:  # the measured table holds for this sweep only
        wo_gemm.set_table(before)
    del m, weights
    torch.cuda.empty_cache()
    return {"batch": rows, "launch": launches}


def _decode_batch_derive(rows: dict[str, list[dict]]) -> dict[str, Any]:
    got = decode_bench.batch_ratio(rows["batch"], 8, "w4a16")
    return {"llm.decode.w4a16_over_fp16.b8": got} if got else {}


DECODE_BATCH = Experiment("ch12.decode_batch", _decode_batch, {"batch": tables.DECODE_BATCH,
                                                                "launch": tables.GEMM_LAUNCH},
                          headlines=("llm.decode.w4a16_over_fp16.b8",), derive=_decode_batch_derive)


GEMM_PROFILE = Experiment("ch12.gemm_ncu", lambda: {"profile": gemm_ncu.profile()}, {"profile": tables.GEMM_NCU},
                          needs="ncu")


def split_of(result: Result, kind: str) -> dict[str, Any] | None:
    """{'ms/step': {part: ms}, 'share': {part: share}} of one kind's decode step (None when not measured)."""
    sel = [r for r in result["split"] if r["kind"] == kind]
    if not sel:
        return None
    return {"ms/step": {r["part"]: r["ms/step"] for r in sel}, "share": {r["part"]: r["share"] for r in sel}}


def agreement(*results: Result) -> list[dict]:
    """The kernels that more than one table of these results shows, by kernel, shape and batch (``tables.agreement``)."""
    return tables.agreement({name: rows for res in results for name, rows in res.rows.items()})
