"""helpers.models.prefill: the course cache filled ahead, the dataset first, every entry said; bad input refused."""

from __future__ import annotations

import pytest

from helpers.errors import InputError
from helpers.models import prefill, train


def test_the_cache_holds_the_dataset_first_then_every_model_and_the_language_model():
    names = list(prefill.tasks())
    assert names[0] == "mnist1d"  # every classifier trains on it
    assert set(names[1:]) == {*train.MODEL_NAMES, "tiny_lm"}


def test_every_entry_is_made_once_in_order_and_said(monkeypatch):
    made, said = [], []
    monkeypatch.setattr(prefill, "tasks", lambda: {n: (lambda n=n: made.append(n)) for n in ("data", "a", "b")})
    seconds = prefill.prefill(jobs=1, say=said.append)
    assert made == ["data", "a", "b"] and list(seconds) == made
    assert [s.split(":")[0] for s in said] == made and all(s.endswith(" s") for s in said)


@pytest.mark.parametrize("jobs", [0, -1, 1.5, True, "2"])
def test_jobs_must_be_a_whole_number(jobs):
    with pytest.raises(InputError, match="jobs must be a whole number of at least 1"):
        prefill.prefill(jobs=jobs)


def test_the_command_refuses_bad_jobs_in_one_line(capsys):
    assert prefill.main(["--jobs", "0"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: jobs must be a whole number") and err.count("\n") == 1
