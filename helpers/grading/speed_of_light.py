"""Speed-of-light limits of the kernel labs: for each ranked exercise and shape, the time no kernel can beat on a
card, the larger of (bytes that must move ÷ the card's measured copy bandwidth) and (operations ÷ its measured
GEMM rate of that precision). The rates come from the card's stored reference run (chapters 2 and 3's own
measurements, ``reference/<card>/results.json``), never from a submission's timings; every table names the card
and the records it used. A kernel's fraction of the limit is limit ÷ its time (1 is the speed of light).

    from helpers.grading import speed_of_light as sol
    sol.table("lab11.tiled", "h200")        # one row per shape: bytes, operations, both bounds, the limit
    sol.note("lab11.tiled", "2048³", 1.2e-3) # the sentence a student's check prints on a GPU

Serves: core of the kernel labs' ranking (labs 11, 12 and 13; the instructors' rank command).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from helpers.errors import InputError

# (record name, what it is): the first one stored on the card is used
BANDWIDTH = (("ch03.copy_gbs.torch_d2d", "device-to-device copy, torch (bytes read + written)"),
             ("ch02.gpu_bandwidth_gbs", "device-to-device copy, chapter 2"))
RATES = {"fp32": (("ch02.gemm_tflops.fp32.n8192", "cuBLAS FP32 GEMM 8192³, CUDA cores (no TF32)"),),
         "int8": (("ch02.gemm_tflops.int8.n8192", "cuBLAS INT8 GEMM 8192³, tensor cores"),)}


@dataclass(frozen=True)
class Shape:
    """One ranked problem size: its label, the bytes a kernel must move at least, and its operations."""

    label: str
    dims: tuple[int, ...]
    bytes: float
    ops: float
    precision: str | None  # the GEMM rate that bounds its operations; None: bandwidth alone


@dataclass(frozen=True)
class Target:
    """A ranked exercise: its title, the kernel's positional arguments and the shapes it is timed on."""

    exercise: str
    title: str
    shapes: tuple[Shape, ...]


def _gemm(m: int, n: int, k: int, width: int, out_width: int, per_column: int, precision: str) -> Shape:
    """A GEMM: A (m×k) and B (k×n) read once, C written once, per-column parameters read once."""
    label = f"{m}³" if m == n == k else f"{m}×{n}×{k}"
    return Shape(label, (m, n, k), float(width * (m * k + k * n) + out_width * m * n + per_column * n),
                 2.0 * m * n * k, precision)


def _hist(n: int, bins: int) -> Shape:
    """A histogram: n float32 values read once, the int32 bins written once."""
    return Shape(f"{n // 2**20}M values, {bins} bins", (n, bins), 4.0 * n + 4.0 * bins, 0.0, None)


