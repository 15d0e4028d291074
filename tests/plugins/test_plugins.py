"""helpers.plugins: one optional-import idiom for every third-party library, and each library's quirks."""

from __future__ import annotations

import ast
import logging
import types
from pathlib import Path

import pytest

import helpers.plugins as plugins
from helpers.errors import MissingPackageError
from helpers.plugins import modelopt_compat, ort_compat
from helpers.tools import layout

FOLDER = Path(plugins.__file__).parent
OTHER_IDIOMS = ("import_module", "require_package", "optional_package")  # what a plugin must not call


def test_optional_names_the_install_line_and_present_says_none():
    with pytest.raises(MissingPackageError, match=r"no_such_lib_xyz is not installed \(for a test\)\. "
                                                  r"Install it with: pip install no-such-lib") as err:
        plugins.optional("no_such_lib_xyz", install="pip install no-such-lib", why="for a test")
    assert isinstance(err.value.__cause__, ImportError) and err.value.install == "pip install no-such-lib"
    assert plugins.present("no_such_lib_xyz") is None
    assert plugins.present("json", needs=("dumps",)) is not None
    assert plugins.present("json", needs=("Builder",)) is None  # e.g. tensorrt-stubs: a module without the API
    with pytest.raises(MissingPackageError, match="only type stubs"):
        plugins.optional("json", install="pip install json", needs=("Builder",))


def test_every_plugin_imports_its_library_through_the_one_idiom():
    """No plugin calls importlib or helpers.errors' import helpers itself; helpers/plugins/__init__ does."""
    found = []
    for path in sorted(FOLDER.glob("*.py")):
        if path.name == "__init__.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            name = getattr(node, "attr", None) or getattr(node, "id", None)
            if name in OTHER_IDIOMS:
                found.append(f"{path.name}:{node.lineno} {name}")
    assert found == []


def test_plugins_sit_just_above_the_foundation(tmp_path):
    assert layout.layer("helpers.device") == 0 < layout.layer("helpers.plugins.trt_family") < layout.layer(
        "helpers.kernels.launch")
    assert layout.layer("helpers.backends") == 0  # the backend table is a foundation module, by its folder
    root = tmp_path / "helpers"
    (root / "plugins").mkdir(parents=True)
    (root / "deploy").mkdir()
    for rel in ("__init__.py", "plugins/__init__.py", "deploy/__init__.py", "deploy/base.py", "device.py"):
        (root / rel).write_text('"""Serves: core."""\n')
    (root / "plugins/bad.py").write_text('"""Serves: core."""\n\ndef f():\n    from helpers.deploy import base\n')
    (root / "device.py").write_text('"""Serves: core."""\n\ndef f():\n    from helpers.plugins import bad\n')
    found = layout.violations(root)
    assert len(found) == 2 and all("higher one" in p for p in found), found
    assert {p.split(":")[0] for p in found} == {"helpers/plugins/bad.py", "helpers/device.py"}  # up from both


def test_modelopt_is_optional_with_its_install_line():
    if modelopt_compat.available():
        pytest.skip("nvidia-modelopt is installed here")
    with pytest.raises(MissingPackageError, match="nvidia-modelopt==0.47.0"):
        modelopt_compat.mtq()


def test_ort_quirks():
    fake = types.SimpleNamespace(get_available_providers=lambda: ["CPUExecutionProvider", "AzureExecutionProvider"])
    assert ort_compat.providers(fake) == ["CPUExecutionProvider"]
    root = logging.getLogger()
    before = root.level
    with ort_compat.quiet_root_logger():
        assert root.level == logging.ERROR
    assert root.level == before
    assert not ort_compat.is_ort_error(ValueError("x"))
    ort = pytest.importorskip("onnxruntime")
    assert ort_compat.run_relu_probe()[0] == [0.0, 2.0]
    with pytest.raises(Exception) as err:
        ort.InferenceSession(b"not a model", providers=["CPUExecutionProvider"])
    assert ort_compat.is_ort_error(err.value)
    assert ort_compat.probe().status in ("real", "cpu")
