"""2:4 structured sparsity: magnitude pruning, a short masked fine-tune, accuracy, and GPU speed
through torch.sparse.to_sparse_semi_structured (Sparse Tensor Cores, compute capability >= 8.0).

The 2x of the datasheet is a ceiling on the multiply-adds; what a framework gains depends on whether
its 2:4 kernel is as well tuned for the GPU as the dense GEMM it replaces (measured, not assumed).

Also the seed's recipe, "mask the smallest 50% of weights, then quantize": the zeros are scattered,
the tensor stays dense, every multiply still runs. It saves nothing unless the hardware (2:4) or a
sparse format can skip them.

Serves: chapter 10.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from helpers.bench import interleaved
from helpers.chapters.ch10_beyond_int8 import ROUNDS
from helpers.errors import InputError
from helpers.threads import torch_threads
from helpers.validation import require_choice, require_float, require_int_range

PATTERNS = ("2:4", "unstructured")


def _torch() -> Any:
    """torch, imported on demand."""
    import torch

    return torch


def _as_rows(w: Any) -> Any:
    """A weight as 2-D (out, in*k...) with the input dimension a multiple of 4."""
    require_float(w, "weight")
    if w.ndim < 2:
        raise InputError(f"2:4 sparsity applies to weights with >= 2 dims (out, in, ...); got shape {tuple(w.shape)}.")
    rows = w.reshape(w.shape[0], -1)
    if rows.shape[1] % 4:
        raise InputError(f"2:4 sparsity groups 4 consecutive input weights; in-features {rows.shape[1]} "
                         "is not a multiple of 4. Skip this layer or pad it.")
    return rows


def mask_24(w: Any) -> Any:
    """Boolean mask keeping the 2 largest-magnitude weights in every group of 4 along the input dimension."""
    torch = _torch()
    rows = _as_rows(w)
    groups = rows.detach().abs().reshape(rows.shape[0], -1, 4)
    keep = groups.topk(2, dim=-1).indices
    mask = torch.zeros_like(groups, dtype=torch.bool).scatter_(-1, keep, True)
    return mask.reshape(w.shape)


def is_24(w: Any) -> bool:
    """True when every group of 4 consecutive input weights holds at most 2 non-zeros."""
    rows = _as_rows(w)
    return bool(((rows.reshape(rows.shape[0], -1, 4) != 0).sum(-1) <= 2).all())


def mask_unstructured(w: Any, sparsity: float = 0.5) -> Any:
    """Boolean mask keeping the largest (1 - sparsity) fraction of |w| anywhere in the tensor (the seed's way)."""
    require_float(w, "weight")
    if not 0 <= sparsity < 1:
        raise InputError(f"sparsity must be in [0, 1), e.g. 0.5; got {sparsity!r}.")
    k = int(round(sparsity * w.numel()))
    if k == 0:
        return _torch().ones_like(w, dtype=_torch().bool)
    thresh = w.detach().abs().flatten().kthvalue(k).values
    return w.detach().abs() > thresh


def prunable_layers(model: Any, kinds: tuple[str, ...] = ("Linear",)) -> dict[str, Any]:
    """The layers whose weights can be pruned 2:4: named modules of the given kinds with in-features % 4 == 0."""
    out = {}
    for name, m in model.named_modules():
        if type(m).__name__ in kinds and getattr(m, "weight", None) is not None:
            if m.weight.reshape(m.weight.shape[0], -1).shape[1] % 4 == 0:
                out[name] = m
    return out


def prune(model: Any, pattern: str = "2:4", sparsity: float = 0.5, kinds: tuple[str, ...] = ("Linear",)) -> dict[str, Any]:
    """Zero weights in place with the 2:4 or the unstructured mask; return {layer name: mask}."""
    require_choice(pattern, PATTERNS, "pattern")
    torch = _torch()
    layers = prunable_layers(model, kinds)
    if not layers:
        raise InputError(f"no {'/'.join(kinds)} layers with in-features divisible by 4 to prune.")
    masks = {}
    with torch.no_grad():
        for name, m in layers.items():
            mask = mask_24(m.weight) if pattern == "2:4" else mask_unstructured(m.weight, sparsity)
            m.weight.mul_(mask)
            masks[name] = mask
    return masks


def sparsity_of(model: Any, masks: dict[str, Any]) -> float:
    """Fraction of zeros over the pruned layers' weights."""
    zeros = sum(int((model.get_submodule(n).weight == 0).sum()) for n in masks)
    total = sum(model.get_submodule(n).weight.numel() for n in masks)
    return zeros / total


def fine_tune(model: Any, masks: dict[str, Any], batches: Iterable[Any], *, steps: int = 100,
              lr: float = 1e-3) -> list[float]:
    """A short fine-tune that keeps the pruned weights at zero (mask re-applied after each step); returns losses."""
    require_int_range(steps, 1, 100_000, "steps")
    torch = _torch()
    from tqdm.auto import tqdm

    opt = torch.optim.Adam(model.parameters(), lr=lr)
    model.train()
    losses: list[float] = []
    data = list(batches)
    if not data:
        raise InputError("fine_tune needs at least one (inputs, labels) batch.")
    for step in tqdm(range(steps), desc="masked fine-tune", leave=False):
        x, y = data[step % len(data)]
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        with torch.no_grad():
            for name, mask in masks.items():
                model.get_submodule(name).weight.mul_(mask)
        losses.append(loss.item())
    model.eval()
    return losses


def dense_with_zeros_times(m: int = 1024, n: int = 1024, k: int = 1024, device: str = "cpu",
                           repeats: int = 20) -> dict:
    """Dense matmul time with a full weight vs the same weight 50% zero (unstructured): the zeros are not skipped.

    'speed-up from zeros' is the median over interleaved rounds (``helpers.bench.interleaved``) of dense ÷ zeros
    time, with the rounds' spread as 'speed-up from zeros spread' (the table ``tables.ZEROS_*`` stores it).
    """
    require_choice(device, ("cpu", "cuda"), "device")
    torch = _torch()
    dt = torch.float16 if device == "cuda" else torch.float32
    x = torch.randn(m, k, device=device, dtype=dt)
    w = torch.randn(n, k, device=device, dtype=dt)
    w_sparse = w * mask_unstructured(w.float(), 0.5).to(dt)
    fns = {"dense": lambda: x @ w.t(), "zeros": lambda: x @ w_sparse.t()}
    if device == "cuda":
        r = interleaved(fns, rounds=ROUNDS, clock="torch", warmup=2, settle=1, per_round=max(1, repeats // ROUNDS))
    else:
        r = interleaved(fns, rounds=repeats, clock="cpu", warmup=2)
    ratio, spread = r.ratio("dense", "zeros")
    return {"device": device, "dense ms": r.median_s("dense") * 1e3, "50% zeros ms": r.median_s("zeros") * 1e3,
            "speed-up from zeros": ratio, "speed-up from zeros spread": spread}


def semi_structured_speed(m: int = 8192, n: int = 8192, k: int = 8192, dtype: str = "float16",
                          repeats: int = 20) -> dict:
    """GPU: y = x @ W.T with W dense vs W 2:4 (to_sparse_semi_structured); ms and speed-up (the median of
    interleaved rounds, its spread as 'speed-up spread'), same run.

    Also the dense rate and the 2:4 rate counted as dense FLOPs (a 2x speed-up would double it),
    and which PyTorch 2:4 kernel class ran (CUTLASS or cuSPARSELt).
    """
    from helpers.device import gpu_info, require_gpu

    require_gpu("2:4 sparse Tensor Core timing")
    require_choice(dtype, ("float16", "bfloat16", "int8"), "dtype")
    info = gpu_info()
    if info.compute_capability < (8, 0):
        return {"skipped": f"2:4 Sparse Tensor Cores need compute capability >= 8.0; this GPU is {info.cc:.1f}"}
    torch = _torch()
    from torch.sparse import to_sparse_semi_structured

    if dtype == "int8":
        w = torch.randint(-127, 128, (n, k), dtype=torch.int8, device="cuda")
        x = torch.randint(-127, 128, (m, k), dtype=torch.int8, device="cuda")
        w = w * mask_24(w.float()).to(torch.int8)
        dense = lambda: torch._int_mm(x, w.t())  # noqa: E731
    else:
        dt = getattr(torch, dtype)
        w = torch.randn(n, k, dtype=dt, device="cuda")
        w = w * mask_24(w.float()).to(dt)
        x = torch.randn(m, k, dtype=dt, device="cuda")
        dense = lambda: torch.nn.functional.linear(x, w)  # noqa: E731
    try:
        ws = to_sparse_semi_structured(w)
        sparse = (lambda: torch.mm(ws, x.t())) if dtype == "int8" else (
            lambda: torch.nn.functional.linear(x, ws))
        sparse()
    except Exception as exc:  # noqa: BLE001 - the backend's refusal is the answer
        return {"skipped": f"{dtype} 2:4 kernels unavailable here: {type(exc).__name__}: {str(exc)[:160]}"}
    r = interleaved({"dense": dense, "2:4": sparse}, rounds=ROUNDS, clock="torch", warmup=2, settle=1,
                    per_round=max(1, repeats // ROUNDS))
    ratio, spread = r.ratio("dense", "2:4")
    t_dense, t_sparse = r.median_s("dense"), r.median_s("2:4")
    flops = 2 * m * n * k
    return {"dtype": dtype, "shape": f"{m}x{n}x{k}", "dense ms": t_dense * 1e3, "2:4 ms": t_sparse * 1e3,
            "speed-up": ratio, "dense TFLOP/s": flops / t_dense / 1e12,
            "2:4 dense-equivalent TFLOP/s": flops / t_sparse / 1e12, "2:4 kernel": type(ws).__name__,
            "speed-up spread": spread}


def accuracy_study(model: Any, data: Any, *, steps: int = 60, batch_size: int = 128) -> list[dict]:
    """Test accuracy of: dense, 2:4 pruned, 2:4 + masked fine-tune, that + dynamic INT8, and the seed's
    unstructured 50% + fine-tune + INT8 (same accuracy story, but no hardware skips its zeros). On one CPU thread
    (``helpers.threads``): the encoder is tiny, and beside other work more threads only spin."""
    with torch_threads(1):
        return _accuracy_rows(model, data, steps, batch_size)


def _accuracy_rows(model: Any, data: Any, steps: int, batch_size: int) -> list[dict]:
    """accuracy_study without the thread setting."""
    import copy

    from helpers.data import loaders
    from helpers.chapters.ch10_beyond_int8.dynamic_quant import dynamic_int8
    from helpers.models.train import evaluate

    train = list(loaders(data, batch_size)["train"])
    rows = [{"variant": "dense FP32", "sparsity": 0.0, "accuracy %": evaluate(model, data)}]
    for pattern in ("2:4", "unstructured"):
        m = copy.deepcopy(model)
        masks = prune(m, pattern, 0.5)
        if pattern == "2:4":
            rows.append({"variant": "2:4 pruned", "sparsity": sparsity_of(m, masks),
                         "accuracy %": evaluate(m, data)})
        fine_tune(m, masks, train, steps=steps, lr=5e-4)
        if pattern == "2:4":
            rows.append({"variant": "2:4 + fine-tune", "sparsity": sparsity_of(m, masks),
                         "accuracy %": evaluate(m, data)})
        label = "2:4 + fine-tune + INT8" if pattern == "2:4" else "unstructured 50% + fine-tune + INT8 (seed)"
        rows.append({"variant": label, "sparsity": sparsity_of(m, masks),
                     "accuracy %": evaluate(dynamic_int8(m), data)})
    return rows
