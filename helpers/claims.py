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

Serves: core — used by chapters 0–11.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from helpers.errors import InputError
from helpers.tables import number

HOLDS, FAILS, NOT_MEASURED = "holds", "doesn't hold", "not measured"
Values = Mapping[str, float | None]
Judge = Callable[[Values], tuple[str, str]]
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


def get(claim_id: str) -> Claim:
    """One registered claim by id."""
    if claim_id not in _REGISTRY:
        raise InputError(f"no claim {claim_id!r} is registered; import its chapter's notes module first.")
    return _REGISTRY[claim_id]


def gather(names: tuple[str, ...] | list[str]) -> tuple[dict[str, float | None], str]:
    """Values of `names` (this session first, then the stored runs) and where they came from."""
    from helpers import findings

    found = {n: findings.get(n) for n in names}
    wheres = sorted({m.where() for m in found.values() if m is not None})
    return {n: (m.value if m else None) for n, m in found.items()}, "; ".join(wheres)


def judge(claim: Claim, measured: Values | None = None) -> dict[str, str]:
    """One claim judged: {claim, evidence, verdict, from, source}."""
    values, where = (dict(measured), "given values") if measured is not None else gather(claim.needs)
    evidence, verdict = claim.judge(values)
    if not claim.needs:
        where = "published figures and the course's code"
    elif not where:
        where = "not measured here, and no stored run holds it yet"
    return {"claim": claim.notes, "evidence": evidence, "verdict": verdict, "from": where,
            "source": claim.source}


def rows(chapter: int | None = None, measured: Values | None = None) -> list[dict]:
    """The claims table of one chapter (or all): claim, evidence, verdict, where from, source."""
    return [judge(c, measured) for c in registered(chapter)]


def show(chapter: int | None = None, measured: Values | None = None) -> None:
    """Display the claims table of one chapter, each verdict computed from the evidence."""
    from helpers.tables import show as show_table

    show_table(rows(chapter, measured),
               caption="Claims from the lecture notes (and circulating figures), judged by evidence.")


def callout_text(claim_id: str, measured: Values | None = None) -> str:
    """The callout as markdown: what the notes say (English, 中文), the verdict, the evidence, the source."""
    c = get(claim_id)
    j = judge(c, measured)
    return (f"**The lecture notes say** ({c.seed}): {c.notes}\n\n"
            f"**讲义中的说法：** {c.notes_zh}\n\n"
            f"**Verdict — {j['verdict']}.** {j['evidence'][:1].upper()}{j['evidence'][1:]}. "
            f"*({j['from']}; source: {c.source})*")


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
