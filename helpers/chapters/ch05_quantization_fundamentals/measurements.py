"""Chapter 5's timed measurements as Experiments, their tables declared once (record names as stored before).

    COPY_CPU  copying the same count of values as FP32 and as INT8 on this CPU (runs on any machine)
    GPU_INT8  on a GPU: the same copy there, and GEMM 8192³ on CUDA cores (dp4a), INT8 and BF16 Tensor Cores;
              elsewhere the stored GPU run

A cell is ``result = measurements.GPU_INT8.run(); result.show("int8_gemm", caption=...)``.

Serves: chapter 5.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from helpers.experiment import Experiment, Rows, Table
from helpers.quant import intgemm, sizes
from helpers.records import Record

COPY_FIELDS = {"FP32 GB/s": "fp32_gbs", "INT8 GB/s": "int8_gbs", "values": "numel"}
COPY = Table("ch05.copy.fp32_over_int8_time", keys=("device",), value="FP32 ÷ INT8 time", unit="ratio",
             fields=COPY_FIELDS, legacy=lambda r: {"device": r.name.rsplit(".", 1)[1]})


# Chapter 2 times GEMMs of the same shape in its own sweep (helpers.perf.gemm); the harness says how these were timed.
HARNESS = "helpers.quant.intgemm.gemm_throughput: each kernel on its own, bench.timeit median (not chapter 2's sweep)"


def _gemm_table(kernels: tuple[str, ...], unit: str, tag: str) -> Table:
    """GEMM throughput rows of some kernels, recorded as ch05.gemm.<kernel>_tops in `unit`."""
    def legacy(r: Record) -> dict[str, Any] | None:
        tail = r.name.rsplit(".", 1)[1]
        return {"kernel": tail.removesuffix("_tops"), "harness": HARNESS} if tail.removesuffix("_tops") in kernels \
            and tail.endswith("_tops") else None

    return Table("ch05.gemm", keys=("kernel",), value=unit, unit=unit, fields=("shape", "harness"),
                 name=lambda row: f"{row['kernel']}_tops", tag=tag, legacy=legacy)


INT8_GEMM = _gemm_table(("dp4a", "int_mm"), "TOPS", "ch05.gemm.int8")
BF16_GEMM = _gemm_table(("bf16",), "TFLOP/s", "ch05.gemm.bf16")
GEMM_LABELS = {"dp4a": "dp4a", "int_mm": "int8 Tensor Core", "bf16": "bf16 Tensor Core"}


def _copy_row(device: str, numel: int, repeats: int) -> dict[str, Any]:
    c = sizes.measured_copy_ratio(numel, repeats=repeats, device="cuda" if device == "gpu" else "cpu")
    print(f"{device.upper()} copy of {numel / 2**20:.0f}M values: FP32 {c['fp32_ms']:.2f} ms, INT8 {c['int8_ms']:.2f} ms "
          f"-> {c['fp32_over_int8_time']:.2f}x faster for {c['fp32_over_int8_bytes']:.0f}x fewer bytes")
    return {"device": device, "FP32 ÷ INT8 time": c["fp32_over_int8_time"], "FP32 GB/s": c["fp32_gbs"],
            "INT8 GB/s": c["int8_gbs"], "values": numel}


COPY_CPU = Experiment("ch05.copy_cpu", lambda numel=1 << 26, repeats=10: {"copy": [_copy_row("cpu", numel, repeats)]},
                      {"copy": COPY}, needs="cpu")


def _gpu(numel: int = 1 << 28, size: int = 8192, repeats: int = 20) -> Rows:
    """dp4a checked against the reference (extreme values), the GPU copy, and the three GEMMs of one shape."""
    rng = np.random.default_rng(1)
    a = rng.integers(-128, 128, (300, 1024)).astype(np.int8)
    b = rng.integers(-128, 128, (1024, 200)).astype(np.int8)
    b[:, 0], a[0] = -128, -128                       # extreme values: the largest accumulators
    print("dp4a == reference:", np.array_equal(intgemm.dp4a_gemm(a, b), intgemm.gemm_int8_ref(a, b)))
    copy = _copy_row("gpu", numel, repeats)          # 1 GB of FP32 >> the L2
    tp = intgemm.gemm_throughput(size, size, size, repeats=repeats)
    shape = f"{size}^3"
    return {"copy": [copy],
            "int8_gemm": [{"kernel": k, "TOPS": tp[f"{k}_tops"], "shape": shape, "harness": HARNESS}
                          for k in ("dp4a", "int_mm")],
            "bf16_gemm": [{"kernel": "bf16", "TFLOP/s": tp["bf16_tops"], "shape": shape, "harness": HARNESS}]}


def _gpu_derive(rows: Rows) -> dict[str, Any]:
    by = {r["kernel"]: r["TOPS"] for r in rows["int8_gemm"]}
    return {"ch05.gemm.dp4a_over_int_mm": by["dp4a"] / by["int_mm"]} if {"dp4a", "int_mm"} <= set(by) else {}


GPU_INT8 = Experiment("ch05.gpu_int8", _gpu, {"copy": COPY, "int8_gemm": INT8_GEMM, "bf16_gemm": BF16_GEMM},
                      derive=_gpu_derive, others={"ch05.gemm.dp4a_over_int_mm": "ratio"}, needs="gpu")


def gemm_bars(result: Any) -> dict[str, float]:
    """{kernel label: TOPS or TFLOP/s} of a GPU_INT8 result, for one bar chart (empty when no run holds them)."""
    return {GEMM_LABELS[r["kernel"]]: r.get("TOPS", r.get("TFLOP/s"))
            for r in result["int8_gemm"] + result["bf16_gemm"]}
