"""The grading worker starts in a scratch folder: it must import the grader's own package even where the course is
not pip-installed (a plain checkout, as on the GPU machine, where every worker died with "No module named
'helpers'"), and a worker that dies says why."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from instructors.batch import jobs

# A child that forgets the editable install (as a checkout that was never pip-installed) and looks for the worker.
FIND_WORKER = ("import sys, importlib.util as u\n"
               "sys.meta_path[:] = [f for f in sys.meta_path if 'editable' not in type(f).__module__ + repr(f)]\n"
               "spec = u.find_spec('instructors.batch.worker')\n"
               "print(spec.origin)\n")


def _find_worker(env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", FIND_WORKER], cwd=cwd, env=env, capture_output=True, text=True)


def test_worker_finds_the_graders_package_without_an_install(tmp_path: Path) -> None:
    done = _find_worker(jobs._worker_env(), tmp_path)
    assert done.returncode == 0, done.stderr
    assert Path(done.stdout.strip()) == jobs.GRADER_ROOT / "instructors" / "batch" / "worker.py"


def test_without_the_path_the_worker_is_not_found(tmp_path: Path) -> None:
    """The planted old behaviour: the environment without the grader's root fails the same way the GPU machine did."""
    env = {k: v for k, v in jobs._worker_env().items() if k != "PYTHONPATH"}
    done = _find_worker(env, tmp_path)
    assert done.returncode != 0 and "No module named 'instructors'" in done.stderr


def test_a_dead_workers_last_error_line_is_kept() -> None:
    err = b"Traceback (most recent call last):\n  File ...\nModuleNotFoundError: No module named 'helpers'\n\n"
    assert jobs._last_line(err) == ": ModuleNotFoundError: No module named 'helpers'"
    assert jobs._last_line(b"") == ""


def test_a_kernel_keeps_the_graders_library_folders_but_never_the_course(tmp_path: Path, monkeypatch) -> None:
    """Libraries installed with ``pip --target`` on PYTHONPATH (the GPU machine's kit) reach the kernel, read-only
    under bubblewrap; the course checkout and any folder holding a helpers or instructors package (answer keys) do
    not."""
    from instructors.batch import sandbox

    lib, keys, inst = tmp_path / "site", tmp_path / "other-checkout", tmp_path / "instructors-only"
    lib.mkdir()
    (keys / "helpers" / "labs").mkdir(parents=True)
    (inst / "instructors" / "keys").mkdir(parents=True)
    monkeypatch.setenv("PYTHONPATH", ":".join([str(sandbox.COURSE_ROOT), str(lib), str(keys), str(inst),
                                               str(tmp_path / "gone")]))
    assert sandbox.library_paths() == [lib.resolve()]
    box = sandbox.Sandbox("bwrap", tmp_path / "copy", tmp_path / "work", tmp_path / "conn")
    assert box.env()["PYTHONPATH"].split(":") == [str(tmp_path / "copy"), str(lib.resolve())]
    argv = box.argv()
    i = argv.index(str(lib.resolve()))
    assert argv[i - 1] == "--ro-bind" and argv[i + 1] == str(lib.resolve())
    assert argv.index("--tmpfs") < i, "the bind must come after the private /tmp, or the tmpfs hides it"
    assert str(sandbox.COURSE_ROOT) not in argv and str(keys) not in " ".join(argv) and str(inst) not in " ".join(argv)


def test_the_graders_own_failure_names_the_course_line_it_came_from() -> None:
    from instructors.batch import limits, worker

    try:
        limits.validate(limits.Resources(processes=-1))
    except Exception as exc:  # noqa: BLE001 - the worker's catch-all, as in worker.main
        line = worker.failure(exc)
    assert line.startswith("the grader failed: InputError: ") and "(at limits.py:" in line


def test_a_kernel_that_does_not_answer_the_reset_is_reported_not_crashed(monkeypatch) -> None:
    import queue
    from types import SimpleNamespace

    from instructors.batch import runner

    def silent(timeout: float) -> dict:
        raise queue.Empty

    kc = SimpleNamespace(execute=lambda *a, **k: "id", shell_channel=SimpleNamespace(get_msg=silent))
    session = SimpleNamespace(client=SimpleNamespace(kc=kc, resources={"metadata": {"path": "/tmp"}}))
    monkeypatch.setattr(runner, "RESET_TIMEOUT_S", 1)
    assert runner._reset(session) == "no reply in 1 s"  # type: ignore[arg-type]
