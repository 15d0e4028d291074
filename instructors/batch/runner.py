"""Grade one submission in its sandboxed kernel: run the student's cells, then ask the kernel for the
student's answers to each test case and judge them here, in the grader's own process.

The student's cells run in order, errors allowed, each under a time limit; a cell that kills or hangs
the kernel is skipped on a fresh kernel. Then the kernel is reset (input transformers, AST
transformers, exception handlers, event callbacks, working folder) through a channel that input
transformers do not touch, and for every case the grader sends the arguments as plain data and
reads back the answer as plain data. A test scores its points when every case passes.

Serves: instructors (batch grading).
"""

from __future__ import annotations

import json
import queue
import secrets
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from helpers.errors import InputError
from helpers.grading import wire
from helpers.grading.compare import BadAnswer
from instructors.batch import limits, procs
from instructors.batch.kernel_session import Session, short
from instructors.batch.sandbox import Sandbox

if TYPE_CHECKING:
    from instructors.batch.sent_kernels import Notebook
    from helpers.grading.kernel_source import SentKernel

MAX_ATTEMPTS = 4
START_ATTEMPTS = 3


@dataclass
class TestCase:
    """One case of a test, with the expected answer (kept in the grader) and its time limit."""
    __test__ = False  # not a pytest test class

    label: str
    args: tuple
    kwargs: dict
    expected: Any
    timeout: float = 60.0


@dataclass
class TestCell:
    """One graded test: an exercise checked on a student's function, worth `points`."""
    __test__ = False  # not a pytest test class

    grade_id: str
    points: float
    exercise: str = ""
    function: str = ""
    run: str | None = None
    cases: list[TestCase] = field(default_factory=list)
    kernel: bool = False  # a kernel lab's test: the worker launches the kernel itself (sent_kernels)


@dataclass
class TestOutcome:
    """The result of one test."""
    __test__ = False  # not a pytest test class

    grade_id: str
    points: float
    max_points: float
    passed: bool
    message: str
    seconds: float = 0.0


@dataclass
class RunResult:
    """Everything the grader learned from one submission."""

    outcomes: list[TestOutcome]
    cell_errors: list[tuple[int, str, str]] = field(default_factory=list)  # (cell, ename, evalue)
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0
    not_graded: str = ""  # the grader's own failure (never the student's): no points given or taken
    cell_seconds: list[float] = field(default_factory=list)
    manual: list[dict] = field(default_factory=list)  # questions read by the instructor: grade_id, max_points, answer


@dataclass
class Limits:
    """Time and output limits for one submission."""

    cell_timeout: float = 60.0
    total_timeout: float = 600.0
    max_output_chars: int = 20_000


def _start(make_sandbox: Callable[[], Sandbox], limits: Limits, deadline: float) -> tuple[Session | None, str]:
    """A started session, retried when the kernel fails to start (the grader's failure, not the student's)."""
    why = ""
    for _ in range(START_ATTEMPTS):
        try:
            return Session(make_sandbox(), limits.cell_timeout, deadline, limits.max_output_chars), ""
        except Exception as exc:  # noqa: BLE001 - any start failure is retried, then reported
            why = f"the kernel did not start: {type(exc).__name__}: {short(exc, 300)}"
            procs.kill_descendants()
            time.sleep(1)
    return None, why


def run_submission(cells: list[str], tests: list[TestCell], make_sandbox: Callable[[], Sandbox],
                   limits: Limits, judge: Callable[[str, Any, Any], None],
                   progress: Callable[[str], None] = lambda s: None, skip: set[int] | None = None,
                   bad_tests: dict[str, str] | None = None, notebook: Notebook | None = None) -> RunResult:
    """Run a submission's code cells, then its tests; `judge(exercise, got, expected)` raises AssertionError.

    With `notebook` (the submission's functions), kernel tests are launched here from the kernel's description.
    """
    start = time.monotonic()
    deadline = start + limits.total_timeout
    skip = set(skip or ())  # student cells that killed or hung the kernel (or the worker)
    bad_tests = dict(bad_tests or {})  # tests whose call did
    result = RunResult([])
    for _attempt in range(MAX_ATTEMPTS):
        result = RunResult([], notes=list(result.notes))
        session, why = _start(make_sandbox, limits, deadline)
        if session is None:
            result.not_graded = why
            break
        try:
            restart = _run_cells(session, cells, skip, result, progress)
            if not restart:
                restart = _run_tests(session, tests, bad_tests, result, judge, progress, notebook)
        finally:
            session.close()
            procs.kill_descendants()
            if session.sandbox.groups is not None:
                session.sandbox.groups.remove()
        if not restart:
            break
    else:
        result.notes.append(f"gave up after {MAX_ATTEMPTS} fresh kernels")
    done = {o.grade_id for o in result.outcomes}
    for t in tests:  # anything never reached scores zero, with the reason
        if t.grade_id not in done and not result.not_graded:
            msg = bad_tests.get(t.grade_id, "not run: the kernel kept dying or the time ran out")
            result.outcomes.append(TestOutcome(t.grade_id, 0.0, t.points, False, msg))
    result.seconds = time.monotonic() - start
    return result


