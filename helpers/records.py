"""The record format: one measured number with where, when and with what software it was measured.

Every headline number goes through ``record()``, which stamps it with the device, versions and date,
keeps it for this Python session (``session_records()``) and, when ``WORKBOOK_RESULTS`` names a file,
appends it there as a JSON line. Stored runs (``reference/<card>/results.json``) are JSON lists of the
same records (``save_records``/``load_records``); ``merge`` is how a new run replaces an old one's records.

    from helpers import records
    rec = records.record("copy.cupy_over_d2d", 0.95, "ratio", lo=0.93, hi=0.96, spread="p10..p90 of 7 rounds")
    records.save_records(records.latest_by_name(records.session_records()), "out/results.json")

Serves: core — used by every chapter and every lab.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import os
from collections.abc import Collection, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from helpers.errors import InputError

RESULTS_VAR = "WORKBOOK_RESULTS"


def _json_safe(value: Any) -> Any:
    """`value` with every NaN or inf float (inside dicts and lists too) replaced by None, which JSON can store."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    return value


@dataclass
class Record:
    """One measured number, with where and when it was measured."""

    name: str
    value: float
    unit: str
    device: str
    date: str
    notebook: str | None = None
    ratio_of: list[str] | None = None
    versions: dict[str, str] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The record as a plain dict (the reference-file format); a NaN/inf among the extras becomes null."""
        d = asdict(self)
        d["extra"] = _json_safe(d["extra"])
        return {k: v for k, v in d.items() if v not in (None, {}, [])}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "Record":
        """Read a record back, keeping unknown fields in `extra`."""
        known = {f for f in cls.__dataclass_fields__}
        base = {k: v for k, v in d.items() if k in known}
        extra = {**base.pop("extra", {}), **{k: v for k, v in d.items() if k not in known}}
        base.setdefault("device", "unknown")
        base.setdefault("date", "unknown")
        return cls(**base, extra=extra)


_session: dict[str, Any] = {"notebook": None, "records": []}


def set_notebook(name: str | None) -> None:
    """Name the notebook that later records belong to."""
    _session["notebook"] = name


def session_records() -> list[Record]:
    """Every record made in this Python session, oldest first."""
    return list(_session["records"])


def record(
    name: str,
    value: float,
    unit: str,
    *,
    ratio_of: Iterable[str] | None = None,
    **extra: Any,
) -> Record:
    """Record one measurement: keep it for this session and append it to $WORKBOOK_RESULTS if set."""
    from helpers.device import device_label
    from helpers.environment import versions

    if not isinstance(name, str) or not name:
        raise InputError("record() needs a non-empty measurement name such as 'copy.cupy_over_d2d'.")
    try:
        value = float(value)
    except (TypeError, ValueError):
        raise InputError(f"record({name!r}, ...) needs a number, got {type(value).__name__} {value!r}. "
                         "Pass the measured value, e.g. float(t.median_s).") from None
    if not math.isfinite(value):
        raise InputError(f"record({name!r}, {value}) is not a finite number, and JSON cannot store it; nothing "
                         "was recorded. Find where the NaN/inf comes from (a zero time? an empty timing?).")
    if not isinstance(unit, str):
        raise InputError(f"record({name!r}, ...) needs the unit as text, e.g. 'ratio', 'ms' or 'GB/s'.")
    rec = Record(
        name=name, value=value, unit=unit, device=device_label(),
        date=_dt.date.today().isoformat(), notebook=_session["notebook"],
        ratio_of=list(ratio_of) if ratio_of else None, versions=versions(), extra=extra,
    )
    _session["records"].append(rec)
    path = os.environ.get(RESULTS_VAR)
    if path:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps(rec.to_json(), allow_nan=False) + "\n")
    return rec


def record_relative(results: dict[str, float], value_prefix: str, unit: str, ratio_prefix: str,
                    baseline: str) -> dict[str, float]:
    """Record each ``<backend>_<variant>`` value and its ratio to the same backend's `baseline`; return the ratios."""
    rel = {}
    for k, v in results.items():
        record(f"{value_prefix}.{k}", v, unit)
        rel[k] = v / results[f"{k.split('_')[0]}_{baseline}"]
        record(f"{ratio_prefix}.{k}", rel[k], "ratio")
    return rel


def latest_by_name(records: Iterable[Record]) -> list[Record]:
    """One record per name (the last one recorded), in first-seen order."""
    last: dict[str, Record] = {}
    for r in records:
        last[r.name] = r
    return list(last.values())


def merge(old: Iterable[Record], new: Iterable[Record], replaced: Collection[str | None]) -> list[Record]:
    """A stored run updated by a new one: the old records of every notebook not in `replaced` (other commands'
    records, notebooks that were not re-run), then the new records; one per name, the latest winning."""
    new = list(new)
    return latest_by_name([r for r in old if r.notebook not in replaced] + new)


def save_records(records: Iterable[Record], path: str | os.PathLike) -> None:
    """Write records as a JSON list (the format of reference/*/results.json)."""
    data = [r.to_json() for r in records]
    try:
        text = json.dumps(data, indent=1, sort_keys=True, allow_nan=False) + "\n"
    except ValueError:
        bad = [d["name"] for d in data if not math.isfinite(d.get("value", 0.0))]
        raise InputError(f"records {bad[:3]} hold NaN or inf, which JSON cannot store; nothing was written to "
                         f"{path}. Drop or re-measure them.") from None
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(text, encoding="utf-8")


def _parse(text: str, where: str) -> Any:
    """json.loads, or an InputError naming the file and line."""
    try:
        return json.loads(text)
    except ValueError as exc:
        raise InputError(f"{where} is not valid JSON ({exc.msg}); the file is cut off or was edited. Write it "
                         "again (re-run what records it), or delete the broken line.") from None


def _record(d: Any, where: str) -> Record:
    """A Record from a parsed JSON object, or an InputError naming where it came from."""
    if not isinstance(d, dict) or not {"name", "value", "unit"} <= d.keys():
        raise InputError(f"{where} is not a record (it needs name, value and unit). Write it with "
                         "helpers.records.record or save_records.")
    return Record.from_json(d)


def load_records(path: str | os.PathLike) -> list[Record]:
    """Read records from a JSON list or a JSON-lines file (InputError naming the line that is broken)."""
    p = Path(path)
    if not p.is_file():
        raise InputError(f"{p} {'is a folder' if p.is_dir() else 'does not exist'}: pass a records file "
                         "(results.json or a .jsonl written by helpers.records.record).")
    try:
        text = p.read_text(encoding="utf-8").strip()
    except UnicodeDecodeError:
        raise InputError(f"{p} is not a text file of records. Pass results.json or a .jsonl of records.") from None
    if not text:
        return []
    if text.startswith("["):
        data = _parse(text, str(p))
        return [_record(d, f"{p}, item {i + 1}") for i, d in enumerate(data)]
    return [_record(_parse(line, f"{p}, line {i + 1}"), f"{p}, line {i + 1}")
            for i, line in enumerate(text.splitlines()) if line.strip()]
