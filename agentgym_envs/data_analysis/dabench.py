"""DataAnalysis-v0's episodes scored as InfiAgent-DABench scores its responses.

On tasks made from DABench's files (``python -m tasks.data_analysis dabench``), each episode's final answer is a
DABench response; :func:`benchmark_metrics` gives DABench's ABQ, PSAQ and UASQ, per concept and per number of
concepts (:mod:`tasks.data_analysis.dabench_eval`), for ``benchmarks.evaluate`` (through the spec's
``benchmark_metrics``) and ``benchmarks.dabench``. An episode an infrastructure fault ended gives no response:
DABench leaves a question without one out of its denominators, and the metrics count it as unanswered.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from agentgym_envs.runner import Episode
from agentgym_envs.spec import BenchmarkMetrics
from tasks.data_analysis.dabench_eval import metrics_lines, score_tasks, task_responses
from tasks.records import Task


def dabench_responses(tasks: Sequence[Task], episodes: Sequence[Episode]) -> list[dict[str, Any]]:
    """DABench responses (``id``, ``response``) of the episodes no infrastructure fault ended, in play order."""
    answers = [(episode.task_id, episode.trajectory.final_answer if episode.trajectory else None)
               for episode in episodes if not episode.infra_error]
    return task_responses(tasks, answers)


def benchmark_metrics(tasks: Sequence[Task], episodes: Sequence[Episode]) -> BenchmarkMetrics | None:
    """DABench's metrics of ``episodes`` on ``tasks``; None when no task was made from DABench's files."""
    if not any("dabench_id" in task.metadata for task in tasks):
        return None
    metrics = score_tasks(tasks, dabench_responses(tasks, episodes))
    return BenchmarkMetrics("DABench", asdict(metrics), tuple(metrics_lines(metrics)))
