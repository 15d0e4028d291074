"""Exploratory device run for issue 27 (scratch, not course code)."""
import json, os, sys, time, traceback, math, subprocess
import torch
OUT = os.environ.get("OUT", "/tmp/out")
res = {"device": torch.cuda.get_device_name(), "torch": torch.__version__}
def save():
    with open(f"{OUT}/explore.json", "w") as f: json.dump(res, f, indent=1, default=str)
def stage(name, fn):
    t0 = time.time()
    try: res[name] = fn()
    except Exception: res[name] = {"error": traceback.format_exc()[-4000:]}
    res.setdefault("sec", {})[name] = round(time.time() - t0, 1); print(name, res["sec"][name], flush=True); save()

from helpers.kernels import wo_gemv as wg, triton_gemv as tg
from helpers.quant import weight_only as wo
from helpers.chapters.ch12_language_models import timing, gemv_bench
from helpers.perf.roofline import measure_bandwidth_gbs

def names_all():
    out = ["wo_naive_w4", "wo_naive_w8"]
    for bits in (4, 8, 16):
        for r in (1, 2, 4, 8):
            for m in (1, 2, 3, 4, 8):
                for norm in (False, True):
                    out.append(wg.kernel_name(bits, wg.Config(r, 1, True), m, norm))
    for bits in (4, 8):
        out.append(wg.kernel_name(bits, wg.Config(1, 1, False), 1, False))
    return out

def compile_all():
    t0 = time.time(); wg.compile_kernels(names_all()); return {"n": len(names_all()), "s": time.time() - t0}

def correctness():
    errs = {}
    gen = torch.Generator(device="cuda").manual_seed(0)
    for (n, k) in ((64, 512), (96, 1024), (32, 8192)):
        w16 = (torch.randn(n, k, device="cuda", generator=gen) * 0.02).half()
        ws = {"fp16": wg.prepare(w16), "w8": wg.prepare(wo.quantize_w8(w16)), "w8n": wg.prepare(wo.quantize_w8(w16), "natural")}
        for g in (32, 64, 128):
            ws[f"w4g{g}"] = wg.prepare(wo.quantize_w4(w16, g)); ws[f"w4g{g}n"] = wg.prepare(wo.quantize_w4(w16, g), "natural")
        for name, w in ws.items():
            cfgs = [wg.Config(1, 1, False, True), wg.Config(1, 1, False)] if w.layout == "natural" else \
                   [wg.Config(r, s) for r in (1, 2, 4, 8) for s in (1, 3, 4, 16)]
            for cfg in cfgs:
                for m in ((1,) if cfg.naive else (1, 2, 3, 8)):
                    x = torch.randn(m, k, device="cuda", generator=gen).half()
                    if m == 1 and cfg.rows == 4: x = x[0]
                    fus = [{}] if (cfg.naive or not cfg.magic) else [{}, {"norm_eps": 1e-5}, {"residual": True}]
                    if cfg.magic and cfg.rows % 2 == 0: fus.append({"norm_eps": 1e-5, "glu": True, "residual": True})
                    for f in fus:
                        f = dict(f)
                        nout = n // 2 if f.get("glu") else n
                        if f.get("residual"): f["residual"] = torch.randn(*x.shape[:-1], nout, device="cuda", generator=gen).half()
                        try:
                            got = wg.gemv(x, w, **f).float(); want = wg.reference(x, w, **f).float()
                            e = float((got - want).abs().max() / want.abs().max())
                        except Exception as exc:
                            e = str(exc)[:200]
                        key = f"{n}x{k} {name} r{cfg.rows}s{cfg.split}{'N' if cfg.naive else ''}{'' if cfg.magic else 'P'} m{m} {'+'.join(f)}"
                        errs[key] = e
    bad = {k: v for k, v in errs.items() if not isinstance(v, float) or v > 5e-3}
    return {"count": len(errs), "worst": max((v for v in errs.values() if isinstance(v, float)), default=None), "bad": bad}

SHAPES = ((4096, 4096), (11008, 4096), (4096, 11008), (28672, 8192), (8192, 28672))
def shape_calls(n, k):
    gen = torch.Generator(device="cuda").manual_seed(n + k)
    w = (torch.randn(n, k, device="cuda", generator=gen) * 0.02).half()
    x = torch.randn(k, device="cuda", generator=gen).half(); xb = x[None].to(torch.bfloat16); x2 = x[None]
    calls, nbytes = {}, {}
    dense = [w] + [w.clone() for _ in range(timing.copies_for(w.numel() * 2) - 1)]
    calls["fp16 cuBLAS"] = [lambda d=d: torch.nn.functional.linear(x2, d) for d in dense]; nbytes["fp16 cuBLAS"] = w.numel() * 2
    q8, q4 = wo.quantize_w8(w), wo.quantize_w4(w, 128)
    packed, sz = gemv_bench.tinygemm_weight(q4)
    nb4 = packed.numel() * packed.element_size() + sz.numel() * sz.element_size()
    tiny = [(packed, sz)] + [(packed.clone(), sz.clone()) for _ in range(timing.copies_for(nb4) - 1)]
    calls["w4a16 tinygemm"] = [lambda p=p, s=s: gemv_bench.tinygemm_linear(xb, p, s) for p, s in tiny]; nbytes["w4a16 tinygemm"] = nb4
    for kind, pw in (("w8a16", tg.prepare_w8(q8)), ("w4a16", tg.prepare_w4(q4))):
        ws = [pw] + [gemv_bench._clone(pw) for _ in range(timing.copies_for(pw.nbytes) - 1)]
        y = torch.empty(n, device="cuda", dtype=torch.float16)
        calls[f"{kind} Triton"] = [lambda c=c: tg.gemv(x, c, out=y) for c in ws]; nbytes[f"{kind} Triton"] = pw.nbytes
    y = torch.empty(n, device="cuda", dtype=torch.float16)
    preps = {16: wg.prepare(w), 8: wg.prepare(q8), 4: wg.prepare(q4)}
    nat = {8: wg.prepare(q8, "natural"), 4: wg.prepare(q4, "natural")}
    copies = {}
    for key, pw in list(preps.items()) + [(("n", b), p) for b, p in nat.items()]:
        copies[key] = [pw] + [pw.clone() for _ in range(timing.copies_for(pw.nbytes) - 1)]
    for bits in (4, 8, 16):
        for r in (1, 2, 4, 8):
            for s in (1, 2, 4, 8):
                if r == 1 and s > 4: continue
                cfg = wg.Config(r, s)
                calls[f"b{bits} r{r} s{s}"] = [lambda c=c, cfg=cfg: wg.gemv(x, c, config=cfg, out=y) for c in copies[bits]]
                nbytes[f"b{bits} r{r} s{s}"] = preps[bits].nbytes
    for bits in (4, 8):
        for label, cfg in (("naive", wg.Config(1, 1, False, True)), ("vector", wg.Config(1, 1, False))):
            calls[f"b{bits} {label}"] = [lambda c=c, cfg=cfg: wg.gemv(x, c, config=cfg, out=y) for c in copies[("n", bits)]]
            nbytes[f"b{bits} {label}"] = nat[bits].nbytes
    return calls, nbytes

