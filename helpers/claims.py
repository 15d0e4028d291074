"""The one registry of claims checked against evidence: the lecture notes' numbers, and figures that circulate.

Each claim says what the notes (or the folklore) state, paraphrased in English and in Chinese, names
the measurements or datasheet facts that decide it, and computes its verdict from them — never
written down in advance. Measurements come from this session first, then the stored runs
(``helpers.findings.get``), and every verdict says which.

A chapter registers its claims once, in its own package (``helpers/chapters/chNN_*/notes.py``):

    from helpers import claims
    claims.register(claims.Claim(id="ch03.shared_memory_size", chapter=3, seed="notes 1 §1.2.3",
        notes="...", notes_zh="...", needs=(), judge=my_judge, source="CUDA C++ Programming Guide, ..."))

and its notebook prints them with ``claims.show(3)`` (a table) or ``claims.callout("ch03.…")``
(one boxed correction where the student meets the topic).

Each claim names the baseline the notes mean (``baseline``: "against FP32, what the notes compare
with"), and every callout is bilingual both ways: the notes' statement, the verdict word (成立 /
不成立 / 视情况而定) and a one-line Chinese summary of the evidence (``summary_zh``), beside the English.

Serves: core — used by chapters 1–11.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from helpers.errors import InputError
from helpers.tables import number

HOLDS, FAILS, NOT_MEASURED = "holds", "doesn't hold", "not measured"
OUTDATED = "outdated"
VERDICT_ZH = {HOLDS: "成立", FAILS: "不成立", NOT_MEASURED: "未测量", OUTDATED: "不成立（已过时）"}
Values = Mapping[str, float | None]
Judge = Callable[[Values], tuple[str, str]]
SummaryZh = Callable[[Values], str]
SEED_FILES = {"notes 1": "000_d69d5450e7e49538.txt", "notes 2": "002_343e62a4a5f53c75.txt",
              "notes 3": "004_cc1b451fef539712.txt", "folklore": ""}


def in_range(value: float | None, lo: float, hi: float) -> str:
    """'holds' when lo <= value <= hi, "doesn't hold" outside, 'not measured' for None."""
    if lo > hi:
        raise InputError(f"range must have lo <= hi, got {lo}..{hi}.")
    if value is None:
        return NOT_MEASURED
    return HOLDS if lo <= value <= hi else FAILS


def combine(parts: Mapping[str, str]) -> str:
    """One verdict from named part-verdicts: all hold, none holds, or 'depends: holds for <which>'."""
    known = {k: v for k, v in parts.items() if v != NOT_MEASURED}
    if not known:
        return NOT_MEASURED
    if all(v == HOLDS for v in known.values()):
        verdict = HOLDS
    elif all(v == FAILS for v in known.values()):
        verdict = FAILS
    else:
        verdict = "depends: holds for " + ", ".join(k for k, v in known.items() if v == HOLDS)
    if len(known) < len(parts):
        verdict += " (partly measured)"
    return verdict


fmt = number  # '12.3 ms', '4,213 GB/s' or '–': the chapters' notes format their evidence with it


@dataclass(frozen=True)
class Claim:
    """A statement from the notes (or folklore), the evidence that decides it, and how."""

    id: str
    chapter: int
    seed: str          # where it is stated: 'notes 1 §1.1' (see SEED_FILES) or 'folklore'
    notes: str         # what is stated, paraphrased in English (never copied)
    notes_zh: str      # the same paraphrase in Chinese
    judge: Judge       # values of `needs` -> (what the evidence shows, verdict)
    source: str        # the measurement or published source that shows it
    needs: tuple[str, ...] = ()
    baseline: str = ""                     # what the notes compare against, e.g. 'FP32 (the notes' 12 ms)'
    summary_zh: SummaryZh | str = ""       # one line of Chinese: what the evidence shows (values -> text)


def verdict_zh(verdict: str) -> str:
    """The Chinese verdict word: 成立, 不成立, 视情况而定, 未测量, or 无法判定 (a difference inside the noise)."""
    from helpers.findings import DISTURBED, DISTURBED_ZH, NOT_RESOLVED, NOT_RESOLVED_ZH

    base, _, rest = verdict.partition(" (")
    words = ((HOLDS + ":", "视情况而定"), ("depends", "视情况而定"), ("holds on paper", "视情况而定"),
             ("doesn't fit", "不成立（不适用）"), (FAILS, "不成立"), (OUTDATED, "不成立（已过时）"),
             (HOLDS, "成立"), (NOT_MEASURED, "未测量"), (NOT_RESOLVED, f"无法判定（{NOT_RESOLVED_ZH}）"),
             (DISTURBED, f"无法判定（{DISTURBED_ZH}）"))
    word = next((zh for en, zh in words if base.startswith(en)), "")
    if not word:
        raise InputError(f"verdict {verdict!r} has no Chinese word: use HOLDS, FAILS, OUTDATED, NOT_MEASURED, "
                         "combine() or findings.NOT_RESOLVED.")
    return word + ("（部分测量）" if "partly measured" in rest else "")


_REGISTRY: dict[str, Claim] = {}


def register(*new: Claim) -> None:
    """Add claims to the registry (registering the same id again replaces it)."""
    for c in new:
        if not c.id.startswith(f"ch{c.chapter:02d}."):
            raise InputError(f"claim id {c.id!r} must start with 'ch{c.chapter:02d}.' (its chapter).")
        if c.seed.split(" §")[0] not in SEED_FILES:
            raise InputError(f"claim {c.id!r}: seed must start with one of {', '.join(SEED_FILES)}.")
        _REGISTRY[c.id] = c


def registered(chapter: int | None = None) -> list[Claim]:
    """The registered claims of one chapter (or all), in registration order."""
    return [c for c in _REGISTRY.values() if chapter is None or c.chapter == chapter]


CHAPTERS = Path(__file__).resolve().parent / "chapters"  # helpers/chapters/chNN_<notebook>/notes.py registers claims


def load_chapter(chapter: str) -> None:
    """Register a chapter's claims ('ch09' -> import helpers.chapters.ch09_<notebook>.notes), as exercises load."""
    found = sorted(p.parent.name for p in CHAPTERS.glob(f"{chapter}_*/notes.py"))
    if found:
        importlib.import_module(f"helpers.chapters.{found[0]}.notes")


