import json, os, time, traceback, itertools
import torch
OUT = os.environ.get("OUT", "/tmp/out")
res = {}
def save():
    json.dump(res, open(f"{OUT}/explore2.json", "w"), indent=1, default=str)
def stage(name, fn):
    t0 = time.time()
    try: res[name] = fn()
    except Exception: res[name] = {"error": traceback.format_exc()[-3000:]}
    res.setdefault("sec", {})[name] = round(time.time() - t0, 1); print(name, res["sec"][name], flush=True); save()
from helpers.kernels import wo_gemv as wg
from helpers.quant import weight_only as wo
from helpers.chapters.ch12_language_models import timing
GRID = [(r, s) for r in (2, 4, 8) for s in (1, 2, 4, 8)]
def names():
    out = []
    for bits in (4, 8, 16):
        for r, s in GRID:
            for norm in (False, True): out.append(wg.kernel_name(bits, wg.Config(r, s), 1, norm))
        for m in (2, 3, 4, 8):
            for r in (1, 2, 4): out.append(wg.kernel_name(bits, wg.Config(r, 4), m, False))
    out += [wg.kernel_name(b, wg.Config(1, 1, False), 1, False) for b in (4, 8)]
    return out
def comp():
    t0 = time.time(); wg.compile_kernels(names()); return time.time() - t0
def correct():
    errs = {}
    gen = torch.Generator(device="cuda").manual_seed(0)
    for n, k in ((64, 512), (96, 2048)):
        w16 = (torch.randn(n, k, device="cuda", generator=gen) * 0.02).half()
        for g in (32, 64, 128):
            pw = wg.prepare(wo.quantize_w4(w16, g))
            for r, s in GRID:
                for m in (1, 3):
                    x = torch.randn(m, k, device="cuda", generator=gen).half()
                    for f in ({}, {"norm_eps": 1e-5, "glu": True}):
                        got = wg.gemv(x, pw, config=wg.Config(r, s), **f).float(); want = wg.reference(x, pw, **f).float()
                        errs[f"{n}x{k} g{g} r{r}s{s} m{m} {len(f)}"] = float((got - want).abs().max() / want.abs().max())
    return {"worst": max(errs.values()), "bad": {k: v for k, v in errs.items() if v > 5e-3}}
SHAPES = [((4096, 4096), {}), ((11008, 4096), {}), ((4096, 11008), {}), ((28672, 8192), {}), ((8192, 28672), {}),
          ((12288, 4096), {"norm_eps": 1e-5}), ((22016, 4096), {"norm_eps": 1e-5, "glu": True}),
          ((4096, 4096), {"resid": 1}), ((4096, 11008), {"resid": 1})]
def sweep():
    out = {}
    for (n, k), fus in SHAPES:
        gen = torch.Generator(device="cuda").manual_seed(n + k)
        w = (torch.randn(n, k, device="cuda", generator=gen) * 0.02).half()
        x = torch.randn(k, device="cuda", generator=gen).half()
        nout = n // 2 if fus.get("glu") else n
        y = torch.empty(nout, device="cuda", dtype=torch.float16)
        kw = dict(fus)
        if kw.pop("resid", None): kw["residual"] = torch.randn(nout, device="cuda", generator=gen).half()
        calls = {}
        if not fus:
            dense = [w] + [w.clone() for _ in range(timing.copies_for(w.numel() * 2) - 1)]
            calls["fp16 cuBLAS"] = [lambda d=d: torch.nn.functional.linear(x[None], d) for d in dense]
        for bits, q in ((16, w), (8, wo.quantize_w8(w)), (4, wo.quantize_w4(w, 128))):
            pw = wg.prepare(q); cs = [pw] + [pw.clone() for _ in range(timing.copies_for(pw.nbytes) - 1)]
            for r, s in GRID:
                calls[f"b{bits} r{r} s{s}"] = [lambda c=c, cfg=wg.Config(r, s): wg.gemv(x, c, config=cfg, out=y, **kw) for c in cs]
        sp = timing.interleaved(calls, rounds=5, replays=2)
        out[f"{n}x{k}{'+' + '+'.join(fus) if fus else ''}"] = {nm: s.median for nm, s in sp.items()}
        del calls; torch.cuda.empty_cache(); res["sweep_partial"] = out; save()
    return out
def decode():
    sw = res["sweep"]
    for key, v in sw.items():
        n, k = (int(a) for a in key.split("+")[0].split("x"))
        for bits in (4, 8, 16):
            best = min((t, nm) for nm, t in v.items() if nm.startswith(f"b{bits} "))[1]
            r, s = int(best.split()[1][1:]), int(best.split()[2][1:])
            wg.TUNED.setdefault((bits, n, k), (r, s))
    from helpers.chapters.ch12_language_models import decode_bench as db
    m = db.build(db.StackShape(layers=32))
    tps = db.tokens_per_second(m, rounds=5)
    split = db.kernel_split(m)
    split8 = db.kernel_split(m, "w8a16 fused (CUDA)")
    return {"tuned": {str(k): v for k, v in wg.TUNED.items()}, "tps": tps, "split": split, "split8": split8["ms/step"]}
stage("compile", comp)
stage("correct", correct)
stage("sweep", sweep)
stage("decode", decode)
