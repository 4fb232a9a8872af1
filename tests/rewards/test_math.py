from __future__ import annotations

import concurrent.futures
import logging
import signal
import threading
import time
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import rewards.math as math_module
from rewards import (
    MathVerdict,
    RewardComputationError,
    RewardConfigError,
    RewardResult,
    math_equivalence_reward,
    math_equivalent,
    math_verdict,
)
from rewards.timelimit import WorkerDied, WorkerTimedOut
from tasks.records import Task, Trajectory, Turn

# (prediction, gold) pairs that mean the same. Every one must pass through the full verifier and
# through the sympy fallback alone, and all but FALLBACK_ONLY through math-verify alone.
EQUIVALENT = [
    ("1/2", "0.5"),  # fraction against decimal
    (r"\frac{1}{2}", "2/4"),  # LaTeX fraction against an unreduced plain one
    ("3/7", r"\frac{3}{7}"),  # plain against LaTeX
    (r"\dfrac{3}{7}", "3/7"),  # display-style fraction
    (r"\frac12", "0.5"),  # brace-less LaTeX fraction
    (r"2\sqrt{3}", r"\sqrt{12}"),  # simplified surd
    ("sqrt(12)", r"2\sqrt{3}"),  # plain-text sqrt
    ("2*sqrt(3)", "sqrt(12)"),  # explicit product
    (r"\sqrt[3]{8}", "2"),  # n-th root
    ("x = 5", "5"),  # an assignment against its value
    ("5", "x=5"),  # and the other way round
    (r"\boxed{5}", "5"),  # boxed answer
    (r"The answer is $\boxed{3}$.", "3"),  # boxed inside a sentence
    ("$-4$", "-4"),  # math delimiters
    (r"The answer is $\frac{1}{2}$.", "0.5"),  # a prose prefix, delimiters and a full stop
    ("0.333333333333", "1/3"),  # a decimal within 1e-9 relative
    ("2", "2.0000000001"),  # relative tolerance
    ("1e9", "1000000000"),  # scientific notation (math-verify alone reads 1*e*9)
    ("1.5e-3", "0.0015"),  # negative exponent
    (r"\pi", "3.14159265358979"),  # a constant against its decimal
    ("[1, 3)", "[1,3)"),  # half-open interval, spacing
    (r"(-\infty,2]", "x <= 2"),  # interval against an inequality
    (r"x \le 2", r"(-\infty, 2]"),  # inequality against an interval
    ("(-oo, 2]", r"(-\infty,2]"),  # sympy's oo (math-verify alone reads -o*o)
    ("1 < x < 3", "(1,3)"),  # chained inequality
    ("x > 2", r"(2, \infty)"),  # unbounded interval
    (r"[1,3) \cup (4,5]", r"(4,5]\cup[1,3)"),  # a union in another order
    (r"\{1,2\}", r"\{2,1\}"),  # sets ignore order
    ("1,2", "2, 1"),  # a list of solutions is a set
    ("(1, 2)", "(1,2)"),  # a pair
    ("(1,2,3)", "(1,2,3)"),  # a triple
    ("x+1", "1+x"),  # symbolic, commuted
    ("(x+1)^2", "x^2+2x+1"),  # symbolic, expanded
]

