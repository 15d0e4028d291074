"""A measurement is one object: declared once in its chapter package, measured here or read back from a stored
run, and shown the same way from both sources.

- ``Metric`` (``helpers.metrics``): a headline: name, unit, meaning, target. ``reference.TARGETS`` is that list.
- ``Table``: one declaration maps a table's rows to records and back. Each row becomes one record named
  ``<prefix>.<tail>`` whose value is the row's `value` column; its `keys` and `fields` columns (and its spread)
  ride in the record's extras, with ``table=<tag>``. ``Table.record(rows)`` records them, and
  ``Table.stored_rows(records)`` rebuilds exactly those rows (a test checks it for every declared table).
- ``Experiment(name, measure, tables, headlines, derive, needs)``: ``run()`` measures and records when this
  machine can (``needs="gpu"``: a GPU is present; ``"cpu"``: always), else reads the rows back from the stored
  GPU run nearest to this machine (same card first, else the newest) and says which one it shows. Its
  ``rebuild`` {table: view} names a table that is a view of another of the same result, rebuilt from the stored
  rows too (chapter 12's batch table from its sweep).
- ``Result``: ``show(table)``, ``bars(...)``, ``say(...)`` (``helpers.findings``, with the spread) and
  ``headlines()``, each labelled with where the rows come from (device, date, software).

Worked example (a chapter package declares, the notebook cell runs and shows):

    from helpers.experiment import Experiment, Table
    COPY = Table("chNN.copy", keys=("kernel",), value="GB/s", unit="GB/s", fields=("bytes",), spread="spread")

    def _measure(nbytes: int = 1 << 28) -> dict[str, list[dict]]:
        r = bench.interleaved({"d2d": ..., "cupy": ...}, rounds=7, clock="torch")
        gbs = lambda s: nbytes * 2 / s / 1e9
        return {"copy": [{"kernel": k, "GB/s": gbs(r.median_s(k)), "bytes": nbytes, "spread": r.spread(k, gbs)}
                         for k in r.seconds]}

    def _derive(rows):  # headline values from the measured rows, with their spread
        by = {row["kernel"]: row for row in rows["copy"]}
        return {"copy.cupy_over_d2d": by["cupy"]["GB/s"] / by["d2d"]["GB/s"]}

    COPY_RUN = Experiment("chNN.copy", _measure, {"copy": COPY}, headlines=("copy.cupy_over_d2d",),
                          derive=_derive, needs="gpu")

    result = COPY_RUN.run()                # measured here on a GPU, else the stored run, labelled
    result.show("copy", caption="Copy bandwidth")
    result.say("cupy copies at {r:.2f}× D2D: {verdict}.", {"r": "copy.cupy_over_d2d"}, findings.faster_slower("r"))

Serves: core — used by chapters 1–12 and lab 13.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from helpers import records as rec_mod
from helpers.errors import InputError, NoGPUError
from helpers.metrics import BY_NAME, Metric  # noqa: F401 - Metric is part of this module's API
from helpers.records import Record
from helpers.spread import Spread, of_extra

NEEDS = ("gpu", "ncu", "cpu")  # a GPU; a GPU and Nsight Compute (ncu) on the PATH; any machine
DECLARED: list["Table"] = []  # every Table declared so far (the round-trip test reads it)
Rows = dict[str, list[dict]]


def _pairs(cols: Sequence[str] | Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """((row column, record extra key), ...) from a tuple of columns (same key) or a {column: key} mapping."""
    if isinstance(cols, str):
        raise InputError(f"columns must be a tuple or a mapping, got the string {cols!r}; write ({cols!r},).")
    return tuple(cols.items()) if isinstance(cols, Mapping) else tuple((c, c) for c in cols)


def slug(value: Any) -> str:
    """A row value as a record-name part: spaces to '_', '×' to 'x', dashes and parentheses dropped."""
    return re.sub(r"[()\-]", "", str(value).replace(" ", "_").replace("×", "x"))


@dataclass(frozen=True)
class Table:
    """How one table's rows map to records and back.

    prefix: record names start '<prefix>.'; keys: the columns that tell rows apart; value: the column that is
    the record's value, in `unit`; fields: other columns kept in the extras; keys and fields may map a column
    to another extra name ({'M': 'batch'}). spread: the column holding the value's spread, a
    ``helpers.spread.Spread`` (stored as lo/hi/spread) or a dict of `spread_fields`. name: the record-name tail,
    a format string over the row's slugged columns or a function of the row (default: the keys joined by '.').
    spread_of: the column the spread describes when it is not `value` (stored as '<spread_of>_lo', ..., so that a
    record's lo/hi always bound its own value, as ``helpers.tools.audit`` checks). tag: the ``table`` extra
    (default: prefix). legacy(record): the columns of a record stored before the table declared them (None: not
    a row of this table). example: one row, for the round-trip test when no stored run holds this table yet.
    """

    prefix: str
    keys: Sequence[str] | Mapping[str, str]
    value: str
    unit: str
    fields: Sequence[str] | Mapping[str, str] = ()
    spread: str | None = None
    spread_fields: tuple[str, ...] = ()
    name: str | Callable[[Mapping[str, Any]], str] | None = None
    tag: str | None = None
    legacy: Callable[[Record], dict | None] | None = field(default=None, compare=False)
    example: Mapping[str, Any] | None = field(default=None, compare=False)
    spread_of: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.prefix, str) or not re.fullmatch(r"[a-z0-9_]+(\.[a-z0-9_]+)*", self.prefix):
            raise InputError(f"Table prefix must be dotted lower-case words such as 'ch12.batch', got {self.prefix!r}.")
        object.__setattr__(self, "keys", _pairs(self.keys))
        object.__setattr__(self, "fields", _pairs(self.fields))
        if not self.keys:
            raise InputError(f"Table {self.prefix!r} needs at least one key column (what tells its rows apart).")
        DECLARED.append(self)

    @property
    def table_tag(self) -> str:
        """The ``table`` extra every record of this table carries."""
        return self.tag or self.prefix

    @property
    def columns(self) -> list[str]:
        """Every column a row of this table holds, in display order."""
        return [c for c, _ in self.keys] + [self.value] + [c for c, _ in self.fields] + \
            ([self.spread] if self.spread else [])

    def record_name(self, row: Mapping[str, Any]) -> str:
        """'<prefix>.<tail>' of one row."""
        slugs = {c: slug(row[c]) for c in self.columns if c in row}
        if self.name is None:
            return ".".join([self.prefix, *(slugs[c] for c, _ in self.keys)])
        if callable(self.name):
            return f"{self.prefix}.{self.name(row)}"
        try:
            return f"{self.prefix}.{self.name.format(**slugs)}"
        except KeyError as exc:
            raise InputError(f"Table {self.prefix!r}: its name {self.name!r} uses {exc}, not a column of the row.") \
                from None

    def _extras(self, row: Mapping[str, Any]) -> dict[str, Any]:
        missing = [c for c in self.columns if c not in row]
        if missing:
            raise InputError(f"a row of table {self.prefix!r} lacks {', '.join(map(repr, missing))} (it has "
                             f"{', '.join(map(repr, row))}); give every declared column, None where it has no value.")
        extra = {key: row[col] for col, key in (*self.keys, *self.fields)}
        s = row[self.spread] if self.spread else None
        if isinstance(s, Spread):
            extra.update({self._spread_key(k): v for k, v in s.extra().items()})
        elif isinstance(s, Mapping):
            extra.update({k: s[k] for k in self.spread_fields})
        elif s is not None:
            raise InputError(f"the {self.spread!r} column of table {self.prefix!r} must hold a helpers.spread.Spread"
                             f" or a dict of {self.spread_fields}, got {type(s).__name__}.")
        return {**extra, "table": self.table_tag}

    def record(self, rows: Iterable[Mapping[str, Any]], **common: Any) -> list[Record]:
        """Record every row (``helpers.records.record``): value, unit, key and field columns, spread; `common`
        extras (e.g. harness=...) go with each."""
        out = []
        for r in rows:
            extras = self._extras(r)  # checks the row's columns first
            out.append(rec_mod.record(self.record_name(r), r[self.value], self.unit, **{**extras, **common}))
        return out

    def _row(self, r: Record) -> dict | None:
        e = r.extra
        if e.get("table") == self.table_tag and all(k in e for _, k in self.keys):
            base: dict = {}
        elif self.legacy is not None:
            base = self.legacy(r)
            if base is None:
                return None
        else:
            return None
        row = {c: e[k] if k in e else base.get(c) for c, k in self.keys}
        row[self.value] = r.value
        row.update({c: e[k] if k in e else base.get(c) for c, k in self.fields})
        if self.spread:
            if self.spread_fields:
                row[self.spread] = {k: e[k] for k in self.spread_fields} if all(
                    k in e for k in self.spread_fields) else None
            else:
                row[self.spread] = of_extra({k: e.get(self._spread_key(k)) for k in ("lo", "hi", "spread")})
        return row

    def _spread_key(self, key: str) -> str:
        """The extra key of one part of the spread ('lo', 'hi', 'spread'): prefixed when it is another column's."""
        return key if not self.spread_of or self.spread_of == self.value else f"{slug(self.spread_of)}_{key}"

    def stored_rows(self, records: Iterable[Record]) -> list[dict]:
        """The rows of this table rebuilt from records (the latest record of each name, first-seen order)."""
        mine = [r for r in rec_mod.latest_by_name(records) if r.name.startswith(self.prefix + ".")]
        return [row for row in map(self._row, mine) if row is not None]


def _value(v: Any) -> tuple[float, Spread | None]:
    """(value, spread) from what `derive` returned for one headline: a number or (number, Spread or None)."""
    if isinstance(v, tuple):
        return float(v[0]), v[1]
    return float(v), None


@dataclass(frozen=True)
class Experiment:
    """A chapter's measurement: `measure(**kw)` returns {table key: rows} for `tables` {key: Table}; `derive(rows)`
    gives the `headlines` (names of ``helpers.metrics``) and the `others` ({name: unit}: the chapter's own derived
    numbers) as numbers or (number, Spread); `needs` 'gpu', 'ncu' or 'cpu'. A key of `measure`'s that starts
    with '_' holds side rows (what a cell shows or `derive` reads beside the tables): kept, never recorded."""

    name: str
    measure: Callable[..., Mapping[str, list[dict]]] = field(compare=False)
    tables: Mapping[str, Table]
    headlines: tuple[str, ...] = ()
    derive: Callable[[Rows], Mapping[str, Any]] | None = field(default=None, compare=False)
    needs: str = "gpu"
    others: Mapping[str, str] = field(default_factory=dict)
    # {table: rows -> rows}: a table that is a view of another table of the same result, rebuilt from that
    # table's rows when shown from a stored run too (its own records may predate a kernel added to the view since)
    rebuild: Mapping[str, Callable[[Rows], list[dict]]] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        if self.needs not in NEEDS:
            raise InputError(f"Experiment {self.name!r}: needs must be one of {NEEDS}, got {self.needs!r}.")
        unknown = [h for h in self.headlines if h not in BY_NAME]
        if unknown:
            raise InputError(f"Experiment {self.name!r}: {unknown} are not headline Metrics (helpers.metrics); "
                             "declare them there or leave them out of headlines.")

    def can_measure(self) -> bool:
        """True when this machine has what `needs` asks for."""
        import shutil

        from helpers.device import has_gpu

        return self.needs == "cpu" or (has_gpu() and (self.needs == "gpu" or shutil.which("ncu") is not None))

    def run(self, *, stored: bool | None = None, card: str | None = None, **kw: Any) -> "Result":
        """Measure and record here when this machine can (or `stored=False` insists), else the stored rows of
        `card` (default: the stored GPU run nearest to this machine), labelled; `kw` go to `measure`."""
        if stored is None:
            stored = not self.can_measure()
        if not stored:
            if not self.can_measure():
                raise NoGPUError(f"measuring {self.name}" + (" (with Nsight Compute's ncu)" if self.needs == "ncu"
                                                             else ""))
            return self._measured(kw)
        return self._stored(card)

    def _measured(self, kw: Mapping[str, Any]) -> "Result":
        from helpers.device import device_label

        rows = {k: list(v) for k, v in self.measure(**kw).items()}
        unknown = {k for k in rows if not k.startswith("_")} - set(self.tables)
        if unknown:
            raise InputError(f"{self.name}.measure returned tables {sorted(unknown)} it does not declare "
                             f"(it declares {sorted(self.tables)}; side rows, never recorded, go under a key that starts "
                             "with '_').")
        recs = [r for k, t in self.tables.items() for r in t.record(rows.get(k, []))]
        for name, v in (self.derive(rows) if self.derive else {}).items():
            if name not in self.headlines and name not in self.others:
                raise InputError(f"{self.name}.derive gave {name!r}, which is not among its headlines or others.")
            value, s = _value(v)
            unit = BY_NAME[name].unit if name in self.headlines else self.others[name]
            recs.append(rec_mod.record(name, value, unit, **(s.extra() if s else {})))
        return Result(self, rows, "here", f"measured here: {device_label()}, {dt.date.today().isoformat()}", recs)

    def nearest_card(self) -> str | None:
        """The stored GPU run nearest to this machine among those that hold rows of this experiment's tables
        (a newer run that measured other chapters does not hide this one's rows)."""
        from helpers import reference

        holding = [c for c in reference.stored_cards()
                   if any(t.stored_rows(reference.load(c)) for t in self.tables.values())]
        return reference.nearest_card(cards=holding) if holding else reference.nearest_card()

    def _stored(self, card: str | None) -> "Result":
        from helpers import reference

        source = card or (self.nearest_card() if self.needs != "cpu" else "cpu")
        recs = list(reference.load(source)) if source else []
        rows = {k: t.stored_rows(recs) for k, t in self.tables.items()}
        rows.update({k: view(rows) for k, view in self.rebuild.items() if any(rows.values())})
        if not recs:
            label = "no stored run holds these rows yet"
        elif card is None and self.needs != "cpu" and not any(rows.values()):
            label = reference.stored_label(source) + "; no stored GPU run holds these rows yet"
        else:
            label = reference.stored_label(source) + (f"; {reference.card_note(source)}" if card is None and
                                                      self.needs != "cpu" else "")
        return Result(self, rows, source or "none", label, recs)


@dataclass
class Result:
    """What an Experiment's run gives: its rows per table, where they come from, and one way to show them."""

    experiment: Experiment
    rows: Rows
    source: str                 # 'here', a stored card folder ('h200', 'h100'), 'cpu' or 'none'
    label: str                  # 'measured here: …' or the stored run's device, date and software
    records: list[Record]

    @property
    def measured(self) -> bool:
        """True when the rows were measured in this session."""
        return self.source == "here"

    def __getitem__(self, table: str) -> list[dict]:
        if table not in self.rows:
            raise InputError(f"{self.experiment.name} has no table {table!r}; it has {', '.join(self.rows)}.")
        return self.rows[table]

    def value(self, name: str) -> float | None:
        """A derived number of this result (measured here, or from the stored run shown), or None."""
        return next((r.value for r in reversed(self.records) if r.name == name), None)

    @property
    def device(self) -> str | None:
        """The device the rows come from, for a figure's label (None: this machine's)."""
        return None if self.measured else (self.records[0].device if self.records else None)

    @property
    def note(self) -> str:
        """'' for rows measured here, 'stored reference' for stored ones (a figure's note)."""
        return "" if self.measured else "stored reference"

    def where(self) -> str:
        """One line that says where the rows come from, and why they were not measured here: no GPU, no Nsight
        Compute, or (on a GPU that could) the notebook asked for the stored run."""
        if self.measured:
            return self.label
        from helpers.device import has_gpu

        needs = self.experiment.needs
        why = ("Not measured in this session" if needs == "cpu" else "No GPU here" if not has_gpu() else
               "Nsight Compute (ncu) is not installed here" if not self.experiment.can_measure() else
               "Not measured on this GPU")
        return f"{why}: stored {self.source.upper()} run, {self.label}"

    def show(self, table: str, caption: str = "", view: Callable[[list[dict]], list[dict]] | None = None) -> None:
        """The table's rows (through `view`, e.g. a column selection), captioned with where they come from."""
        from helpers.tables import show as show_table

        rows = self[table]
        if not rows:
            print(f"{caption or table}: no rows ({self.where()}).")
            return
        show_table(view(rows) if view else rows, caption=f"{caption} ({self.where()})".strip())

    def bars(self, table: str, label: str, value: str, title: str, ylabel: str, target: float | None = None,
             name: str | None = None) -> Any:
        """A bar chart of one column of a table, labelled by another, with the rows' device (`name`: the saved
        figure's file name, see ``helpers.plots``)."""
        from helpers import plots

        rows = self[table]
        if not rows:
            print(f"{title}: no rows ({self.where()}).")
            return None
        return plots.bar_ratios({str(r[label]): r[value] for r in rows}, title=title, ylabel=ylabel, target=target,
                                device=self.device, note=self.note, name=name)

    def say(self, template: str, names: Mapping[str, str], verdict: Any = None, **twin_zh: Any) -> str:
        """``helpers.findings.say`` over this result's source (its spreads decide 'not resolved at this noise'),
        with its 中文 twin (``zh=``, ``verdict_zh=``) passed on."""
        from helpers import findings, reference

        sources = ((findings.HERE,) if self.measured else
                   (self.source,) if self.source in reference.SOURCES else None)
        return findings.say(template, names, verdict, sources=sources, **twin_zh)

    def headlines(self) -> list[dict]:
        """The experiment's headline values beside the stored runs and their targets (shown, and returned)."""
        from helpers import reference

        names = [*self.experiment.headlines, *self.experiment.others]
        mine = [r for r in self.records if r.name in names] if self.measured else []
        reference.show(names, mine)
        return reference.comparison_rows(names, mine)
