"""Every lecture-notes claim is bilingual both ways and names its baseline: the callout carries the
verdict word (成立 / 不成立 / 视情况而定, or 未测量 / 无法判定) and a one-line Chinese summary of the
evidence, with the stored runs, with nothing measured, and after a verdict computed here."""

from __future__ import annotations

import importlib
import pkgutil
import re

import pytest

from helpers import bench, chapters, claims, findings
from helpers.errors import InputError

CJK = re.compile(r"[\u4e00-\u9fff]")
WORDS = ("成立", "不成立", "视情况而定", "未测量", "无法判定")


def _register_all() -> list[claims.Claim]:
    """Import every chapter's notes.py / claims.py so that all claims are registered."""
    for mod in pkgutil.iter_modules(chapters.__path__):
        for leaf in ("notes", "claims"):
            try:
                importlib.import_module(f"helpers.chapters.{mod.name}.{leaf}")
            except ModuleNotFoundError as exc:
                if not exc.name or not exc.name.endswith(f".{leaf}"):
                    raise
    return claims.registered()


ALL = _register_all()


@pytest.fixture(autouse=True)
def _clean_session(monkeypatch):
    monkeypatch.setitem(bench._session, "records", [])


def test_the_registry_holds_every_chapters_claims():
    assert len(ALL) >= 30 and {c.chapter for c in ALL} >= set(range(1, 12))


@pytest.mark.parametrize("claim", ALL, ids=[c.id for c in ALL])
def test_callout_is_bilingual_and_names_its_baseline(claim):
    assert CJK.search(claim.notes_zh), f"{claim.id}: the notes' statement has no Chinese"
    assert claim.baseline, f"{claim.id}: say which baseline the notes mean (Claim.baseline)"
    for measured in (None, {n: None for n in claim.needs}):   # the stored runs, then nothing measured
        j = claims.judge(claim, measured)
        text = claims.callout_text(claim.id, measured)
        verdict_line = next(line for line in text.splitlines() if line.startswith("**结论："))
        assert any(w in verdict_line for w in WORDS), f"{claim.id}: no Chinese verdict word in {verdict_line!r}"
        assert CJK.search(j["summary_zh"]) and "\n" not in j["summary_zh"], \
            f"{claim.id}: the Chinese summary of the evidence is missing or not one line"
        assert f"**Judged against** {claim.baseline}" in text


def test_verdict_words_map_both_ways():
    assert claims.verdict_zh(claims.HOLDS) == "成立"
    assert claims.verdict_zh(claims.FAILS) == "不成立"
    assert claims.verdict_zh(claims.combine({"a": claims.HOLDS, "b": claims.FAILS})) == "视情况而定"
    assert claims.verdict_zh("holds (partly measured)") == "成立（部分测量）"
    assert claims.verdict_zh(findings.NOT_RESOLVED).startswith("无法判定")
    with pytest.raises(InputError, match="no Chinese word"):
        claims.verdict_zh("probably fine")


def test_int8_doubling_is_judged_against_fp32_not_fp16():
    """Old behaviour: INT8 ÷ FP16 alone decided it ("doesn't hold" at 0.93×). The notes mean FP32."""
    c = claims.get("ch09.int8_doubles_speed")
    assert "FP32" in c.baseline
    from helpers.chapters.ch09_deployment import notes

    m = {notes.FP32: 1630.0, notes.FP16: 4809.0, notes.INT8_OVER_FP32: 8.26, notes.INT8_OVER_FP16: 0.93}
    j = claims.judge(c, m)
    assert j["verdict"] == claims.HOLDS and "2.95×" in j["evidence"] and j["verdict_zh"] == "成立"
    slow = claims.judge(c, {**m, notes.FP16: 2000.0, notes.INT8_OVER_FP32: 1.2})
    assert slow["verdict"] == claims.FAILS


def test_every_claims_table_row_has_its_chinese_twin():
    """Old table: claim, evidence and verdict in English, only the verdict word (结论) in Chinese."""
    for measured in (None, {}):
        for row in claims.rows(None, measured):
            for en, zh in claims.ROW_TWINS.items():
                assert row[en] and CJK.search(row[zh]), f"{row['claim'][:40]}: column {en!r} has no Chinese twin {zh!r}"
