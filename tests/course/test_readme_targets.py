"""README's lists of headline targets not met and not resolved are those of reference/h200/summary.md as stored."""

from __future__ import annotations

import re
from pathlib import Path

from helpers import reference

ROOT = Path(__file__).resolve().parents[2]


def _summary_verdicts(text: str) -> dict[str, str]:
    """{headline name: its 'met' cell} from the summary's headline table."""
    out = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 5 and (m := re.fullmatch(r"`([\w.]+)`", cells[0])):
            out[m.group(1)] = cells[3]
    return out


def _bullet_names(readme: str, title: str) -> set[str]:
    """The headline names written in backticks in README's bullet that starts with **title**."""
    start = readme.index(f"- **{title}**")
    end = readme.find("\n- **", start + 1)
    return set(re.findall(r"`([\w.]+)`", readme[start:end])) & set(reference.TARGETS_BY_NAME)


def test_readme_names_every_target_the_summary_does_not_meet_and_no_other():
    verdicts = _summary_verdicts((ROOT / "reference/h200/summary.md").read_text(encoding="utf-8"))
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(verdicts) >= 20, "the summary's headline table was not found"
    assert _bullet_names(readme, "Headline targets not met") == {n for n, v in verdicts.items() if v == "**no**"}
    assert _bullet_names(readme, "Not resolved at this noise") == \
        {n for n, v in verdicts.items() if v.startswith("not resolved")}



def test_the_docs_point_to_no_file_outside_a_students_checkout():
    docs = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("*.md"))]
    missing = [f"{p.name}: {m}" for p in docs for m in re.findall(r"(?<![\w./])(?:\.\./)*shared/[\w./-]*\w",
                                                                  p.read_text(encoding="utf-8"))
               if not (ROOT / m).exists()]
    assert not missing, f"pointers to files a student's checkout does not have: {missing}"
