"""Did a run leave files in its private TMPDIR? The checker `make notebooks` calls after nbval.

    TMPDIR=$(mktemp -d) pytest --nbval-lax ... ; python -m helpers.tools.report check-tmp "$TMPDIR"

Serves: tooling — `make notebooks` (nothing left in $TMPDIR) and tests/course/test_bad_inputs.py.
"""

from __future__ import annotations

import fnmatch
from pathlib import Path

from helpers import cli
from helpers.errors import InputError

# Left in TMPDIR by design of a third-party package, not a leak: ONNX Runtime (1.32) writes its telemetry session
# id to $TMPDIR/.ses (51 bytes, one fixed name) whenever it opens a session, even with telemetry events disabled.
KNOWN_TMP_FILES = (".ses",)


def tmp_leftovers(folder: Path, allow: tuple[str, ...] = KNOWN_TMP_FILES) -> list[str]:
    """'name (size)' of everything a run left in `folder` except entries matching an `allow` glob (KNOWN_TMP_FILES)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise InputError(f"{folder} is not a folder. Pass the private TMPDIR the run was given.")
    left = []
    for p in sorted(folder.iterdir()):
        if any(fnmatch.fnmatch(p.name, g) for g in allow):
            continue
        files = [p] if not p.is_dir() or p.is_symlink() else [f for f in p.rglob("*") if f.is_file()]
        left.append(f"{p.name} ({sum(f.lstat().st_size for f in files) / 1e6:.1f} MB)")
    return left


def check_tmp(argv: list[str]) -> int:
    """The `check-tmp DIR [--allow GLOB ...]` verb: exit 1 and list what was left, else exit 0."""
    ap = cli.Parser(prog="python -m helpers.tools.report check-tmp",
                    description="fail if a run left anything in its private TMPDIR")
    ap.add_argument("folder", type=Path)
    ap.add_argument("--allow", action="append", default=[],
                    help=f"glob of an entry that may stay (repeatable; always allowed: {', '.join(KNOWN_TMP_FILES)})")
    a = ap.parse_args(argv)
    left = tmp_leftovers(a.folder, KNOWN_TMP_FILES + tuple(a.allow))
    for item in left:
        print(f"left behind in {a.folder}: {item}")
    if left:
        print("Fix: write scratch files with helpers.session.scratch_dir(prefix) or a "
              "`with tempfile.TemporaryDirectory()` block, so they are removed.")
        return 1
    print(f"nothing left behind in {a.folder}")
    return 0
