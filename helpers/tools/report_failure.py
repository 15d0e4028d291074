"""Why a notebook of the reference run failed: the cell, its first line, the exception and the last frames.

A failed run's row once said only `FAILED: AssertionError:`. `describe(nb, exc)` reads the executed
notebook instead: the index of the failing code cell, its first line, the exception type and message, and
the last frames of its traceback, the course's own (notebook cells, helpers/) before the libraries'.

Serves: tooling — `make gpu-report` (helpers.tools.report).
"""

from __future__ import annotations

import re
from typing import Any

ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
COURSE_FRAMES = 4  # the last course frames kept (notebook cells and helpers/)
OTHER_FRAMES = 2  # the last library frames kept after them
MESSAGE_CHARS = 600


def plain(text: str) -> str:
    """`text` without terminal colour codes."""
    return ANSI.sub("", text)


def frame_text(item: str) -> str:
    """One traceback item as two lines at most: where it is, and the line it stopped at (the '---->' line)."""
    lines = [ln.rstrip() for ln in plain(item).strip().splitlines()]
    arrow = next((ln.strip() for ln in lines[1:] if re.match(r"\s*-+>", ln)), "")
    return lines[0] + (f"\n  {arrow}" if arrow else "") if lines else ""


def is_course_frame(location: str) -> bool:
    """A frame in a notebook cell or in the course's helpers package."""
    return location.startswith(("Cell In", "Input In")) or "/helpers/" in location.replace("\\", "/")


def last_frames(traceback: list[str]) -> list[str]:
    """The last frames of an IPython traceback, the course's first, then the last library frames."""
    frames = [frame_text(t) for t in traceback if plain(t).lstrip().startswith(("Cell In", "Input In", "File "))]
    course = [f for f in frames if is_course_frame(f)]
    other = [f for f in frames if not is_course_frame(f)]
    return course[-COURSE_FRAMES:] + other[-OTHER_FRAMES:]


def running_cell(nb: Any) -> int | None:
    """Index of the code cell that started and never replied (a timeout or a dead kernel), else None."""
    for i, cell in enumerate(nb.cells):
        timing = cell.get("metadata", {}).get("execution", {})
        if cell.cell_type == "code" and "iopub.execute_input" in timing and "shell.execute_reply" not in timing:
            return i
    return None


def error_cell(nb: Any) -> tuple[int, dict] | None:
    """(index, error output) of the first code cell holding an error output, else None."""
    for i, cell in enumerate(nb.cells):
        for out in cell.get("outputs", []) if cell.cell_type == "code" else []:
            if out.get("output_type") == "error":
                return i, out
    return None


def first_line(source: str) -> str:
    """A cell's first line that is not blank, cut to 160 characters."""
    return next((ln.strip() for ln in source.splitlines() if ln.strip()), "")[:160]


def describe(nb: Any, exc: BaseException) -> dict:
    """What failed in the executed notebook `nb`, raised as `exc`: cell, line, type, message, frames (JSON-ready)."""
    found, index = error_cell(nb), None
    if found is not None:
        index, out = found[0], found[1]
        kind, message, frames = out.get("ename", ""), out.get("evalue", ""), last_frames(out.get("traceback", []))
    else:  # no error output: the kernel died or a cell ran past the timeout
        index = running_cell(nb)
        kind = getattr(exc, "ename", None) or type(exc).__name__
        message, frames = getattr(exc, "evalue", None) or str(exc), []
    message = plain(str(message)).strip()
    return {"cell": index, "line": first_line(nb.cells[index].source) if index is not None else "",
            "type": kind, "message": message[-MESSAGE_CHARS:], "frames": frames}


def one_line(failure: dict | None, fallback: str = "") -> str:
    """'cell 12 `y = f(0)`: ZeroDivisionError: division by zero' for a summary row."""
    if not failure:
        return fallback.splitlines()[-1][:200] if fallback.strip() else ""
    where = f"cell {failure['cell']} `{failure['line'][:80]}`: " if failure.get("cell") is not None else ""
    message = failure.get("message", "").splitlines()
    return f"{where}{failure.get('type', '')}: {message[-1][:160] if message else ''}".rstrip(": ")


def details(failure: dict) -> list[str]:
    """Markdown lines for one failure: where, the exception, then its last frames as a code block."""
    lines = [f"- cell {failure.get('cell')}: `{failure.get('line', '')}`",
             f"- {failure.get('type', '')}: {failure.get('message', '')}".rstrip()]
    if failure.get("frames"):
        lines += ["", "```", *"\n".join(failure["frames"]).splitlines(), "```"]
    return lines
