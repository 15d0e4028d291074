"""`make release`: what students receive holds the labs, the chapters and the course package, and no
answer key, solution notebook or hidden case; no solution line is in the labs, the chapters or the
grading package. (The course library itself implements reference kernels and quantizers that the
chapters demonstrate: those modules are course content, so they are not searched for solution lines.)"""

from __future__ import annotations

import tarfile
from pathlib import Path

from grading_support import leaks

from helpers.grading import release, visible


def _texts(folder: Path) -> dict[str, str]:
    """Every text file under a folder."""
    out = {}
    for p in folder.rglob("*"):
        if p.is_file() and p.suffix in (".py", ".ipynb", ".json", ".md", ".txt", ".toml", ".yml", ".cu"):
            out[str(p.relative_to(folder))] = p.read_text(encoding="utf-8", errors="replace")
    return out


def _hidden_labels() -> set[str]:
    """The labels of every hidden case of every lab's answer key."""
    labels = set()
    for lab in visible.answer_key_labs():
        for ex in visible.lab_exercises(lab):
            labels |= {c.label for c in (ex.hidden() if ex.hidden else [])}
    return labels


def test_release_has_the_labs_and_no_answer_key(tmp_path: Path) -> None:
    folder, archive = release.build(tmp_path / "release")
    assert (folder / "labs").is_dir() and (folder / "notebooks").is_dir() and (folder / "helpers" / "grading").is_dir()
    assert (folder / "helpers" / "grading" / "visible" / "lab00.json").is_file()
    assert not (folder / "helpers" / "grading" / "exercises").exists() and not (folder / "solutions").exists()
    texts = _texts(folder)
    student_facing = {k: v for k, v in texts.items() if k.startswith(("labs/", "notebooks/", "helpers/grading/"))}
    found = leaks(student_facing)
    assert not found, f"solution or hidden lines in the release: {found[:5]}"
    labels = [f"{name}: {label}" for label in _hidden_labels() for name, t in texts.items() if label in t]
    assert not labels, f"hidden cases in the release: {labels[:5]}"
    with tarfile.open(archive) as tar:
        names = tar.getnames()
    assert "release/labs/lab00_warmup_quantize.ipynb" in names and not any("exercises" in n for n in names)


def test_release_check_catches_a_planted_answer_key(tmp_path: Path) -> None:
    folder, _ = release.build(tmp_path / "release")
    key = Path(release.ROOT) / release.ANSWER_KEY / "lab00.py"
    (folder / "planted.py").write_text(key.read_text(encoding="utf-8"), encoding="utf-8")
    assert [n for n in (f"planted.py: {lab}" for lab in _hidden_labels()) if n.split(": ", 1)[1] in
            (folder / "planted.py").read_text(encoding="utf-8")]
