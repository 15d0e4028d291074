"""Sentences about measured outcomes, built from the record: live when this session measured it, else stored.

A notebook never writes a measured outcome into its markdown. It asks for the sentence instead:

    from helpers import findings
    findings.say("INT8 GEMM runs at {r:.2f}× the BF16 rate: {verdict}.",
                 {"r": "gemm.int8_over_bf16"}, verdict=findings.faster_slower("r"))

prints ``INT8 GEMM runs at 1.23× the BF16 rate: faster. (stored reference: NVIDIA H200, 2026-11-30)``
without a GPU, and the same sentence with this run's number (``measured here``) on one.
``get(name)`` gives one value with where it came from (and its spread, when the record stores one,
see ``helpers.spread``); ``ratio_sentence`` is the common "A is r× B here: faster/slower" case.
Missing numbers give a sentence that says they are missing.

Every sentence has its 中文 twin: ``zh=`` is the same sentence in Chinese, with the same keys, and its
``{verdict}`` comes from ``verdict_zh=`` (or from the verdict's own ``.zh``, which the verdicts below carry):
the sentence then prints in English, and on the next line in Chinese with where the numbers came from.

Noise: a verdict never calls a difference a finding when it lies inside the measured spread. The
verdicts below read the spreads that ``sentence`` hands them (``Values.spreads``) and then say
``NOT_RESOLVED`` ("not resolved at this noise", 中文 ``NOT_RESOLVED_ZH``) instead of faster/slower.

A measurement whose rounds lie beyond a stated physical bound (``beyond_bound``: an overlap that
gained more than the two stage times allow) is not noise but a ``DISTURBED`` measurement ("disturbed
measurement", 中文 ``DISTURBED_ZH``): it is measured again, and a stored one is never read as a finding.

``overheard()`` lists every sentence built while it is open (template, values, verdict), so that
``helpers.tools.audit`` can judge each printed verdict against every stored run; a reading that judges several
items in one sentence tells it each item's verdict with ``judged(item, verdict)``.

Serves: core — used by chapters 1–12 and labs 06, 08, 12, 13.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from helpers.errors import InputError
from helpers.spread import Spread, of_record

HERE = "here"
NOT_RESOLVED = "not resolved at this noise"
NOT_RESOLVED_ZH = "在此噪声下无法分辨"
DISTURBED = "disturbed measurement"
DISTURBED_ZH = "测量受到干扰"
ZH_WORDS = {"faster": "更快", "slower": "更慢", "about as fast": "速度相当", "about the same": "大致相同",
            NOT_RESOLVED: NOT_RESOLVED_ZH, DISTURBED: DISTURBED_ZH}  # the common verdict words, twinned
BOUND_SLACK = 0.05  # a round may exceed its physical bound by this fraction of it (timing noise), no more
Verdict = Callable[[Mapping[str, float]], str]


def default_sources() -> tuple[str, ...]:
    """Where a sentence's numbers come from, in order: this session, then the stored GPU runs nearest to this
    machine first (the order ``helpers.experiment`` reads its rows in), then the stored CPU run."""
    from helpers import reference

    cards = reference.stored_cards()
    first = reference.nearest_card(cards=cards) if cards else None
    return (HERE, *([first] if first else []), *[c for c in cards if c != first], "cpu")


class Values(dict):
    """The values a verdict is given ({key: value}), with their spreads where the records store one."""

    def __init__(self, values: Mapping[str, float | None], spreads: Mapping[str, Spread | None] | None = None):
        super().__init__(values)
        self.spreads: dict[str, Spread] = {k: s for k, s in (spreads or {}).items() if s is not None}


@dataclass(frozen=True)
class Measured:
    """One value and where it came from: this session (``source == 'here'``) or a stored run."""

    name: str
    value: float
    unit: str
    source: str
    device: str
    date: str
    spread: Spread | None = None

    @property
    def stored(self) -> bool:
        """True when the value comes from a stored reference run, not this session."""
        return self.source != HERE

    def where(self) -> str:
        """'measured here' or 'stored reference: NVIDIA H200, 2026-11-30'."""
        return "measured here" if not self.stored else f"stored reference: {self.device}, {self.date}"

    def where_zh(self) -> str:
        """The Chinese of ``where``: '本次测量' or '已保存的参考结果：NVIDIA H200，2026-11-30'."""
        return "本次测量" if not self.stored else f"已保存的参考结果：{self.device}，{self.date}"

    def __str__(self) -> str:
        return f"{self.value:.3g} {self.unit}".strip()


def twin(verdict: Verdict, zh: Verdict) -> Verdict:
    """`verdict` carrying its Chinese twin as ``verdict.zh`` (what ``sentence`` uses for a ``zh=`` template)."""
    verdict.zh = zh  # type: ignore[attr-defined]
    return verdict


def zh_word(verdict: Verdict) -> Verdict:
    """The Chinese twin of a verdict that returns one of the common words (ZH_WORDS)."""
    def word(v: Mapping[str, float]) -> str:
        en = verdict(v)
        if en not in ZH_WORDS:
            raise InputError(f"verdict {en!r} has no Chinese word in findings.ZH_WORDS: pass verdict_zh= instead.")
        return ZH_WORDS[en]
    return word


@dataclass(frozen=True)
class Said:
    """One sentence as built: its template, the measurement names and values it read, and its verdict."""

    template: str
    names: dict[str, str]
    values: dict[str, float]
    verdict: str
    text: str
    spreads: dict[str, Spread] = field(default_factory=dict)


_HEARD: list[list[Said]] = []  # the open overheard() lists


@contextlib.contextmanager
def overheard() -> Iterator[list[Said]]:
    """Collect every sentence built while open: ``with findings.overheard() as said: ...``."""
    said: list[Said] = []
    _HEARD.append(said)
    try:
        yield said
    finally:
        _HEARD.remove(said)


def judged(item: str, verdict: str) -> None:
    """Tell the open ``overheard()`` lists one item's verdict, for a reading that judges several items in one sentence
    (chapter 4's modes against the warp model): the auditor then compares each item across the stored runs."""
    for heard in _HEARD:
        heard.append(Said(item, {}, {}, verdict, f"{item}: {verdict}"))


def beyond_bound(spread: Spread | None, bound: float | None, slack: float = BOUND_SLACK) -> bool:
    """True when the rounds of a value reach above its physical `bound` (by more than `slack` of it): a
    disturbed measurement, to be measured again, never noise. False without a spread or a bound."""
    if spread is None or bound is None:
        return False
    return spread.hi > bound + slack * max(1.0, abs(bound))


def above_bound(rounds: Sequence[float], bound: float, slack: float = BOUND_SLACK) -> list[int]:
    """Indices of the rounds that lie above the physical `bound` (by more than `slack` of it)."""
    return [i for i, r in enumerate(rounds) if r > bound + slack * max(1.0, abs(bound))]


def get(name: str, sources: Sequence[str] | None = None) -> Measured | None:
    """The first of this session's record ('here') and the stored runs, in `sources` order, that holds `name`."""
    from helpers import reference
    from helpers.bench import session_records

    for src in default_sources() if sources is None else sources:
        if src == HERE:
            rec = next((r for r in reversed(session_records()) if r.name == name), None)
        elif src in reference.SOURCES:
            rec = reference.lookup(name, src)
        else:
            raise InputError(f"sources must be among {HERE!r}, {', '.join(map(repr, reference.SOURCES))}; got {src!r}.")
        if rec is not None:
            return Measured(name, rec.value, rec.unit, src, rec.device, rec.date, of_record(rec))
    return None


def _provenance(found: Mapping[str, Measured]) -> str:
    """'(measured here)', '(stored reference: …)', or a mix naming which key came from where."""
    groups: dict[str, list[str]] = {}
    for key, m in found.items():
        groups.setdefault(m.where(), []).append(key)
    if len(groups) == 1:
        return f"({next(iter(groups))})"
    return "(" + "; ".join(f"{', '.join(keys)}: {where}" for where, keys in groups.items()) + ")"


def _provenance_zh(found: Mapping[str, Measured]) -> str:
    """The Chinese of ``_provenance``: '（本次测量）', '（已保存的参考结果：…）' or a mix naming which key is which."""
    groups: dict[str, list[str]] = {}
    for key, m in found.items():
        groups.setdefault(m.where_zh(), []).append(key)
    if len(groups) == 1:
        return f"（{next(iter(groups))}）"
    return "（" + "；".join(f"{'、'.join(keys)}：{where}" for where, keys in groups.items()) + "）"


def sentence(template: str, names: Mapping[str, str], verdict: Verdict | None = None,
             sources: Sequence[str] | None = None, missing: str | None = None, *,
             zh: str | None = None, verdict_zh: Verdict | None = None, missing_zh: str | None = None) -> str:
    """Fill `template` with the values of `names` {key: measurement name} and a computed ``{verdict}``.

    The sentence ends with where the numbers came from. When a number is missing everywhere it says
    so instead (`missing` replaces the default wording). With `zh`, its Chinese twin follows on the next
    line (``{verdict}`` there from `verdict_zh`, else from ``verdict.zh``).
    """
    if not names:
        raise InputError("sentence() needs at least one measurement: names={'key': 'measurement.name'}.")
    vz = verdict_zh or getattr(verdict, "zh", None)
    if zh is not None and "{verdict" in zh and vz is None:
        raise InputError("a Chinese template with {verdict} needs its verdict in Chinese: pass verdict_zh=.")
    found = _one_run(names, default_sources() if sources is None else sources)
    absent = [names[k] for k, m in found.items() if m is None]
    if absent:
        text = missing or (f"Not measured here, and no stored run holds {', '.join(absent)} yet: "
                           "nothing to conclude.")
        if zh is None:
            return text
        return text + "\n" + (missing_zh or f"此处未测量，已保存的运行中也没有 {'、'.join(absent)}：无从下结论。")
    values = Values({k: m.value for k, m in found.items() if m is not None},
                    {k: m.spread for k, m in found.items() if m is not None})
    said = verdict(values) if verdict else ""
    text = template.format(**values, verdict=said)
    known = {k: m for k, m in found.items() if m is not None}
    text = f"{text} {_provenance(known)}"
    for heard in _HEARD:
        heard.append(Said(template, dict(names), dict(values), said, text, dict(values.spreads)))
    if zh is not None:
        text += "\n" + zh.format(**values, verdict=vz(values) if vz else "") + _provenance_zh(known)
    return text


def _one_run(names: Mapping[str, str], sources: Sequence[str]) -> dict[str, "Measured | None"]:
    """Each name's measurement: this session's where it measured the name; the rest all from the first stored run
    that holds every one of them (one run's numbers are compared with each other), else each from the first source
    that holds it (the provenance then says which)."""
    here = {k: get(n, (HERE,)) for k, n in names.items()} if HERE in sources else {}
    found = {k: m for k, m in here.items() if m is not None}
    rest = {k: n for k, n in names.items() if k not in found}
    for src in (s for s in sources if s != HERE):
        stored = {k: get(n, (src,)) for k, n in rest.items()}
        if all(m is not None for m in stored.values()):
            return {**found, **stored}
    return {**found, **{k: get(n, sources) for k, n in rest.items()}}


def say(template: str, names: Mapping[str, str], verdict: Verdict | None = None,
        sources: Sequence[str] | None = None, missing: str | None = None, **twin_zh: Any) -> str:
    """Print and return ``sentence(...)`` (``zh=``, ``verdict_zh=``, ``missing_zh=`` as there)."""
    text = sentence(template, names, verdict, sources, missing, **twin_zh)
    print(text)
    return text


def resolved(x: float, y: float, spread: Spread | None) -> bool:
    """False when y lies inside x's measured spread: the difference x − y is noise, not a finding."""
    return spread is None or not spread.contains(y)


def compare(x: float, y: float = 1.0, *, above: str, below: str, same: str = "about the same",
            tolerance: float = 0.03, spread: Spread | None = None, unresolved: str = NOT_RESOLVED) -> str:
    """`above` when x > y·(1+tolerance), `below` when x < y·(1−tolerance), else `same`.

    With x's `spread` given, a y inside it gives `unresolved` ("not resolved at this noise") whatever
    the tolerance says: a difference inside the noise is never printed as a finding.
    """
    if not resolved(x, y, spread):
        return unresolved
    if x > y * (1 + tolerance):
        return above
    if x < y * (1 - tolerance):
        return below
    return same


def faster_slower(key: str, tolerance: float = 0.03) -> Verdict:
    """A verdict for a speed ratio named `key` (>1 is faster): 'faster', 'slower' or 'about as fast' (its
    Chinese twin as ``.zh``)."""
    def verdict(v: Mapping[str, float]) -> str:
        return compare(v[key], above="faster", below="slower", same="about as fast", tolerance=tolerance,
                       spread=spread_of(v, key))
    return twin(verdict, zh_word(verdict))


def spread_of(values: Mapping[str, float], key: str) -> Spread | None:
    """The spread ``sentence`` handed a verdict for `key` (None when its record stores none)."""
    return getattr(values, "spreads", {}).get(key)


def threshold(key: str, limit: float, *, above: str, below: str) -> Verdict:
    """A verdict that says `above` when the value of `key` is at least `limit`, else `below`.

    When the record's spread straddles `limit`, the verdict is NOT_RESOLVED instead.
    """
    def verdict(v: Mapping[str, float]) -> str:
        s = spread_of(v, key)
        if s is not None and s.contains(limit):
            return NOT_RESOLVED
        return above if v[key] >= limit else below
    return verdict


def against_target(name: str, subject: str, sources: Sequence[str] | None = None,
                   subject_zh: str | None = None) -> str:
    """'<subject>: 0.77 (target >= 0.7: met). (stored reference: …)' for a headline name of reference.TARGETS;
    'not resolved at this noise' when the record's spread straddles the target, 'no spread stored' when it has none."""
    from helpers import reference

    t = reference.TARGETS_BY_NAME.get(name)
    if t is None:
        raise InputError(f"{name!r} is not a headline measurement (helpers.reference.TARGETS).")

    def verdict(v: Mapping[str, float], zh: bool = False) -> str:
        met, s = t.met(v["x"]), spread_of(v, "x")
        if s is not None and t.straddled(s):
            return (f"目标 {t.text}：{NOT_RESOLVED_ZH}，{s.lo:.3g}..{s.hi:.3g}" if zh else
                    f"target {t.text}: {NOT_RESOLVED}, {s.lo:.3g}..{s.hi:.3g}")
        if met is None:
            return "仅报告，无目标" if zh else "reported, no target"
        if zh:
            return f"目标 {t.text}：{'达标' if met else '未达标'}" + ("" if s is not None else "，未保存噪声范围")
        return f"target {t.text}: {'met' if met else 'not met'}" + ("" if s is not None else ", no spread stored")

    zh = None if subject_zh is None else f"{subject_zh}：{{x:.3g}}（{{verdict}}）。"
    return sentence(f"{subject}: {{x:.3g}} ({{verdict}}).", {"x": name}, verdict, sources, zh=zh,
                    verdict_zh=lambda v: verdict(v, zh=True))


def ratio_sentence(name: str, subject: str, baseline: str, sources: Sequence[str] | None = None,
                   subject_zh: str | None = None, baseline_zh: str | None = None) -> str:
    """'<subject> runs at 0.93× <baseline>: slower. (stored reference: …)' for a speed ratio record, with its
    Chinese twin when `subject_zh` and `baseline_zh` are given."""
    zh = (None if subject_zh is None or baseline_zh is None else
          f"{subject_zh}的速度是{baseline_zh}的 {{r:.2f}} 倍：{{verdict}}。")
    return sentence(f"{subject} runs at {{r:.2f}}× {baseline}: {{verdict}}.", {"r": name},
                    faster_slower("r"), sources, zh=zh)
