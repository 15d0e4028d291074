"""Chapter 9's 8-bit engine as Experiments: what it fuses, how accurate it is (any machine), how fast (a GPU).

    ENGINE_SPEED.run()     # on a GPU: tunes, times and records everything below; elsewhere: the stored GPU run
    ENGINE_ACCURACY.run()  # on this machine: the engine's exact CPU twin on the course's trained models

Tables: the tuned GEMM configuration per shape and format (dispatch by measurement), the GEMMs at BERT-base shapes
against FP16 cuBLAS, BERT-base and ResNet-50 throughput of every path, torchao's 8-bit paths in a round of their
own, the GPU time of one forward split by kind of kernel, and the engine's accuracy against FP32.

Serves: chapter 9.
"""

from __future__ import annotations

from typing import Any

import torch

from helpers import spread
from helpers.chapters.ch09_deployment import engine_bench as eb
from helpers.chapters.ch09_deployment import engine_tune as et
from helpers.chapters.ch09_deployment.workloads import MLPERF_RESNET50_H200
from helpers.experiment import Experiment, Rows, Table
from helpers.spread import Spread
from helpers.stage_clock import StageClock


TUNED = Table("ch09.engine.tuned", keys=("format", "shape"), value="TFLOP/s", unit="TFLOP/s", fields=("config",),
              example={"format": "fp8", "shape": "4096x3072x768", "TFLOP/s": 600.0, "config": [128, 128, 128, 8, 8, 3]})
GEMM = Table("ch09.engine.gemm", keys=("shape", "GEMM"), value="× FP16 cuBLAS", unit="ratio",
             fields=("µs", "TFLOP/s", "rounds_s"), spread="spread",
             example={"shape": "4096x3072x768", "GEMM": "fp8 engine", "× FP16 cuBLAS": 1.3, "µs": 30.0,
                      "TFLOP/s": 640.0, "rounds_s": [3.0e-5, 3.1e-5], "spread": None})
BERT = Table("ch09.engine.bert", keys=("path",), value="sequences/s", unit="sequences/s", fields=("rounds_s",),
             spread="spread")
TORCHAO = Table("ch09.engine.torchao", keys=("path",), value="sequences/s", unit="sequences/s", fields=("rounds_s",),
                spread="spread")
RESNET = Table("ch09.engine.resnet50", keys=("path",), value="images/s", unit="images/s", fields=("rounds_s",),
               spread="spread")
INSTRUCTIONS = Table("ch09.engine.instructions", keys=("format", "shape"), value="MMA groups in flight", unit="groups",
                     fields=("config", "instruction", "tile loads"),
                     example={"format": "int8", "shape": "4096x3072x768", "MMA groups in flight": 0,
                              "config": [128, 256, 128, 8, 8, 3, "tma"],
                              "instruction": "wgmma.mma_async.sync.aligned.m64n128k32.s32.s8.s8", "tile loads": "TMA"})
PARTS = Table("ch09.engine.parts", keys=("model", "path", "part"), value="ms", unit="ms")
KERNELS = Table("ch09.engine.kernels", keys=("model", "path"), value="kernels", unit="kernels",
                fields=("GPU ms",), example={"model": "BERT-base", "path": "fp16 engine + CUDA graph", "kernels": 98,
                                            "GPU ms": 2.9})
ACCURACY = Table("ch09.engine.accuracy", keys=("model", "format"), value="drop (pts)", unit="pts",
                 fields=("FP32 %", "engine %", "CPU twin %", "agreement with twin %"), spread="spread")
TABLES = {"tuned": TUNED, "instructions": INSTRUCTIONS, "gemm": GEMM, "bert": BERT, "torchao": TORCHAO,
          "resnet": RESNET, "parts": PARTS, "kernels": KERNELS, "accuracy": ACCURACY}


def _rate_rows(r: Any, items: int, value: str) -> list[dict]:
    """Throughput rows (items per second) of every timed path, with the spread over the rounds."""
    return [{"path": k, value: items / r.median_s(k), "spread": r.spread(k, lambda s: items / s),
             "rounds_s": list(r.seconds[k])} for k in r.seconds]


def trace_name(model: str, path: str) -> str:
    """The record name of one forward's stored timeline, e.g. 'ch09.timeline.bert_base.fp8_engine'."""
    from helpers.experiment import slug

    return "ch09.timeline." + slug(model.lower()).replace(".", "") + "." + \
        slug(path.replace(" + CUDA graph", "").lower()).replace(".", "")


UNFUSED = "fp16 eager + CUDA graph"  # one kernel per PyTorch operation, replayed as a graph: fusion's baseline
LAST: dict[tuple[str, str], Any] = {}  # (model, path) -> the Trace of the last forward measured in this session