def _run_cells(session: Session, cells: list[str], skip: set[int], result: RunResult,
               progress: Callable[[str], None]) -> bool:
    """Run the student's cells; return True when a cell killed/hung the kernel (restart)."""
    for i, source in enumerate(cells):
        if i in skip:
            result.cell_seconds.append(0.0)
            continue
        progress(f"cell {i}")
        t0 = time.monotonic()
        status, ename, evalue = session.run(source)
        result.cell_seconds.append(time.monotonic() - t0)
        if status == "deadline":
            result.notes.append(f"stopped at code cell {i + 1}: total time limit reached")
            return False
        if session.broken(status):
            skip.add(i)
            why = f"stopped the kernel ({evalue})" if status == "dead" else "hung the kernel (even after an interrupt)"
            over = session.limit_reason()
            if over:
                why = f"went over the sandbox's {session.sandbox.resources.describe(over)} limit and stopped the kernel"
            result.notes.append(f"code cell {i + 1} {why}; it was skipped on a fresh kernel")
            return True
        if status in ("error", "timeout"):
            result.cell_errors.append((i + 1, ename, evalue))
            over = limits.explain(ename, evalue)
            if over:
                result.notes.append(f"code cell {i + 1} hit the sandbox's {session.sandbox.resources.describe(over)} "
                                    f"limit ({ename}); the cells after it still ran")
        printed = session.client.chars.get(len(session.nb.cells) - 1, 0)
        if printed > session.client.max_output_chars:
            result.notes.append(f"code cell {i + 1} printed {printed:,} characters; only the first "
                                f"{session.client.max_output_chars:,} were kept (output truncated)")
    return False


RESET_TIMEOUT_S = 30  # how long the shell reset before the tests may take to answer


def _reset(session: Session) -> str:
    """Undo what the student's code changed in the shell, through user_expressions (no input transformers)."""
    from nbclient.util import ensure_async, run_sync

    kc = session.client.kc
    assert kc is not None

    async def get(timeout: float) -> dict:
        return await ensure_async(kc.shell_channel.get_msg(timeout=timeout))

    expr = f"__import__('helpers.grading.probe', fromlist=['reset']).reset({str(session.client.resources['metadata']['path'])!r})"
    msg_id = kc.execute("", silent=True, store_history=False, user_expressions={"reset": expr})
    limit = time.monotonic() + RESET_TIMEOUT_S
    while time.monotonic() < limit:
        try:
            reply = run_sync(get)(max(1.0, limit - time.monotonic()))
        except queue.Empty:  # the kernel is busy or gone: the tests that follow say which
            break
        if reply.get("parent_header", {}).get("msg_id") == msg_id:
            value = reply["content"].get("user_expressions", {}).get("reset", {})
            return "" if value.get("status") == "ok" else f"{value.get('ename', '')}: {value.get('evalue', '')}"
    return f"no reply in {RESET_TIMEOUT_S} s"


def _case_message(case: TestCase, text: str) -> str:
    """A failure message that names the case (not for a stub: it fails every case alike)."""
    if text.startswith("NotImplementedError") or text.startswith("NameError") or not case.label:
        return text
    return f"case '{case.label}': {text}"


def _ask(session: Session, t: TestCell, run: str | None, case: TestCase) -> tuple[str, Any]:
    """The kernel's answer for `run(fn, *case)`: ('answer', value), or (pass/fail/broken verdict, message)."""
    token = secrets.token_hex(8)
    payload = wire.dumps({"args": tuple(case.args), "kwargs": dict(case.kwargs)})
    code = (f"__import__('helpers.grading.probe', fromlist=['answer']).answer("
            f"{t.function!r}, {run!r}, {payload!r}, {token!r})")
    status, ename, evalue = session.run(code, timeout=case.timeout)
    if session.broken(status):
        over = session.limit_reason()
        if over:
            return "broken", f"went over the sandbox's {session.sandbox.resources.describe(over)} limit"
        return "broken", "killed the kernel" if status == "dead" else "hung the kernel"
    if status == "timeout":
        return "fail", f"your function ran longer than the {case.timeout:.0f} s this case may take"
    if status == "deadline":
        return "fail", "not run: the submission used up its total time limit"
    messages = []
    for text in session.answers():
        try:
            m = wire.loads(json.loads(text) if text.startswith('"') else text)
        except Exception:  # noqa: BLE001 - a malformed answer is no answer
            continue
        if isinstance(m, dict) and m.get("token") == token:
            messages.append(m)
    if not messages:
        why = f" ({ename}: {evalue})" if status == "error" else ""
        return "fail", f"no answer came back from your kernel{why}"
    m = messages[-1]
    kind = m.get("status")
    if kind == "missing":
        return "fail", (f"NameError: {m.get('message')}. The test needs this name: did you rename or delete the "
                        f"function or the cell that defines it?")
    if kind == "todo":
        return "fail", "NotImplementedError: not done yet (the stub was not replaced)"
    if kind != "answer":
        prefix = "your function raised " if kind == "error" else ""
        return "fail", prefix + short(m.get("message", ""))
    return "answer", m.get("answer")


