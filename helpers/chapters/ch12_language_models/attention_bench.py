"""One decoder layer's attention at decode time: PyTorch (copy kernels writing the cache, one at batch 1 and two
above, then scaled_dot_product_attention: the eager path's) against the course's decode attention kernel (``helpers.kernels.decode_attention``), per batch size.

Each call writes the new token's key and value into its cache and attends over all of it; the calls cycle over
enough cache copies that L2 cannot hold them, as a decode step over 32 layers' caches cannot. A row's "cache GB/s"
is the bytes of keys and values the call must read (B x heads x positions x 128 x 2 x 2 bytes) over its time.

Serves: chapter 12.
"""

from __future__ import annotations

from typing import Any

from helpers.chapters.ch12_language_models import decode_bench, timing

KERNELS = ("PyTorch SDPA", "course kernel")
L2_DEFEAT_BYTES = 200 << 20  # cache copies per call list: at least this many bytes


def cache_bytes(shape: decode_bench.StackShape, batch: int) -> int:
    """Bytes of keys and values one layer's attention reads for a batch."""
    return 2 * batch * shape.d * shape.context * 2


def attention_rows(shape: decode_bench.StackShape, batches: tuple[int, ...] = (1, 4, 8, 16),
                   rounds: int = timing.ROUNDS) -> list[dict[str, Any]]:
    """Rows (batch, kernel, µs, cache GB/s, × PyTorch, spread), both kernels of a batch interleaved; the course
    kernel's answer checked against ``decode_attention.reference`` (PyTorch's) first."""
    import torch

    from helpers.kernels import decode_attention as da
    from helpers.spread import paired_ratio

    rows: list[dict[str, Any]] = []
    for b in batches:
        gen = torch.Generator(device="cuda").manual_seed(b)
        lead = () if b == 1 else (b,)
        dh = shape.d // shape.heads
        qkv = torch.randn(*lead, 3 * shape.d, device="cuda", generator=gen).half()
        copies = max(2, -(-L2_DEFEAT_BYTES // cache_bytes(shape, b)))
        caches = [torch.randn(2, *lead, shape.heads, shape.context, dh, device="cuda", generator=gen).half()
                  for _ in range(copies)]
        mine = da.attend(qkv, caches[0].clone(), shape.heads)
        err = float((mine.float() - da.reference(qkv, caches[0].clone(), shape.heads).float()).abs().max())
        if err > 2e-3:
            raise AssertionError(f"decode attention at batch {b}: max difference {err:.1e} from PyTorch's (allowed 2e-3)")
        spreads = timing.interleaved({
            KERNELS[0]: [lambda c=c: decode_bench.pytorch_attend(qkv, c, shape) for c in caches],
            KERNELS[1]: [lambda c=c: da.attend(qkv, c, shape.heads) for c in caches]}, rounds=rounds)
        base = spreads[KERNELS[0]].samples_us
        for name in KERNELS:
            s = spreads[name]
            rows.append({"batch": b, "kernel": name, "µs": s.median, "cache GB/s": cache_bytes(shape, b) / s.median / 1e3,
                         "× PyTorch": paired_ratio(base, s.samples_us)[0], "spread": s.extra()})
        del caches
    return rows


def sentence(rows: list[dict[str, Any]]) -> str:
    """Per batch size of the rows: the course kernel's time against PyTorch's, and whether the two differ outside
    their rounds' min..max (else "not resolved")."""
    parts = []
    for b in sorted({r["batch"] for r in rows}):
        by = {r["kernel"]: r for r in rows if r["batch"] == b}
        if set(KERNELS) - by.keys():
            continue
        t, c = by[KERNELS[0]], by[KERNELS[1]]
        apart = c["spread"]["max_us"] < t["spread"]["min_us"] or t["spread"]["max_us"] < c["spread"]["min_us"]
        parts.append(f"batch {b}: {c['µs']:.1f} µs against {t['µs']:.1f} ({c['× PyTorch']:.2f}× PyTorch's speed"
                     + ("" if apart else ", not resolved: the rounds' ranges overlap") + ")")
    if not parts:
        return "Decode attention: no rows."
    return "One layer's attention, the course's kernel against PyTorch's: " + "; ".join(parts) + "."