def get(claim_id: str) -> Claim:
    """One claim by id such as 'ch09.int8_doubles_speed', loading its chapter's notes module on demand."""
    if not isinstance(claim_id, str) or "." not in claim_id:
        raise InputError(f"claim ids look like 'ch09.int8_doubles_speed'; got {claim_id!r}.")
    if claim_id not in _REGISTRY:
        load_chapter(claim_id.split(".", 1)[0])
    if claim_id not in _REGISTRY:
        raise InputError(f"no claim {claim_id!r}: its chapter's notes.py registers none by that name. "
                         f"Check the spelling; registered: {', '.join(sorted(_REGISTRY)) or 'none'}.")
    return _REGISTRY[claim_id]


def gather(names: tuple[str, ...] | list[str]) -> tuple[dict[str, float | None], str]:
    """Values of `names` (this session first, then the stored runs, with their spreads) and where from."""
    from helpers import findings

    found = {n: findings.get(n) for n in names}
    wheres = sorted({m.where() for m in found.values() if m is not None})
    values = findings.Values({n: (m.value if m else None) for n, m in found.items()},
                             {n: m.spread for n, m in found.items() if m is not None})
    return values, "; ".join(wheres)


def judge(claim: Claim, measured: Values | None = None) -> dict[str, str]:
    """One claim judged: {claim, evidence, verdict, verdict_zh, summary_zh, baseline, from, source}."""
    from helpers.findings import Values as WithSpreads

    given = None if measured is None else WithSpreads(measured, getattr(measured, "spreads", None))
    values, where = (given, "given values") if given is not None else gather(claim.needs)
    evidence, verdict = claim.judge(values)
    summary = claim.summary_zh(values) if callable(claim.summary_zh) else claim.summary_zh
    if not claim.needs:
        where = "published figures and the course's code"
    elif not where:
        where = "not measured here, and no stored run holds it yet"
    return {"claim": claim.notes, "evidence": evidence, "verdict": verdict, "verdict_zh": verdict_zh(verdict),
            "summary_zh": summary, "baseline": claim.baseline, "from": where, "source": claim.source}


ROW_TWINS = {"claim": "说法", "evidence": "证据", "verdict": "结论"}  # every English column's 中文 twin


def rows(chapter: int | None = None, measured: Values | None = None) -> list[dict]:
    """The claims table of one chapter (or all), bilingual: claim and 说法 (the notes' statement), evidence and
    证据 (its Chinese summary), verdict and 结论, then where from and the source."""
    out = []
    for c in registered(chapter):
        j = judge(c, measured)
        out.append({"claim": j["claim"], "说法": c.notes_zh, "evidence": j["evidence"], "证据": j["summary_zh"],
                    "verdict": j["verdict"], "结论": j["verdict_zh"], "from": j["from"], "source": j["source"]})
    return out


def show(chapter: int | None = None, measured: Values | None = None) -> None:
    """Display the claims table of one chapter, each verdict computed from the evidence."""
    from helpers.tables import show as show_table

    show_table(rows(chapter, measured),
               caption="Claims from the lecture notes (and circulating figures), judged by evidence.")


def callout_text(claim_id: str, measured: Values | None = None) -> str:
    """The callout as markdown: what the notes say, the baseline, the verdict and the evidence, each in
    English and in 中文, then where the numbers came from and the source."""
    c = get(claim_id)
    j = judge(c, measured)
    against = (f"**Judged against** {c.baseline}, the baseline the notes mean.\n\n" if c.baseline else "")
    summary = j["summary_zh"].rstrip("。") + "。" if j["summary_zh"] else ""
    return (f"**The lecture notes say** ({c.seed}): {c.notes}\n\n"
            f"**讲义中的说法：** {c.notes_zh}\n\n{against}"
            f"**Verdict — {j['verdict']}.** {j['evidence'][:1].upper()}{j['evidence'][1:]}. "
            f"*({j['from']}; source: {c.source})*\n\n"
            f"**结论：{j['verdict_zh']}。** {summary}")


def callout(claim_id: str, measured: Values | None = None) -> None:
    """Show one claim's callout: rendered markdown in Jupyter, plain text elsewhere."""
    from helpers.tables import in_notebook

    text = callout_text(claim_id, measured)
    plain = text.replace("**", "").replace("*", "")
    if in_notebook():
        from IPython.display import display

        display({"text/markdown": "> " + text.replace("\n\n", "\n>\n> "), "text/plain": plain}, raw=True)
    else:
        print(plain)
