"""GEMM throughput per precision (FP32, TF32, FP16, BF16, INT8, FP8), each beside the dense spec peak.

INT8 runs on Tensor Cores through ``torch._int_mm`` (int8 x int8 -> int32; shapes multiples of
8, m > 16). FP8 (e4m3) runs through ``torch._scaled_mm`` on compute capability >= 8.9, with the
second operand column-major and float32 scale tensors. On a CPU the same calls run through
oneDNN/MKL, which is what the CPU roofline of chapter 2 uses.

Serves: core — used by chapters 1, 2, 9–12 and labs 01, 09, 11.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

import torch

from helpers import bench
from helpers.errors import InputError
from helpers.validation import require_choice, require_int_range

PRECISIONS = ("fp32", "tf32", "fp16", "bf16", "int8", "fp8")
FLOAT_DTYPES = {"fp32": torch.float32, "tf32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
BYTES = {"fp32": 4, "tf32": 4, "fp16": 2, "bf16": 2, "int8": 1, "fp8": 1}


@dataclass(frozen=True)
class GemmResult:
    """One measured GEMM: precision, size, time and throughput (TFLOP/s, or TOPS for INT8)."""

    precision: str
    m: int
    n: int
    k: int
    seconds: float
    tflops: float
    spec_tflops: float | None

    @property
    def pct_of_spec(self) -> float | None:
        """Measured throughput as a percentage of the dense datasheet peak (None without a spec)."""
        return None if not self.spec_tflops else 100 * self.tflops / self.spec_tflops


def supported_precisions(device: str = "cuda", cc: tuple[int, int] | None = None) -> tuple[str, ...]:
    """Precisions whose GEMM runs on `device` ('cuda' or 'cpu'); FP8 needs CC >= 8.9, TF32/BF16 >= 8.0."""
    require_choice(device, ("cuda", "cpu"), "device")
    if device == "cpu":
        return ("fp32", "bf16", "int8")
    if cc is None:
        if not torch.cuda.is_available():
            return ()
        cc = torch.cuda.get_device_capability(0)
    out = ["fp32", "fp16"]
    if cc >= (8, 0):
        out[1:1] = ["tf32"]
        out.append("bf16")
    if cc >= (7, 5):
        out.append("int8")
    if cc >= (8, 9) and hasattr(torch, "float8_e4m3fn"):
        out.append("fp8")
    return tuple(p for p in PRECISIONS if p in out)


def _check_shape(precision: str, m: int, n: int, k: int) -> None:
    """Validate sizes, including torch._int_mm's constraints for INT8."""
    for name, v in (("m", m), ("n", n), ("k", k)):
        require_int_range(v, 1, 1 << 17, name)
    if precision in ("int8", "fp8") and (m % 16 or n % 16 or k % 16 or m <= 16):
        raise InputError(f"{precision} GEMM needs m, n, k multiples of 16 and m > 16 "
                         f"(torch._int_mm / _scaled_mm constraints); got {m}x{n}x{k}.")


def gemm_fn(precision: str, m: int, n: int, k: int, device: str = "cuda", seed: int = 0) -> Callable[[], torch.Tensor]:
    """A no-argument function running one (m x k) @ (k x n) GEMM in `precision` on `device`."""
    require_choice(precision, PRECISIONS, "precision")
    require_choice(device, ("cuda", "cpu"), "device")
    _check_shape(precision, m, n, k)
    g = torch.Generator(device="cpu").manual_seed(seed)
    if precision == "int8":
        a = torch.randint(-128, 128, (m, k), generator=g, dtype=torch.int8).to(device)
        # cuBLASLt's fast INT8 kernels want the second operand column-major ("TN" layout);
        # a row-major b measured 6x slower on the H200.
        b = torch.randint(-128, 128, (n, k), generator=g, dtype=torch.int8).to(device).t()
        return lambda: torch._int_mm(a, b)
    if precision == "fp8":
        a = torch.randn(m, k, generator=g).to(device).to(torch.float8_e4m3fn)
        b = torch.randn(n, k, generator=g).to(device).to(torch.float8_e4m3fn).t()  # column-major (k, n)
        one = torch.ones((), device=device, dtype=torch.float32)
        return lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
    dt = FLOAT_DTYPES[precision]
    a = torch.randn(m, k, generator=g).to(device=device, dtype=dt)
    b = torch.randn(k, n, generator=g).to(device=device, dtype=dt)
    return lambda: a @ b


