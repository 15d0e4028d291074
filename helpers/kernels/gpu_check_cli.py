"""The command line of the weight-only GEMM's GPU check (``wo_gemm_check``): --out DIR, a new or empty folder (a check
never replaces files it did not write), or --selftest, and --rounds.

Serves: core — used by chapter 12.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

import torch


def parse(module: str, doc: str, writes: str, argv: list[str] | None,
          selftest: Callable[[], bool]) -> argparse.Namespace | int:
    """The GPU checks' command line: --out DIR (a new or empty folder) or --selftest, and --rounds; the parsed
    arguments for a run with --out, or an exit status: the `selftest`'s (0 when it passed), or a refusal's (no GPU
    here, a folder that holds files)."""
    ap = argparse.ArgumentParser(prog=f"python -m helpers.kernels.{module}", description=doc.splitlines()[0])
    ap.add_argument("--out", type=Path, help=f"a new or empty folder for {writes}")
    ap.add_argument("--selftest", action="store_true", help="only the small correctness cases")
    ap.add_argument("--rounds", type=int, default=5, help="interleaved timing rounds (default 5)")
    args = ap.parse_args(argv)
    if not 2 <= args.rounds <= 100:
        ap.error(f"--rounds must be 2..100 (two give a spread), got {args.rounds}")
    if not torch.cuda.is_available():
        print(f"{module} needs a CUDA GPU (none here).", file=sys.stderr)
        return 2
    if args.selftest:
        return 0 if selftest() else 1
    if args.out is None:
        ap.error("give --out DIR (or --selftest)")
    if args.out.exists() and any(args.out.iterdir()):
        print(f"{args.out} is not empty; give a new folder (nothing was written).", file=sys.stderr)
        return 2
    return args
