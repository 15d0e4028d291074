"""Every findings sentence has its 中文 twin: the mechanism, and a scan of every call site in the course."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from helpers import bench, findings
from helpers.errors import InputError

ROOT = Path(__file__).resolve().parents[1]
PRINTERS = {"say": "zh", "sentence": "zh", "ratio_sentence": "subject_zh", "against_target": "subject_zh"}
# Call sites still printing English only, by file: chapters 9 and 12 are being rewritten elsewhere, the rest are
# to be twinned next. Remove a file when its calls are twinned; a new English-only call fails the test below.
PENDING: set[str] = set()


@pytest.fixture(autouse=True)
def _clean_session(monkeypatch):
    monkeypatch.setitem(bench._session, "records", [])


def test_a_sentence_prints_its_chinese_twin_on_the_next_line():
    bench.record("x.ratio", 1.5, "ratio")
    text = findings.sentence("X runs at {r:.2f}×: {verdict}.", {"r": "x.ratio"}, findings.faster_slower("r"),
                             zh="X 的速度是 {r:.2f} 倍：{verdict}。")
    assert text == "X runs at 1.50×: faster. (measured here)\nX 的速度是 1.50 倍：更快。（本次测量）"
    assert findings.ratio_sentence("x.ratio", "X", "Y", subject_zh="X", baseline_zh="Y").endswith(
        "X的速度是Y的 1.50 倍：更快。（本次测量）")
    missing = findings.sentence("{r}", {"r": "nowhere"}, zh="{r}")
    assert missing.splitlines()[1].startswith("此处未测量")
    with pytest.raises(InputError, match="verdict_zh"):
        findings.sentence("{verdict}", {"r": "x.ratio"}, lambda v: "odd", zh="{verdict}")


def _calls(path: Path) -> list[ast.Call]:
    if path.suffix == ".ipynb":
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        sources = ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]
    else:
        sources = [path.read_text(encoding="utf-8")]
    out = []
    for src in sources:
        try:
            tree = ast.parse("\n".join(ln for ln in src.splitlines() if not ln.lstrip().startswith(("%", "!"))))
        except SyntaxError:
            continue
        out += [n for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                and n.func.attr in PRINTERS and isinstance(n.func.value, ast.Name)
                and (n.func.value.id == "findings" or n.func.attr == "say")]  # an Experiment Result's say too
    return out


def test_every_findings_sentence_in_the_course_has_its_chinese_twin():
    """Old: every findings sentence was English only."""
    english_only = set()
    for pattern in ("helpers/**/*.py", "notebooks/*.ipynb", "labs/*.ipynb", "solutions/*.ipynb"):
        for path in ROOT.glob(pattern):
            if path.name == "findings.py":
                continue
            for call in _calls(path):
                if not any(k.arg in (PRINTERS[call.func.attr], None) for k in call.keywords):  # None: **kwargs
                    english_only.add(str(path.relative_to(ROOT)))
    assert english_only - PENDING == set(), f"twin these sentences (zh=...): {sorted(english_only - PENDING)}"
    assert PENDING - english_only == set(), f"twinned now, remove from PENDING: {sorted(PENDING - english_only)}"
