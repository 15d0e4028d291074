"""The architecture/precision table: dense (not sparse) peak rates of common inference GPUs, with sources.

Serves: core — used by chapters 0–2, 5, 9–12 and labs 01, 09, 11.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GPUSpec:
    """Published dense peaks of one GPU. Rates in TFLOP/s (TOPS for INT8); None = no such path."""

    name: str
    arch: str
    cc: float
    sms: int
    fp32: float
    tf32: float | None
    fp16: float | None  # FP16/BF16 on Tensor Cores, FP32 accumulate where the vendor gives both
    int8: float | None  # INT8 TOPS: Tensor Cores where present, else dp4a on CUDA cores
    fp8: float | None
    bandwidth_gbs: float
    dp4a: bool
    int8_tensor_cores: bool
    fp8_tensor_cores: bool
    source: str
    match: tuple[str, ...]  # lower-case substrings of the device name that select this row


SPECS: tuple[GPUSpec, ...] = (
    GPUSpec("Tesla P4", "Pascal", 6.1, 20, 5.5, None, None, 22.0, None, 192, True, False, False,
            "NVIDIA Tesla P4 datasheet (INT8 is dp4a on CUDA cores; FP16 runs at 1/64 rate)", ("p4",)),
    GPUSpec("V100 SXM2", "Volta", 7.0, 80, 15.7, None, 125.0, 62.0, None, 900, True, False, False,
            "NVIDIA V100 datasheet (INT8 is dp4a: Volta Tensor Cores do FP16 only)", ("v100",)),
    GPUSpec("T4", "Turing", 7.5, 40, 8.1, None, 65.0, 130.0, None, 320, True, True, False,
            "NVIDIA T4 datasheet", ("t4",)),
    GPUSpec("A100 SXM 80GB", "Ampere", 8.0, 108, 19.5, 156.0, 312.0, 624.0, None, 2039, True, True, False,
            "NVIDIA A100 datasheet (dense; 312/624/1248 are the sparse TF32/FP16/INT8 figures)", ("a100",)),
    GPUSpec("A10", "Ampere", 8.6, 72, 31.2, 62.5, 125.0, 250.0, None, 600, True, True, False,
            "NVIDIA A10 datasheet (dense)", ("a10",)),
    GPUSpec("L4", "Ada", 8.9, 58, 30.3, 60.0, 121.0, 242.5, 242.5, 300, True, True, True,
            "NVIDIA L4 datasheet (dense = half the sparse figures printed there)", ("l4",)),
    GPUSpec("RTX 4090", "Ada", 8.9, 128, 82.6, 82.6, 165.2, 660.6, 660.6, 1008, True, True, True,
            "NVIDIA Ada whitepaper, appendix (FP16 with FP32 accumulate; GeForce halves it)",
            ("4090",)),
    GPUSpec("H100 SXM", "Hopper", 9.0, 132, 67.0, 494.7, 989.4, 1978.9, 1978.9, 3350, True, True, True,
            "NVIDIA H100 datasheet (dense = half the sparse figures printed there)", ("h100",)),
    GPUSpec("H200 SXM", "Hopper", 9.0, 132, 67.0, 494.7, 989.4, 1978.9, 1978.9, 4800, True, True, True,
            "NVIDIA H200 datasheet (same SMs and clocks as H100 SXM, HBM3e)", ("h200",)),
)

PRECISIONS = ("fp32", "tf32", "fp16", "int8", "fp8")


def spec_for(device_name: str) -> GPUSpec | None:
    """The table row whose match strings occur in a device name, or None."""
    low = device_name.lower()
    # Longest match first so that "a100" is not taken for "a10".
    candidates = [(len(m), s) for s in SPECS for m in s.match if m in low]
    return max(candidates, key=lambda c: c[0])[1] if candidates else None


def peak(spec: GPUSpec, precision: str) -> float | None:
    """The dense peak of one precision (TFLOP/s or TOPS)."""
    if precision == "bf16":
        precision = "fp16"
    return getattr(spec, precision)


def table_rows(highlight: str | None = None) -> list[dict]:
    """The spec table as dicts, with `current` set on the row matching `highlight`."""
    current = spec_for(highlight) if highlight else None
    rows = []
    for s in SPECS:
        rows.append({
            "GPU": s.name, "arch": s.arch, "CC": s.cc, "SMs": s.sms,
            "FP32": s.fp32, "TF32": s.tf32, "FP16/BF16": s.fp16, "INT8": s.int8, "FP8": s.fp8,
            "GB/s": s.bandwidth_gbs,
            "dp4a": s.dp4a, "INT8 TC": s.int8_tensor_cores, "FP8 TC": s.fp8_tensor_cores,
            "current": s is current,
        })
    return rows


def show_table(highlight: str | None = None) -> None:
    """Display the spec table (HTML in Jupyter, text elsewhere) with the running device highlighted."""
    from helpers.tables import show

    rows = table_rows(highlight)
    show(rows, highlight_key="current",
         caption="Dense peak rates (TFLOP/s; INT8 in TOPS). Sources: NVIDIA datasheets and whitepapers.")
