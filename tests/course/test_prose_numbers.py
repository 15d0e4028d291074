"""Every number in a notebook's markdown is backed: a stored measurement the notebook names, a cited fact
(tests/support/prose_facts.py), or a literal of the notebook's own code. Numbers about measured outcomes belong in
printed sentences (helpers.findings), not in prose. The rules and exclusions: tests/support/prose_numbers.py."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from helpers import reference
from helpers.tools.notebooks import build
from tests.support.prose_facts import FACTS, Fact
from tests.support.prose_numbers import Number, markdown_cells, matches, named_measurements, numbers

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted(p for folder in ("notebooks", "labs", "solutions") for p in (ROOT / folder).glob("*.ipynb"))


def _code_literals(path: Path) -> set[float]:
    """Numbers written in the notebook's code cells: the parameters of the experiments it runs."""
    nb = json.loads(path.read_text(encoding="utf-8"))
    code = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code")
    return {float(m.replace("_", "")) for m in re.findall(r"(?<![\w.])\d[\d_]*(?:\.\d+)?(?![\w])", code)}


def _stored(path: Path) -> list[tuple[float, str]]:
    """(value, unit) of every stored record this notebook made or names (by name or name prefix)."""
    names = named_measurements(path)
    out = []
    for src in reference.SOURCES:
        for r in reference.load(src):
            if r.notebook == path.stem or r.name in names or any(r.name.startswith(n + ".") for n in names):
                out.append((r.value, r.unit))
    return out


def _facts(stem: str) -> list[Fact]:
    """The cited facts that apply to one notebook."""
    return [f for f in FACTS if not f.notebooks or stem in f.notebooks]


def unbacked(path: Path) -> list[str]:
    """'cell N: "number" in "…context…"' for every number in the markdown that nothing backs."""
    stored, facts, literals = _stored(path), _facts(path.stem), _code_literals(path)

    def backed(n: Number) -> bool:
        if not n.percent and n.value in literals:
            return True
        if any(matches(n, f.value, "%") for f in facts):  # a fact is written in its own unit
            return True
        return any(matches(n, v, unit) for v, unit in stored)

    return [f"cell {i}: {n.text!r} in “…{n.context}…”" for i, md in markdown_cells(path)
            for n in numbers(md) if not backed(n)]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_number_in_the_prose_is_backed(path: Path) -> None:
    problems = unbacked(path)
    assert not problems, (f"{path.relative_to(ROOT)}: numbers in markdown that are neither a stored measurement "
                          "it names, nor a cited fact (tests/support/prose_facts.py), nor a literal of its code — print "
                          "them from the record instead (helpers.findings):\n" + "\n".join(problems))


def test_a_planted_wrong_number_fails(tmp_path: Path) -> None:
    record = reference.lookup("copy.stride32_over_stride1")
    assert record is not None
    good = f"At stride 32 the stored copy kept {record.value:.3f} of its stride-1 bandwidth."
    bad = "At stride 32 the copy kept 0.25 of its stride-1 bandwidth, and it stops falling at stride 8."
    code = 'reference.show(["copy.stride32_over_stride1"])'
    ok = build(tmp_path / "03_memory_hierarchy.ipynb", [("md", good), ("code", code)])
    assert unbacked(ok) == []
    wrong = build(tmp_path / "03_memory_hierarchy.ipynb", [("md", bad), ("code", code)])
    found = unbacked(wrong)
    assert len(found) == 1 and "'0.25'" in found[0]


def test_a_planted_measured_claim_without_its_measurement_fails(tmp_path: Path) -> None:
    # the number is right for the stored run, but this notebook names no such measurement: not backed
    value = reference.lookup("gemm.int8_over_bf16").value  # type: ignore[union-attr]
    nb = build(tmp_path / "99_planted.ipynb", [("md", f"INT8 runs {value:.2f}× faster than BF16."),
                                               ("code", "print('no measurement named here')")])
    assert len(unbacked(nb)) == 1


@pytest.mark.parametrize("text, expected", [
    ("INT8, FP16, H200, E4M3, ch03, lab02, sm_90 and ResNet-50 are names", []),
    ("see chapter 5, section 2 and questions 3–4; `x = 17` is code; 2:4 sparsity", []),
    ("pytorch-quantization 2.1.3 with TensorRT 10 on 2026-11-29, MLPerf v4.1", []),
    ("8192³ elements, about 1/15 of it, 20% more, 65,536 registers", [8192.0, 1 / 15, 20.0, 65536.0]),
    ("## 3 · Heading\n1. first item with 42 things", [42.0]),
    ("## Exercise 1: a copy (3 points)\n**Question (1 point, read by your instructor).** within 1.5 points of FP32",
     [1.5]),
])
def test_exclusions(text: str, expected: list[float]) -> None:
    assert [round(n.value, 6) for n in numbers(text)] == [round(v, 6) for v in expected]


def test_tolerance_and_percent() -> None:
    n = numbers("0.065")[0]
    assert matches(n, 0.0653) and not matches(n, 0.07)
    pct = numbers("94%")[0]
    assert matches(pct, 0.9357, "ratio") and not matches(pct, 0.5, "ratio")


@pytest.mark.parametrize("fact", [f for f in FACTS if f.check], ids=lambda f: f.what[:40])
def test_computed_facts_still_hold(fact: Fact) -> None:
    assert fact.check is not None and fact.check() == pytest.approx(fact.value, rel=1e-9)


def test_every_fact_is_cited() -> None:
    assert all(f.source and f.what for f in FACTS)
