"""Command line for instructors:

    python -m helpers.grading generate                          labs/ and the visible cases from solutions/
    python -m helpers.grading grade SUBMISSIONS... --out DIR    grade notebooks or folders (--help for options)
    python -m helpers.grading release [--out DIR]               what students receive, as a folder and a .tar.gz

Serves: instructors (lab generation, batch grading, the student release).
"""

from __future__ import annotations

import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    """Dispatch to generate, grade or release."""
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0
    if argv[0] == "generate":
        from helpers.grading import visible
        from helpers.grading.labgen import generate

        for p in generate() + visible.write_all():
            print(f"wrote {p}")
        return 0
    if argv[0] == "grade":
        from helpers.grading.grade import main as grade_main

        return grade_main(argv[1:])
    if argv[0] == "release":
        from helpers.grading import release

        out = Path(argv[argv.index("--out") + 1]) if "--out" in argv else Path("artifacts/release")
        folder, archive = release.build(out)
        print(f"wrote {folder} and {archive}")
        return 0
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