# Pairs that must NOT pass, through the full verifier or either path alone.
NOT_EQUIVALENT = [
    ("3", "4"),  # different numbers
    ("-3", "3"),  # sign
    ("[1,3)", "[1,3]"),  # open and closed ends differ
    (r"[1,3) \cup (4,5]", r"[1,3)\cup[4,5]"),  # one end of a union differs
    ("the answer is 3 or 4", "3"),  # two answers at once
    ("3 or 4", "3"),  # two answers at once
    ("3, 4", "3"),  # a list of answers against one
    (r"\{3, 4\}", "3"),  # a set against one of its elements
    ("3 4", "7"),  # math-verify alone reads juxtaposed numbers as their sum
    (r"\boxed{3} \boxed{4}", "3"),  # two boxed answers
    ("$3$ or $4$", "3"),  # two math spans
    ("3$ 4", "3"),  # math-verify alone would read only the first span
    ("", "0"),  # empty prediction
    ("   ", "0"),  # blank prediction
    ("0.3333", "1/3"),  # too coarse a decimal
    ("0.50000001", "0.5"),  # outside the relative tolerance
    ("2", "2.00001"),  # outside the relative tolerance
    (r"\pi", "3.14"),  # a rounded constant
    ("(1,2)", "(2,1)"),  # ordered pairs
    ("(1,2,3)", "(1,3,2)"),  # ordered triples
    ("y=5", "x=5"),  # different variables
    ("x^2+1", "x^2+2"),  # different expressions
    ("[3, 1]", "[5, 2]"),  # reversed intervals are not both "empty"
    ("abc", "xyz"),  # different symbols
    ("9^{9^{9}}", "1"),  # a power tower is rejected, not evaluated
    ("__import__('os').system('true')", "0"),  # code is never evaluated
    ("x.__class__", "x"),  # nor is attribute access
]


# Equivalent pairs that math-verify alone gets wrong: the sympy fallback is what makes them pass.
FALLBACK_ONLY = {
    ("2", "2.0000000001"),  # math-verify rounds floats to 12 decimals instead of a relative tolerance
    ("1e9", "1000000000"),  # math-verify reads 1e9 as 1*e*9
    ("1.5e-3", "0.0015"),
    ("(-oo, 2]", r"(-\infty,2]"),  # math-verify reads oo as o*o
}
PATHS = ("full", "math_verify_only", "sympy_only")


def decide(path: str, prediction: str, gold: str, monkeypatch: pytest.MonkeyPatch) -> bool:
    """The verdict of the whole verifier (in its worker process), or of one of its two paths alone.

    A path is disabled by patching this process's module, which a worker process does not see, so
    the one-path verdicts come from the same comparison run here, without the time limit.
    """
    if path == "full":
        return math_equivalent(prediction, gold)
    if path == "math_verify_only":
        monkeypatch.setattr(math_module, "_sympy_equal", lambda predicted, reference: False)
    if path == "sympy_only":
        monkeypatch.setattr(math_module, "_math_verify_equal", lambda predicted, reference: False)
    return math_module._compare(prediction, gold)


