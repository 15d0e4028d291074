"""A migrated chapter's Table reads its stored run back, and records the rows under the names they were stored with.

    assert stored_tables_problems({"ch03.copy_gbs.": (tables.COPY, 9), ...}) == []
"""

from __future__ import annotations

from collections.abc import Mapping

from helpers import records, reference
from helpers.experiment import Table


def _problems(table: Table, prefix: str, rows: int, source: str = "h200") -> list[str]:
    """What is wrong with `table` against the stored `source` run's records under `prefix` ([] when none are
    stored): not `rows` rows read back, or other names when those rows are recorded again (this session's
    records are put back as they were)."""
    stored = [r for r in reference.load(source) if r.name.startswith(prefix)]
    if not stored:
        return []
    got = table.stored_rows(reference.load(source))
    out = [] if len(got) == rows else [f"{table.prefix}: {len(got)} rows read back from {source}, not {rows}"]
    before = list(records._session["records"])
    try:
        names = sorted(r.name for r in table.record(got))
    finally:
        records._session["records"][:] = before
    if names != sorted(r.name for r in stored):
        out.append(f"{table.prefix}: recorded again under other names than the stored ones")
    return out


def stored_tables_problems(tables: Mapping[str, tuple[Table, int]], source: str = "h200") -> list[str]:
    """Every problem of each {record-name prefix: (table, rows the stored run holds)} (``_problems``)."""
    return [p for prefix, (table, rows) in tables.items() for p in _problems(table, prefix, rows, source)]
