"""Text that is on every machine without a download: the Python standard library's own source files.

A fixed list of modules, read as UTF-8 bytes (a byte-level vocabulary of 256 tokens). The training and
held-out files are different files, so perplexity is measured on code the model never saw. Each Python
version ships its own text (the GPU machine runs 3.12, the CPU machines 3.11): a perplexity is a
measurement of that machine's text, and `corpus_info()` says which files and version it came from.

Serves: core — used by chapter 12.
"""

from __future__ import annotations

import functools
import hashlib
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

import torch

from helpers.errors import InputError

TRAIN_FILES = (
    "argparse.py", "ast.py", "base64.py", "bisect.py", "calendar.py", "configparser.py", "contextlib.py",
    "csv.py", "dataclasses.py", "difflib.py", "enum.py", "fractions.py", "functools.py", "gettext.py",
    "heapq.py", "inspect.py", "ipaddress.py", "logging/__init__.py", "optparse.py", "pathlib.py",
    "pickle.py", "pprint.py", "random.py", "shutil.py", "statistics.py", "string.py", "tarfile.py",
    "textwrap.py", "threading.py", "tokenize.py", "typing.py",
)
HELDOUT_FILES = ("collections/__init__.py", "json/encoder.py", "json/decoder.py", "queue.py", "shlex.py",
                 "copy.py", "fnmatch.py", "glob.py")
VOCAB = 256  # bytes


@dataclass(frozen=True)
class Corpus:
    """Training and held-out byte tokens, with where they came from."""

    train: torch.Tensor  # int64 tokens
    heldout: torch.Tensor
    files: tuple[str, ...]
    python: str
    digest: str


def stdlib_dir() -> Path:
    """The folder of this interpreter's standard library sources."""
    return Path(sysconfig.get_paths()["stdlib"])


def _read(names: tuple[str, ...], root: Path) -> tuple[bytes, list[str]]:
    """The bytes of every listed file that exists under root (missing ones skipped), and their names."""
    parts, found = [], []
    for name in names:
        path = root / name
        if path.is_file():
            parts.append(path.read_bytes())
            found.append(name)
    return b"\n".join(parts), found


@functools.cache
def load_corpus() -> Corpus:
    """The stdlib text as byte tokens: training files and held-out files (cached per process)."""
    root = stdlib_dir()
    train, tf = _read(TRAIN_FILES, root)
    held, hf = _read(HELDOUT_FILES, root)
    if len(train) < 100_000 or len(held) < 20_000:
        raise InputError(f"the Python standard library sources under {root} are missing or too small "
                         f"({len(train)} + {len(held)} bytes); install a full CPython (not an embedded one).")
    digest = hashlib.sha256(train + b"\0" + held).hexdigest()[:16]
    as_tokens = lambda b: torch.frombuffer(bytearray(b), dtype=torch.uint8).long()  # noqa: E731
    return Corpus(as_tokens(train), as_tokens(held), tuple(tf + hf), sys.version.split()[0], digest)


def corpus_info() -> str:
    """One line: how many files and bytes, from which Python version."""
    c = load_corpus()
    return (f"Python {c.python} standard library: {len(c.files)} files, {len(c.train):,} training bytes, "
            f"{len(c.heldout):,} held-out bytes (digest {c.digest})")


def windows(tokens: torch.Tensor, length: int, count: int | None = None) -> torch.Tensor:
    """Non-overlapping windows of `length + 1` tokens (input plus next-token targets), the first `count`."""
    if length < 1 or len(tokens) < length + 1:
        raise InputError(f"need at least {length + 1} tokens for windows of {length}, got {len(tokens)}.")
    n = (len(tokens) - 1) // length
    n = n if count is None else min(n, count)
    idx = torch.arange(n)[:, None] * length + torch.arange(length + 1)[None, :]
    return tokens[idx]


def random_windows(tokens: torch.Tensor, length: int, batch: int, generator: torch.Generator) -> torch.Tensor:
    """`batch` windows of `length + 1` tokens at seeded random offsets (a training batch)."""
    start = torch.randint(0, len(tokens) - length - 1, (batch,), generator=generator)
    return tokens[start[:, None] + torch.arange(length + 1)[None, :]]
