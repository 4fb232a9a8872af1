from __future__ import annotations

import concurrent.futures
import json
import signal
import time
from collections.abc import Iterator
from typing import Any

import pytest

from rewards import RewardConfigError, VerifierUnavailableError
from rewards.timelimit import TimeLimitedWorkers, WorkerDied, WorkerTimedOut, _Worker
from tasks.errors import InfrastructureError

BOUND_S = 30.0  # generous: a call must return, not be fast on a loaded CI machine


@pytest.fixture
def workers() -> Iterator[TimeLimitedWorkers]:
    pool = TimeLimitedWorkers(max_workers=2)
    yield pool
    pool.close()


@pytest.mark.parametrize(
    ("fn", "args", "result"),
    [
        ("math:factorial", [5], 120),  # a plain call
        ("builtins:sorted", [[3, 1, 2]], [1, 2, 3]),  # JSON lists go both ways
        ("builtins:print", ["stray output"], None),  # a print goes to stderr, not into the replies
    ],
)
def test_call_returns_the_result(workers: TimeLimitedWorkers, fn: str, args: list[Any], result: Any) -> None:
    assert workers.call(fn, args, timeout_s=BOUND_S) == result


def test_a_call_past_its_limit_is_killed_and_the_worker_replaced(workers: TimeLimitedWorkers) -> None:
    start = time.perf_counter()
    with pytest.raises(WorkerTimedOut):
        workers.call("time:sleep", [60], timeout_s=0.5)
    assert time.perf_counter() - start < BOUND_S
    assert workers.size == 0  # killed, not kept
    assert workers.call("math:factorial", [3], timeout_s=BOUND_S) == 6


def test_a_call_that_raises_is_an_error_with_its_message(workers: TimeLimitedWorkers) -> None:
    with pytest.raises(RuntimeError, match=r"expected a result from math:sqrt .* got ValueError: math domain error"):
        workers.call("math:sqrt", [-1], timeout_s=BOUND_S)
    assert workers.size == 1  # the worker is fine and kept


def test_a_worker_that_exits_mid_call_is_reported(workers: TimeLimitedWorkers) -> None:
    with pytest.raises(WorkerDied, match="exit code 3"):
        workers.call("os:_exit", [3], timeout_s=BOUND_S)
    assert workers.call("math:factorial", [4], timeout_s=BOUND_S) == 24


def test_concurrent_calls_share_at_most_max_workers(workers: TimeLimitedWorkers) -> None:
    with concurrent.futures.ThreadPoolExecutor(max_workers=6) as pool:
        results = list(pool.map(lambda n: workers.call("math:factorial", [n], timeout_s=BOUND_S), range(12)))
    assert results == [1, 1, 2, 6, 24, 120, 720, 5040, 40320, 362880, 3628800, 39916800]
    assert 1 <= workers.size <= workers.max_workers


def test_worker_that_cannot_start_is_an_infrastructure_error() -> None:
    pool = TimeLimitedWorkers(max_workers=1, preload=["no_such_module_for_agentrl_tests"])
    with pytest.raises(VerifierUnavailableError, match="expected a verifier worker to import") as caught:
        pool.call("math:factorial", [3], timeout_s=BOUND_S)
    assert isinstance(caught.value, InfrastructureError)
    assert pool.size == 0


def test_orphaned_worker_ends_itself_at_the_backstop() -> None:
    # should its parent die without killing it, a worker stuck in a call must not spin for ever
    worker = _Worker.start((), startup_timeout_s=BOUND_S)
    stdin = worker.process.stdin
    assert stdin is not None
    stdin.write(json.dumps({"fn": "time:sleep", "args": [60], "backstop_s": 0.5}).encode() + b"\n")
    stdin.flush()
    try:
        assert worker.process.wait(timeout=BOUND_S) == -signal.SIGALRM
    finally:
        worker.kill()


@pytest.mark.parametrize(
    "kwargs",
    [
        {"max_workers": 0},  # no worker at all
        {"max_workers": True},  # a bool is not a count
        {"max_workers": 1, "startup_timeout_s": 0},  # no time to start
    ],
)
def test_bad_pool_configuration_is_rejected(kwargs: dict[str, Any]) -> None:
    with pytest.raises(RewardConfigError, match="expected"):
        TimeLimitedWorkers(**kwargs)


@pytest.mark.parametrize("timeout_s", [0, -1.0, float("nan"), float("inf")])
def test_bad_call_limit_is_rejected(workers: TimeLimitedWorkers, timeout_s: float) -> None:
    with pytest.raises(RewardConfigError, match="timeout_s"):
        workers.call("math:factorial", [3], timeout_s=timeout_s)
