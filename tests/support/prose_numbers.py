"""Find the numbers in a notebook's markdown and decide whether each one is backed.

A number written in prose is backed when it is
(a) a stored measurement that the notebook names (a record made by this notebook, or one whose name
    or name prefix appears in its code or text), equal within TOLERANCE, or
(b) a fixed fact on the cited list in ``tests/support/prose_facts.py`` that applies to this notebook.

Not numbers, by construction (the exclusions, each a rule below):
- code: `code spans`, fenced blocks, $math$, link targets and HTML tags;
- identifiers: digits joined to letters or '_' (INT8, FP16, H200, E4M3, ch03, lab02, sm_90, cu130, 05b),
  a name-dash-number (ResNet-50, top-1) and an N:M pattern (2:4 sparsity);
- references: heading and list numbering, 'chapter 5', 'section 2', 'question 3', 'lab 4', '§1.2';
- a lab's grading points, '(2 points)', '(1 point, read by your instructor)': tests/grading/batch/test_labgen.py
  checks that they add up to the points of the graded cells;
- versions (a product name then its version, v4.1, 2.1.3) and dates (2026-11-29);
- exponents after '^' (8192³ is read as 8192 and an exponent);
- counting words (one, two, …) are words, not digits, so they are never scanned.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

TOLERANCE = 0.02  # relative; a number also matches when it is the value rounded to the digits written

PRODUCTS = (r"TensorRT(?:-RTX)?|CUDA|Python|PyTorch|torch|numba|numpy|cupy|ONNX Runtime|onnxruntime|opset|"
            r"pytorch-quantization|ipywidgets|JupyterLab|jupyterlab_widgets|nbgrader|MLPerf(?: Inference)?|"
            r"matplotlib|scikit-learn|ModelOpt|nvidia-modelopt|Nsight Compute|ORT|Volta|Turing|Ampere|Hopper|"
            r"Blackwell|Ada|Pascal|ipykernel|version|Triton")
REMOVE = [
    re.compile(r"```.*?```", re.S),                                  # fenced code
    re.compile(r"`[^`\n]*`"),                                        # code spans
    re.compile(r"\$[^$\n]+\$"),                                      # inline math
    re.compile(r"\]\([^)]*\)"),                                      # link targets
    re.compile(r"<[^>\n]+>"),                                        # HTML tags
    re.compile(r"^\s*#+\s*\d+[a-z]?\s*[·.:]?", re.M),                # heading numbers
    re.compile(r"^\s*\d+[.)]\s", re.M),                              # numbered list markers
    re.compile(r"\b\d{4}-\d{2}-\d{2}\b"),                            # dates
    re.compile(rf"(?:{PRODUCTS})\s+v?\d+(?:\.\d+)*(?:\s*(?:and|or|/|,)\s*\d+(?:\.\d+)*)*", re.I),  # versions
    re.compile(r"\bv\d+(?:\.\d+)+\b|\b\d+\.\d+\.\d+\b"),             # bare versions
    re.compile(r"(?:chapters?|sections?|questions?|labs?|steps?|parts?|notebooks?|cells?|figures?|exercises?|"
               r"§)\s*\d+[a-z]?(?:\.\d+)*(?:\s*(?:[–-]|and|or|,|&)\s*\d+[a-z]?)*", re.I),  # references
    re.compile(r"\(\s*\d+\s+points?\b"),                              # grading points: (2 points
    re.compile(r"[A-Za-z][\w]*-\d+\b"),                              # ResNet-50, top-1
    re.compile(r"\b\d+:\d+\b"),                                      # 2:4
    re.compile(r"\^\s*\(?[-−]?\d+\)?"),                              # exponents
]
SUPERSCRIPTS = str.maketrans({"²": "^2", "³": "^3", "⁴": "^4", "⁻": "^-", "−": "-"})
NUMBER = re.compile(r"(?<![\w.,/])(-?\d{1,3}(?:,\d{3})+|-?\d+(?:\.\d+)?(?:e[-+]?\d+)?)"
                    r"(?:\s*/\s*(\d+(?:\.\d+)?))?(\s*%)?(?![\w])")


@dataclass(frozen=True)
class Number:
    """One number found in prose: its value, whether it was written as a percentage, and its context."""

    value: float
    text: str
    percent: bool
    context: str
    digits_after_point: int


def strip_excluded(text: str) -> str:
    """The markdown with every excluded part (see the module docstring) blanked out."""
    text = text.translate(SUPERSCRIPTS)
    for rx in REMOVE:
        text = rx.sub(lambda m: " " * len(m.group(0)), text)
    return text


def numbers(markdown: str) -> list[Number]:
    """Every number left in the markdown after the exclusions."""
    clean = strip_excluded(markdown)
    found = []
    for m in NUMBER.finditer(clean):
        raw, denom, pct = m.group(1), m.group(2), m.group(3)
        value = float(raw.replace(",", ""))
        if denom:
            value = value / float(denom) if float(denom) else value
        start = max(0, m.start() - 40)
        ctx = " ".join(markdown.translate(SUPERSCRIPTS)[start:m.end() + 40].split())
        digits = len(raw.split(".")[1]) if "." in raw and not denom else 0
        found.append(Number(value, m.group(0).strip(), bool(pct), ctx, digits))
    return found


def matches(n: Number, value: float, unit: str = "") -> bool:
    """True when `n` equals `value`: within TOLERANCE, or as the value rounded to the digits written.

    A percentage matches a ratio or fraction (value × 100) and a value stored in %.
    """
    candidates = [value]
    if n.percent and unit not in ("%", "pts"):
        candidates = [value * 100]
    for v in candidates:
        half_step = 0.5 * 10 ** (-n.digits_after_point)
        if abs(n.value - v) <= max(TOLERANCE * abs(v), half_step if n.digits_after_point else 0) + 1e-12:
            return True
    return False


def markdown_cells(path: Path) -> list[tuple[int, str]]:
    """(cell index, source) of every markdown cell of a notebook."""
    nb = json.loads(path.read_text(encoding="utf-8"))
    return [(i, "".join(c["source"]) if isinstance(c["source"], list) else c["source"])
            for i, c in enumerate(nb["cells"]) if c["cell_type"] == "markdown"]


def named_measurements(path: Path) -> set[str]:
    """Dotted measurement names and prefixes that a notebook mentions anywhere (code or text)."""
    nb = json.loads(path.read_text(encoding="utf-8"))
    text = "\n".join("".join(c["source"]) for c in nb["cells"])
    return set(re.findall(r"\b[a-z][a-z0-9_]*(?:\.[a-z0-9_]+)+\b", text))
