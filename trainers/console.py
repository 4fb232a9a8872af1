"""What the main job shows on the console while its seeds train, and where everything else goes.

The seeds' runs send :class:`SeedEvent` objects (phase, step, latest loss and reward, or an alert of the
rollout monitor); the parent turns them into one live table, a row per seed (:class:`SeedDisplay`), or,
when stdout is not a terminal (CI, a log file), into one plain line per phase change per seed and a
progress line about every minute; alerts always print as lines. What a seed's run prints itself (TRL's
log dictionaries, bars, warnings) goes to a file in its output directory (:func:`output_to`), and the
trainers' log dictionaries to a JSON-lines file (:class:`TrainerLogFile`).

Example:
    >>> board = SeedBoard([0], clock=lambda: 0.0)
    >>> board.update(SeedEvent(0, "SFT", 0, 300))
    '[     0s] seed 0: SFT, 300 steps'
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, redirect_stderr, redirect_stdout
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple, Protocol, TextIO

from rich.console import Console
from rich.live import Live
from rich.table import Table
from transformers import TrainerCallback

DONE = "done"
"""The phase a seed's run reports last."""
PROGRESS_EVERY_S = 60.0
"""Off a terminal, seconds between two progress lines of one seed within one phase."""
SHOWN_METRICS = ("loss", "reward")
"""The entries of a trainer's log dictionary the display shows (when the trainer logs them)."""


class Report(Protocol):
    """Progress of one seed's run: ``report(phase, steps done, steps in all or None, latest metrics or None)``;
    ``report(..., alert=message)`` passes on an alert of the run's monitor (the other arguments are ignored)."""

    def __call__(self, phase: str, done: int, total: int | None,
                 metrics: Mapping[str, float] | None = None, *, alert: str | None = None) -> None: ...


class SeedEvent(NamedTuple):
    """One progress report of one seed's run, as a worker sends it to the parent (or an alert of its monitor)."""

    seed: int
    phase: str
    done: int
    total: int | None
    metrics: Mapping[str, float] | None = None
    alert: str | None = None


@dataclass
class SeedStatus:
    """Where one seed's run stands."""

    phase: str = "waiting"
    done: int = 0
    total: int | None = None
    since: float = 0.0
    """When the phase began (the board's clock)."""
    metrics: dict[str, float] = field(default_factory=dict)
    """Latest value of each shown metric, over all phases."""
    phase_metrics: dict[str, float] = field(default_factory=dict)
    """Latest value of each shown metric in the current phase."""
    last_line: float = 0.0
    """When the last plain line about this seed was made (the board's clock)."""


class SeedBoard:
    """Every seed's :class:`SeedStatus`, updated from :class:`SeedEvent` objects; renders rows and lines.

    Args:
        seeds: The seeds, in the order of the rows.
        clock: Seconds, for the elapsed times (a fake one in tests).
        progress_every_s: Seconds after a seed's last plain line when a step of the same phase makes another.
    """

    def __init__(self, seeds: Sequence[int], clock: Callable[[], float] = time.monotonic,
                 progress_every_s: float = PROGRESS_EVERY_S) -> None:
        self.clock = clock
        self.progress_every_s = progress_every_s
        self.started = clock()
        self.status = {seed: SeedStatus(since=self.started, last_line=self.started) for seed in seeds}

    def update(self, event: SeedEvent) -> str | None:
        """Apply ``event``; returns the plain line that announces a new phase, or reports a phase's progress
        when ``progress_every_s`` have passed since the seed's last line, or shows an alert, else None."""
        status, now = self.status[event.seed], self.clock()
        if event.alert is not None:
            return f"[{now - self.started:7.0f}s] seed {event.seed}: {event.alert}"
        line = None
        if event.phase != status.phase:
            line = self._phase_line(event, status, now)
            status.phase, status.since, status.phase_metrics = event.phase, now, {}
        status.done, status.total = event.done, event.total
        status.metrics.update(event.metrics or {})
        status.phase_metrics.update(event.metrics or {})
        if line is None and event.total is not None and now - status.last_line >= self.progress_every_s:
            line = self._progress_line(event.seed, status, now)
        if line is not None:
            status.last_line = now
        return line

    def _progress_line(self, seed: int, status: SeedStatus, now: float) -> str:
        """``[elapsed] seed k: <phase>, done/total steps[, metrics], <time in phase>``."""
        shown = [f"{status.done}/{status.total} steps", *_metric_texts(status.phase_metrics),
                 f"{now - status.since:.0f}s"]
        return f"[{now - self.started:7.0f}s] seed {seed}: {status.phase}, {', '.join(shown)}"

    def _phase_line(self, event: SeedEvent, previous: SeedStatus, now: float) -> str:
        """``[elapsed] seed k: <new phase>[, N steps][ (<phase that ended>: done/total steps, metrics, time)]``."""
        line = f"[{now - self.started:7.0f}s] seed {event.seed}: {event.phase}"
        if event.total is not None and event.phase != DONE:
            line += f", {event.total} steps"
        if previous.total is not None and previous.phase != DONE:
            ended = [f"{previous.done}/{previous.total} steps", *_metric_texts(previous.phase_metrics),
                     f"{now - previous.since:.0f}s"]
            line += f" ({previous.phase}: {', '.join(ended)})"
        return line

    def rows(self) -> list[tuple[str, str, str, str, str, str]]:
        """Per seed: seed, phase, step x/y (blank outside training), latest loss, latest reward, time in phase."""
        now = self.clock()
        return [(str(seed), status.phase, _steps(status), _number(status.metrics.get("loss")),
                 _number(status.metrics.get("reward")), f"{now - status.since:.0f}s")
                for seed, status in self.status.items()]

    def table(self) -> Table:
        """The rows as a rich table."""
        table = Table(title=f"Seeds ({self.clock() - self.started:.0f}s)")
        for column in ("seed", "phase", "step", "loss", "reward", "in phase"):
            table.add_column(column, justify="left" if column == "phase" else "right")
        for row in self.rows():
            table.add_row(*row)
        return table