@contextlib.contextmanager
def float32_mode(precision: str) -> Iterator[None]:
    """Let FP32 matmuls use TF32 Tensor Cores only for precision 'tf32' (restored afterwards)."""
    prev = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("high" if precision == "tf32" else "highest")
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(prev)


def spec_peak(precision: str, device_name: str | None = None) -> float | None:
    """Dense spec peak (TFLOP/s or TOPS) of `precision` on the named GPU (default: this one), or None."""
    from helpers.perf import specs
    from helpers.device import gpu_info

    if device_name is None:
        info = gpu_info()
        device_name = info.name if info else ""
    spec = specs.spec_for(device_name) if device_name else None
    return specs.peak(spec, precision) if spec else None


def measure(precision: str, m: int, n: int | None = None, k: int | None = None, *, device: str = "cuda",
            warmup: int = 3, repeats: int = 20) -> GemmResult:
    """Time one GEMM shape in one precision (CUDA events on the GPU, perf_counter on the CPU)."""
    n, k = n or m, k or m
    if device == "cuda" and not torch.cuda.is_available():
        from helpers.errors import NoGPUError

        raise NoGPUError(f"a {precision} GEMM on the GPU")
    fn = gemm_fn(precision, m, n, k, device)
    with float32_mode(precision):
        t = bench.timeit(fn, backend="torch" if device == "cuda" else "cpu", warmup=warmup, repeats=repeats)
    spec = spec_peak(precision) if device == "cuda" else None
    return GemmResult(precision, m, n, k, t.median_s, bench.tflops(bench.gemm_flops(m, n, k), t.median_s), spec)


def sweep(precisions: Iterable[str], sizes: Iterable[int], *, device: str = "cuda",
          repeats: int = 20) -> list[GemmResult]:
    """Measure square GEMMs for every precision and size (sizes ascending), with a progress bar."""
    from tqdm.auto import tqdm

    jobs = [(p, s) for p in precisions for s in sizes]
    return [measure(p, s, device=device, repeats=repeats)
            for p, s in tqdm(jobs, desc=f"timing GEMMs on the {device.upper()}", unit="GEMM")]


def best(results: Iterable[GemmResult], precision: str) -> GemmResult | None:
    """The fastest result of one precision, or None."""
    rs = [r for r in results if r.precision == precision]
    return max(rs, key=lambda r: r.tflops) if rs else None


def at_size(results: Iterable[GemmResult], precision: str, size: int) -> GemmResult | None:
    """The result of one precision at square size `size`, or None."""
    return next((r for r in results if r.precision == precision and r.m == size), None)


def headline_ratios(results: list[GemmResult]) -> dict[str, float]:
    """gemm.bf16_over_spec (best BF16 ÷ spec), gemm.int8_over_bf16 and gemm.fp8_over_bf16 (same largest shape)."""
    out: dict[str, float] = {}
    b = best(results, "bf16")
    if b is not None and b.spec_tflops:
        out["gemm.bf16_over_spec"] = b.tflops / b.spec_tflops
    sizes = sorted({r.m for r in results if r.precision == "bf16"})
    for p in ("int8", "fp8"):
        common = [s for s in sizes if at_size(results, p, s) is not None]
        if common:
            s = common[-1]
            num, den = at_size(results, p, s), at_size(results, "bf16", s)
            assert num is not None and den is not None
            out[f"gemm.{p}_over_bf16"] = num.tflops / den.tflops
    return out


def rows(results: Iterable[GemmResult]) -> list[dict]:
    """Results as table rows: precision, size, TFLOP/s, spec, % of spec."""
    return [{"precision": r.precision, "size": f"{r.m}x{r.n}x{r.k}", "ms": r.seconds * 1e3,
             "TFLOP/s (TOPS)": r.tflops, "dense spec": r.spec_tflops, "% of spec": r.pct_of_spec}
            for r in results]


