"""helpers.models.train's cache key: code changes retrain, docstring, comment and layout edits do not."""

from __future__ import annotations

from helpers.models import lm_train, train

BASE = '''
def step(x):
    """Add one."""
    return x + 1
'''
DOCS_AND_LAYOUT = '''
def step(x):  # the same code
    """Add one to x, reworded."""

    return (x
            + 1)
'''
CODE_CHANGE = BASE.replace("x + 1", "x + 2")


def test_docstrings_comments_and_layout_do_not_change_the_code_text():
    assert train.code_text(BASE) == train.code_text(DOCS_AND_LAYOUT)


def test_a_code_change_changes_the_code_text():
    assert train.code_text(BASE) != train.code_text(CODE_CHANGE)


def test_a_string_that_is_not_a_docstring_is_kept():
    assert train.code_text("x = 1\n'kept'\n") != train.code_text("x = 1\n")


def test_a_config_change_changes_the_key():
    cfg = train.CONFIGS["resnet_small"]
    assert train.config_key(cfg) != train.config_key(train.TrainConfig("resnet_small", epochs=cfg.epochs + 1))


def test_the_lm_key_reads_the_same_code_text():
    assert lm_train.config_key(lm_train.DEFAULT) == lm_train.config_key(lm_train.LMTrainConfig())


def test_a_read_only_cache_trains_for_the_session_without_a_lock(tmp_path, monkeypatch):
    """The batch grader's sandbox mounts the model cache read-only: a model not in it is trained, not stored."""
    monkeypatch.setenv("WORKBOOK_CACHE", str(tmp_path))
    stored = []
    monkeypatch.setattr(train, "_load_cached", lambda *a: False)
    monkeypatch.setattr(train, "_train_and_store", lambda model, data, cfg, path, name, progress: stored.append(path))
    monkeypatch.setattr(train.os, "access", lambda p, mode: False)
    name = train.MODEL_NAMES[0]
    train.trained_model(name, progress=False)
    assert stored == [None] and not list(tmp_path.glob("*.lock"))
    monkeypatch.setattr(train.os, "access", lambda p, mode: True)
    train.trained_model(name, progress=False)
    assert stored[1] == train.checkpoint_path(name) and list(tmp_path.glob("*.lock"))
