"""labs/ generated from solutions/: stubs with hints, hidden tests gone, committed labs up to date."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from grading_support import SENTINEL, solution_nb

from helpers.grading.labgen import (
    BEGIN_HIDDEN,
    BEGIN_SOLUTION,
    END_HIDDEN,
    MARKDOWN_STUB,
    generate,
    lab_from_solution,
    stale,
    strip_source,
)

ROOT = Path(__file__).resolve().parents[1]
SOLUTIONS, LABS = ROOT / "solutions", ROOT / "labs"


def _sources(nb: dict) -> list[str]:
    """Every cell's source text."""
    return ["".join(c["source"]) for c in nb["cells"]]


def test_solution_block_becomes_stub_with_hint() -> None:
    src = "def f(x):\n    # HINT: double it\n    ### BEGIN SOLUTION\n    return 2 * x\n    ### END SOLUTION\n"
    out = strip_source(src)
    assert "return 2 * x" not in out and BEGIN_SOLUTION not in out
    assert "    raise NotImplementedError('Not implemented yet. Hint: double it')" in out
    ns: dict = {}
    exec(out, ns)  # the stub is valid Python and raises with the hint
    with pytest.raises(NotImplementedError, match="double it"):
        ns["f"](1)


def test_stub_without_hint_and_hint_used_once() -> None:
    src = ("# HINT: first\n### BEGIN SOLUTION\na = 1\n### END SOLUTION\n"
           "### BEGIN SOLUTION\nb = 2\n### END SOLUTION")
    out = strip_source(src)
    assert out.count("Hint: first") == 1
    assert "raise NotImplementedError('Not implemented yet.')" in out


def test_hidden_tests_removed_visible_kept() -> None:
    src = f"assert f(1) == 2\n{BEGIN_HIDDEN}\nassert f(5) == 10  # secret\n{END_HIDDEN}\nprint('done')"
    out = strip_source(src)
    assert out == "assert f(1) == 2\nprint('done')"


def test_markdown_answer_becomes_placeholder() -> None:
    out = strip_source("Why?\n### BEGIN SOLUTION\nBecause.\n### END SOLUTION", markdown=True)
    assert out == f"Why?\n{MARKDOWN_STUB}"


def test_unclosed_marker_is_an_error() -> None:
    with pytest.raises(ValueError, match="never closed"):
        strip_source(f"{BEGIN_HIDDEN}\nassert True\n")


def test_fixture_lab_keeps_metadata_drops_hidden() -> None:
    lab = lab_from_solution(solution_nb())
    text = json.dumps(lab)
    assert SENTINEL not in text and "BEGIN HIDDEN" not in text and "return a + b" not in text
    grade_ids = [c["metadata"].get("nbgrader", {}).get("grade_id") for c in lab["cells"]]
    assert "lab98.add" in grade_ids and "lab98.mul" in grade_ids
    assert MARKDOWN_STUB in _sources(lab)[-1]


def test_generate_writes_one_lab_per_solution(tmp_path: Path) -> None:
    sol = tmp_path / "solutions"
    sol.mkdir()
    (sol / "lab98_fixture.ipynb").write_text(json.dumps(solution_nb()), encoding="utf-8")
    written = generate(sol, tmp_path / "labs")
    assert [p.name for p in written] == ["lab98_fixture.ipynb"]
    assert stale(sol, tmp_path / "labs") == []


def test_committed_labs_are_what_generate_writes() -> None:
    out = stale(SOLUTIONS, LABS)
    assert not out, f"labs out of date: {out}. Fix: python -m helpers.grading generate"
    extra = {p.name for p in LABS.glob("*.ipynb")} - {p.name for p in SOLUTIONS.glob("*.ipynb")}
    assert not extra, f"labs without a solution: {sorted(extra)} (labs/ is generated; delete them)"


def _hidden_only_lines(solution: dict) -> set[str]:
    """Lines that occur only inside hidden-test blocks of a solution notebook."""
    hidden, visible = set(), set()
    for src in _sources(solution):
        inside = False
        for line in src.splitlines():
            s = line.strip()
            if s == BEGIN_HIDDEN:
                inside = True
            elif s == END_HIDDEN:
                inside = False
            elif s:
                (hidden if inside else visible).add(s)
    return hidden - visible


def test_hidden_tests_never_appear_under_labs() -> None:
    lab_texts = {p: p.read_text(encoding="utf-8") for p in LABS.rglob("*") if p.is_file()}
    for p, text in lab_texts.items():
        assert "HIDDEN TESTS" not in text, f"{p} contains a hidden-test marker"
    lab_lines = set()
    for p in LABS.rglob("*.ipynb"):
        for src in _sources(json.loads(lab_texts[p])):
            lab_lines |= {s.strip() for s in src.splitlines() if s.strip()}
    for sol in SOLUTIONS.glob("*.ipynb"):
        leaked = _hidden_only_lines(json.loads(sol.read_text(encoding="utf-8"))) & lab_lines
        assert not leaked, f"hidden-test lines of {sol.name} appear under labs/: {sorted(leaked)[:3]}"
