"""Chapter 4's tables, each declared once: how its rows become records and come back from a stored run.

The record names are those the chapter has always stored (``ch04.divergence_ms.cupy_mod2``,
``ch04.blocksize_gbs.b256``, ``ch04.smem_occupancy.k48``, ``ch04.reduce_gbs.torch_sum``, ...), so the stored
runs made before these declarations read back as rows: each table's `legacy` hook takes the key from the name.

Serves: chapter 4.
"""

from __future__ import annotations

from collections.abc import Callable

from helpers.experiment import Table
from helpers.records import Record


def _tail(column: str, letter: str = "") -> Callable[[Record], dict]:
    """A legacy hook: the record name's last part is the row's `column` (a number after `letter` when given)."""
    def legacy(r: Record) -> dict:
        tail = r.name.rsplit(".", 1)[1]
        return {column: int(tail[len(letter):]) if letter else tail}
    return legacy


DIVERGENCE = Table("ch04.divergence_ms", keys=("kernel",), value="ms", unit="ms", spread="spread",
                   tag="ch04.divergence", legacy=_tail("kernel"))
# each kernel's time ÷ its backend's all-path-A (uniform) time: read from the same timings as DIVERGENCE
SLOWDOWN = Table("ch04.divergence_slowdown", keys=("kernel",), value="slowdown", unit="ratio", spread="spread",
                 tag="ch04.slowdown", legacy=_tail("kernel"))


def _sweep(stem: str, column: str, letter: str) -> tuple[Table, Table]:
    """The copy's GB/s and its theoretical occupancy (at `registers` per thread) along one sweep."""
    gbs = Table(f"ch04.{stem}_gbs", keys=(column,), value="GB/s", unit="GB/s", name=f"{letter}{{{column}}}",
                tag=f"ch04.{stem}_gbs", legacy=_tail(column, letter))
    occ = Table(f"ch04.{stem}_occupancy", keys=(column,), value="occupancy", unit="fraction", fields=("registers",),
                name=f"{letter}{{{column}}}", tag=f"ch04.{stem}_occupancy", legacy=_tail(column, letter))
    return gbs, occ


BLOCK_GBS, BLOCK_OCCUPANCY = _sweep("blocksize", "threads", "b")
SMEM_GBS, SMEM_OCCUPANCY = _sweep("smem", "KiB", "k")

REDUCE = Table("ch04.reduce_gbs", keys=("kernel",), value="GB/s", unit="GB/s", tag="ch04.reduce", legacy=_tail("kernel"))
