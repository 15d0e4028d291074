"""What students receive, and the course package a graded kernel sees: the labs, the chapters, the
course package without its answer keys (no ``helpers/labs/*/key.py``) and without the
instructors' service (``helpers/grading/batch``), the stored reference data.

    python -m helpers.grading.batch release --out artifacts/release     a folder and a .tar.gz beside it

--out must be new, empty or an earlier release; the .tar.gz beside it must be new or an earlier release's.

Serves: instructors (the student release; the grader's answer-key-free copy for kernels).
"""

from __future__ import annotations

import shutil
from pathlib import Path

from helpers import cli
from helpers.grading.exercise import KEY_MODULE

PROG = "python -m helpers.grading.batch release"
INSTEAD = "a new or empty folder, e.g. --out artifacts/release"  # what a refusal tells the user to pass
ROOT = Path(__file__).resolve().parents[3]
ANSWER_KEYS = f"helpers/labs/*/{KEY_MODULE}.py"  # each lab's answer key: specs and hidden cases
INSTRUCTORS = Path("helpers") / "grading" / "batch"  # the batch grader and the authoring tools
PACKAGE_ITEMS = ("helpers", "reference", "requirements.txt", "pyproject.toml")
RELEASE_ITEMS = PACKAGE_ITEMS + ("labs", "notebooks", "jupyter", "requirements-gpu.txt", "environment.yml",
                                 "README.md")
_SKIP = shutil.ignore_patterns("__pycache__", "*.pyc", ".ipynb_checkpoints", "*.egg-info")


def _copy(items: tuple[str, ...], dest: Path, root: Path) -> Path:
    """Copy the named files and folders of `root` to `dest`, leaving out the answer keys and the instructors' service."""
    dest.mkdir(parents=True, exist_ok=True)
    for name in items:
        src = root / name
        if src.is_dir():
            shutil.copytree(src, dest / name, ignore=_SKIP, dirs_exist_ok=True)
        elif src.is_file():
            shutil.copy2(src, dest / name)
    for key in dest.glob(ANSWER_KEYS):
        key.unlink()
    shutil.rmtree(dest / INSTRUCTORS, ignore_errors=True)
    return dest


def student_package(dest: Path, root: Path = ROOT) -> Path:
    """The course package as a graded kernel sees it (no answer keys, no solutions, no grader): dest/helpers, ..."""
    return _copy(PACKAGE_ITEMS, dest, root)


def build(out: Path, root: Path = ROOT) -> tuple[Path, Path]:
    """Write the student release to out/ and out.tar.gz; return both paths.

    `out` must be new, empty, or an earlier release holding only what it wrote (then that is replaced);
    anything else is refused before anything is copied (helpers.cli's output contract).
    """
    out = Path(out)
    archive = out.parent / f"{out.name}.tar.gz"
    inputs = [root / name for name in RELEASE_ITEMS]
    with cli.output_dir(out, PROG, beside=[archive], inputs=inputs, instead=INSTEAD):
        _copy(RELEASE_ITEMS, out, root)
        cli.tar_beside(out, PROG)
    return out, archive
