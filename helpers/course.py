"""The course map in one place: each chapter's notebook, title and labs, and where a chapter leads next.

Notebook 00 prints the path through the course from it, every chapter's closing "Next" cell links
what it names (``next_markdown``), and ``tests/course/test_course_map.py`` checks both the notebooks and the
README's chapter table against it. A new chapter or lab is added here first.

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


CHAPTERS: tuple[Chapter, ...] = (
    Chapter("00_start_here", "How the workbook works: what runs here, how measuring and checking work",
            ("lab00_warmup_quantize",)),
    Chapter("01_why_gpu_inference", "Why GPUs for inference: latency, throughput, where the CPU wins",
            ("lab01_roofline_and_timing",)),
    Chapter("02_gpu_architecture", "GPU architecture: SMs, CUDA cores, Tensor Cores, precisions, the roofline",
            ("lab01_roofline_and_timing",)),
    Chapter("03_memory_hierarchy", "Memory hierarchy: coalescing, strides, shared memory, bank conflicts",
            ("lab02_coalescing_and_transpose",)),
    Chapter("04_warp_execution", "Warp execution: divergence, occupancy, reductions",
            ("lab03_divergence_and_reduction",)),
    Chapter("05_quantization_fundamentals", "Quantization fundamentals: scales, zero points, integer arithmetic",
            ("lab04_per_channel_and_requant", "lab11_gemm_kernels")),
    Chapter("05b_quantization_explorer", "The quantization explorer: bits, clipping, scheme, granularity",
            ("lab04_per_channel_and_requant",)),
    Chapter("06_calibration", "Calibration: max, percentile, MSE, entropy",
            ("lab05_entropy_calibration", "lab12_histogram_kernels")),
    Chapter("07_ptq", "Post-training quantization with pytorch-quantization", ("lab06_ptq_sensitivity",)),
    Chapter("08_qat", "Quantization-aware training", ("lab07_qat",)),
    Chapter("09_deployment", "Deployment: Q/DQ ONNX, TensorRT, ONNX Runtime, PyTorch INT8", ("lab08_deploy",)),
    Chapter("10_beyond_int8", "Beyond INT8 basics: sparsity, FP8, dynamic quantization, layouts, pipelines"),
    Chapter("11_troubleshooting", "Troubleshooting, automated", ("lab09_troubleshoot",)),
    Chapter("12_language_models",
            "Quantizing a language model: weight-only INT8/INT4, SmoothQuant, KV cache, decode speed",
            ("lab10_llm_quantization", "lab13_weight_only_gemv")),
)
BY_NOTEBOOK = {c.notebook: c for c in CHAPTERS}


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


def path_rows() -> list[dict]:
    """The path through the course as table rows: notebook, what it teaches, its labs."""
    return [{"notebook": c.notebook, "what it teaches": c.title, "lab": ", ".join(c.labs) or "–"}
            for c in CHAPTERS]