def _steps(status: SeedStatus) -> str:
    return f"{status.done}/{status.total}" if status.total is not None and status.phase != DONE else ""


def _number(value: float | None) -> str:
    return "" if value is None else f"{value:.4g}"


def _metric_texts(metrics: Mapping[str, float]) -> list[str]:
    return [f"{name} {metrics[name]:.4g}" for name in SHOWN_METRICS if name in metrics]


class SeedDisplay:
    """The seeds' progress on ``console``: a live table on a terminal; elsewhere one line per phase change, and
    one per seed about every :data:`PROGRESS_EVERY_S` seconds within a phase.

    Use it as a context manager and feed it with :meth:`update`.

    Args:
        seeds: The seeds, in the order of the rows.
        console: Where it is shown; whether it is a terminal picks the table or the lines.
        clock: Seconds, for the elapsed times.
    """

    def __init__(self, seeds: Sequence[int], console: Console, clock: Callable[[], float] = time.monotonic) -> None:
        self.board = SeedBoard(seeds, clock)
        self.console = console
        self.live = Live(console=console, get_renderable=self.board.table, refresh_per_second=2,
                         redirect_stdout=False, redirect_stderr=False) if console.is_terminal else None

    def __enter__(self) -> SeedDisplay:
        if self.live is not None:
            self.live.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self.live is not None:
            self.live.stop()

    def phase(self, seed: int) -> str:
        """The phase ``seed``'s run is in."""
        return self.board.status[seed].phase

    def update(self, event: SeedEvent) -> None:
        """Show ``event``: in the table (redrawn twice a second), or as a line when it begins a new phase or a
        progress line is due; an alert always as a line."""
        line = self.board.update(event)
        if line is not None and (self.live is None or event.alert is not None):  # alerts print above the table
            self.console.print(line, markup=False, highlight=False, soft_wrap=True)
            self.console.file.flush()


class AlertForwarder(logging.Handler):
    """Passes each warning a logger emits (the rollout monitor's alerts) on to ``report`` as an alert."""

    def __init__(self, report: Report) -> None:
        super().__init__(logging.WARNING)
        self.report = report

    def emit(self, record: logging.LogRecord) -> None:
        self.report("", 0, None, alert=record.getMessage())


@contextmanager
def alerts_to(report: Report, logger_name: str = "trainers.monitoring") -> Iterator[None]:
    """Inside the block, the warnings of ``logger_name`` also go to ``report`` (see :class:`AlertForwarder`)."""
    handler = AlertForwarder(report)
    logger = logging.getLogger(logger_name)
    logger.addHandler(handler)
    try:
        yield
    finally:
        logger.removeHandler(handler)


@contextmanager
def stdout_copy() -> Iterator[TextIO]:
    """A stream to where this process's stdout goes now, which :func:`output_to` does not redirect."""
    sys.stdout.flush()
    stream = os.fdopen(os.dup(sys.stdout.fileno()), "w", buffering=1, encoding=sys.stdout.encoding)
    try:
        yield stream
    finally:
        stream.close()


@contextmanager
def output_to(path: Path) -> Iterator[None]:
    """Inside the block, everything this process writes to stdout and stderr goes to ``path`` (overwritten).

    Both ``sys.stdout``/``sys.stderr`` and the file descriptors behind them are redirected, so Python's
    streams (even when something has replaced them), logging handlers bound to the old ones, C code and
    child processes all write there.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    streams = (sys.stdout, sys.stderr)
    for stream in streams:
        stream.flush()
    saved = {fd: os.dup(fd) for fd in (1, 2)}
    with path.open("w", buffering=1) as log, redirect_stdout(log), redirect_stderr(log):
        try:
            for fd in saved:
                os.dup2(log.fileno(), fd)
            yield
        finally:
            for stream in streams:  # what was written to the streams this replaced goes to the log too
                stream.flush()
            for fd, copy in saved.items():
                os.dup2(copy, fd)
                os.close(copy)


class TrainerLogFile(TrainerCallback):
    """Writes each log dictionary of a trainer (TRL's per-step loss, reward, ...) to ``path`` as a JSON line.

    The file is started afresh when training begins; each line is the dictionary with the optimizer step
    (``"step"``) added.
    """

    def __init__(self, path: Path) -> None:
        self.path = path

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text("")

    def on_log(self, args: Any, state: Any, control: Any, logs: Mapping[str, Any] | None = None,
               **kwargs: Any) -> None:
        with self.path.open("a") as file:
            file.write(json.dumps({"step": state.global_step, **(logs or {})}, default=str) + "\n")


class StepReporter(TrainerCallback):
    """Sends a trainer's progress to ``report``: its start, each optimizer step, the shown metrics it logs."""

    def __init__(self, report: Report, phase: str) -> None:
        self.report, self.phase = report, phase

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.report(self.phase, state.global_step, state.max_steps)

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.report(self.phase, state.global_step, state.max_steps)

    def on_log(self, args: Any, state: Any, control: Any, logs: Mapping[str, Any] | None = None,
               **kwargs: Any) -> None:
        metrics = {name: float(logs[name]) for name in SHOWN_METRICS if logs and name in logs}
        if metrics:
            self.report(self.phase, state.global_step, state.max_steps, metrics)
