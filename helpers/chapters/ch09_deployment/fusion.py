"""What ONNX Runtime's CPU optimizer turns each Q/DQ dialect into: integer kernels or float ones.

Three INT8 exports of the same model: ORT's own quantize_static with uint8 activations (its x86
default: VNNI multiplies unsigned by signed bytes), the same with int8 activations, and the
TensorRT-style export (int8 activations, no QuantizeLinear after each layer). The counts come
from the graph ORT actually runs, so the sentence about fusion is measured, not recalled.

Serves: chapter 9 (also chapter 11).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from helpers.errors import InputError

DIALECTS = ("ORT quantize_static, u8 activations", "ORT quantize_static, s8 activations",
            "TensorRT-style Q/DQ (s8, no Q after a layer)")


def fusion_rows(fp32_path: str | os.PathLike, trt_style_path: str | os.PathLike,
                calib_batches: Sequence[np.ndarray], workdir: str | os.PathLike) -> list[dict]:
    """One row per dialect: integer kernels, float conv/GEMM kernels and Q/DQ nodes left after ORT's optimizer."""
    from helpers.deploy.ort_backend import fusion_counts, quantize_static_qdq

    if not calib_batches:
        raise InputError("fusion_rows needs calibration batches for ORT's quantize_static.")
    work = Path(workdir)
    paths = {
        DIALECTS[0]: quantize_static_qdq(fp32_path, work / "fusion_u8.onnx", calib_batches, uint8_activations=True),
        DIALECTS[1]: quantize_static_qdq(fp32_path, work / "fusion_s8.onnx", calib_batches, uint8_activations=False),
        DIALECTS[2]: Path(trt_style_path),
    }
    return [{"export": name, **fusion_counts(p)} for name, p in paths.items()]


def fusion_sentence(rows: Sequence[dict]) -> str:
    """What the counts say, computed: which dialect runs integer kernels, and how completely."""
    by = {r["export"]: r for r in rows}
    if set(by) != set(DIALECTS):
        raise InputError(f"fusion_sentence needs the rows of fusion_rows (exports {', '.join(DIALECTS)}).")

    def share(r: dict) -> str:
        total = r["integer kernels"] + r["float conv/GEMM kernels"]
        return f"{r['integer kernels']} of {total}" if total else "none"

    u8, s8, trt = (by[d] for d in DIALECTS)
    if s8["integer kernels"] == 0:
        s8_words = "on this CPU and ORT version int8 activations do not fuse at all"
    elif s8["integer kernels"] < u8["integer kernels"]:
        s8_words = "int8 activations fuse too, but fewer layers than with uint8 (ORT's x86 kernels prefer u8 x s8)"
    else:
        s8_words = "int8 activations fuse as completely as uint8"
    trt_words = ("the TensorRT-style export, with no QuantizeLinear after its layers, fuses none"
                 if trt["integer kernels"] == 0 else
                 f"even the TensorRT-style export fuses {trt['integer kernels']} here")
    return (f"Integer kernels among the conv/GEMM layers ONNX Runtime runs on this CPU: u8 activations {share(u8)}, "
            f"s8 activations {share(s8)}, TensorRT-style {share(trt)} (measured here). So {s8_words}; "
            f"{trt_words}.")


def _speeds(values: dict[str, float]) -> tuple[str, str]:
    """ORT's own INT8 {'i'} and the TensorRT-style Q/DQ {'t'}, each ÷ FP32: faster, slower, no faster, or not
    resolved (1 inside its rounds' spread)."""
    from helpers.findings import compare, spread_of

    return tuple(compare(values[k], above="faster", below="slower", same="no faster", spread=spread_of(values, k))
                 for k in ("i", "t"))  # type: ignore[return-value]


def cpu_speed_verdict(values: dict[str, float]) -> str:
    """Verdict on ORT's own INT8 {'i'} and the TensorRT-style Q/DQ {'t'} speed, both ÷ FP32."""
    own, trt = _speeds(values)
    if own == "faster" and trt != "faster":
        return f"the graph that fuses is faster than FP32, the one that does not is {trt}"
    return f"ORT's own INT8 is {own} than FP32 and the TensorRT-style graph is {trt} here"


def cpu_speed_verdict_zh(values: dict[str, float]) -> str:
    """``cpu_speed_verdict`` in Chinese."""
    from helpers.findings import ZH_WORDS

    words = {**ZH_WORDS, "no faster": "不更快"}
    own, trt = _speeds(values)
    if own == "faster" and trt != "faster":
        return f"会融合的图比 FP32 更快，不融合的图{words[trt]}"
    return f"ORT 自己的 INT8 相对 FP32 {words[own]}，TensorRT 风格的图在这里{words[trt]}"
