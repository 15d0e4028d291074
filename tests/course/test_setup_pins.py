"""The pins: environment.yml and requirements.txt must agree exactly; `make setup` installs them
(torch through pip, the rest through uv, pip as the fallback); the fresh-clone timer's parts."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _pins(lines: list[str]) -> dict[str, str]:
    """name -> version for every 'name==version' line."""
    pins = {}
    for line in lines:
        m = re.match(r"^\s*(?:-\s*)?([A-Za-z0-9_.\-]+)==([^\s#]+)", line)
        if m:
            pins[m.group(1).lower()] = m.group(2)
    return pins


def test_environment_yml_matches_requirements():
    req = _pins((ROOT / "requirements.txt").read_text().splitlines())
    env_lines = (ROOT / "environment.yml").read_text().splitlines()
    pip_section = env_lines[env_lines.index("  - pip:") + 1:]
    env = _pins(pip_section)
    assert req, "requirements.txt has no pins"
    assert env == req, f"differ: only in requirements {set(req.items()) - set(env.items())}, " \
                       f"only in environment.yml {set(env.items()) - set(req.items())}"


def test_every_requirement_is_pinned():
    for line in (ROOT / "requirements.txt").read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            assert "==" in line, f"unpinned requirement: {line}"


def test_pin_parser_catches_a_difference():
    assert _pins(["torch==2.13.0"]) != _pins(["  - torch==2.14.1"])


# ---- how `make setup` installs the pins, and the fresh-clone timer ----------------------------------

def _setup_recipe(*make_args: str) -> list[str]:
    """The commands `make setup` would run if requirements.txt had changed (make -n, nothing runs)."""
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    out = subprocess.run(["make", "-n", "--no-print-directory", "-W", "requirements.txt", "setup", *make_args],
                         cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return [ln for ln in out.splitlines() if ln.strip()]


def test_setup_installs_torch_with_pip_before_uv():
    lines = _setup_recipe()
    torch_line = next((i for i, ln in enumerate(lines) if "pip install" in ln and "torch==" in ln), None)
    uv_line = next((i for i, ln in enumerate(lines) if "uv pip install" in ln), None)
    assert uv_line is not None, "make setup no longer installs with uv:\n" + "\n".join(lines)
    assert torch_line is not None and torch_line < uv_line, (
        "torch must come through pip before uv runs: uv would fetch PyPI's CUDA torch")
    assert "-r requirements.txt" in "\n".join(lines[uv_line:]), "uv must install the pinned list"
    assert re.search(r"pip install -q [^|]*-r requirements\.txt", "\n".join(lines)), "no pip fallback"


def test_installer_pip_skips_uv():
    script = "\n".join(_setup_recipe("INSTALLER=pip"))
    assert '[ "pip" = uv ]' in script, "INSTALLER=pip must turn the uv branch off"


def test_fresh_clone_config_gives_port_token_and_no_browser(tmp_path):
    from helpers.tools import fresh_clone

    env = fresh_clone._jupyter_home(tmp_path / "home", 12345, "abc")
    config = json.loads((Path(env["JUPYTER_CONFIG_DIR"]) / "jupyter_server_config.json").read_text())
    assert config["ServerApp"]["port"] == 12345 and config["ServerApp"]["open_browser"] is False
    assert config["IdentityProvider"]["token"] == "abc"
    assert all(str(tmp_path) in v for v in env.values()), "every Jupyter folder must be private"


def test_fresh_clone_record(tmp_path):
    from helpers import bench
    from helpers.tools import fresh_clone

    timeline = fresh_clone.Timeline(clone_s=2.0, setup_s=290.0, serving_s=300.0, notes={"installer": "pip"})
    out = tmp_path / "fresh.json"
    fresh_clone.save(timeline, out)
    (rec,) = bench.load_records(out)
    assert rec.name == "suite.fresh_clone_to_lab_minutes" and rec.unit == "min"
    assert rec.value == pytest.approx(5.0) and rec.extra["lab_start_s"] == pytest.approx(10.0)


def test_fresh_clone_rejects_bad_input(tmp_path, capsys):
    from helpers.tools import fresh_clone

    assert fresh_clone.main([str(tmp_path)]) == 2  # a folder, not a file
    assert fresh_clone.main([str(tmp_path / "x.json"), "--overlay", "no/such/file"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and all(ln.startswith("error: ") for ln in err), err


def test_suite_time_counts_setup_only_when_it_ran_in_the_command(tmp_path):
    import os

    from helpers.tools import suite_time

    stamp = tmp_path / ".setup-done"
    assert suite_time.setup_seconds(1000.0, stamp) == 0.0  # never set up
    stamp.touch()
    os.utime(stamp, (1300.0, 1300.0))
    assert suite_time.setup_seconds(1000.0, stamp) == 300.0  # set up during the run
    assert suite_time.setup_seconds(2000.0, stamp) == 0.0  # set up before it
