"""Chapter 1: the claims table's verdicts follow the measurements."""

from __future__ import annotations

import pytest

from helpers.chapters.ch01_why_gpu_inference import claims
from helpers.errors import InputError


def _verdicts(m):
    return {r["claim"][:20]: r["verdict"] for r in claims.rows(m)}


def test_range_and_combine():
    assert claims.in_range(250, 200, 300) == claims.HOLDS
    assert claims.in_range(150, 200, 300) == claims.FAILS
    assert claims.in_range(None, 200, 300) == claims.NOT_MEASURED
    assert claims.combine({"a": "holds", "b": "holds"}) == "holds"
    assert claims.combine({"a": claims.FAILS, "b": claims.FAILS}) == claims.FAILS
    assert claims.combine({"a": "holds", "b": claims.FAILS}) == "depends: holds for a"
    assert claims.combine({"a": "holds", "b": claims.NOT_MEASURED}) == "holds (partly measured)"
    with pytest.raises(InputError):
        claims.in_range(1, 5, 2)


def test_verdicts_follow_the_numbers():
    m = {"ch01.bert_base.cpu_ms.b1": 250.0, "ch01.bert_base.gpu_ms.b1": 6.0,
         "ch01.speedup.bert_base.b1": 12.0, "ch01.speedup.bert_base.b8": 40.0,
         "ch01.tiny_mlp.cpu_ms.b1": 0.02, "ch01.tiny_mlp.gpu_e2e_ms.b1": 0.08,
         "ch01.tiny_mlp.crossover_batch": 4096.0,
         "ch01.cpu_bandwidth_gbs": 80.0, "ch01.gpu_bandwidth_gbs": 1500.0}
    assert set(_verdicts(m).values()) == {"holds"}
    m2 = dict(m, **{"ch01.bert_base.cpu_ms.b1": 40.0, "ch01.speedup.bert_base.b1": 2.0,
                    "ch01.tiny_mlp.gpu_e2e_ms.b1": 0.01, "ch01.gpu_bandwidth_gbs": 4300.0})
    v = list(_verdicts(m2).values())
    assert v[0] == "depends: holds for the GPU side"
    assert v[1] == "depends: holds for bert_base b8"
    assert v[2] == claims.FAILS
    assert v[3] == "depends: holds for the CPU"


def test_unmeasured_claims_say_so():
    assert set(_verdicts({}).values()) == {claims.NOT_MEASURED}


def test_every_claim_cites_context():
    assert len(claims.CLAIMS) == 4 and all(c.anchor for c in claims.CLAIMS)
    assert sum("published anchor" in c.anchor for c in claims.CLAIMS) >= 3
