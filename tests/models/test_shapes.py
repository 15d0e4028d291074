"""helpers.models.shapes: one vocabulary for a transformer's shape, the cited shapes, and clear errors."""

from __future__ import annotations

import pytest

from helpers.errors import InputError
from helpers.models import bert, encoder, tiny_lm
from helpers.models.shapes import BERT_BASE, LLAMA_7B, LLAMA_70B, TransformerShape
from helpers.quant.kv_cache import kv_bytes_per_token


def test_the_cited_shapes():
    assert (BERT_BASE.d_model, BERT_BASE.n_heads, BERT_BASE.d_ff, BERT_BASE.n_layers) == (768, 12, 3072, 12)
    assert LLAMA_7B.head_dim == 128 and LLAMA_7B.kv_dim == 4096 and LLAMA_7B.vocab == 32000
    assert LLAMA_7B.linear_params_per_layer() == 4 * 4096**2 + 3 * 4096 * 11008  # ≈ 202 M per decoder layer
    assert 6.4e9 < LLAMA_7B.n_layers * LLAMA_7B.linear_params_per_layer() < 6.6e9  # the "7B" is mostly these
    assert LLAMA_70B.kv_heads == 8 and LLAMA_70B.kv_dim == 1024 and LLAMA_70B.head_dim == 128
    assert 6.4e10 < LLAMA_70B.n_layers * LLAMA_70B.linear_params_per_layer() < 7.0e10
    assert BERT_BASE.linear_params_per_layer(gated=False) == 4 * 768**2 + 2 * 768 * 3072


def test_kv_cache_bytes_from_a_shape():
    def per_token(s: TransformerShape, kind: str = "fp16") -> float:
        return kv_bytes_per_token(s.n_layers, s.kv_dim, kind, s.head_dim)

    assert per_token(LLAMA_7B) == 2 * 32 * 4096 * 2  # 512 KiB a token in FP16
    assert per_token(LLAMA_70B) == 2 * 80 * 1024 * 2  # 320 KiB: grouped-query attention stores 8 of 64 heads
    assert per_token(LLAMA_70B, "int8") == 2 * 80 * (1024 + 2 * 8)


def test_every_model_of_the_course_speaks_the_vocabulary():
    assert isinstance(bert.BertConfig(), TransformerShape) and isinstance(tiny_lm.LMConfig(), TransformerShape)
    assert isinstance(encoder.EncoderSmall().shape, TransformerShape)
    lm = tiny_lm.TinyLM(tiny_lm.LMConfig(d_model=32, n_heads=2, d_ff=64, n_layers=1, vocab=16, ctx=8))
    assert lm.blocks[0].attn.head_dim == 16 and lm.blocks[0].mlp.up.out_features == 64
    small = encoder.EncoderSmall(seq_len=8, shape=encoder.ENCODER_SMALL.with_(d_model=16, d_ff=32, n_layers=1))
    assert len(small.layers) == 1 and small.layers[0].ff1.out_features == 32


@pytest.mark.parametrize("fields, match", [
    (dict(d_model=100, n_heads=3, d_ff=8, n_layers=1, vocab=8), "divisible by n_heads=3"),
    (dict(d_model=64, n_heads=8, d_ff=8, n_layers=1, vocab=8, n_kv_heads=3), "multiple of n_kv_heads=3"),
    (dict(d_model=64, n_heads=8, d_ff=8, n_layers=0, vocab=8), "n_layers must be a whole number >= 1"),
    (dict(d_model=64.0, n_heads=8, d_ff=8, n_layers=1, vocab=8), "d_model must be a whole number"),
    (dict(d_model=True, n_heads=1, d_ff=8, n_layers=1, vocab=8), "d_model must be a whole number"),
])
def test_bad_shapes_are_one_line_errors(fields, match):
    with pytest.raises(InputError, match=match):
        TransformerShape(**fields)


def test_with_changes_fields_and_names_unknown_ones():
    assert LLAMA_7B.with_(n_layers=4).n_layers == 4 and LLAMA_7B.n_layers == 32
    with pytest.raises(InputError, match="unknown TransformerShape field.*layers.*the fields are d_ff"):
        LLAMA_7B.with_(layers=4)
    with pytest.raises(InputError, match="unknown LMConfig field.*heads"):
        tiny_lm.LMConfig().with_(heads=2)
