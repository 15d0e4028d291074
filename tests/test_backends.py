"""helpers.backends: one table of deploy backends, read by the CLI, deploy_all and the environment probe.

A fake entry added to the table must show up in the CLI's --backend choices, in deploy_all's backends,
in stacks.stacks() and in environment.versions(); a CLI or a probe that keeps its own list is caught.
"""

from __future__ import annotations

import importlib
import types
from pathlib import Path

import numpy as np
import pytest
import torch

from helpers import backends as registry
from helpers import environment
from helpers.deploy import __main__ as deploy_cli
from helpers.deploy.base import Backend, DeployJob
from helpers.errors import InputError
from helpers.plugins import stacks
from tests.support.tiny_models import tiny_cnn, tiny_inputs

FAKE = registry.Entry("fake", "Fake backend", __name__, ("json",), "pip install fake-backend",
                      output="onnx", deploy="fake_variants")


class FakeBackend(Backend):
    """Runs the fake-quant model in torch: enough to be one more backend of deploy_all."""

    name = "fake"

    def __init__(self, model):
        self.model = model

    def run(self, x: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            return self.model(torch.from_numpy(x)).numpy()


def fake_variants(job: DeployJob) -> dict[str, Backend]:
    """The fake entry's deploy function: one backend, running the Q/DQ export's source model."""
    job.paths["Fake INT8"] = job.qdq_onnx
    return {"Fake INT8": FakeBackend(job.fake_quant)}


def backend_choices(parser) -> dict[str, tuple[str, ...]]:
    """{subcommand: its --backend choices} of a deploy CLI parser."""
    sub = next(a for a in parser._actions if a.dest == "command")
    out = {}
    for name, p in sub.choices.items():
        for a in p._actions:
            if a.dest == "backend":
                out[name] = tuple(a.choices)
    return out


def table_problems(cli: types.ModuleType, dev: types.ModuleType) -> list[str]:
    """Where the CLI or the environment probe disagrees with the registry (empty when both read it)."""
    problems = []
    for cmd, choices in backend_choices(cli.parser()).items():
        if tuple(choices) != registry.cli_names():
            problems.append(f"`{cmd} --backend` offers {choices}, the registry {registry.cli_names()}")
    dev.stacks.cache_clear()
    rows = dev.stacks()
    titles = {e.title for e in registry.BACKENDS if not e.probe}  # the rows an import check names
    if not titles <= {s.name for s in rows}:
        problems.append(f"stacks.stacks() has no row for {sorted(titles - {s.name for s in rows})}")
    if len(rows) != len(dev.CORE_PROBES) + len(registry.BACKENDS) + len(dev.LATE_PROBES):
        problems.append(f"stacks.stacks() has {len(rows)} rows, not one per backend besides its own probes")
    environment._versions.cache_clear()
    have = environment.versions()
    wanted = dict.fromkeys(p for e in registry.BACKENDS for p in e.packages)  # read here, not through packages()
    missing = [p for p in wanted if environment._version(p) != "-" and p not in have]
    if missing:
        problems.append(f"environment.versions() leaves out {missing}")
    return problems


@pytest.fixture
def with_fake(monkeypatch):
    """The registry with one more backend, FAKE; caches cleared before and after."""
    monkeypatch.setattr(registry, "BACKENDS", (*registry.BACKENDS, FAKE))
    stacks.stacks.cache_clear()
    environment._versions.cache_clear()
    yield FAKE
    stacks.stacks.cache_clear()
    environment._versions.cache_clear()


def test_the_cli_and_the_probe_read_the_table():
    assert table_problems(deploy_cli, stacks) == []
    assert backend_choices(deploy_cli.parser()) == {"build": ("ort", "tensorrt"), "bench": ("ort", "tensorrt")}
    assert len(set(registry.names())) == len(registry.BACKENDS)


def test_a_new_entry_reaches_the_cli_and_the_probe(with_fake):
    assert "fake" in registry.cli_names() and table_problems(deploy_cli, stacks) == []
    assert deploy_cli.parser().parse_args(["bench", "m.onnx", "--backend", "fake"]).backend == "fake"
    row = next(s for s in stacks.stacks() if s.name == "Fake backend")
    assert row.status == "real" and row.detail.startswith("json ")
    assert "json" in environment.versions()


def test_a_cli_or_probe_with_its_own_list_is_caught(with_fake, monkeypatch):
    """Planted: a CLI whose choices are typed in, and a probe that forgets the registry's backends."""
    source = Path(deploy_cli.__file__).read_text(encoding="utf-8")
    assert source.count("choices=registry.cli_names()") == 2
    frozen = types.ModuleType("frozen_cli")
    exec(compile(source.replace("choices=registry.cli_names()", 'choices=("ort", "tensorrt")'),
                 "frozen_cli", "exec"), frozen.__dict__)
    assert any("`build --backend` offers ('ort', 'tensorrt')" in p for p in table_problems(frozen, stacks))
    monkeypatch.setattr(stacks, "backend_probes", lambda: ())
    monkeypatch.setattr(registry, "packages", lambda: ())  # a versions() that no longer asks the registry
    found = table_problems(deploy_cli, stacks)
    assert any("no row for ['Fake backend'" in p for p in found), found
    assert any("leaves out" in p and "'json'" in p for p in found), found


def test_a_new_entry_is_deployed_by_deploy_all(with_fake, monkeypatch, tmp_path):
    from helpers.chapters.ch09_deployment.workloads import deploy_all

    monkeypatch.setattr(registry, "BACKENDS", (registry.get("torch"), FAKE))  # skip ORT: keep the test fast
    x = tiny_inputs(16)
    d = deploy_all(tiny_cnn(), x, x, tmp_path, calib_batch=8)
    assert list(d["backends"]) == ["PyTorch FP32", "PyTorch INT8 (torch._int_mm)", "Fake INT8"]
    assert d["size_mb"]["Fake INT8"] > 0
    with torch.no_grad():
        ref = d["fake_quant"](x).numpy()
    assert np.allclose(d["backends"]["Fake INT8"].run(x.numpy()), ref)


def test_deploy_all_leaves_out_a_backend_that_is_not_installed(monkeypatch, tmp_path):
    from helpers.chapters.ch09_deployment.workloads import deploy_all

    absent = registry.Entry("absent", "Absent", __name__, ("no_such_package_xyz",), "pip install nothing",
                            deploy="fake_variants")
    monkeypatch.setattr(registry, "BACKENDS", (registry.get("torch"), absent))
    x = tiny_inputs(16)
    assert "Fake INT8" not in deploy_all(tiny_cnn(), x, x, tmp_path, calib_batch=8)["backends"]
    row = stacks.probe_import(absent)
    assert row.status == "missing" and row.fix


def test_every_entry_names_real_modules_and_functions():
    for e in registry.BACKENDS:
        importlib.import_module(e.module)
        if e.probe:
            assert callable(registry.load(e.probe)), e
        if e.deploy:
            assert callable(registry.deploy_function(e)), e
        assert e.output in ("", *registry.OUTPUTS)


def test_bad_names_and_entries_are_one_line_errors():
    with pytest.raises(InputError, match="no deploy backend 'onnx'.*ort, tensorrt"):
        registry.get("onnx")
    with pytest.raises(InputError, match="output must be one of"):
        registry.Entry("x", "X", "m", ("p",), "pip install p", output="wheel")
    with pytest.raises(InputError, match="names no package"):
        registry.Entry("x", "X", "m", (), "pip install p")
    with pytest.raises(InputError, match="names no function"):
        registry.load("helpers.backends:NOT_THERE")