def results_from_records(records: Iterable[bench.Record], prefix: str = "ch02.gemm_tflops") -> list[GemmResult]:
    """Rebuild GemmResults from stored records named '<prefix>.<precision>.n<size>' (chapter 2's GEMM table)."""
    out = []
    for r in records:
        parts = r.name[len(prefix) + 1:].split(".")
        if not r.name.startswith(prefix + ".") or len(parts) != 2 or not parts[1].startswith("n"):
            continue
        size = int(parts[1][1:])
        flops = bench.gemm_flops(size, size, size)
        pct = r.extra.get("pct_of_spec")
        spec = r.value * 100 / pct if pct else None
        out.append(GemmResult(parts[0], size, size, size, flops / (r.value * 1e12), r.value, spec))
    return out


def plot(results: list[GemmResult], *, device: str | None = None, note: str = ""):
    """TFLOP/s against size, one line per precision, with dashed spec peaks."""
    from helpers import plots

    precs = [p for p in PRECISIONS if any(r.precision == p for r in results)]
    sizes = sorted({r.m for r in results})
    def y(p: str, s: int) -> float:
        r = at_size(results, p, s)
        return r.tflops if r is not None else float("nan")

    ys = {p: [y(p, s) for s in sizes] for p in precs}
    fig = plots.sweep(sizes, ys, title="GEMM throughput by precision", xlabel="square size n (n×n×n)",
                      ylabel="TFLOP/s (TOPS for INT8)", logx=True, logy=True, device=device, note=note,
                      name="ch02_gemm_throughput")
    ax = fig.axes[0]
    for i, p in enumerate(precs):
        spec = next((r.spec_tflops for r in results if r.precision == p and r.spec_tflops), None)
        if spec:
            ax.axhline(spec, ls=":", lw=1, color=plots.PALETTE[i % len(plots.PALETTE)])
    return fig


def dp4a_comparison(n: int = 8192, repeats: int = 10) -> dict[str, float]:
    """INT8 GEMM on CUDA cores (the dp4a kernel of helpers.quant.intgemm) vs Tensor Cores (torch._int_mm).

    Asserts the two int32 results are identical, times both kernels alone (operands packed and
    resident on the GPU) and returns TOPS of each and the ratio (dp4a TOPS ÷ Tensor Core TOPS: chapter 2's
    DP4A experiment records it as gemm.dp4a_over_int8_tc).
    """
    from helpers.device import require_gpu

    require_gpu("The dp4a vs Tensor Core comparison")
    _check_shape("int8", n, n, n)
    import cupy

    from helpers.quant import intgemm  # the chapter 5-6 kernel (cupy RawKernel with __dp4a)

    g = torch.Generator().manual_seed(0)
    a = torch.randint(-128, 128, (n, n), generator=g, dtype=torch.int8).cuda()
    b = torch.randint(-128, 128, (n, n), generator=g, dtype=torch.int8).cuda()
    a4, bt4 = intgemm.pack_for_dp4a(cupy.asarray(a), cupy.asarray(b))
    out = cupy.empty((n, n), dtype=cupy.int32)
    intgemm.dp4a_gemm_packed(a4, bt4, out)
    cupy.cuda.Device().synchronize()
    b_cm = intgemm.column_major(b)  # the Tensor Cores' fast layout, same values
    if not torch.equal(torch.as_tensor(out, device="cuda"), torch._int_mm(a, b_cm)):
        raise AssertionError("dp4a and Tensor Core INT8 GEMMs disagree: integer GEMMs must match exactly.")
    t_dp = bench.timeit(lambda: intgemm.dp4a_gemm_packed(a4, bt4, out), backend="cupy", repeats=repeats)
    t_tc = bench.timeit(lambda: torch._int_mm(a, b_cm), backend="torch", repeats=repeats)
    flops = bench.gemm_flops(n, n, n)
    res = {"dp4a_tops": bench.tflops(flops, t_dp.median_s), "tensor_core_tops": bench.tflops(flops, t_tc.median_s)}
    res["ratio"] = res["dp4a_tops"] / res["tensor_core_tops"]
    return res
