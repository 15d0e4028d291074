"""TensorRT-RTX engines built from the course's own FP32, FP16 and Q/DQ INT8 exports of two models.

``run_builds(work_dir)`` exports the chapter 9 model (``resnet_small`` trained on MNIST-1D) and
ResNet-50 with ``helpers.deploy.export``, parses and builds each with a dynamic-batch profile
(1/8/32) through ``helpers.deploy.tensorrt_backend.build``, records what the builder said, then
tries to run each engine: on an RTX-class GPU it runs them and times them beside ONNX Runtime and
PyTorch INT8; on Hopper it records the runtime's refusal, in its own words.
``show(results)`` prints the table from live results, else from the stored reference.

    python -m helpers.chapters.ch09_deployment.trt_rtx --out DIR    (records go to $WORKBOOK_RESULTS)

Serves: chapter 9.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from helpers import bench
from helpers.chapters.ch09_deployment.trt_rtx_view import PREFIX, PROFILE, results_from_records, show
from helpers.plugins import trt_family, trt_layers
from helpers.deploy.tensorrt_backend import BuildReport, TensorRTBackend, build, parser_report
from helpers.errors import InputError, MissingPackageError

__all__ = ["available", "run_builds", "show", "parser_report", "results_from_records", "ModelSpec"]

HEADLINE = "trt_rtx.int8_over_fp32_engine_size"


@dataclass
class ModelSpec:
    """A model to export: how to make it, one example input, calibration batches and labelled test data."""

    name: str
    make: Callable[[], nn.Module]
    example: torch.Tensor
    calib: list[torch.Tensor]
    test: tuple[torch.Tensor, torch.Tensor] | None = None  # (inputs, labels) for parity and timing


def chapter_model() -> ModelSpec:
    """The chapter 9 model: resnet_small trained on MNIST-1D, calibrated on its calibration split."""
    from helpers.data import load_dataset
    from helpers.models.train import trained_model

    data = load_dataset("mnist1d")
    x_test, y_test = data.test.tensors
    return ModelSpec(
        "resnet_small",
        lambda: trained_model("resnet_small", progress=False),
        x_test[:1],
        list(torch.split(data.calib.tensors[0], 128)),
        (x_test, y_test),
    )


def resnet50_model() -> ModelSpec:
    """ResNet-50 at 224x224 (random init), calibrated on random normal images (the CLI's default)."""
    from helpers.models.resnet import image_batch, resnet50

    return ModelSpec(
        "resnet50", resnet50, torch.zeros(1, 3, 224, 224), [image_batch(8, seed=s) for s in (1, 2)]
    )


def available() -> bool:
    """True where TensorRT-RTX is importable and a GPU is present (the reference run, an RTX PC)."""
    from helpers.device import has_gpu

    return trt_family.find(trt_family.TENSORRT_RTX) is not None and has_gpu()


def export_all(spec: ModelSpec, work: Path) -> tuple[dict[str, Path], nn.Module]:
    """FP32, FP16 and Q/DQ INT8 ONNX files of one model (the course's own export code), and the FP32 model."""
    from helpers.deploy.export import export_fp16, export_onnx, export_qdq
    from helpers.deploy.qdq_model import fake_quant_copy

    model = spec.make().eval()
    fq = fake_quant_copy(model, spec.calib)
    paths = {
        "fp32": export_onnx(model, spec.example, work / f"{spec.name}_fp32.onnx"),
        "fp16": export_fp16(model, spec.example, work / f"{spec.name}_fp16.onnx"),
        "int8": export_qdq(fq, spec.example, work / f"{spec.name}_int8_qdq.onnx"),
    }
    return paths, model


def try_run(
    rep: BuildReport, precision: str, fam: trt_family.Family
) -> tuple[TensorRTBackend | None, str]:
    """(backend, '') when this machine runs the engine, else (None, the runtime's refusal)."""
    if rep.engine is None:
        return None, "no engine was built"
    try:
        return TensorRTBackend(rep.engine, precision, family=fam), ""
    except InputError as exc:
        return None, str(exc)


def result_row(
    spec: ModelSpec, precision: str, rep: BuildReport, ran: bool, refusal: str
) -> dict[str, Any]:
    """One model x precision as a plain dict (what run_builds returns and show() reads)."""
    from helpers.device import device_label

    return {
        "model": spec.name,
        "precision": precision,
        "family": rep.family,
        "device": device_label(),
        "date": _dt.date.today().isoformat(),
        "stored": False,
        "onnx_mb": rep.onnx.stat().st_size / 1e6,
        "parsed": rep.parsed,
        "built": rep.built,
        "build_s": rep.build_s,
        "engine_mb": rep.engine_mb,
        "layers": rep.network_layers,
        "network_types": rep.network_types,
        "engine_layers": len(rep.engine_layers),
        "int8_layers": rep.int8_layers,
        "layer_summary": trt_layers.summary(rep.engine_layers),
        "parser_messages": rep.parser_messages,
        "build_messages": rep.build_messages[-10:],
        "error": rep.error,
        "runs": ran,
        "runtime_error": refusal,
    }


def record_row(row: dict[str, Any]) -> None:
    """Record one result under ch09.trt_rtx.<model>.<precision>.* (details in the extras of `.built`)."""
    base = f"{PREFIX}.{row['model']}.{row['precision']}"
    details = {
        k: row[k]
        for k in (
            "family",
            "onnx_mb",
            "parsed",
            "network_types",
            "layer_summary",
            "parser_messages",
            "build_messages",
            "error",
        )
    }
    details["parser_messages"] = row["parser_messages"][:20]  # the first 20 (all are in the rows)
    bench.record(f"{base}.built", float(row["built"]), "bool", **details)
    if row["built"]:
        bench.record(f"{base}.build_s", row["build_s"], "s", profile=list(PROFILE))
        bench.record(f"{base}.engine_mb", row["engine_mb"], "MB")
        bench.record(f"{base}.engine_layers", row["engine_layers"], "layers")
        bench.record(f"{base}.int8_layers", row["int8_layers"], "layers")
        bench.record(f"{base}.runs", float(row["runs"]), "bool", error=row["runtime_error"])
    if row["parsed"]:
        bench.record(f"{base}.layers", row["layers"], "layers")


def record_headline(rows: list[dict[str, Any]], model: str = "resnet50") -> float | None:
    """Record ResNet-50's INT8 ÷ FP32 engine size (the headline), when both engines were built."""
    size = {r["precision"]: r["engine_mb"] for r in rows if r["model"] == model and r["built"]}
    if "int8" not in size or "fp32" not in size:
        return None
    return bench.record(
        HEADLINE,
        size["int8"] / size["fp32"],
        "ratio",
        ratio_of=[f"{model} INT8 Q/DQ engine MB", f"{model} FP32 engine MB"],
    ).value


def benchmark(
    spec: ModelSpec,
    model: nn.Module,
    engines: dict[str, TensorRTBackend],
    work: Path,
    batches: tuple[int, ...] = (1, 32),
    repeats: int = 20,
) -> list[dict[str, Any]]:
    """Time the engines beside ONNX Runtime and PyTorch INT8 (deploy_all); check their parity."""
    from helpers.chapters.ch09_deployment import workloads
    from helpers.deploy import parity

    if spec.test is None:
        raise InputError(f"benchmark needs test data for {spec.name}; ModelSpec.test is None.")
    x, y = spec.test
    deployed = workloads.deploy_all(model, torch.cat(spec.calib), x, work / f"{spec.name}_bench")
    with torch.no_grad():
        ref = deployed["fake_quant"](x).numpy()
    names = {f"TensorRT-RTX {p}": be for p, be in engines.items()}
    for row in parity.parity_rows(ref, names, x.numpy(), y.numpy()):
        bench.record(
            f"{PREFIX}.parity.{spec.name}.{row['precision']}_agreement",
            row["top-1 agreement"],
            "fraction",
        )
    keep = ("ORT FP32", "PyTorch INT8 (torch._int_mm)")
    backends = {**names, **{k: v for k, v in deployed["backends"].items() if k in keep}}
    make = lambda b: x[torch.arange(b) % len(x)].numpy()  # noqa: E731
    rows = []
    for label, be in backends.items():
        for lat in be.benchmark(make, batches, repeats=repeats):
            name = f"{PREFIX}.bench.{spec.name}.{workloads.slug(label)}.b{lat.batch}"
            bench.record(name, lat.items_per_s, "items/s")
            rows.append({"model": spec.name, **lat.row(), "backend": label})
    return rows


def run_builds(
    work_dir: Path,
    specs: list[ModelSpec] | None = None,
    *,
    family: trt_family.Family | None = None,
    bench_repeats: int = 20,
) -> list[dict[str, Any]]:
    """Export, build, record and (where the runtime allows) run and time each model x precision."""
    from tqdm.auto import tqdm

    fam = family or trt_family.require(trt_family.TENSORRT_RTX, "chapter 9's TensorRT-RTX engines")
    work = Path(work_dir)
    work.mkdir(parents=True, exist_ok=True)
    print(f"Building {fam.label} engines from the course's exports (one progress step per model).")
    rows: list[dict[str, Any]] = []
    specs = specs if specs is not None else [chapter_model(), resnet50_model()]
    for spec in tqdm(specs, desc="export + build (FP32, FP16, INT8 Q/DQ)"):
        paths, model = export_all(spec, work)
        engines = {}
        for precision, path in paths.items():
            rep = build(
                path,
                work / f"{path.stem}.engine",
                family=fam,
                min_batch=PROFILE[0],
                opt_batch=PROFILE[1],
                max_batch=PROFILE[2],
            )
            backend, refusal = try_run(rep, precision, fam)
            if backend is not None:
                engines[precision] = backend
                rep.engine_layers = backend.layers() or rep.engine_layers
            row = result_row(spec, precision, rep, backend is not None, refusal)
            record_row(row)
            rows.append(row)
        if engines and spec.test is not None:  # the runtime works here: time them (on the INT8 row)
            rows[-1]["bench"] = benchmark(spec, model, engines, work, repeats=bench_repeats)
    record_headline(rows)
    return rows


def main(argv: list[str] | None = None) -> int:
    """Command line: build in a scratch folder, print the table, save the rows under --out."""
    from helpers.session import scratch_dir

    p = argparse.ArgumentParser(
        prog="python -m helpers.chapters.ch09_deployment.trt_rtx",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--out", type=Path, required=True, help="folder for trt_rtx.json (the rows)")
    a = p.parse_args(argv)
    from helpers import cli

    try:
        cli.check_output_dir(a.out, "trt_rtx")  # refused before any build: a user's folder is never written into
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    bench.set_notebook("09_deployment")
    try:
        rows = run_builds(scratch_dir("ch09_trt_rtx"))
    except MissingPackageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    show(rows)
    with cli.output_dir(a.out, "trt_rtx") as out, cli.write_beside(out / "trt_rtx.json") as tmp:
        tmp.write_text(json.dumps(rows, indent=1, default=str) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