def split_rows(model: str, path: str, trace: Any) -> list[dict]:
    """One forward's GPU milliseconds per kind of kernel, and the gaps, as PARTS rows."""
    return [{"model": model, "path": path, "part": k, "ms": v} for k, v in trace.ms_by_kind().items()]


def kernel_rows(model: str, path: str, trace: Any) -> list[dict]:
    """How many kernels one forward launched, and their GPU time, as a KERNELS row."""
    return [{"model": model, "path": path, "kernels": int(trace.totals["events"]),
             "GPU ms": sum(v for k, v in trace.ms_by_kind().items() if k != "gaps")}]


def _parts(model: str, variants: dict, paths: tuple[str, ...]) -> Rows:
    """Record one forward of each path with the shared timeline helper, store its trace (record
    ``trace_name``) and return its time per kind of kernel (PARTS rows) and its kernel count (KERNELS rows)."""
    from helpers.perf import timeline

    rows: list[dict] = []
    kernels: list[dict] = []
    for p in paths:
        if p in variants:
            try:
                with torch.inference_mode():
                    t = timeline.record(variants[p], label=p)
            except Exception as exc:  # a profiler that sees no kernel must not lose the timings
                print(f"{model} {p}: no time split ({type(exc).__name__}: {exc})")
                continue
            timeline.store(t, trace_name(model, p))
            LAST[(model, p)] = t
            rows += split_rows(model, p, t)
            kernels += kernel_rows(model, p, t)
    return {"parts": rows, "kernels": kernels}


def _failed(errors: dict[str, str]) -> None:
    """Say which paths could not be built, and where (the last lines of each traceback)."""
    for name, tb in errors.items():
        print(f"{name}: not built here —", " | ".join(tb.strip().splitlines()[-3:]))


def accuracy_rows(device: str = "cpu") -> list[dict]:
    """The engine on the course's trained encoder and CNN (MNIST-1D test set): its accuracy drop from FP32 with a
    paired bootstrap, and (on a GPU) its agreement with its exact CPU twin. On a GPU the FP8 encoder also runs every
    GEMM cuBLASLt can take there with fast accumulation (``encoder.library_configs``), the path the tuner may choose
    at BERT-base's shapes."""
    from helpers.data import load_dataset
    from helpers.deploy.engine8 import encoder, resnet
    from helpers.models.train import trained_model

    from tqdm.auto import tqdm

    data = load_dataset("mnist1d")
    x, y = data.test.tensors
    calib = list(torch.split(data.calib.tensors[0], 128))
    rows = []
    bar = tqdm(total=5 if device == "cuda" else 4, desc="8-bit engine: accuracy of its FP8 and INT8 builds",
               leave=False)
    for name, mod in (("encoder_small", encoder), ("resnet_small", resnet)):
        model = trained_model(name, progress=False).eval()
        with torch.no_grad():
            ok32 = (model(x).argmax(1) == y).float()
            for fmt in ("fp8", "int8"):
                twin = mod.build(model, calib, fmt)(x).argmax(1)
                preds = {fmt.upper(): twin}
                if device == "cuda":
                    m = trained_model(name, progress=False).eval().cuda()
                    eng = mod.build(m, [c.cuda() for c in calib], fmt)
                    m.half()
                    preds[fmt.upper()] = eng(x.cuda()).argmax(1).cpu()
                    if mod is encoder and fmt == "fp8":
                        tokens = eng.front(x.cuda()).shape[:2].numel()
                        eng.configs = encoder.library_configs(eng, tokens)
                        preds["FP8 cuBLASLt fast accumulation"] = eng(x.cuda()).argmax(1).cpu()
                        bar.update()
                for label, pred in preds.items():
                    ok = (pred == y).float()
                    d = spread.bootstrap_paired(ok32.numpy() * 100, ok.numpy() * 100, what="test samples")
                    rows.append({"model": name, "format": label, "drop (pts)": float(ok32.mean() - ok.mean()) * 100,
                                 "FP32 %": float(ok32.mean()) * 100, "engine %": float(ok.mean()) * 100,
                                 "CPU twin %": float((twin == y).float().mean()) * 100,
                                 "agreement with twin %": float((pred == twin).float().mean()) * 100, "spread": d})
                bar.update()
    bar.close()
    return rows


STAGES = ("bert", "resnet", "accuracy")


