"""Sentences about measured outcomes, built from the record: live when this session measured it, else stored.

A notebook never writes a measured outcome into its markdown. It asks for the sentence instead:

    from helpers import findings
    findings.say("INT8 GEMM runs at {r:.2f}× the BF16 rate: {verdict}.",
                 {"r": "gemm.int8_over_bf16"}, verdict=findings.faster_slower("r"))

prints ``INT8 GEMM runs at 1.23× the BF16 rate: faster. (stored reference: NVIDIA H200, 2026-11-30)``
without a GPU, and the same sentence with this run's number (``measured here``) on one.
``get(name)`` gives one value with where it came from; ``ratio_sentence`` is the common
"A is r× B here: faster/slower" case. Missing numbers give a sentence that says they are missing.

Serves: core — used by chapters 1–11.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from helpers.errors import InputError

HERE = "here"
DEFAULT_SOURCES = (HERE, "h200", "cpu")
Verdict = Callable[[Mapping[str, float]], str]


@dataclass(frozen=True)
class Measured:
    """One value and where it came from: this session (``source == 'here'``) or a stored run."""

    name: str
    value: float
    unit: str
    source: str
    device: str
    date: str

    @property
    def stored(self) -> bool:
        """True when the value comes from a stored reference run, not this session."""
        return self.source != HERE

    def where(self) -> str:
        """'measured here' or 'stored reference: NVIDIA H200, 2026-11-30'."""
        return "measured here" if not self.stored else f"stored reference: {self.device}, {self.date}"

    def __str__(self) -> str:
        return f"{self.value:.3g} {self.unit}".strip()


def get(name: str, sources: Sequence[str] = DEFAULT_SOURCES) -> Measured | None:
    """The first of this session's record ('here') and the stored runs, in `sources` order, that holds `name`."""
    from helpers import reference
    from helpers.bench import session_records

    for src in sources:
        if src == HERE:
            rec = next((r for r in reversed(session_records()) if r.name == name), None)
        elif src in reference.SOURCES:
            rec = reference.lookup(name, src)
        else:
            raise InputError(f"sources must be among {HERE!r}, {', '.join(map(repr, reference.SOURCES))}; got {src!r}.")
        if rec is not None:
            return Measured(name, rec.value, rec.unit, src, rec.device, rec.date)
    return None


def _provenance(found: Mapping[str, Measured]) -> str:
    """'(measured here)', '(stored reference: …)', or a mix naming which key came from where."""
    groups: dict[str, list[str]] = {}
    for key, m in found.items():
        groups.setdefault(m.where(), []).append(key)
    if len(groups) == 1:
        return f"({next(iter(groups))})"
    return "(" + "; ".join(f"{', '.join(keys)}: {where}" for where, keys in groups.items()) + ")"


def sentence(template: str, names: Mapping[str, str], verdict: Verdict | None = None,
             sources: Sequence[str] = DEFAULT_SOURCES, missing: str | None = None) -> str:
    """Fill `template` with the values of `names` {key: measurement name} and a computed ``{verdict}``.

    The sentence ends with where the numbers came from. When a number is missing everywhere it says
    so instead (`missing` replaces the default wording).
    """
    if not names:
        raise InputError("sentence() needs at least one measurement: names={'key': 'measurement.name'}.")
    found = {k: get(n, sources) for k, n in names.items()}
    absent = [names[k] for k, m in found.items() if m is None]
    if absent:
        return missing or (f"Not measured here, and no stored run holds {', '.join(absent)} yet: "
                           "nothing to conclude.")
    values = {k: m.value for k, m in found.items() if m is not None}
    text = template.format(**values, verdict=verdict(values) if verdict else "")
    return f"{text} {_provenance({k: m for k, m in found.items() if m is not None})}"


def say(template: str, names: Mapping[str, str], verdict: Verdict | None = None,
        sources: Sequence[str] = DEFAULT_SOURCES, missing: str | None = None) -> str:
    """Print and return ``sentence(...)``."""
    text = sentence(template, names, verdict, sources, missing)
    print(text)
    return text


def compare(x: float, y: float = 1.0, *, above: str, below: str, same: str = "about the same",
            tolerance: float = 0.03) -> str:
    """`above` when x > y·(1+tolerance), `below` when x < y·(1−tolerance), else `same`."""
    if x > y * (1 + tolerance):
        return above
    if x < y * (1 - tolerance):
        return below
    return same


def faster_slower(key: str, tolerance: float = 0.03) -> Verdict:
    """A verdict for a speed ratio named `key` (>1 is faster): 'faster', 'slower' or 'about as fast'."""
    return lambda v: compare(v[key], above="faster", below="slower", same="about as fast", tolerance=tolerance)


def threshold(key: str, limit: float, *, above: str, below: str) -> Verdict:
    """A verdict that says `above` when the value of `key` is at least `limit`, else `below`."""
    return lambda v: above if v[key] >= limit else below


def against_target(name: str, subject: str, sources: Sequence[str] = DEFAULT_SOURCES) -> str:
    """'<subject>: 0.77 (target >= 0.7: met). (stored reference: …)' for a headline name of reference.TARGETS."""
    from helpers import reference

    t = reference.TARGETS_BY_NAME.get(name)
    if t is None:
        raise InputError(f"{name!r} is not a headline measurement (helpers.reference.TARGETS).")

    def verdict(v: Mapping[str, float]) -> str:
        met = t.met(v["x"])
        return "reported, no target" if met is None else f"target {t.text}: {'met' if met else 'not met'}"

    return sentence(f"{subject}: {{x:.3g}} ({{verdict}}).", {"x": name}, verdict, sources)


def ratio_sentence(name: str, subject: str, baseline: str, sources: Sequence[str] = DEFAULT_SOURCES) -> str:
    """'<subject> runs at 0.93× <baseline>: slower. (stored reference: …)' for a speed ratio record."""
    return sentence(f"{subject} runs at {{r:.2f}}× {baseline}: {{verdict}}.", {"r": name},
                    faster_slower("r"), sources)
