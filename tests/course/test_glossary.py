"""The 中文 bridge: every glossary term is used in the course, and each notebook gives its key terms in both
languages where it first uses them (docs/glossary.md names the notebook that introduces each term)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest


ROOT = Path(__file__).resolve().parents[2]
GLOSSARY = ROOT / "docs" / "glossary.md"
CJK = re.compile(r"[\u4e00-\u9fff]")


def entries() -> list[dict]:
    """Rows of the glossary table: english (alternatives split on ' / '), chinese, first (notebook stem)."""
    rows = []
    for line in GLOSSARY.read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 4 and cells[0] not in ("English", "---") and not cells[0].startswith("-"):
            rows.append({"english": [e.strip() for e in cells[0].split(" / ")], "chinese": cells[1],
                         "first": cells[2]})
    return rows


def _pattern(words: list[str]) -> re.Pattern:
    """Any of the English alternatives at a word start (plurals and endings allowed)."""
    return re.compile("|".join(r"(?<![\w-])" + re.escape(w) for w in words), re.I)


def _markdown(path: Path) -> list[str]:
    """The markdown cells of a notebook."""
    nb = json.loads(path.read_text(encoding="utf-8"))
    return ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown"]


def first_use_problems(path: Path, rows: list[dict]) -> list[str]:
    """Terms this notebook introduces whose first markdown cell that uses them lacks the Chinese term."""
    cells = _markdown(path)
    problems = []
    for row in (r for r in rows if r["first"] == path.stem):
        pat = _pattern(row["english"])
        first = next((c for c in cells if pat.search(c)), None)
        if first is None:
            problems.append(f"{path.name} introduces {row['english'][0]!r} but never uses it")
        elif row["chinese"] not in first:
            problems.append(f"{path.name}: first use of {row['english'][0]!r} lacks {row['chinese']}")
    return problems


def test_glossary_is_well_formed() -> None:
    rows = entries()
    assert len(rows) >= 40
    stems = {p.stem for p in (ROOT / "notebooks").glob("*.ipynb")}
    for r in rows:
        assert CJK.search(r["chinese"]), r
        assert r["first"] in stems, f"{r['english'][0]}: no notebook {r['first']}"
    required = {"coalesced access": "合并访问", "warp": "线程束", "branch divergence": "分支发散",
                "bank conflict": "存储体冲突", "occupancy": "占用率", "scale": "缩放因子", "zero point": "零点",
                "per-channel": "逐通道", "calibration": "校准", "post-training quantization": "训练后量化",
                "quantization-aware training": "量化感知训练", "straight-through estimator": "直通估计器",
                "layer fusion": "层融合", "explicit quantization": "显式量化"}
    have = {r["english"][0]: r["chinese"] for r in rows}
    assert {k: have.get(k) for k in required} == required


def test_every_term_is_used_in_the_course() -> None:
    text = "\n".join(c for folder in ("notebooks", "labs", "solutions")
                     for p in (ROOT / folder).glob("*.ipynb") for c in _markdown(p))
    unused = [r["english"][0] for r in entries() if not _pattern(r["english"]).search(text)]
    assert not unused, f"glossary terms no notebook or lab uses: {unused}"


@pytest.mark.parametrize("path", sorted((ROOT / "notebooks").glob("*.ipynb")), ids=lambda p: p.name)
def test_key_terms_are_bilingual_at_first_use(path: Path) -> None:
    problems = first_use_problems(path, entries())
    assert not problems, "\n".join(problems)


def test_a_planted_monolingual_first_use_fails(tmp_path: Path) -> None:
    from helpers.tools.notebooks import build

    rows = [{"english": ["warp"], "chinese": "线程束", "first": "02_gpu_architecture"}]
    (tmp_path / "bad").mkdir()
    (tmp_path / "good").mkdir()
    bad = build(tmp_path / "bad" / "02_gpu_architecture.ipynb", [("md", "A warp is 32 threads."), ("md", "warp (线程束)")])
    good = build(tmp_path / "good" / "02_gpu_architecture.ipynb", [("md", "A **warp** (线程束) is 32 threads.")])
    assert first_use_problems(bad, rows) == ["02_gpu_architecture.ipynb: first use of 'warp' lacks 线程束"]
    assert first_use_problems(good, rows) == []