def measure(batch: int = 32, seq: int = 128, images: int = 256, torchao: bool = True,
            stages: tuple[str, ...] = STAGES) -> Rows:
    """Everything chapter 9 times on a GPU (all three stages together took 151 s inside notebook 09 on an H100 with
    empty Triton and inductor caches in the last stored run of 2026-12-07, every GEMM tuned with pointer and TMA loads:
    ResNet-50's builds and tuning 73 s, torchao's FP8 path 26 s, building BERT-base's paths 18 s, tuning the GEMMs
    16 s, accuracy 12 s; 168, 190 and 140 s in the three stored runs before it that day; on an H100 on 2026-12-07 with
    the compile caches already filled, 72 s);
    `stages` picks a part ('bert': the GEMMs, BERT-base and torchao; 'resnet'; 'accuracy')."""
    out: Rows = {}
    clock = StageClock()
    if "bert" in stages:
        out.update(_measure_bert(batch, seq, torchao, clock))
    if "resnet" in stages:
        clock.start("ResNet-50: building and tuning every path")
        rn, errors, tuned = eb.resnet_variants(images)
        _failed(errors)
        out["tuned"] = out.get("tuned", []) + tuned
        clock.start("ResNet-50: interleaved rounds and the kernel split")
        out["resnet"] = _rate_rows(et.interleaved(rn, rounds=12, inner=3), images, "images/s")
        for k, v in _parts("ResNet-50", rn, tuple(rn)).items():
            out[k] = out.get(k, []) + v
        rn.clear()
        torch.cuda.empty_cache()
    if "accuracy" in stages:
        clock.start("accuracy")
        out["accuracy"] = accuracy_rows("cuda")
    print(clock.line("Measuring the engine on this GPU"))
    return out


def _measure_bert(batch: int, seq: int, torchao: bool, clock: StageClock) -> Rows:
    """The GEMM tuning and table, BERT-base's paths in interleaved rounds, torchao's in a round of their own."""
    from tqdm.auto import tqdm

    bar = tqdm(total=5, desc="8-bit engine on this GPU: GEMMs and BERT-base", leave=False)

    def step(what: str) -> None:
        bar.set_postfix_str(what)
        clock.start(what)

    step("tuning the fused GEMM per shape")
    tuned, engine_configs, tuned_rows, instructions = {}, {}, [], []
    for fmt in eb.FORMATS:
        best, rows = et.tune(fmt)
        tuned[fmt], engine_configs[fmt] = best, et.dispatch(best, rows)
        tuned_rows += et.tuned_rows(fmt, engine_configs[fmt], rows)
        try:
            instructions += et.instruction_rows(fmt, best)
        except Exception as exc:  # reading the PTX explains the timings; it must not lose them
            print(f"{fmt}: the tuned GEMMs' PTX was not read ({type(exc).__name__}: {str(exc)[:160]})")
    bar.update()
    step("GEMMs at BERT-base shapes")
    gemm = eb.gemm_table(tuned)
    bar.update()
    step("BERT-base: building every path")
    bert, errors = eb.bert_variants(batch, seq, engine_configs)
    _failed(errors)
    bar.update()
    step("BERT-base: interleaved rounds")
    for name, fn in bert.items():  # each path once more after all were built: a fault names its path
        try:
            with torch.inference_mode():
                fn()
            torch.cuda.synchronize()
        except Exception as exc:
            raise RuntimeError(f"BERT-base path {name!r} failed when run after the others were built: {exc}") from exc
    bert_rows = _rate_rows(et.interleaved(bert, rounds=15, inner=5), batch, "sequences/s")
    step("BERT-base: the unfused trace and the kernel split")
    unfused, errors = eb.bert_variants(batch, seq, engine_configs, paths=(UNFUSED,))  # traced only: what fusion removes
    _failed(errors)
    parts = _parts("BERT-base", {**bert, **unfused}, (UNFUSED, "fp16 compiled + CUDA graph", "fp16 engine + CUDA graph",
                                                       "fp8 engine + CUDA graph", "int8 engine + CUDA graph"))
    unfused.clear()
    bar.update()
    torchao_rows: list[dict] = []
    if torchao:
        step("torchao's FP8 path, in a round of its own")
        peers, errors = eb.bert_variants(batch, seq, engine_configs, paths=("torchao fp8 + CUDA graph",))
        _failed(errors)
        if peers:
            same = {k: bert[k] for k in ("fp16 compiled + CUDA graph", "fp8 engine + CUDA graph") if k in bert}
            torchao_rows = _rate_rows(et.interleaved({**same, **peers}, rounds=15, inner=5), batch, "sequences/s")
    bar.update()
    bert.clear()
    torch.cuda.empty_cache()
    bar.close()
    return {"tuned": tuned_rows, "instructions": instructions, "gemm": gemm, "bert": bert_rows, "torchao": torchao_rows,
            **parts}


def best_row(rows: list[dict], value: str, prefixes: tuple[str, ...]) -> dict | None:
    """The fastest row whose path starts with one of `prefixes` (the headline ratios' "best FP16" and "best 8-bit")."""
    cands = [r for r in rows if str(r["path"]).startswith(prefixes)]
    return max(cands, key=lambda r: r[value]) if cands else None