def _judged(judge: Callable[[], None]) -> tuple[str, str]:
    """(pass, '') or (fail, why) of one judgement made here."""
    try:
        judge()
    except (AssertionError, BadAnswer, InputError) as err:
        return "fail", short(err)
    except Exception as exc:  # noqa: BLE001 - a malformed answer fails its case, explained
        return "fail", f"your answer could not be checked ({type(exc).__name__}: {short(exc, 300)})"
    return "pass", ""


def _call(session: Session, t: TestCell, case: TestCase, judge: Callable[[str, Any, Any], None]) -> tuple[str, str]:
    """Ask the kernel for one answer and judge it here; return (verdict, message), verdict pass/fail/broken."""
    kind, got = _ask(session, t, t.run, case)
    if kind != "answer":
        return kind, got
    return _judged(lambda: judge(t.exercise, got, case.expected))


def _kernel_case(session: Session, t: TestCell, case: TestCase, stand: SentKernel,
                 judge: Callable[[str, Any, Any], None]) -> tuple[str, str]:
    """One case of a kernel test, launched here on the grader's inputs from the kernel's vetted description."""
    from instructors.batch.sent_kernels import Notebook
    from helpers.grading.kernel_source import RunsPython

    try:
        got = Notebook.launch(t.exercise, stand, case)
    except RunsPython:  # a device function called from Python: the student's answer, then the helper's
        kind, answer = _ask(session, t, t.run, case)
        if kind != "answer":
            return kind, answer
        return _judged(lambda: Notebook.judge_device(t.exercise, str(t.run), stand, answer, case, judge))
    except (BadAnswer, InputError) as err:
        return "fail", short(err)
    except Exception as exc:  # noqa: BLE001 - the course runner failed on this kernel: said, never a traceback
        return "fail", f"the grader could not launch your kernel ({type(exc).__name__}: {short(exc, 300)})"
    return _judged(lambda: judge(t.exercise, got, case.expected))


def _cases(session: Session, t: TestCell, judge: Callable[[str, Any, Any], None],
           notebook: Notebook | None) -> Iterator[tuple[TestCase, str, str]]:
    """(case, verdict, message) of each case in turn; a kernel test asks the kernel once, for its description."""
    if not (t.kernel and notebook is not None and t.cases):
        for case in t.cases:
            yield (case, *_call(session, t, case, judge))
        return
    from instructors.batch.sent_kernels import DESCRIPTION

    kind, data = _ask(session, t, DESCRIPTION, TestCase("", (), {}, None, t.cases[0].timeout))
    if kind != "answer":
        yield TestCase("", (), {}, None), kind, data
        return
    try:
        stand = notebook.stand_in(data)
    except BadAnswer as err:  # one clear line, for the whole test
        yield TestCase("", (), {}, None), "fail", short(err)
        return
    for case in t.cases:
        yield (case, *_kernel_case(session, t, case, stand, judge))


def _run_tests(session: Session, tests: list[TestCell], bad_tests: dict[str, str], result: RunResult,
               judge: Callable[[str, Any, Any], None], progress: Callable[[str], None],
               notebook: Notebook | None = None) -> bool:
    """Reset the shell, then judge each test; return True when a call killed the kernel (restart)."""
    problem = _reset(session)
    if problem:
        result.notes.append(f"the grading reset did not complete ({short(problem, 200)})")
    for t in tests:
        if t.grade_id in bad_tests:
            result.outcomes.append(TestOutcome(t.grade_id, 0.0, t.points, False, bad_tests[t.grade_id]))
            continue
        progress(f"test {t.grade_id}")
        t0 = time.monotonic()
        verdict, message = "pass", ""
        for case, verdict, message in _cases(session, t, judge, notebook):
            if verdict == "broken":
                bad_tests[t.grade_id] = f"this test {message} while calling your code"
                return True
            if verdict == "fail":
                message = _case_message(case, message)
                break
        ok = verdict == "pass"
        result.outcomes.append(TestOutcome(t.grade_id, t.points if ok else 0.0, t.points, ok,
                                           "passed" if ok else message, time.monotonic() - t0))
    return False
