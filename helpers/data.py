"""Offline datasets for the quantization chapters: deterministic splits and a calibration subset.

Nothing is downloaded. Built in:
- ``"mnist1d"``: MNIST-1D (Greydanus 2020), 1-D signals of length 40 in 10 classes, made by the
  package's offline generator ``make_dataset(get_dataset_args())`` (seed 42: 4000 train, 1000 test).
  Small CNNs reach roughly 90-98% on it, so quantization losses are visible.
- ``"digits"``: scikit-learn's 8x8 handwritten digits (1797 images, 17 grey levels), shipped with
  scikit-learn; used as-is (no upscaling, no augmentation). Easy: FP32 is ~99%.
- ``"cifar10"`` and ``"imagefolder"``: only when you pass ``root`` pointing at data you already have
  (the ``cifar-10-batches-py`` folder, or an ImageFolder tree ``root/<class>/<image>``).

Serves: core — used by chapters 7–12 and labs 06–09.
"""

from __future__ import annotations

import functools
import pickle
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader, TensorDataset

from helpers.errors import InputError, require_package
from helpers.validation import require_choice, require_int_range

NAMES = ("mnist1d", "digits", "cifar10", "imagefolder")
SPLIT_SEED = 0


@dataclass(frozen=True)
class Dataset:
    """Train/val/test splits and a calibration subset (drawn from train), as TensorDatasets."""

    name: str
    train: TensorDataset
    val: TensorDataset
    test: TensorDataset
    calib: TensorDataset
    num_classes: int
    input_shape: tuple[int, ...]
    description: str

    def __repr__(self) -> str:
        sizes = ", ".join(f"{k} {len(getattr(self, k))}" for k in ("train", "val", "test", "calib"))
        return f"Dataset({self.name!r}: {sizes}; input {self.input_shape}, {self.num_classes} classes)"


def _tensors(x: np.ndarray, y: np.ndarray) -> TensorDataset:
    """A TensorDataset of float32 inputs and int64 labels."""
    return TensorDataset(torch.tensor(x, dtype=torch.float32), torch.tensor(y, dtype=torch.int64))


def _split(x: np.ndarray, y: np.ndarray, fractions: tuple[float, float]) -> list[np.ndarray]:
    """Shuffle with a fixed seed and cut into len(fractions)+1 index sets."""
    idx = np.random.default_rng(SPLIT_SEED).permutation(len(x))
    cuts = np.cumsum([int(f * len(x)) for f in fractions])
    return np.split(idx, cuts)


def _standardize(train: np.ndarray, *others: np.ndarray) -> list[np.ndarray]:
    """Scale every split with the training set's per-feature mean and std."""
    axes = (0,) + tuple(range(2, train.ndim)) if train.ndim > 2 else (0,)
    mean = train.mean(axis=axes, keepdims=True)
    std = train.std(axis=axes, keepdims=True) + 1e-6
    return [(a - mean) / std for a in (train, *others)]


MNIST1D_KEYS = ("x", "y", "x_test", "y_test")


@functools.cache
def _mnist1d() -> tuple[np.ndarray, ...]:
    """MNIST-1D from its offline generator: (x_train, y_train, x_test, y_test), x of shape (n, 1, 40).

    Generated once (3-8 s on a 2-core machine) and kept in the course's cache folder, keyed by the
    generator's version and arguments; later processes read it back. The tensors handed out are copies.
    """
    data_mod = require_package("mnist1d.data", "pip install mnist1d", "the MNIST-1D generator")
    args = data_mod.get_dataset_args()
    d = _mnist1d_cached(args) or _mnist1d_generate(data_mod, args)
    x, xt = (np.asarray(d[k], dtype=np.float32)[:, None, :] for k in ("x", "x_test"))
    x, xt = _standardize(x, xt)
    return x, np.asarray(d["y"]), xt, np.asarray(d["y_test"])


def _mnist1d_path(args: Any) -> Path:
    """The cache file of MNIST-1D made by this generator version with these arguments."""
    import hashlib
    from importlib.metadata import PackageNotFoundError, version

    from helpers.session import cache_dir

    try:
        made_by = version("mnist1d")
    except PackageNotFoundError:
        made_by = "unknown"
    key = hashlib.sha256(repr((made_by, sorted(vars(args).items()))).encode()).hexdigest()[:16]
    return cache_dir() / f"mnist1d-{key}.npz"


def _mnist1d_cached(args: Any) -> dict[str, np.ndarray] | None:
    """The cached arrays, or None when there is no readable cache file (then it is made again)."""
    try:
        with np.load(_mnist1d_path(args)) as f:
            return {k: f[k] for k in MNIST1D_KEYS}
    except (OSError, KeyError, ValueError, InputError):
        return None


def _mnist1d_generate(data_mod: Any, args: Any) -> dict[str, np.ndarray]:
    """Generate MNIST-1D and keep it in the cache (written beside, then renamed; skipped where it cannot be)."""
    import os

    d = data_mod.make_dataset(args)
    arrays = {k: np.asarray(d[k]) for k in MNIST1D_KEYS}
    try:
        path = _mnist1d_path(args)
    except InputError:  # no usable cache folder: generated again next time
        return arrays
    tmp = path.with_name(f"{path.stem}.{os.getpid()}.tmp.npz")
    try:
        np.savez(tmp, **arrays)
        tmp.replace(path)
    except OSError:
        tmp.unlink(missing_ok=True)
    return arrays


def _digits() -> tuple[np.ndarray, np.ndarray]:
    """scikit-learn digits as (n, 1, 8, 8) floats in 0..1 (pixel levels 0..16 divided by 16)."""
    from sklearn.datasets import load_digits

    d = load_digits()
    return (d.images / 16.0).astype(np.float32)[:, None], d.target