def time_shapes():
    out = {}
    for n, k in SHAPES:
        calls, nb = shape_calls(n, k)
        sp = timing.interleaved(calls, rounds=5, replays=2)
        out[f"{n}x{k}"] = {name: {"us": s.median, **s.extra(), "gbs": nb[name] / s.median / 1e3} for name, s in sp.items()}
        del calls; torch.cuda.empty_cache(); save()
        res["time_partial"] = out
    return out

def repeat_check():
    # same kernels again, different table composition: agreement check
    out = {}
    for n, k in ((11008, 4096), (28672, 8192)):
        calls, nb = shape_calls(n, k)
        keep = {kk: v for kk, v in calls.items() if kk in ("fp16 cuBLAS", "b4 r8 s4", "b4 r4 s4", "b8 r4 s4", "b16 r4 s4", "w4a16 tinygemm")}
        sp = timing.interleaved(keep, rounds=7, replays=2)
        out[f"{n}x{k}"] = {name: {"us": s.median, **s.extra()} for name, s in sp.items()}
        del calls, keep; torch.cuda.empty_cache()
    return out

def batch_and_groups():
    out = {}
    n, k = 11008, 4096
    gen = torch.Generator(device="cuda").manual_seed(3)
    w = (torch.randn(n, k, device="cuda", generator=gen) * 0.02).half()
    calls = {}
    for g in (32, 64, 128):
        pw = wg.prepare(wo.quantize_w4(w, g)); cs = [pw] + [pw.clone() for _ in range(timing.copies_for(pw.nbytes) - 1)]
        x = torch.randn(k, device="cuda", generator=gen).half(); y = torch.empty(n, device="cuda", dtype=torch.float16)
        for r in (4, 8):
            calls[f"g{g} r{r}"] = [lambda c=c, r=r: wg.gemv(x, c, config=wg.Config(r, 4), out=y) for c in cs]
    sp = timing.interleaved(calls, rounds=5, replays=2)
    out["groups"] = {name: s.median for name, s in sp.items()}
    calls = {}
    dense = [w] + [w.clone() for _ in range(timing.copies_for(w.numel() * 2) - 1)]
    p8 = wg.prepare(wo.quantize_w8(w)); p4 = wg.prepare(wo.quantize_w4(w, 128))
    c8 = [p8] + [p8.clone() for _ in range(timing.copies_for(p8.nbytes) - 1)]
    c4 = [p4] + [p4.clone() for _ in range(timing.copies_for(p4.nbytes) - 1)]
    for m in (1, 2, 3, 4, 8):
        x = torch.randn(m, k, device="cuda", generator=gen).half(); y = torch.empty(m, n, device="cuda", dtype=torch.float16)
        calls[f"fp16 m{m}"] = [lambda d=d, x=x: torch.nn.functional.linear(x, d) for d in dense]
        for r in (1, 2, 4):
            for s in (2, 4):
                calls[f"w8 m{m} r{r} s{s}"] = [lambda c=c, x=x, r=r, s=s: wg.gemv(x, c, config=wg.Config(r, s), out=y) for c in c8]
                calls[f"w4 m{m} r{r} s{s}"] = [lambda c=c, x=x, r=r, s=s: wg.gemv(x, c, config=wg.Config(r, s), out=y) for c in c4]
    sp = timing.interleaved(calls, rounds=5, replays=2)
    out["batch"] = {name: s.median for name, s in sp.items()}
    return out

def decode():
    from helpers.chapters.ch12_language_models import decode_bench as db
    m = db.build(db.StackShape(layers=32))
    chk = db.check_paths(m)
    tps = db.tokens_per_second(m, rounds=5)
    split = db.kernel_split(m)
    # attention alone
    shape = m["shape"]
    qkv = torch.randn(3 * shape.d, device="cuda").half()
    att = timing.interleaved({"attend": [lambda i=i: db._attend(qkv, m["cache"][i], shape) for i in range(32)]}, rounds=5)
    return {"check": chk, "tps": tps, "split": split, "attend_us": att["attend"].median}

stage("compile", compile_all)
stage("correct", correctness)
stage("d2d", lambda: measure_bandwidth_gbs("cuda", nbytes=1 << 30))
stage("time", time_shapes)
stage("repeat", repeat_check)
stage("batch_groups", batch_and_groups)
stage("decode", decode)
save()
