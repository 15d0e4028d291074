"""The pins: environment.yml and requirements.txt must agree exactly."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


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
