"""BERT-base timings as the chapter shows them: short bar labels and ratios to FP32 eager, live or stored.

Serves: chapter 9.
"""

from __future__ import annotations

from helpers.chapters.ch09_deployment.workloads import BERT_PATHS, slug
from helpers.errors import InputError


BERT_SHORT = {"fp32 eager": "FP32 eager", "fp16 eager": "FP16 eager", "fp16 compiled": "FP16 compiled",
              "fp16 CUDA graphs": "FP16 graphs", "int8 eager": "INT8 eager", "int8 compiled": "INT8 compiled",
              "int8 fused": "INT8 fused", "int8 fused CUDA graphs": "INT8 fused graphs", "fp8 eager": "FP8 eager",
              "fp8 compiled": "FP8 compiled"}


def bert_bars(tput: dict[str, float]) -> dict[str, float]:
    """Throughput ÷ FP32 eager under short bar labels, from {BERT path or its slug: sequences/s}."""
    by_slug = {slug(k): v for k, v in tput.items()}
    base = by_slug.get("fp32_eager")
    if not base:
        raise InputError("bert_bars needs the 'fp32 eager' throughput as its baseline.")
    return {BERT_SHORT[p]: by_slug[slug(p)] / base for p in BERT_PATHS if slug(p) in by_slug}


def stored_bert_throughput(source: str = "h200") -> dict[str, float]:
    """The stored BERT-base sequences/s by path slug (records ch09.bert.seq_per_s.<slug>)."""
    from helpers.reference import lookup_all

    prefix = "ch09.bert.seq_per_s."
    return {r.name[len(prefix):]: r.value for r in lookup_all(prefix, source)}
