"""The bad-input tables' one assertion: the call raises exactly InputError, in one line that names the fix."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from helpers.errors import InputError


def assert_one_line_error(call: Callable[[], Any], fix: str) -> None:
    """`call()` raises InputError itself (not a subclass), on one line, and the message contains `fix`."""
    with pytest.raises(InputError) as info:
        call()
    msg = str(info.value)
    assert type(info.value) is InputError
    assert fix in msg and "\n" not in msg, msg
