"""Chapter 3's tables, each declared once: how its rows become records and come back from a stored run.

The record names are those the chapter has always stored (``ch03.copy_gbs.cupy_float4``,
``ch03.stride_gbs.s8`` for cupy and ``ch03.stride_gbs_numba.s8``, ``ch03.offset_gbs_cupy.o1``, ...), so the
stored runs made before these declarations read back as rows: each table's `legacy` hook takes the columns
from the name.

Serves: chapter 3.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from helpers.experiment import Table
from helpers.records import Record


def _tail(column: str) -> Callable[[Record], dict]:
    """A legacy hook: the record name's last part is the row's `column`."""
    return lambda r: {column: r.name.rsplit(".", 1)[1]}


COPY = Table("ch03.copy_gbs", keys=("kernel",), value="GB/s", unit="GB/s", spread="spread", tag="ch03.copy",
             legacy=_tail("kernel"))


def _sweep(stem: str, letter: str, column: str, bare_cupy: bool) -> tuple[Callable[[Mapping[str, Any]], str],
                                                                          Callable[[Record], dict | None]]:
    """The record-name tail of one sweep point (cupy's is '<stem>.<letter><x>' when `bare_cupy`, else
    '<stem>_cupy.…'; numba's '<stem>_numba.…') and the legacy hook that reads it back."""
    def name(row: Mapping[str, Any]) -> str:
        bare = bare_cupy and row["backend"] == "cupy"
        return f"{stem}{'' if bare else '_' + str(row['backend'])}.{letter}{int(row[column])}"

    pattern = re.compile(rf"ch03\.{stem}(?:_(cupy|numba))?\.{letter}(\d+)")

    def legacy(r: Record) -> dict | None:
        m = pattern.fullmatch(r.name)
        if m is None or m.group(1) == ("cupy" if bare_cupy else None):
            return None  # not this sweep, or its cupy points named the other way
        return {"backend": m.group(1) or "cupy", column: int(m.group(2))}

    return name, legacy


_stride_name, _stride_legacy = _sweep("stride_gbs", "s", "stride", bare_cupy=True)
STRIDE = Table("ch03", keys=("backend", "stride"), value="GB/s", unit="GB/s", spread="spread", name=_stride_name,
               tag="ch03.stride", legacy=_stride_legacy)
_offset_name, _offset_legacy = _sweep("offset_gbs", "o", "offset", bare_cupy=False)
OFFSET = Table("ch03", keys=("backend", "offset"), value="GB/s", unit="GB/s", spread="spread", name=_offset_name,
               tag="ch03.offset", legacy=_offset_legacy)

TRANSPOSE = Table("ch03.transpose_gbs", keys=("kernel",), value="GB/s", unit="GB/s", spread="spread",
                  tag="ch03.transpose", legacy=_tail("kernel"))
# each transpose as a fraction of its backend's tiled copy: read from the same timings as TRANSPOSE
FRACTION = Table("ch03.transpose_over_copy", keys=("kernel",), value="÷ tiled copy", unit="ratio", spread="spread",
                 tag="ch03.transpose_fraction", legacy=_tail("kernel"))

READONLY = Table("ch03.readonly_gbs", keys=("loads",), value="GB/s", unit="GB/s", spread="spread",
                 tag="ch03.readonly", legacy=_tail("loads"))
