"""Command line: make DataAnalysis tasks from a seed or from DABench's files, and score responses as DABench does.

Usage::

    python -m tasks.data_analysis generate --seed 7 --theme flights --dirtiness 2 --count 18 --out runs/da-7
    python -m tasks.data_analysis dabench --questions da-dev-questions.jsonl --labels da-dev-labels.jsonl \\
        --data-dir da-dev-tables --out runs/dabench/tasks.jsonl
    python -m tasks.data_analysis score --questions da-dev-questions.jsonl --labels da-dev-labels.jsonl \\
        --responses responses.jsonl

``generate`` writes ``<out>/data/<files>`` and ``<out>/tasks.jsonl``; ``dabench`` writes the file
``--out`` and names every question it dropped or flagged. Read either with :func:`tasks.read_tasks` and pass
the tasks to the env as ``tasks=``. ``score`` prints DABench's ABQ, PSAQ and UASQ, per concept and per number
of concepts, of a responses file in DABench's format (JSONL of ``id`` and ``response``), computed by
:mod:`tasks.data_analysis.dabench_eval` exactly as DABench's ``eval_closed_form.py`` does; ``--json`` writes
them to a file too.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from tasks.data_analysis.dabench import DabenchLoad, QuestionNote, read_dabench
from tasks.data_analysis.dabench_eval import DabenchMetrics, metrics_lines, score_responses
from tasks.data_analysis.datasets import DIRTINESS_LEVELS, THEMES
from tasks.data_analysis.generate import generate_tasks
from tasks.data_analysis.questions import FAMILIES
from tasks.errors import TaskError
from tasks.records import Task


def _write(tasks: Sequence[Task], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(task.to_json() + "\n" for task in tasks), encoding="utf-8")
    print(f"wrote {len(tasks)} tasks to {path}")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m tasks.data_analysis", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    generate = commands.add_parser("generate", help="a seeded dataset and audited questions about it")
    generate.add_argument("--seed", type=int, required=True, help="seed of the dataset and questions")
    generate.add_argument("--theme", choices=sorted(THEMES), default="retail", help="what the tables are about")
    generate.add_argument("--dirtiness", type=int, choices=DIRTINESS_LEVELS, default=1, help="0 clean .. 3 dirtiest")
    generate.add_argument("--count", type=int, default=len(FAMILIES), help="number of tasks")
    generate.add_argument("--family", action="append", choices=FAMILIES, help="only these families (repeatable)")
    generate.add_argument("--out", type=Path, required=True, help="folder for data/ and tasks.jsonl")
    dabench = commands.add_parser("dabench", help="InfiAgent-DABench's questions, labels and CSV folder")
    dabench.add_argument("--questions", type=Path, required=True, help="questions JSONL file")
    dabench.add_argument("--labels", type=Path, required=True, help="labels JSONL file")
    dabench.add_argument("--data-dir", type=Path, required=True, help="folder of the CSV files")
    dabench.add_argument("--skip-missing", action="store_true", help="leave out questions without file or label")
    dabench.add_argument("--skip-broken", action="store_true",
                         help="leave out questions whose label DABench broke (kept and flagged otherwise)")
    dabench.add_argument("--out", type=Path, required=True, help="tasks JSONL file to write")
    score = commands.add_parser("score", help="DABench's metrics of a responses file, by DABench's own rules")
    score.add_argument("--questions", type=Path, required=True, help="questions JSONL file (for the concepts)")
    score.add_argument("--labels", type=Path, required=True, help="labels JSONL file")
    score.add_argument("--responses", type=Path, required=True, help="responses JSONL file (id, response)")
    score.add_argument("--json", type=Path, help="also write the metrics to this JSON file")
    return parser


def _print_notes(title: str, notes: Sequence[QuestionNote]) -> None:
    if notes:
        print(f"{title} ({len(notes)}):")
        for note in notes:
            print(f"  {note}")


def _load(args: argparse.Namespace) -> DabenchLoad:
    loaded = read_dabench(args.questions, args.labels, args.data_dir, skip_missing=args.skip_missing,
                          skip_broken=args.skip_broken)
    _print_notes("dropped", loaded.dropped)
    _print_notes("kept, but DABench's label is broken (--skip-broken drops them)", loaded.flagged)
    return loaded


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    with open(path, encoding="utf-8") as lines:
        return [json.loads(line) for line in lines if line.strip()]


def _score(args: argparse.Namespace) -> DabenchMetrics:
    concepts = {record["id"]: record["concepts"] for record in _read_jsonl(args.questions)}
    metrics = score_responses(_read_jsonl(args.labels), _read_jsonl(args.responses), concepts)
    print("\n".join(metrics_lines(metrics)))
    if args.json:
        args.json.write_text(json.dumps(asdict(metrics), indent=2) + "\n", encoding="utf-8")
    return metrics


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point; returns the exit status (2 on a task error, with its message)."""
    args = _parser().parse_args(argv)
    try:
        if args.command == "generate":
            tasks = generate_tasks(args.seed, folder=args.out, theme=args.theme, dirtiness=args.dirtiness,
                                   count=args.count, families=tuple(args.family or FAMILIES))
            _write(tasks, args.out / "tasks.jsonl")
        elif args.command == "dabench":
            _write(_load(args).tasks, args.out)
        else:
            _score(args)
    except TaskError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
