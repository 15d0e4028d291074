import torch
from helpers.kernels import wo_gemv as wg
from helpers.quant import weight_only as wo
w = (torch.randn(96, 1024, device="cuda") * 0.02).half()
for q, lay in ((wo.quantize_w8(w), "natural"), (wo.quantize_w4(w, 64), "natural")):
    pw = wg.prepare(q, lay); x = torch.randn(1024, device="cuda").half()
    for cfg in (wg.Config(1, 1, False, True), wg.Config(1, 1, False)):
        wg.gemv(x, pw, config=cfg)
for q in (w, wo.quantize_w8(w), wo.quantize_w4(w, 32)):
    pw = wg.prepare(q)
    for m in (1, 3):
        x = torch.randn(m, 1024, device="cuda").half()
        r = torch.randn(m, 48, device="cuda").half()
        wg.gemv(x, pw, config=wg.Config(4, 3))
        wg.gemv(x, pw, config=wg.Config(8, 16), norm_eps=1e-5, glu=True, residual=r)
torch.cuda.synchronize(); print("sanitize ok")
