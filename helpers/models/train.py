"""Deterministic training, evaluation, and the checkpoint cache of the course's small models.

`trained_model(name)` trains once (seeded, on the CPU so every machine gets the same weights),
then caches the weights under $WORKBOOK_CACHE (default ~/.cache/gpu-int8-course). The cache file
name carries a key hashed from the training config and the code that defines the model and the
loop (its syntax tree: docstrings, comments and layout do not count); the file also stores a hash of
the weights. A stale key or a wrong weight hash retrains.

Serves: core — used by chapters 7–12 and labs 06–09.
"""

from __future__ import annotations

import ast
import contextlib
import hashlib
import inspect
import io
import os
import sys
import textwrap
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from helpers.errors import InputError
from helpers.session import CACHE_VAR, DEFAULT_CACHE, cache_dir  # noqa: F401  (re-exported)
from helpers.threads import torch_threads
from helpers.validation import require_choice

CODE_VERSION = 1  # bump to retrain every cached model


@dataclass(frozen=True)
class TrainConfig:
    """Everything that decides the trained weights."""

    model: str
    dataset: str = "mnist1d"
    epochs: int = 30
    lr: float = 3e-3
    weight_decay: float = 1e-4
    batch_size: int = 128
    seed: int = 0
    label_smoothing: float = 0.0


def _builders() -> dict[str, Callable[..., nn.Module]]:
    """Model name -> constructor taking (input_shape, num_classes)."""
    from helpers.models.cnn import ResNetSmall
    from helpers.models.encoder import EncoderSmall
    from helpers.models.mobilenet import MobileNetSmall

    def dims(shape: tuple[int, ...]) -> int:
        return len(shape) - 1

    return {
        "resnet_small": lambda s, k: ResNetSmall(s[0], k, dims(s)),
        "mobilenet_small": lambda s, k: MobileNetSmall(s[0], k, dims(s)),
        "encoder_small": lambda s, k: EncoderSmall(s[-1], k),
    }


CONFIGS: dict[str, TrainConfig] = {
    "resnet_small": TrainConfig("resnet_small", epochs=20),
    "mobilenet_small": TrainConfig("mobilenet_small", epochs=20, lr=5e-3),
    "encoder_small": TrainConfig("encoder_small", epochs=20, lr=2e-3, weight_decay=1e-2),
}
MODEL_NAMES = tuple(CONFIGS)


def build_model(name: str, input_shape: tuple[int, ...], num_classes: int, seed: int = 0) -> nn.Module:
    """A freshly initialised (seeded) model of a known name."""
    require_choice(name, MODEL_NAMES, "name")
    torch.manual_seed(seed)
    return _builders()[name](tuple(input_shape), num_classes)


def config_key(cfg: TrainConfig) -> str:
    """Hash of the training config, CODE_VERSION and the source of the model and training code."""
    from helpers.models import cnn, encoder, mobilenet

    h = hashlib.sha256(repr((sorted(asdict(cfg).items()), CODE_VERSION)).encode())
    for mod in (cnn, mobilenet, encoder):
        h.update(code_text(mod).encode())
    h.update(_TRAINING_CODE.encode())
    return h.hexdigest()[:16]


def code_text(obj: Any) -> str:
    """The source of a module, class or function (or a source string) as code only: docstrings, comments, layout out."""
    tree = ast.parse(textwrap.dedent(obj if isinstance(obj, str) else inspect.getsource(obj)))
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and body
                and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)):
            node.body = body[1:] or [ast.Pass()]
    return ast.unparse(tree)


def weights_hash(state: dict[str, torch.Tensor]) -> str:
    """Hash of a state_dict's names, shapes and values."""
    h = hashlib.sha256()
    for k in sorted(state):
        t = state[k].detach().cpu().contiguous()
        h.update(f"{k}:{tuple(t.shape)}:{t.dtype}".encode())
        h.update(t.numpy().tobytes() if t.dtype != torch.bfloat16 else t.float().numpy().tobytes())
    return h.hexdigest()