@pytest.mark.parametrize(
    ("prediction", "gold", "path"),
    [
        (prediction, gold, path)
        for prediction, gold in EQUIVALENT
        for path in PATHS
        if not (path == "math_verify_only" and (prediction, gold) in FALLBACK_ONLY)
    ],
)
def test_equivalent_pairs(prediction: str, gold: str, path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    assert decide(path, prediction, gold, monkeypatch) is True


@pytest.mark.parametrize(("prediction", "gold"), sorted(FALLBACK_ONLY))
def test_fallback_only_pairs_really_need_the_fallback(
    prediction: str, gold: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # if math-verify learns these forms, FALLBACK_ONLY (and the report of its quirks) is stale
    assert decide("math_verify_only", prediction, gold, monkeypatch) is False


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize(("prediction", "gold"), NOT_EQUIVALENT)
def test_not_equivalent_pairs(prediction: str, gold: str, path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    assert decide(path, prediction, gold, monkeypatch) is False


@pytest.mark.parametrize(
    ("prediction", "gold"),
    [
        ("1,000", "1000"),  # thousands separator
        (r"50\%", "0.5"),  # percent
        (r"\left[1, 3\right)", "[1,3)"),  # sized delimiters
        (r"\frac{\sqrt{2}}{2}", r"\frac{1}{\sqrt{2}}"),  # rationalized denominator
    ],
)
def test_forms_only_math_verify_reads(prediction: str, gold: str) -> None:
    assert math_equivalent(prediction, gold) is True


@pytest.mark.parametrize(
    "garbage",
    [
        None,  # not a string at all
        12,  # a number instead of a string
        "}{",  # unbalanced braces
        r"\boxed{3",  # unclosed box
        r"\frac{1}",  # missing denominator
        "((((((((",  # unbalanced parentheses
        "1/0",  # division by zero
        "x" * (math_module.MAX_ANSWER_CHARS + 1),  # oversized
    ],
)
def test_garbage_is_not_equivalent(garbage: object) -> None:
    assert math_equivalent(garbage, "1") is False  # type: ignore[arg-type]


@settings(max_examples=150, deadline=None)
@given(st.text(alphabet="0123456789+-*/^()[]{}\\,.=<> xe$!", max_size=30))
def test_never_raises_on_math_like_noise(text: str) -> None:
    assert math_equivalent(text, "1") in (True, False)


def test_oversized_input_is_rejected_quickly() -> None:
    start = time.perf_counter()
    assert math_equivalent("1" * 100_000, "1" * 100_000) is False
    assert time.perf_counter() - start < 0.5


# Answers that pass every cheap guard and then keep sympy busy for far longer than any limit: only
# the worker process's wall-clock limit stops them.
HANGING = [
    "(10^{99})!",  # the factorial of a huge number, computed exactly
    r"\binom{10^{50}}{10^{25}}",  # a huge binomial coefficient
    r"\Gamma(10^{30})",  # the gamma function of a huge number
    "(x+1)^{9999}",  # a huge polynomial, expanded
]
LIMIT_S = 1.0
BOUND_S = 30.0  # generous: the call must return, not be fast on a loaded CI machine


@pytest.mark.parametrize("answer", HANGING)
def test_hanging_answer_is_cut_in_a_worker_thread(answer: str) -> None:
    # the case that used to run unbounded: a verifier called off the main thread
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        start = time.perf_counter()
        verdict = pool.submit(math_verdict, answer, "1", timeout_s=LIMIT_S).result(timeout=BOUND_S)
    assert time.perf_counter() - start < BOUND_S
    assert verdict == MathVerdict(equivalent=False, timed_out=True)


def test_hanging_answer_is_cut_in_the_main_thread() -> None:
    start = time.perf_counter()
    assert math_equivalent(HANGING[0], "1", timeout_s=LIMIT_S) is False
    assert time.perf_counter() - start < BOUND_S


def test_verifier_works_again_after_a_timeout() -> None:
    # the killed worker is replaced
    assert math_verdict(HANGING[0], "1", timeout_s=LIMIT_S).timed_out
    assert math_verdict("1/2", "0.5", timeout_s=LIMIT_S) == MathVerdict(equivalent=True)


def test_an_armed_outer_timer_is_left_alone() -> None:
    # the limit never touches the caller's SIGALRM timer or handler
    def outer_handler(signum: int, frame: object) -> None:
        raise AssertionError("the outer timer must not fire during the test")

    previous = signal.signal(signal.SIGALRM, outer_handler)
    signal.setitimer(signal.ITIMER_REAL, 60.0)
    try:
        assert math_verdict(HANGING[0], "1", timeout_s=0.2).timed_out
        assert signal.getsignal(signal.SIGALRM) is outer_handler
        assert signal.getitimer(signal.ITIMER_REAL)[0] > 30.0
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@pytest.fixture
def fresh_workers(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Verifier workers started inside the test, so that their output is captured by it."""
    monkeypatch.setattr(math_module, "_pool", None)
    yield
    if math_module._pool is not None:
        math_module._pool.close()


def test_no_timeout_notice_from_a_thread(
    fresh_workers: None,
    capfd: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # math-verify logs "Timeout is disabled" once per process when its signal timeouts are off;
    # the worker drops that notice, and this process never runs math-verify
    monkeypatch.setattr(math_module, "TIMEOUT_S", LIMIT_S)
    values: list[float] = []

    def score() -> None:
        for answer in (r"\frac{3}{7}", "4/7", "x = 3/7", HANGING[0]):
            values.append(math_equivalence_reward(make_task("3/7"), answered(answer), {}).value)

    caplog.set_level(logging.DEBUG)
    thread = threading.Thread(target=score)
    thread.start()
    thread.join(timeout=60)
    out, err = capfd.readouterr()
    assert values == [1.0, 0.0, 1.0, 0.0]
    assert "Timeout is disabled" not in out + err + caplog.text


@pytest.mark.parametrize(
    ("outcome", "verdict"),
    [
        (True, MathVerdict(equivalent=True)),  # the comparison finished: equal
        (False, MathVerdict(equivalent=False)),  # the comparison finished: different
        (WorkerTimedOut("slow"), MathVerdict(equivalent=False, timed_out=True)),  # cut at the limit
        (WorkerDied("killed"), MathVerdict(equivalent=False, crashed=True)),  # e.g. the OOM killer
    ],
)
def test_verdict_says_how_the_comparison_ended(
    outcome: object, verdict: MathVerdict, monkeypatch: pytest.MonkeyPatch
) -> None:
    class Workers:
        def call(self, fn: str, args: list[str], *, timeout_s: float) -> object:
            if isinstance(outcome, Exception):
                raise outcome
            return outcome

    monkeypatch.setattr(math_module, "_workers", Workers)
    assert math_verdict("1", "1") == verdict


def test_worker_error_is_not_a_silent_zero(monkeypatch: pytest.MonkeyPatch) -> None:
    # a bug in the comparison surfaces (the composite names the term) instead of scoring 0
    class Workers:
        def call(self, fn: str, args: list[str], *, timeout_s: float) -> object:
            raise RuntimeError("expected a result from rewards.math:_compare_in_worker, got TypeError: boom")

    monkeypatch.setattr(math_module, "_workers", Workers)
    with pytest.raises(RuntimeError, match="boom"):
        math_verdict("1", "1")


@pytest.mark.parametrize("timeout_s", [0, -1.0, float("nan"), float("inf")])
def test_bad_timeout_is_a_config_error(timeout_s: float) -> None:
    with pytest.raises(RewardConfigError, match="timeout_s"):
        math_equivalent("1", "1", timeout_s=timeout_s)


def make_task(answer: object) -> Task:
    return Task(id="math/0", env="PythonSandbox", family="math", prompt="Compute.", answer=answer)


def answered(answer: str) -> Trajectory:
    return Trajectory((Turn(action=f"<answer>{answer}</answer>", observation="", answer=answer),))


@pytest.mark.parametrize(
    ("gold", "trajectory", "value", "timed_out"),
    [
        # an equivalent final answer
        (r"\frac{3}{7}", answered("3/7"), 1.0, 0.0),
        # a wrong one
        ("3/7", answered("4/7"), 0.0, 0.0),
        # no final answer
        ("3/7", Trajectory(), 0.0, 0.0),
        # a numeric gold answer is compared through its text
        (42, answered("42"), 1.0, 0.0),
        # an answer that hangs the verifier is wrong, and the component says it was cut
        ("3/7", answered(HANGING[0]), 0.0, 1.0),
    ],
)
def test_math_equivalence_reward(
    gold: object, trajectory: Trajectory, value: float, timed_out: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(math_module, "TIMEOUT_S", LIMIT_S)
    result = math_equivalence_reward(make_task(gold), trajectory, {})
    assert result == RewardResult(value, {"verifier_timeout": timed_out, "verifier_crash": 0.0})


@pytest.mark.parametrize("gold", [None, ["1", "2"], True])
def test_math_equivalence_reward_needs_a_string_gold(gold: object) -> None:
    with pytest.raises(RewardComputationError, match="math/0"):
        math_equivalence_reward(make_task(gold), answered("1"), {})
