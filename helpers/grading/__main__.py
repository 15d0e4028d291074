"""Command line for instructors:

    python -m helpers.grading generate                          labs/ from solutions/
    python -m helpers.grading grade SUBMISSIONS... --out DIR    grade notebooks or folders
                                                                (--help for the options)

Serves: the labs (self-checks) and instructors (lab generation, batch grading).
"""

from __future__ import annotations

import sys


def main(argv: list[str]) -> int:
    """Dispatch to generate or grade."""
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0
    if argv[0] == "generate":
        from helpers.grading.labgen import generate

        for p in generate():
            print(f"wrote {p}")
        return 0
    if argv[0] == "grade":
        from helpers.grading.grade import main as grade_main

        return grade_main(argv[1:])
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