def _ratio(fast: dict | None, slow: dict | None) -> tuple[float, Spread | None] | None:
    """slow time ÷ fast time over the same rounds (> 1: `fast` is faster), with its spread."""
    if not fast or not slow or not fast.get("rounds_s") or not slow.get("rounds_s"):
        return None
    return spread.paired_ratio(slow["rounds_s"], fast["rounds_s"])


def gemm_ratios(rows: list[dict]) -> dict[str, tuple[float, Spread | None]]:
    """FP16 cuBLAS time ÷ each GEMM's time, summed over the four BERT shapes (each once per layer), round by round."""
    by: dict[str, list[list[float]]] = {}
    for r in rows:
        by.setdefault(r["GEMM"], []).append(r["rounds_s"])
    if "fp16 cuBLAS" not in by:
        return {}
    total = {k: [sum(rs) for rs in zip(*v)] for k, v in by.items() if len(v) == len(by["fp16 cuBLAS"])}
    return {k: spread.paired_ratio(total["fp16 cuBLAS"], t) for k, t in total.items()}


def gemm_speedup(rows: list[dict]) -> tuple[str, tuple[float, Spread | None]] | None:
    """The fastest 8-bit GEMM (library or the engine's; INT32-out excluded) and its `gemm_ratios` entry."""
    eight = {k: v for k, v in gemm_ratios(rows).items() if k.startswith(("fp8", "int8")) and "int32 out" not in k}
    if not eight:
        return None
    best = max(eight, key=lambda k: eight[k][0])
    return best, eight[best]


def derive(rows: Rows) -> dict[str, Any]:
    """The chapter's headlines from the measured rows, each with the spread of its interleaved rounds."""
    out: dict[str, Any] = {}
    bert, rn = rows.get("bert", []), rows.get("resnet", [])
    b16, b8 = best_row(bert, "sequences/s", ("fp16",)), best_row(bert, "sequences/s", ("fp8", "int8"))
    pairs = {"bert_base.best8_over_fp16": (b8, b16),
             "bert_base.int8_over_fp16": (best_row(bert, "sequences/s", ("int8",)), b16),
             "bert_base.int8_over_fp32_eager": (best_row(bert, "sequences/s", ("int8",)),
                                                best_row(bert, "sequences/s", ("fp32",))),
             "resnet50.best8_over_fp16": (best_row(rn, "images/s", ("fp8", "int8")),
                                          best_row(rn, "images/s", ("fp16",)))}
    tao = rows.get("torchao", [])
    pairs["bert_base.engine_over_torchao"] = (best_row(tao, "sequences/s", ("fp8 engine", "int8 engine")),
                                              best_row(tao, "sequences/s", ("torchao",)))
    for name, (fast, slow) in pairs.items():
        r = _ratio(fast, slow)
        if r is not None:
            out[name] = r
    g = gemm_speedup(rows.get("gemm", []))
    if g is not None:
        out["bert_base.gemm8_over_fp16"] = g[1]
    best_rn = max(rn, key=lambda r: r["images/s"]) if rn else None
    if best_rn is not None:
        s = best_rn["spread"]
        out["resnet50.best_over_mlperf_h200"] = (best_rn["images/s"] / MLPERF_RESNET50_H200, None if s is None else
                                                 Spread(s.lo / MLPERF_RESNET50_H200, s.hi / MLPERF_RESNET50_H200,
                                                        s.method))
    return out


ENGINE_SPEED = Experiment("ch09.engine", measure, TABLES,
                          headlines=("bert_base.best8_over_fp16", "bert_base.int8_over_fp16",
                                     "bert_base.gemm8_over_fp16", "bert_base.engine_over_torchao",
                                     "bert_base.int8_over_fp32_eager", "resnet50.best8_over_fp16",
                                     "resnet50.best_over_mlperf_h200"),
                          derive=derive, needs="gpu")
ENGINE_ACCURACY = Experiment("ch09.engine_cpu", lambda: {"accuracy": accuracy_rows("cpu")},
                             {"accuracy": Table("ch09.engine_cpu.accuracy", keys=("model", "format"),
                                                value="drop (pts)", unit="pts",
                                                fields=("FP32 %", "engine %", "CPU twin %", "agreement with twin %"),
                                                spread="spread",
                                                example={"model": "resnet_small", "format": "INT8", "drop (pts)": 0.0,
                                                         "FP32 %": 98.3, "engine %": 98.3, "CPU twin %": 98.3,
                                                         "agreement with twin %": 100.0, "spread": None})},
                             needs="cpu")