def _as_loader(data: Any, split: str, batch_size: int = 512) -> DataLoader:
    """A DataLoader from a Dataset (its `split`), a TensorDataset, or a DataLoader."""
    from helpers.data import Dataset

    if isinstance(data, DataLoader):
        return data
    if isinstance(data, Dataset):
        require_choice(split, ("train", "val", "test", "calib"), "split")
        data = getattr(data, split)
    if isinstance(data, TensorDataset):
        return DataLoader(data, batch_size=batch_size)
    raise InputError(f"pass a helpers.data.Dataset, a TensorDataset or a DataLoader, got {type(data).__name__}.")


def model_device(model: nn.Module) -> torch.device:
    """The device of a model's first parameter (CPU for a model without parameters)."""
    p = next(model.parameters(), None)
    return p.device if p is not None else torch.device("cpu")


@torch.no_grad()
def predict(model: nn.Module, data: Any, split: str = "test") -> tuple[torch.Tensor, torch.Tensor]:
    """(logits, labels) of a model over a split, in eval mode, on the model's device."""
    if not isinstance(model, nn.Module):
        raise InputError(f"model must be a torch.nn.Module, got {type(model).__name__}.")
    dev = model_device(model)
    was_training = model.training
    model.eval()
    logits, labels = [], []
    for x, y in _as_loader(data, split):
        logits.append(model(x.to(dev)).float().cpu())
        labels.append(y)
    model.train(was_training)
    return torch.cat(logits), torch.cat(labels)


def evaluate(model: nn.Module, data: Any, split: str = "test") -> float:
    """Top-1 accuracy in percent of `model` on a split of `data` (default: the test split)."""
    logits, labels = predict(model, data, split)
    return float((logits.argmax(1) == labels).float().mean() * 100)


def fit(model: nn.Module, train: TensorDataset, *, epochs: int, lr: float, weight_decay: float = 0.0,
        batch_size: int = 128, seed: int = 0, label_smoothing: float = 0.0, progress: bool = True,
        desc: str = "train", val: TensorDataset | None = None, schedule: str = "onecycle") -> list[dict[str, float]]:
    """Train with AdamW and a 'onecycle' or 'cosine' LR schedule; return per-epoch {epoch, loss, lr, val_acc}."""
    from tqdm.auto import tqdm

    if epochs < 1:
        raise InputError(f"epochs must be at least 1, got {epochs}.")
    dev = model_device(model)
    gen = torch.Generator().manual_seed(seed)
    loader = DataLoader(train, batch_size=batch_size, shuffle=True, generator=gen)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay)
    require_choice(schedule, ("onecycle", "cosine"), "schedule")
    steps = epochs * len(loader)
    sched = (torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=steps) if schedule == "onecycle"
             else torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=steps))
    loss_fn = nn.CrossEntropyLoss(label_smoothing=label_smoothing)
    history = []
    bar = tqdm(range(epochs), desc=desc, disable=not progress, leave=False)
    for epoch in bar:
        model.train()
        total, count = 0.0, 0
        for x, y in loader:
            x, y = x.to(dev), y.to(dev)
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(model(x), y)
            loss.backward()
            opt.step()
            sched.step()
            total, count = total + float(loss.detach()) * len(y), count + len(y)
        row = {"epoch": epoch + 1, "loss": total / count, "lr": sched.get_last_lr()[0]}
        if val is not None:
            row["val_acc"] = evaluate(model, val)
        history.append(row)
        bar.set_postfix(loss=f"{row['loss']:.3f}", **({"val": f"{row['val_acc']:.1f}%"} if val is not None else {}))
    model.eval()
    return history


def checkpoint_path(name: str, dataset: str | None = None) -> Path:
    """Where the cached weights of a model (on a dataset) live for the current code and config."""
    cfg = _config(name, dataset)
    return cache_dir() / f"{cfg.model}-{cfg.dataset}-{config_key(cfg)}.pt"