def _cifar10(root: Path) -> tuple[np.ndarray, ...]:
    """CIFAR-10 from an already downloaded 'cifar-10-batches-py' folder (no download)."""
    folder = root / "cifar-10-batches-py" if (root / "cifar-10-batches-py").is_dir() else root
    files = [folder / f"data_batch_{i}" for i in range(1, 6)] + [folder / "test_batch"]
    missing = [f.name for f in files if not f.exists()]
    if missing:
        raise InputError(f"CIFAR-10 files {missing} are not in {folder}. Pass root= the folder that "
                         "holds cifar-10-batches-py (this workbook never downloads it).")

    def read(f: Path) -> tuple[np.ndarray, np.ndarray]:
        """One CIFAR-10 batch file as (images, labels), or InputError naming the broken file."""
        try:
            with open(f, "rb") as fh:
                b = pickle.load(fh, encoding="bytes")
            return b[b"data"].reshape(-1, 3, 32, 32).astype(np.float32) / 255.0, np.asarray(b[b"labels"])
        except Exception as exc:  # noqa: BLE001 - a cut-off or foreign file raises many kinds
            raise InputError(f"{f} is not a readable CIFAR-10 batch ({type(exc).__name__}); the folder is "
                             "incomplete or corrupt. Unpack cifar-10-python.tar.gz into it again.") from None

    parts = [read(f) for f in files[:5]]
    x, y = np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])
    xt, yt = read(files[5])
    x, xt = _standardize(x, xt)
    return x, y, xt, yt


def _imagefolder(root: Path, size: int = 32) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Images under root/<class>/*, resized to size x size RGB in 0..1, with labels and class names."""
    from PIL import Image

    classes = sorted(p.name for p in root.iterdir() if p.is_dir())
    if not classes:
        raise InputError(f"{root} has no class folders. An ImageFolder tree is root/<class>/<image>.")
    xs, ys = [], []
    for label, cls in enumerate(classes):
        for f in sorted((root / cls).iterdir()):
            if f.suffix.lower() in (".png", ".jpg", ".jpeg", ".bmp", ".gif", ".webp"):
                try:
                    img = Image.open(f).convert("RGB").resize((size, size))
                except Exception as exc:  # noqa: BLE001 - PIL raises several kinds for a broken image
                    raise InputError(f"{f} is not a readable image ({type(exc).__name__}). Replace or "
                                     "remove it, then load the folder again.") from None
                xs.append(np.asarray(img, dtype=np.float32).transpose(2, 0, 1) / 255.0)
                ys.append(label)
    if len(xs) < 10:
        raise InputError(f"{root} holds only {len(xs)} images; at least 10 are needed for the splits.")
    return np.stack(xs), np.asarray(ys), classes


def load_dataset(name: str = "digits", root: str | Path | None = None, *, calib_size: int = 512) -> Dataset:
    """Deterministic train/val/test splits and a calibration subset (from train) of a named dataset."""
    require_choice(name, NAMES, "name")
    require_int_range(calib_size, 1, 100_000, "calib_size")
    if name in ("cifar10", "imagefolder"):
        if root is None:
            raise InputError(f"{name!r} needs root= the folder where the data already is "
                             "(this workbook never downloads). Or use 'mnist1d' or 'digits'.")
        root = Path(root).expanduser()
        if not root.is_dir():
            raise InputError(f"root={str(root)!r} is not a folder. Pass the folder that holds the data.")
    if name == "mnist1d":
        x, y, xt, yt = _mnist1d()
        tr, va = _split(x, y, (0.875,))
        desc = "MNIST-1D (offline generator, seed 42), standardized; val = 12.5% of the 4000 train samples"
    elif name == "digits":
        xa, ya = _digits()
        tr_, va_, te_ = _split(xa, ya, (0.7, 0.1))
        x, y, xt, yt = xa, ya, xa[te_], ya[te_]
        tr, va = tr_, va_
        desc = "scikit-learn digits 8x8, pixels/16, not upscaled or augmented; 70/10/20 split"
    elif name == "cifar10":
        x, y, xt, yt = _cifar10(root)
        tr, va = _split(x, y, (0.9,))
        desc = f"CIFAR-10 from {root}, standardized per channel; val = 10% of train"
    else:
        xa, ya, classes = _imagefolder(root)
        tr_, va_, te_ = _split(xa, ya, (0.7, 0.1))
        x, y, xt, yt = xa, ya, xa[te_], ya[te_]
        tr, va = tr_, va_
        desc = f"ImageFolder {root} ({len(classes)} classes) resized to 32x32; 70/10/20 split"
    calib_idx = tr[: min(calib_size, len(tr))]
    return Dataset(
        name=name, train=_tensors(x[tr], y[tr]), val=_tensors(x[va], y[va]), test=_tensors(xt, yt),
        calib=_tensors(x[calib_idx], y[calib_idx]), num_classes=int(max(y.max(), yt.max()) + 1),
        input_shape=tuple(x.shape[1:]), description=desc,
    )


def loaders(data: Dataset, batch_size: int = 128, *, seed: int = 0) -> dict[str, DataLoader]:
    """DataLoaders for every split; only 'train' shuffles (with a seeded generator, so runs repeat)."""
    if not isinstance(data, Dataset):
        raise InputError(f"loaders() needs a helpers.data.Dataset from load_dataset(), got {type(data).__name__}.")
    require_int_range(batch_size, 1, 1 << 20, "batch_size")
    gen = torch.Generator().manual_seed(seed)
    out = {}
    for split in ("train", "val", "test", "calib"):
        shuffle = split == "train"
        out[split] = DataLoader(getattr(data, split), batch_size=batch_size, shuffle=shuffle,
                                generator=gen if shuffle else None)
    return out
