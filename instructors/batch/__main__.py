"""Command line for instructors:

    python -m instructors.batch generate [--force]                labs/ and the visible cases from solutions/
    python -m instructors.batch grade SUBMISSIONS... --out DIR    grade notebooks or folders (--help for options)
    python -m instructors.batch release [--out DIR]               what students receive, as a folder and a .tar.gz
    python -m instructors.batch rank SUBMISSIONS... --out DIR     labs 11-13's kernels against the speed of light
    python -m instructors.batch hub serve|release|collect|return  teaching on JupyterHub (docs/instructors.md)

generate writes this course's generated files only (labs/NAME.ipynb for each solutions/NAME.ipynb, and each
lab's visible.json), whatever the working folder; a lab that changed since it wrote it is refused unless
--force. grade and release follow helpers.cli's output contract:
--out must be new, empty or their own earlier output, and never the course folder, its solutions/ (or the
--solutions given), a repository, or a folder holding files they did not write. Bad input, an unknown
option included, is one line on stderr and exit status 2.

Serves: instructors (lab generation, batch grading, the student release, the kernel ranking, the hub).
"""

from __future__ import annotations

import sys
from pathlib import Path

from helpers import cli
from helpers.errors import InputError

PROG = "python -m instructors.batch"


def _generate(argv: list[str]) -> int:
    """generate [--force]."""
    ap = cli.Parser(prog=f"{PROG} generate", description="labs/ and the visible cases from solutions/")
    ap.add_argument("--force", action="store_true", help="replace labs that changed since generate wrote them")
    args = ap.parse_args(argv)
    from instructors.batch import visible
    from instructors.batch.labgen import generate

    for p in generate(force=args.force) + visible.write_all():
        print(f"wrote {p}")
    return 0


def _grade(argv: list[str]) -> int:
    """grade SUBMISSIONS... --out DIR [options] (parsed by instructors.batch.grade)."""
    from instructors.batch.grade import main as grade_main

    return grade_main(argv)


def _release(argv: list[str]) -> int:
    """release [--out DIR]."""
    from instructors.batch import release

    ap = cli.Parser(prog=f"{PROG} release", description="what students receive, as a folder and a .tar.gz beside it")
    ap.add_argument("--out", type=Path, default=cli.COURSE / "artifacts" / "release",
                    help="a new or empty folder, or an earlier release (default: artifacts/release)")
    folder, archive = release.build(ap.parse_args(argv).out)
    print(f"wrote {folder} and {archive}")
    return 0


def _rank(argv: list[str]) -> int:
    """rank SUBMISSIONS... --out DIR (labs 11-13's kernels against the speed of light: instructors.batch.rank)."""
    from instructors.batch.rank import main as rank_main

    return rank_main(argv)


def _hub(argv: list[str]) -> int:
    """hub serve|release|collect|return ... (teaching on JupyterHub: instructors.batch.hub)."""
    from instructors.batch.hub import main as hub_main

    return hub_main(argv)


VERBS = {"generate": _generate, "grade": _grade, "release": _release, "rank": _rank, "hub": _hub}


def main(argv: list[str] | None = None) -> int:
    """Dispatch to generate, grade or release; bad input is one line on stderr and exit status 2."""
    from instructors.batch.worker import skip_unused_imports

    skip_unused_imports()  # before a verb imports nbformat: a grade run starts 1-2 s sooner (the worker says why)

    def dispatch(args: list[str]) -> int:
        if not args or args[0] in ("-h", "--help"):
            print(__doc__)
            return 0
        if args[0] not in VERBS:
            raise InputError(f"unknown command {args[0]!r}: use {', '.join(VERBS)}. See: {PROG} --help")
        return VERBS[args[0]](args[1:])

    return cli.run(dispatch, argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
