"""Chapter 9's measurements outside the 8-bit engine (``engine.py``), as Experiments.

    PARITY.run(reference=, backends=, x=, ...)  # any machine: every backend against the fake-quant model
    ort_cpu().run(workdir=WORK)                         # any machine: ONNX Runtime FP32 / INT8 / Q/DQ on this CPU
    BATCH1.run()                                        # a GPU: BERT-base at batch 1, eager and as a CUDA graph

``ort_cpu()`` picks the record names by machine: on a CPU-only machine they are the CPU reference's
(``ort_cpu.int8_over_fp32``, a headline); on a GPU machine its host CPU is not the course's CPU reference, so its
numbers go under ``ch09.gpu_host_cpu.*``.

Serves: chapter 9.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from helpers.chapters.ch09_deployment import workloads
from helpers.experiment import Experiment, Rows, Table
from helpers.records import Record

# -- every deployed backend against the PyTorch fake-quant model --------------------------------------------------

PARITY_NAMES = {"ORT on TensorRT-style Q/DQ": "ort_qdq_agreement", "PyTorch INT8 (torch._int_mm)": "torch_int8_agreement"}


def _parity_name(row: Any) -> str:
    return PARITY_NAMES.get(row["backend"]) or workloads.slug(row["backend"]) + "_agreement"


def _parity_legacy(r: Record) -> dict | None:
    """A stored parity record from before the table: its backend from its name."""
    tail = r.name.rsplit(".", 1)[-1]
    back = {v: k for k, v in PARITY_NAMES.items()}
    return {"backend": back[tail], "precision": None} if tail in back else None


PARITY_TABLE = Table("ch09.parity", keys=("backend",), value="top-1 agreement", unit="fraction",
                     fields=("precision",), name=_parity_name, legacy=_parity_legacy)


def _parity(reference: Any, backends: Any, x: Any, labels: Any = None, sizes_mb: Any = None) -> Rows:
    from helpers.deploy import parity

    return {"parity": parity.parity_rows(reference, backends, x, labels, sizes_mb)}


PARITY = Experiment("ch09.parity", _parity, {"parity": PARITY_TABLE}, needs="cpu")

# -- ONNX Runtime on this machine's CPU ---------------------------------------------------------------------------

INT8, QDQ = "ORT INT8 (quantize_static, u8 act)", "ORT on TensorRT-style Q/DQ (s8 act)"


def _ort_table(prefix: str) -> Table:
    return Table(prefix, keys=("path",), value="× ORT FP32", unit="ratio",
                 fields=("ms", "top-1 agreement with FP32", "MB on disk", "batch", "threads"), spread="spread",
                 name=lambda row: workloads.slug(row["path"]),
                 example={"path": INT8, "× ORT FP32": 2.5, "ms": 100.0, "top-1 agreement with FP32": 1.0,
                          "MB on disk": 11.2, "batch": 32, "threads": 2, "spread": None})


def _ort_measure(workdir: str | Path, batch: int = 32, repeats: int = 5) -> Rows:
    import torch

    cpu = workloads.ort_cpu_comparison(workdir, batch=batch, repeats=repeats)
    mb = cpu["size_mb"]
    size = {"ORT FP32": mb["fp32"], INT8: mb["int8 ORT"], QDQ: mb["int8 TensorRT-style"]}
    return {"ort": [{"path": k, "× ORT FP32": cpu["speedup"][k], "ms": t.median_ms,
                     "top-1 agreement with FP32": cpu["agreement"][k], "MB on disk": size[k], "batch": batch,
                     "threads": torch.get_num_threads(), "spread": cpu["spread"].get(k)}
                    for k, t in cpu["timings"].items()]}


def _ort_experiment(prefix: str, int8_name: str, qdq_name: str) -> Experiment:
    def derive(rows: Rows) -> dict[str, Any]:
        by = {r["path"]: r for r in rows["ort"]}
        return {int8_name: (by[INT8]["× ORT FP32"], by[INT8]["spread"]),
                qdq_name: (by[QDQ]["× ORT FP32"], by[QDQ]["spread"])}

    headline = int8_name == "ort_cpu.int8_over_fp32"
    return Experiment(prefix, _ort_measure, {"ort": _ort_table(prefix)},
                      headlines=(int8_name,) if headline else (), derive=derive, needs="cpu",
                      others={qdq_name: "ratio"} if headline else {int8_name: "ratio", qdq_name: "ratio"})


ORT_CPU = _ort_experiment("ch09.ort_cpu.paths", "ort_cpu.int8_over_fp32", "ch09.ort_cpu.trt_style_over_fp32")
ORT_GPU_HOST = _ort_experiment("ch09.gpu_host_cpu.paths", "ch09.gpu_host_cpu.int8_over_fp32",
                               "ch09.gpu_host_cpu.trt_style_over_fp32")


def ort_cpu() -> Experiment:
    """The ONNX Runtime CPU experiment under this machine's names (see the module docstring)."""
    from helpers.device import has_gpu

    return ORT_GPU_HOST if has_gpu() else ORT_CPU


def ort_names(result: Any) -> dict[str, str]:
    """{'i': ORT INT8's ratio name, 't': the Q/DQ graph's} of a result of ``ort_cpu()``."""
    int8, qdq = (*result.experiment.headlines, *result.experiment.others)
    return {"i": int8, "t": qdq}

# -- BERT-base at batch 1: what a CUDA graph saves -----------------------------------------------------------------

B1_PATHS = ("fp16 eager", "int8 eager", "fp16 eager + CUDA graph", "int8 eager + CUDA graph")


def _b1_legacy(r: Record) -> dict | None:
    """A stored batch-1 record from before the table: its path from its name."""
    by_slug = {workloads.slug(p): p for p in B1_PATHS}
    tail = r.name.rsplit(".", 1)[-1]
    return {"path": by_slug[tail]} if tail in by_slug else None


BATCH1_TABLE = Table("ch09.bert.b1_ms", keys=("path",), value="ms", unit="ms", spread="spread",
                     name=lambda row: workloads.slug(row["path"]), legacy=_b1_legacy,
                     example={"path": "fp16 eager", "ms": 4.0, "spread": None})


def _batch1(seq: int = 128, rounds: int = 15) -> Rows:
    import torch

    from helpers import bench

    with torch.inference_mode():
        small = workloads.bert_variants(1, seq, paths=("fp16 eager", "int8 eager"))
        small.update({f"{k} + CUDA graph": workloads.cuda_graph(fn) for k, fn in list(small.items())})
        r = bench.interleaved(small, rounds=rounds, clock="torch", warmup=3, per_round=3)
    return {"b1": [{"path": k, "ms": r.median_s(k) * 1e3, "spread": r.spread(k, lambda s: s * 1e3)}
                   for k in B1_PATHS if k in r.seconds]}


BATCH1 = Experiment("ch09.bert.b1", _batch1, {"b1": BATCH1_TABLE})

