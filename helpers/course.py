"""The course map in one place: each chapter's notebook, title and labs, and where a chapter leads next.

Notebook 00's path through the course is written from it (``path_markdown``: every chapter and lab as a link,
with its goal and a time estimate), every chapter's closing "Next" cell links what it names
(``next_markdown``), and ``tests/course/test_course_map.py`` checks the notebooks and the README's chapter
table against it. A new chapter or lab is added here first. The minutes are estimates for a student reading
and running a notebook on a CPU (the simulator included), not measurements: quarter hours, written in words.

Serves: core — used by chapter 0.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from helpers.errors import InputError

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Chapter:
    """One chapter: its notebook's file stem, what it teaches, and the labs that practise it."""

    notebook: str
    title: str
    labs: tuple[str, ...] = ()
    minutes: int = 45


@dataclass(frozen=True)
class Lab:
    """One lab: its file stem, its goal in one line, and about how long it takes."""

    name: str
    goal: str
    minutes: int


CHAPTERS: tuple[Chapter, ...] = (
    Chapter("00_start_here", "How the workbook works: what runs here, how measuring and checking work",
            ("lab00_warmup_quantize",), minutes=15),
    Chapter("01_why_gpu_inference", "Why GPUs for inference: latency, throughput, where the CPU wins",
            ("lab01_roofline_and_timing",), minutes=45),
    Chapter("02_gpu_architecture", "GPU architecture: SMs, CUDA cores, Tensor Cores, precisions, the roofline",
            ("lab01_roofline_and_timing",), minutes=60),
    Chapter("03_memory_hierarchy", "Memory hierarchy: coalescing, strides, shared memory, bank conflicts",
            ("lab02_coalescing_and_transpose",), minutes=60),
    Chapter("04_warp_execution", "Warp execution: divergence, occupancy, reductions",
            ("lab03_divergence_and_reduction",), minutes=45),
    Chapter("05_quantization_fundamentals", "Quantization fundamentals: scales, zero points, integer arithmetic",
            ("lab04_per_channel_and_requant", "lab11_gemm_kernels"), minutes=60),
    Chapter("05b_quantization_explorer", "The quantization explorer: bits, clipping, scheme, granularity",
            ("lab04_per_channel_and_requant",), minutes=30),
    Chapter("06_calibration", "Calibration: max, percentile, MSE, entropy",
            ("lab05_entropy_calibration", "lab12_histogram_kernels"), minutes=45),
    Chapter("07_ptq", "Post-training quantization with pytorch-quantization", ("lab06_ptq_sensitivity",), minutes=60),
    Chapter("08_qat", "Quantization-aware training", ("lab07_qat",), minutes=45),
    Chapter("09_deployment", "Deployment: Q/DQ ONNX, TensorRT, ONNX Runtime, PyTorch INT8", ("lab08_deploy",), minutes=60),
    Chapter("10_beyond_int8", "Beyond INT8 basics: sparsity, FP8, dynamic quantization, layouts, pipelines", minutes=60),
    Chapter("11_troubleshooting", "Troubleshooting, automated", ("lab09_troubleshoot",), minutes=45),
    Chapter("12_language_models",
            "Quantizing a language model: weight-only INT8/INT4, SmoothQuant, KV cache, decode speed",
            ("lab10_llm_quantization", "lab13_weight_only_gemv"), minutes=75),
)
BY_NOTEBOOK = {c.notebook: c for c in CHAPTERS}
LABS: tuple[Lab, ...] = (
    Lab("lab00_warmup_quantize", "quantize and dequantize a tensor to INT8 (a warm-up)", 30),
    Lab("lab01_roofline_and_timing", "place kernels on the roofline and time a GPU correctly", 60),
    Lab("lab02_coalescing_and_transpose", "write a coalesced copy and a conflict-free transpose", 60),
    Lab("lab03_divergence_and_reduction", "avoid divergence and write a parallel reduction", 45),
    Lab("lab04_per_channel_and_requant", "per-channel weight scales and integer-only requantization", 60),
    Lab("lab05_entropy_calibration", "entropy calibration, TensorRT's method", 60),
    Lab("lab06_ptq_sensitivity", "post-training quantization by hand, then each layer's sensitivity", 60),
    Lab("lab07_qat", "recover accuracy with quantization-aware training", 45),
    Lab("lab08_deploy", "deploy an INT8 model and prove it is INT8 and still accurate", 75),
    Lab("lab09_troubleshoot", "diagnose and fix a broken INT8 deployment", 45),
    Lab("lab10_llm_quantization", "per-group INT4 weights and SmoothQuant's scale for a language model", 60),
    Lab("lab11_gemm_kernels", "write the GEMMs: naive, tiled in shared memory, INT8 with dp4a", 90),
    Lab("lab12_histogram_kernels", "the calibration histogram on the GPU, with privatised bins", 60),
    Lab("lab13_weight_only_gemv", "write the W4A16 GEMV: unpack INT4, scale by group, sum across a warp", 90),
)
BY_LAB = {lab.name: lab for lab in LABS}


