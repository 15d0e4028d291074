"""Train the chapter-12 TinyLM once on the stdlib text and keep it in the course's model cache.

The cache key hashes the training config, the model and loop code (docstrings and comments left out),
the Python version and the text's digest (each Python version ships its own standard library, so each
trains its own model). The file stores a hash of the weights, checked on load (`helpers.models.train`
does the same for the classifiers; its `cache_dir`, `code_text` and `weights_hash` are reused here).

Serves: core — used by chapter 12.
"""

from __future__ import annotations

import hashlib
import io
import math
import os
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from helpers.errors import InputError
from helpers.models import stdlib_text, tiny_lm
from helpers.models.train import cache_dir, code_text, training_lock, weights_hash

CODE_VERSION = 1


@dataclass(frozen=True)
class LMTrainConfig:
    """Everything that decides the trained weights."""

    model: tiny_lm.LMConfig = field(default_factory=lambda: tiny_lm.LMConfig(n_layers=2, d_ff=384, ctx=64))
    steps: int = 400
    batch: int = 32
    lr: float = 1e-2
    warmup: int = 20
    weight_decay: float = 0.05
    seed: int = 0
    bf16: bool = True  # matmuls in bfloat16 (autocast): about twice as fast on CPUs with AVX-512 BF16


DEFAULT = LMTrainConfig()


def config_key(cfg: LMTrainConfig) -> str:
    """Hash of the config, the code, the Python version and the training text."""
    corpus = stdlib_text.load_corpus()
    h = hashlib.sha256(repr((asdict(cfg), CODE_VERSION, corpus.python, corpus.digest)).encode())
    for code in (tiny_lm, stdlib_text, train_lm):
        h.update(code_text(code).encode())
    return h.hexdigest()[:16]


def checkpoint_path(cfg: LMTrainConfig = DEFAULT) -> Path:
    """Where the cached weights for this config, code and text live."""
    return cache_dir() / f"tiny_lm-stdlib-{config_key(cfg)}.pt"


def _lr(step: int, cfg: LMTrainConfig) -> float:
    """Linear warm-up, then cosine decay to a tenth."""
    if step < cfg.warmup:
        return cfg.lr * (step + 1) / cfg.warmup
    t = (step - cfg.warmup) / max(1, cfg.steps - cfg.warmup)
    return cfg.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * t)))


def train_lm(cfg: LMTrainConfig = DEFAULT, progress: bool = True) -> tuple[tiny_lm.TinyLM, list[float]]:
    """Train a TinyLM from scratch on the stdlib text (seeded, CPU); return it and its loss per step."""
    from tqdm.auto import tqdm

    if cfg.steps < 1 or cfg.batch < 1:
        raise InputError(f"steps and batch must be at least 1, got {cfg.steps} and {cfg.batch}.")
    torch.manual_seed(cfg.seed)
    model = tiny_lm.TinyLM(cfg.model)
    decay = [p for n, p in model.named_parameters() if p.ndim == 2]
    other = [p for n, p in model.named_parameters() if p.ndim < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": cfg.weight_decay},
                             {"params": other, "weight_decay": 0.0}], lr=cfg.lr, betas=(0.9, 0.95))
    gen = torch.Generator().manual_seed(cfg.seed)
    tokens = stdlib_text.load_corpus().train
    losses: list[float] = []
    model.train()
    bar = tqdm(range(cfg.steps), desc="training the tiny language model", disable=not progress,
               leave=False)
    for step in bar:
        for g in opt.param_groups:
            g["lr"] = _lr(step, cfg)
        batch = stdlib_text.random_windows(tokens, cfg.model.ctx, cfg.batch, gen)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=cfg.bf16):
            loss = tiny_lm.loss_on(model, batch)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        losses.append(float(loss.detach()))
        if step % 10 == 0:
            bar.set_postfix(loss=f"{losses[-1]:.3f}")
    return model.eval(), losses


def _load(path: Path, model: torch.nn.Module) -> list[float] | None:
    """Verified weights into model and the stored loss curve, or None when missing or corrupt."""
    if not path.exists():
        return None
    try:
        blob = torch.load(path, map_location="cpu", weights_only=True)
        if weights_hash(blob["state_dict"]) != blob["weights_hash"]:
            return None
        model.load_state_dict(blob["state_dict"])
        return list(blob["losses"])
    except Exception:  # noqa: BLE001 - any unreadable checkpoint is simply retrained
        return None


def trained_lm(cfg: LMTrainConfig = DEFAULT, *, progress: bool = True,
               retrain: bool = False) -> tuple[tiny_lm.TinyLM, list[float]]:
    """The trained TinyLM (eval mode, CPU) and its training losses, from the verified cache or trained now."""
    path = checkpoint_path(cfg)
    model = tiny_lm.TinyLM(cfg.model)
    if not retrain and (losses := _load(path, model)) is not None:
        return model.eval(), losses
    with training_lock(path):  # another process (a prefill, a parallel test worker) may be training it
        if not retrain and (losses := _load(path, model)) is not None:
            return model.eval(), losses
        model, losses = train_lm(cfg, progress)
        state = {k: v.detach().clone() for k, v in model.state_dict().items()}
        buf = io.BytesIO()
        torch.save({"state_dict": state, "weights_hash": weights_hash(state), "losses": losses,
                    "config": repr(cfg), "python": sys.version.split()[0], "torch": str(torch.__version__)}, buf)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_bytes(buf.getvalue())
        tmp.replace(path)
    return model, losses
