"""What students receive, and the course package a graded kernel sees: the labs, the chapters, the
course package without its answer key (no ``helpers/grading/exercises``), the stored reference data.

    python -m helpers.grading release --out artifacts/release     a folder and a .tar.gz beside it

Serves: instructors (the student release; the grader's answer-key-free copy for kernels).
"""

from __future__ import annotations

import shutil
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ANSWER_KEY = Path("helpers") / "grading" / "exercises"
PACKAGE_ITEMS = ("helpers", "reference", "requirements.txt", "pyproject.toml")
RELEASE_ITEMS = PACKAGE_ITEMS + ("labs", "notebooks", "jupyter", "requirements-gpu.txt", "environment.yml",
                                 "README.md")
_SKIP = shutil.ignore_patterns("__pycache__", "*.pyc", ".ipynb_checkpoints", "*.egg-info")


def _copy(items: tuple[str, ...], dest: Path, root: Path) -> Path:
    """Copy the named files and folders of `root` to `dest`, leaving out the answer key."""
    dest.mkdir(parents=True, exist_ok=True)
    for name in items:
        src = root / name
        if src.is_dir():
            shutil.copytree(src, dest / name, ignore=_SKIP, dirs_exist_ok=True)
        elif src.is_file():
            shutil.copy2(src, dest / name)
    shutil.rmtree(dest / ANSWER_KEY, ignore_errors=True)
    return dest


def student_package(dest: Path, root: Path = ROOT) -> Path:
    """The course package as a graded kernel sees it (no answer key, no solutions): dest/helpers, ..."""
    return _copy(PACKAGE_ITEMS, dest, root)


def build(out: Path, root: Path = ROOT) -> tuple[Path, Path]:
    """Write the student release to out/ (replacing it) and out.tar.gz; return both paths."""
    out = Path(out)
    if out.exists():
        shutil.rmtree(out)
    _copy(RELEASE_ITEMS, out, root)
    archive = out.with_name(out.name + ".tar.gz")
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(out, arcname=out.name)
    return out, archive
