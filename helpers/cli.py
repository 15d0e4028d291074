"""Command lines that speak to a student: any bad input is one line on stderr and a non-zero exit.

Every verb of the course (``python -m helpers.deploy``, ``helpers.tools.report``, ``helpers.tools.notebooks``,
``helpers.tools.site``) runs through ``run``: a course error, a usage error or an OS error (missing file,
folder instead of file, no permission) prints ``error: <problem>. <fix>`` on stderr and exits 2; anything
unexpected exits 1 with one line too. ``--debug`` anywhere on the line adds the Python traceback.
``claim_output_dir`` makes sure a command never deletes or overwrites a folder it did not write.

Serves: core — used by chapter 9 and lab08 (`python -m helpers.deploy`) and by every tool's command line.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import traceback
from collections.abc import Callable, Iterable
from pathlib import Path

from helpers.errors import InputError, WorkbookError

DEBUG_FLAG = "--debug"
MARKER = ".workbook-output"  # written into every output folder a command creates: "this folder is mine"
MAX_CHARS = 400


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors are one-line InputErrors instead of a usage dump and exit."""

    def error(self, message: str) -> None:  # type: ignore[override]
        """Raise the problem with the fix (the verb's --help) instead of printing usage."""
        raise InputError(f"{message}. See: {self.prog} --help")


def positive_int(text: str) -> int:
    """An argparse type: a whole number >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _os_message(exc: OSError) -> str:
    """An OSError as the problem and what to do about it."""
    where = exc.filename or "a path"
    fixes = {FileNotFoundError: "does not exist: check the path",
             IsADirectoryError: "is a folder: pass a file",
             NotADirectoryError: "has a file where a folder is expected: check the path",
             PermissionError: "cannot be read or written by you: pick a path you own"}
    for kind, text in fixes.items():
        if isinstance(exc, kind):
            return f"{where} {text}."
    return f"{where}: {exc.strerror or exc}. Check the path and the disk."


def describe(exc: BaseException) -> str:
    """One line: the problem and the fix for a course error or OS error; for anything else, how to see more."""
    if isinstance(exc, WorkbookError):
        text = str(exc)
    elif isinstance(exc, OSError):
        text = _os_message(exc)
    else:
        text = (f"unexpected {type(exc).__name__}: {exc}. This is a bug or an input the course does not "
                f"recognise: rerun with {DEBUG_FLAG} to see where it failed")
    text = " ".join(text.split())
    return text if len(text) <= MAX_CHARS else text[: MAX_CHARS - 3] + "..."


def run(command: Callable[[list[str]], int], argv: Iterable[str] | None = None) -> int:
    """Run `command(argv)` as a command line; return its exit status (2 for bad input, 1 for a crash)."""
    args = list(sys.argv[1:] if argv is None else argv)
    debug = DEBUG_FLAG in args
    args = [a for a in args if a != DEBUG_FLAG]
    try:
        return int(command(args) or 0)
    except SystemExit as exc:  # --help (0), or a verb that exits on its own
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except KeyboardInterrupt:
        print("error: interrupted.", file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001 - the one place every command-line failure is turned into a line
        if debug:
            traceback.print_exc()
        print(f"error: {describe(exc)}", file=sys.stderr)
        return 2 if isinstance(exc, (WorkbookError, OSError)) else 1


def claim_output_dir(path: Path, outputs: Iterable[str], command: str) -> Path:
    """Make `path` this command's output folder: create it, or clear what an earlier run of it wrote.

    A folder holding anything but `outputs` (the names the command writes) is refused, never cleared.
    """
    path = Path(path)
    if path.exists():
        foreign = foreign_entries(path, outputs)
        if foreign:
            shown = ", ".join(foreign[:5]) + (" ..." if len(foreign) > 5 else "")
            raise InputError(f"{path} already exists and holds files {command} did not write ({shown}); "
                             "nothing was changed. Pass a new or empty folder, or move those files away.")
        for p in path.iterdir():
            shutil.rmtree(p) if p.is_dir() and not p.is_symlink() else p.unlink()
    path.mkdir(parents=True, exist_ok=True)
    (path / MARKER).write_text(f"Written by {command}; it may clear this folder on its next run.\n",
                               encoding="utf-8")
    return path


def foreign_entries(path: Path, outputs: Iterable[str]) -> list[str]:
    """Names in the existing folder `path` that are not among a command's `outputs` (nor its marker)."""
    path = Path(path)
    if not path.is_dir():
        raise InputError(f"{path} is a file, not a folder. Pass a new or empty folder for the output.")
    own = set(outputs) | {MARKER}
    return sorted(p.name for p in path.iterdir() if p.name not in own)
