"""Checks before records are stored as a reference (reference/cpu, reference/h200, reference/h100, ...).

A `null` value once made reference/cpu/results.json unloadable (every stored lookup then failed); a file
could replace a notebook's stored measurement or the suite-time headline, and CPU results could be stored
as the H200's reference, all without a word. Every record is checked before anything is written:

- type: a non-empty name, a finite number (not a bool, not null), a unit, a device and a date as text;
- unit: a name already stored keeps its unit (unless its own run replaces all its records); a headline's unit
  follows its name (`_over_` ratio, `_pts`, `_minutes`);
- card: reference/cpu holds CPU records only; reference/<card> (h200, h100, ...) only that card's records;
- owner: a name stored by one run (a notebook, `make test`, the grading load test) is not replaced by
  another's without `replace_owner` (the `--replace-owner` flag), and the refusal says whose it is.

`check_summary_folder` keeps `report --store` from replacing a summary.md or runs.json it did not write.

Serves: tooling — `make gpu-report`, `make cpu-reference` and store-records (helpers.tools.report).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable
from pathlib import Path

from helpers import bench
from helpers.errors import InputError
from helpers.reference import TARGETS_BY_NAME
from helpers.tools.report_summary import SUMMARY_HEADER
CARD = re.compile(r"^(?:h|a|l|t|b|gb|rtx)\d{1,4}[a-z]*$")  # a card's reference folder: h200, h100, a100, l40s, t4 ...
HEADLINE_UNITS = (("_over_", "ratio"), ("_pts", "pts"), ("_minutes", "min"))


def is_cpu(device: str) -> bool:
    """A record measured on a CPU machine (helpers.device.device_label: 'CPU (x86_64, 2 cores)')."""
    return device.startswith("CPU")


def value_problem(r: bench.Record) -> str | None:
    """Why a record cannot be stored as it is (type), or None."""
    if not isinstance(r.name, str) or not r.name.strip():
        return f"a record without a name (value {r.value!r})"
    if isinstance(r.value, bool) or not isinstance(r.value, (int, float)):
        return f"{r.name}: value {r.value!r} is not a number"
    if not math.isfinite(r.value):
        return f"{r.name}: value {r.value} is not finite"
    for field in ("unit", "device", "date"):
        if not isinstance(getattr(r, field), str) or not getattr(r, field).strip():
            return f"{r.name}: its {field} is {getattr(r, field)!r}, not text"
    return None


def unit_problem(r: bench.Record, stored: dict[str, bench.Record]) -> str | None:
    """Why a record's unit is wrong for its name (a stored name keeps its unit; a headline's follows its name)."""
    old = stored.get(r.name)
    if old is not None and old.unit != r.unit:
        return f"{r.name}: unit {r.unit!r}, but it is stored in {old.unit!r}"
    if r.name in TARGETS_BY_NAME:
        want = next((u for part, u in HEADLINE_UNITS if part in r.name), None)
        if want is not None and r.unit != want:
            return f"{r.name}: unit {r.unit!r}, but this headline is measured in {want!r} (MEASUREMENTS.md)"
    return None


def card_problem(r: bench.Record, folder: str, stored: Iterable[bench.Record] = ()) -> str | None:
    """Why a record does not belong in reference/<folder>: a CPU record in a card's folder, or the reverse."""
    name = folder.lower()
    if name == "cpu":
        return None if is_cpu(r.device) else f"{r.name} was measured on {r.device}, not a CPU machine"
    if CARD.match(name):
        if is_cpu(r.device):
            return f"{r.name} was measured on {r.device}, not on an {name.upper()}"
        if not re.search(rf"(?<![A-Za-z0-9]){re.escape(name)}(?![0-9])", r.device, re.IGNORECASE):
            return f"{r.name} was measured on {r.device}, not on an {name.upper()}"
        return None
    kinds = {is_cpu(s.device) for s in stored}  # another folder: its records say whether it holds CPU or GPU results
    if kinds and is_cpu(r.device) not in kinds:
        return f"{r.name} was measured on {r.device}, but the folder holds {'CPU' if True in kinds else 'GPU'} results"
    return None


def owner(r: bench.Record) -> str:
    """Which run a record belongs to: its notebook or command."""
    return r.notebook or "an unnamed command"


def check_records(records: list[bench.Record], dest: Path, source: str, *, replace_owner: bool = False,
                  owners_replaced: Iterable[str] = ()) -> None:
    """Raise InputError (nothing written) unless every record may go into the results.json of folder `dest`.

    `source` names the records (a file, a run) in the message. `owners_replaced` are runs whose records
    this store replaces on purpose (a full reference run replaces its notebooks' records).
    """
    stored = {r.name: r for r in bench.load_records(dest / "results.json")} if (dest / "results.json").is_file() else {}
    problems = [p for r in records if (p := value_problem(r))]
    if problems:
        raise InputError(f"{source} holds records that cannot be stored ({'; '.join(problems[:3])}); nothing "
                         "was written. Re-measure them or drop them from the file.")
    mine = set(owners_replaced)
    kept = {n: r for n, r in stored.items() if owner(r) not in mine}  # a run that replaces its records may change units
    problems = [p for r in records if (p := unit_problem(r, kept) or card_problem(r, dest.name, stored.values()))]
    if problems:
        raise InputError(f"{source} does not belong in {dest} ({'; '.join(problems[:3])}); nothing was written. "
                         "Store CPU results in reference/cpu and a card's in reference/<card> (h200, h100), in "
                         "the units already stored.")
    taken = sorted({(r.name, owner(stored[r.name]), owner(r)) for r in records if r.name in stored
                    and owner(stored[r.name]) != owner(r) and owner(stored[r.name]) not in mine})
    if taken and not replace_owner:
        shown = "; ".join(f"{n} is {old}'s measurement, {source} has it from {new}" for n, old, new in taken[:3])
        raise InputError(f"{source} would replace measurements another run owns ({shown}{' ...' if len(taken) > 3 else ''}"
                         f"); nothing was written. Re-run the owner instead, or pass --replace-owner to replace "
                         "them on purpose.")


def check_summary_folder(dest: Path) -> None:
    """Raise unless `report --store` may write `dest`'s summary.md and runs.json: absent, or written by the report."""
    summary, runs = dest / "summary.md", dest / "runs.json"
    if (summary.exists() or summary.is_symlink()) and not _reads_as(summary, SUMMARY_HEADER):
        raise InputError(f"{summary} was not written by the reference run (it does not start with "
                         f"{SUMMARY_HEADER.strip()!r}); nothing was changed. Move it away, or pass another --store folder.")
    if (runs.exists() or runs.is_symlink()) and not _is_runs_file(runs):
        raise InputError(f"{runs} was not written by the reference run (it is not a list of notebook runs); "
                         "nothing was changed. Move it away, or pass another --store folder.")


def _reads_as(path: Path, header: str) -> bool:
    """A regular file whose text starts with `header`."""
    if path.is_symlink() or not path.is_file():
        return False
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read(len(header)) == header


def _is_runs_file(path: Path) -> bool:
    """A regular file holding the report's runs.json: a JSON list of {path, seconds, ok, ...} rows."""
    if path.is_symlink() or not path.is_file():
        return False
    try:
        rows = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError):
        return False
    return isinstance(rows, list) and all(isinstance(r, dict) and {"path", "seconds", "ok"} <= r.keys() for r in rows)