def _gemv(n: int, k: int, group: int) -> Shape:
    """A W4A16 GEMV: n×k INT4 codes (half a byte each), float32 scales per row and group, x read, y written."""
    return Shape(f"{n}×{k}", (n, k, group), n * k / 2 + 4.0 * n * (k // group) + 4.0 * k + 4.0 * n,
                 2.0 * n * k, "fp32")


GEMM_SHAPES = ((1024, 1024, 1024), (2048, 2048, 2048), (4096, 4096, 1024))
HIST_SHAPES = ((1 << 22, 512), (1 << 24, 2048), (1 << 24, 256))
GEMV_SHAPES = ((4096, 4096), (11008, 4096), (4096, 11008))  # lab 13's bench: LLaMA-7B's projections
GEMV_GROUP = 128

TARGETS = {t.exercise: t for t in (
    Target("lab11.naive", "naive FP32 GEMM", tuple(_gemm(*s, 4, 4, 0, "fp32") for s in GEMM_SHAPES)),
    Target("lab11.tiled", "tiled FP32 GEMM", tuple(_gemm(*s, 4, 4, 0, "fp32") for s in GEMM_SHAPES)),
    Target("lab11.int8", "tiled INT8 GEMM", tuple(_gemm(*s, 1, 1, 16, "int8") for s in GEMM_SHAPES)),
    Target("lab12.global_atomics", "histogram, global atomics", tuple(_hist(*s) for s in HIST_SHAPES)),
    Target("lab12.shared_bins", "histogram, shared-memory bins", tuple(_hist(*s) for s in HIST_SHAPES)),
    Target("lab13.gemv", "W4A16 GEMV", tuple(_gemv(*s, GEMV_GROUP) for s in GEMV_SHAPES)),
)}


def target(exercise: str) -> Target:
    """The ranked exercise, or InputError listing those ranked."""
    if exercise not in TARGETS:
        raise InputError(f"{exercise!r} is not a ranked kernel exercise; ranked: {', '.join(TARGETS)}.")
    return TARGETS[exercise]


def shape(exercise: str, label: str) -> Shape:
    """One shape of a ranked exercise by its label, or InputError listing the labels."""
    t = target(exercise)
    found = next((s for s in t.shapes if s.label == label), None)
    if found is None:
        labels = ", ".join(s.label for s in t.shapes)
        raise InputError(f"{exercise} has no ranked shape {label!r}; its shapes: {labels}.")
    return found


@dataclass(frozen=True)
class Rate:
    """A stored measurement used as a limit: its value (GB/s or TFLOP/s), record name, meaning, device, date."""

    value: float
    name: str
    what: str
    device: str
    date: str


def _stored(card: str, choices: Iterable[tuple[str, str]], what: str, records: dict | None) -> Rate:
    """The first of `choices` stored for the card (records: name -> Record, for tests), or InputError."""
    from helpers import reference

    choices = tuple(choices)
    if records is None:
        if card not in reference.SOURCES or card == "cpu":
            raise InputError(f"unknown card {card!r}: pass one of the stored GPU runs "
                             f"({', '.join(s for s in reference.SOURCES if s != 'cpu')}).")
        records = {r.name: r for r in reference.load(card)}
    for name, meaning in choices:
        r = records.get(name)
        if r is not None and math.isfinite(r.value) and r.value > 0:
            return Rate(float(r.value), name, meaning, r.device, r.date)
    raise InputError(f"the stored {card.upper()} run has no {what} ({' or '.join(n for n, _ in choices)}), so its "
                     f"speed-of-light limits cannot be computed: run chapters 2 and 3 on that card "
                     f"(python -m helpers.tools.report) and store the run, or pass a card that has them.")


def rates(card: str, records: dict | None = None) -> dict[str, Rate]:
    """The card's stored copy bandwidth ('bandwidth') and GEMM rates ('fp32', 'int8')."""
    out = {"bandwidth": _stored(card, BANDWIDTH, "copy bandwidth", records)}
    for prec, choices in RATES.items():
        out[prec] = _stored(card, choices, f"{prec.upper()} GEMM rate", records)
    return out


def limit_seconds(s: Shape, card_rates: dict[str, Rate]) -> tuple[float, float, float]:
    """(limit, memory bound, compute bound) in seconds; the compute bound is 0 for a bandwidth-only shape."""
    memory = s.bytes / (card_rates["bandwidth"].value * 1e9)
    compute = s.ops / (card_rates[s.precision].value * 1e12) if s.precision else 0.0
    return max(memory, compute), memory, compute


def table(exercise: str, card: str, records: dict | None = None) -> list[dict]:
    """One row per shape of the exercise: bytes, operations, both bounds and the limit (µs), what bounds it, and
    the stored records the rates came from."""
    t, r = target(exercise), rates(card, records)
    rows = []
    for s in t.shapes:
        lim, mem, comp = limit_seconds(s, r)
        rate = r[s.precision] if s.precision else None
        rows.append({"exercise": exercise, "shape": s.label, "bytes": int(s.bytes), "operations": int(s.ops),
                     "memory bound µs": round(mem * 1e6, 3), "compute bound µs": round(comp * 1e6, 3),
                     "limit µs": round(lim * 1e6, 3), "bound by": "memory" if mem >= comp else "compute",
                     "card": r["bandwidth"].device, "bandwidth": f"{r['bandwidth'].value:.0f} GB/s "
                     f"({r['bandwidth'].name}, {r['bandwidth'].date})",
                     "rate": f"{rate.value:.1f} {'TOPS' if s.precision == 'int8' else 'TFLOP/s'} ({rate.name}, "
                             f"{rate.date})" if rate else "none: bandwidth alone"})
    return rows


def fraction(limit_s: float, seconds: float) -> float:
    """limit ÷ measured time: the share of the speed of light reached (InputError for a time that is not > 0)."""
    if not (isinstance(seconds, (int, float)) and math.isfinite(seconds) and seconds > 0):
        raise InputError(f"a kernel's time must be a positive, finite number of seconds; got {seconds!r}.")
    return limit_s / seconds


def card_of(device: str) -> str | None:
    """The stored card folder whose name is in the device label ('NVIDIA H200' -> 'h200'), or None."""
    from helpers import reference

    return next((c for c in reference.stored_cards() if c.upper() in device.upper()), None)


def note(exercise: str, label: str, seconds: float, device: str | None = None, zh: bool = False) -> str:
    """The sentence a student's check prints on a GPU: the fraction of this card's limit at one shape, or why none
    is computed (no stored rates of this card: the limit of another card would not be this card's). `zh`: its
    中文 twin."""
    if device is None:
        from helpers.device import device_label

        device = device_label()
    s, card = shape(exercise, label), card_of(device)
    try:
        if card is None:
            raise InputError(f"no stored GPU run of {device}")
        r = rates(card)
    except InputError as err:
        if zh:
            return f"{label} 的光速极限：未计算（{device} 没有已存储的带宽和 GEMM 速率）。"
        return f"Speed of light at {label}: not computed ({str(err).split(':')[0]})."
    lim, mem, comp = limit_seconds(s, r)
    names = r["bandwidth"].name + (f" and {r[s.precision].name}" if s.precision else "")
    if zh:
        return (f"{label} 在这张 {card.upper()} 上的光速极限：{lim * 1e6:.1f} µs（受{'内存' if mem >= comp else '计算'}"
                f"限制，取自已存储的 {card.upper()} 运行的 {names.replace(' and ', ' 和 ')}）；你的核函数用时 "
                f"{seconds * 1e6:.1f} µs：达到极限的 {fraction(lim, seconds):.3f}。")
    return (f"Speed of light at {label} on this {card.upper()}: {lim * 1e6:.1f} µs ("
            f"{'memory' if mem >= comp else 'compute'}-bound, from the stored {card.upper()} run's {names}); your "
            f"kernel took {seconds * 1e6:.1f} µs: {fraction(lim, seconds):.3f} of the limit.")