def _config(name: str, dataset: str | None) -> TrainConfig:
    """The training config of a named model, optionally on another dataset."""
    require_choice(name, MODEL_NAMES, "name")
    cfg = CONFIGS[name]
    if dataset is not None and dataset != cfg.dataset:
        if name == "encoder_small" and dataset != "mnist1d":
            raise InputError("encoder_small reads 1-D signals; use dataset='mnist1d'.")
        cfg = TrainConfig(**{**asdict(cfg), "dataset": dataset})
    return cfg


def _load_cached(path: Path, model: nn.Module, name: str = "") -> bool:
    """Load verified weights into model; False when the file is missing, unreadable or corrupt (said in one line)."""
    if not path.exists():
        return False
    try:
        blob = torch.load(path, map_location="cpu", weights_only=True)
        state = blob["state_dict"]
        if weights_hash(state) != blob["weights_hash"]:
            print(f"cached model {name or path.stem} failed its hash check ({path.name}): retraining.")
            return False
        model.load_state_dict(state)
    except Exception as exc:  # noqa: BLE001 - any unreadable checkpoint is simply retrained
        print(f"cached model {name or path.stem} could not be read ({type(exc).__name__}, {path.name}): retraining.")
        return False
    return True


def trained_model(name: str, *, dataset: str | None = None, progress: bool = True,
                  retrain: bool = False) -> nn.Module:
    """A trained, eval-mode model on the CPU, from the verified cache or trained now (seeded)."""
    from helpers.data import load_dataset

    cfg = _config(name, dataset)
    data = load_dataset(cfg.dataset)
    model = build_model(name, data.input_shape, data.num_classes, cfg.seed)
    path = checkpoint_path(name, cfg.dataset)
    if not retrain and _load_cached(path, model, name):
        return model.eval()
    if not _writable(path.parent):  # e.g. the batch grader's sandbox, which mounts the cache read-only
        print(f"the model cache {path.parent} cannot be written here: training {name} for this session only.")
        return _train_and_store(model, data, cfg, None, name, progress)
    with training_lock(path):  # another process (a parallel test worker) may be training the same model
        if not retrain and path.is_file() and _load_cached(path, model, name):
            return model.eval()
        return _train_and_store(model, data, cfg, path, name, progress)


def _writable(folder: Path) -> bool:
    """True when `folder` exists or can be made, and this process may create files in it."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        return False
    return os.access(folder, os.W_OK)


@contextlib.contextmanager
def training_lock(path: Path) -> Iterator[None]:
    """Hold an exclusive lock beside the checkpoint while one process trains it (others wait, then load)."""
    import fcntl

    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_suffix(".lock"), "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _train_and_store(model: nn.Module, data: Any, cfg: Any, path: Path | None, name: str, progress: bool) -> nn.Module:
    """Train `model` with its config, store the checkpoint atomically (hash-checked on load; not when `path` is None),
    return it in eval mode."""
    with torch_threads(1):  # tiny layers gain little from threads, and spinning threads hurt on busy machines
        fit(model, data.train, epochs=cfg.epochs, lr=cfg.lr, weight_decay=cfg.weight_decay,
            batch_size=cfg.batch_size, seed=cfg.seed, label_smoothing=cfg.label_smoothing,
            progress=progress, desc=f"training {name} on {cfg.dataset}")
    if path is None:
        return model.eval()
    state = {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}
    buf = io.BytesIO()
    torch.save({"state_dict": state, "weights_hash": weights_hash(state), "config": asdict(cfg),
                "python": sys.version.split()[0], "torch": str(torch.__version__)}, buf)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_bytes(buf.getvalue())
    tmp.replace(path)
    return model.eval()


# The training code as defined here (read once, so that patching `fit` in a test cannot change the key).
_TRAINING_CODE = code_text(fit) + code_text(_builders)
