import sys, torch
from helpers.kernels import wo_gemv as wg
from helpers.quant import weight_only as wo
n, k = (int(v) for v in sys.argv[1:3]) if len(sys.argv) > 2 else (11008, 4096)
w = (torch.randn(n, k, device="cuda") * 0.02).half()
x = torch.randn(k, device="cuda").half()
q8, q4 = wo.quantize_w8(w), wo.quantize_w4(w, 128)
runs = []
for bits, q in ((8, q8), (4, q4)):
    for label, layout, cfg in (("naive", "natural", wg.Config(1, 1, False, True)), ("vector", "natural", wg.Config(1, 1, False)),
                               ("magic", "magic", wg.Config(1, 1)), ("rows4", "magic", wg.Config(4, 1)), ("rows8", "magic", wg.Config(8, 1)),
                               ("split", "magic", wg.Config(4, 4)), ("split8", "magic", wg.Config(8, 4))):
        runs.append((f"b{bits} {label}", wg.prepare(q, layout), cfg))
runs.append(("b16 split", wg.prepare(w), wg.Config(4, 4)))
for name, pw, cfg in runs:
    wg.gemv(x, pw, config=cfg)
torch.cuda.synchronize()
print("ORDER", [r[0] for r in runs], flush=True)
for name, pw, cfg in runs:
    wg.gemv(x, pw, config=cfg)
torch.linalg.vector_norm(x)  # marker
torch.cuda.synchronize()
