"""helpers.data and helpers.models.train: deterministic splits, offline loaders, the checkpoint cache."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import torch

from helpers.data import load_dataset, loaders
from helpers.errors import InputError
from helpers.models import train


@pytest.fixture(scope="module")
def mnist1d():
    return load_dataset("mnist1d")


def test_mnist1d_splits_are_deterministic_and_disjoint(mnist1d):
    again = load_dataset("mnist1d")
    for split in ("train", "val", "test", "calib"):
        a, b = getattr(mnist1d, split).tensors, getattr(again, split).tensors
        assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    assert (len(mnist1d.train), len(mnist1d.val), len(mnist1d.test), len(mnist1d.calib)) == (3500, 500, 1000, 512)
    assert mnist1d.input_shape == (1, 40) and mnist1d.num_classes == 10
    train_rows = {tuple(r.tolist()) for r in mnist1d.train.tensors[0][:, 0]}
    assert not any(tuple(r.tolist()) in train_rows for r in mnist1d.val.tensors[0][:, 0])
    assert all(tuple(r.tolist()) in train_rows for r in mnist1d.calib.tensors[0][:, 0])


def test_digits_is_unscaled_8x8_in_0_1():
    d = load_dataset("digits")
    x = d.train.tensors[0]
    assert d.input_shape == (1, 8, 8) and x.dtype == torch.float32
    assert float(x.min()) == 0.0 and float(x.max()) == 1.0
    assert len(torch.unique(x)) == 17  # the 17 grey levels that make entropy calibration collapse
    assert len(d.train) + len(d.val) + len(d.test) == 1797


def test_bad_names_and_missing_roots_are_explained(tmp_path):
    with pytest.raises(InputError, match="one of"):
        load_dataset("imagenet")
    with pytest.raises(InputError, match="never downloads"):
        load_dataset("cifar10")
    with pytest.raises(InputError, match="cifar-10-batches-py"):
        load_dataset("cifar10", root=tmp_path)


def test_cifar10_from_disk(tmp_path):
    folder = tmp_path / "cifar-10-batches-py"
    folder.mkdir()
    rng = np.random.default_rng(0)
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        blob = {b"data": rng.integers(0, 256, (20, 3072), dtype=np.uint8), b"labels": list(range(10)) * 2}
        (folder / name).write_bytes(pickle.dumps(blob))
    d = load_dataset("cifar10", root=tmp_path, calib_size=8)
    assert d.input_shape == (3, 32, 32) and len(d.test) == 20 and len(d.train) + len(d.val) == 100
    assert len(d.calib) == 8


def test_imagefolder_from_disk(tmp_path):
    from PIL import Image

    for cls in ("cat", "dog"):
        (tmp_path / cls).mkdir()
        for i in range(6):
            Image.new("RGB", (40, 30), (i * 40, 0, 0)).save(tmp_path / cls / f"{i}.png")
    d = load_dataset("imagefolder", root=tmp_path)
    assert d.num_classes == 2 and d.input_shape == (3, 32, 32)
    assert len(d.train) + len(d.val) + len(d.test) == 12


def test_loaders_shuffle_train_repeatably(mnist1d):
    first = next(iter(loaders(mnist1d, 64)["train"]))[1]
    second = next(iter(loaders(mnist1d, 64)["train"]))[1]
    assert torch.equal(first, second)
    with pytest.raises(InputError):
        loaders("mnist1d")


@pytest.mark.parametrize("name,shape", [("resnet_small", (1, 40)), ("mobilenet_small", (1, 40)),
                                        ("encoder_small", (1, 40)), ("resnet_small", (1, 8, 8)),
                                        ("mobilenet_small", (3, 32, 32))])
def test_models_give_logits(name, shape):
    m = train.build_model(name, shape, 10).eval()
    assert m(torch.randn(4, *shape)).shape == (4, 10)


def test_checkpoint_cache_trains_once_and_retrains_when_stale(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(train.CACHE_VAR, str(tmp_path))
    monkeypatch.setitem(train.CONFIGS, "resnet_small", train.TrainConfig("resnet_small", "digits", epochs=1))
    m1 = train.trained_model("resnet_small", dataset="digits", progress=False)
    path = train.checkpoint_path("resnet_small", "digits")
    assert path.exists() and path.parent == tmp_path and not m1.training

    def no_training(*a, **k):
        raise AssertionError("a valid cache must not retrain")
    monkeypatch.setattr(train, "fit", no_training)
    m2 = train.trained_model("resnet_small", dataset="digits", progress=False)
    assert all(torch.equal(a, b) for a, b in zip(m1.state_dict().values(), m2.state_dict().values()))

    blob = torch.load(path, weights_only=True)
    blob["state_dict"]["fc.bias"] += 1.0  # corrupt the weights: the hash no longer matches
    torch.save(blob, path)
    capsys.readouterr()
    with pytest.raises(AssertionError, match="must not retrain"):
        train.trained_model("resnet_small", dataset="digits", progress=False)
    assert f"cached model resnet_small failed its hash check ({path.name}): retraining." in capsys.readouterr().out

    monkeypatch.setitem(train.CONFIGS, "resnet_small", train.TrainConfig("resnet_small", "digits", epochs=2))
    assert train.checkpoint_path("resnet_small", "digits") != path  # a new config is a new key


def test_evaluate_is_a_percentage_and_validates(mnist1d):
    m = train.build_model("resnet_small", (1, 40), 10)
    acc = train.evaluate(m, mnist1d, "val")
    assert 0.0 <= acc <= 100.0
    with pytest.raises(InputError):
        train.evaluate(m, [1, 2, 3])
    with pytest.raises(InputError):
        train.evaluate("model", mnist1d)
    with pytest.raises(InputError):
        train.trained_model("vgg")


def test_mnist1d_is_generated_once_then_read_from_the_cache(tmp_path, monkeypatch):
    """The generator's 3-8 s ran in every notebook's kernel; now the first one keeps the arrays in the cache."""
    import numpy as np

    from helpers import data

    monkeypatch.setenv("WORKBOOK_CACHE", str(tmp_path))
    made = data._mnist1d.__wrapped__()
    files = list(tmp_path.glob("mnist1d-*.npz"))
    assert len(files) == 1 and not list(tmp_path.glob("*.tmp*"))
    monkeypatch.setattr(data, "_mnist1d_generate", lambda *a: pytest.fail("generated again despite the cache"))
    read = data._mnist1d.__wrapped__()
    assert all(np.array_equal(a, b) for a, b in zip(made, read))
    files[0].write_bytes(b"not an npz")  # a damaged cache file is made again, never an error
    monkeypatch.undo()
    monkeypatch.setenv("WORKBOOK_CACHE", str(tmp_path))
    again = data._mnist1d.__wrapped__()
    assert all(np.array_equal(a, b) for a, b in zip(made, again)) and np.load(files[0])["x"].shape[0] == len(made[0])