def chapter(notebook: str) -> Chapter:
    """The chapter whose notebook has this file stem."""
    if notebook not in BY_NOTEBOOK:
        raise InputError(f"{notebook!r} is not in the course map (helpers/course.py); add it to CHAPTERS.")
    return BY_NOTEBOOK[notebook]


def next_chapter(notebook: str) -> Chapter | None:
    """The chapter after this one, or None for the last."""
    i = CHAPTERS.index(chapter(notebook))
    return CHAPTERS[i + 1] if i + 1 < len(CHAPTERS) else None


def lab_link(lab: str) -> str:
    """A lab's link relative to a chapter notebook (both open in JupyterLab's file browser)."""
    return f"../labs/{lab}.ipynb"


def next_markdown(notebook: str) -> str:
    """The closing "Next" cell of a chapter: its labs and the next chapter, as relative links."""
    c, nxt = chapter(notebook), next_chapter(notebook)
    lines = ["## Next", ""]
    for lab in c.labs:
        lines.append(f"* **Practise it:** [{lab}]({lab_link(lab)}) (open it, fill in the cells marked "
                     "`# YOUR CODE HERE`, run its checks).")
    if nxt is not None:
        lines.append(f"* **Next chapter:** [{nxt.notebook}]({nxt.notebook}.ipynb): {nxt.title}.")
    else:
        lines.append("* **This is the last chapter.** Back to the start: [00_start_here](00_start_here.ipynb).")
    return "\n".join(lines)


QUARTERS = ("a quarter of an hour", "half an hour", "three quarters of an hour", "an hour", "an hour and a quarter",
            "an hour and a half", "an hour and three quarters", "two hours")


def duration(minutes: int) -> str:
    """A time estimate in words ('an hour and a half'): estimates are quarter hours, up to two hours."""
    if minutes % 15 or not 1 <= minutes // 15 <= len(QUARTERS):
        raise InputError(f"a time estimate is a whole number of quarter hours up to two hours; got {minutes} min.")
    return QUARTERS[minutes // 15 - 1]


def lab(name: str) -> Lab:
    """The lab of this file stem."""
    if name not in BY_LAB:
        raise InputError(f"{name!r} is not a lab of the course map (helpers/course.py); add it to LABS.")
    return BY_LAB[name]


def path_markdown() -> str:
    """The path through the course for notebook 00: each chapter, then the labs it introduces, as links
    (relative to notebooks/) with a one-line goal and a time estimate; a lab shared with an earlier chapter
    is named, not repeated."""
    lines, seen = [], set()
    for c in CHAPTERS:
        link = "this page" if c.notebook == "00_start_here" else f"[{c.notebook}]({c.notebook}.ipynb)"
        lines.append(f"* **{link}**: {c.title} (about {duration(c.minutes)})")
        for name in c.labs:
            if name in seen:
                lines.append(f"  * Lab {name}, above")
                continue
            seen.add(name)
            lines.append(f"  * Lab [{name}]({lab_link(name)}): {lab(name).goal} (about {duration(lab(name).minutes)})")
    return "\n".join(lines)


MAINTENANCE = ("suite.", "grading.")  # the course's own upkeep (test-suite time, grader speed), not a lesson


def _verdict(target: object, rec: object) -> str:
    """'1.24 (met)', '0.8 (not met)', '0.9 (not resolved at this noise)', '0.31' without a target, or '–'."""
    from helpers.spread import of_record

    if rec is None:
        return "–"
    value = getattr(rec, "value")
    text = f"{value:.3g}"
    if getattr(target, "straddled")(of_record(rec)):
        return f"{text} (not resolved at this noise)"
    met = getattr(target, "met")(value)
    return text if met is None else f"{text} ({'met' if met else 'not met'})"


def headline_rows(maintenance: bool = False) -> list[dict]:
    """The course's headline targets as table rows: what, target, and each stored run's value marked met / not
    met. The lessons' headlines, or (``maintenance=True``) the course's upkeep rows (suite.*, grading.*)."""
    from helpers import reference

    rows = []
    for t in reference.TARGETS:
        if t.name.startswith(MAINTENANCE) != maintenance:
            continue
        row = {"what": t.meaning, "target": t.text}
        for src in reference.SOURCES:
            row[reference.SOURCE_NAMES[src]] = _verdict(t, reference.lookup(t.name, src))
        rows.append(row)
    return rows
