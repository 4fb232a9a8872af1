"""The bundled DataAnalysis benchmark: generated datasets and their train/dev/test questions.

Files live in ``tasks/data/data_analysis/``: ``datasets.jsonl`` (one :meth:`Dataset.to_dict` a
line, the canonical form of every bundled dataset), ``train.jsonl``, ``dev.jsonl``, ``test.jsonl``
(one task a line) and ``MANIFEST.json``. A bundled task names its dataset in
``metadata["dataset"]``; :func:`tasks.data_analysis.datasets.dataset_files` materializes that dataset's files
(cached).

The splits are disjoint by dataset (:data:`SPLIT_DATASETS` each, themes and dirtiness levels
cycling), every family is in every split with an equal share, and within a family the picks cycle
through the difficulties it reaches. Drafts are made in rounds over the split's datasets and
budgets, each with its own seed, audited (:func:`tasks.data_analysis.audit.build_task`), and the
manifest counts the dropped ones by reason. Written by ``python -m tasks.build_splits``
(:func:`build_data_analysis_files`), checked by ``python -m tasks.build_splits --check``.
"""

from __future__ import annotations

import hashlib
import json
import random
import tempfile
from collections import Counter
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

from tasks.data_analysis.audit import Dropped, build_task
from tasks.data_analysis.datasets import ENV, GENERATOR_VERSION, THEMES, Dataset, generate_dataset, materialize
from tasks.data_analysis.questions import DRAFTERS, FAMILIES, QUESTIONS_VERSION, Scene
from tasks.data_analysis.references import LoadedTables, write_files
from tasks.records import Task
from tasks.splits import MANIFEST_NAME

BUILDER = "tasks.data_analysis.bundled:build_data_analysis_files"
"""What the manifest names as its builder (``python -m tasks.build_splits`` calls it)."""

DATASETS_FILE = "datasets.jsonl"
SPLIT_SIZES = {"train": 400, "dev": 100, "test": 100}
SPLIT_DATASETS = {"train": 40, "dev": 10, "test": 10}
DATASET_SEED_BASE = 20_250_701
"""Dataset ``i`` (0-based over train, dev, test) is drawn with seed ``DATASET_SEED_BASE + i``."""
MAX_ROUNDS = 8
"""Most rounds of drafts over a split's datasets for one family."""


def bundled_dataset_specs() -> dict[str, list[tuple[str, int, int]]]:
    """Split -> its datasets as ``(theme, seed, dirtiness)``, themes and dirtiness levels cycling."""
    themes, specs, index = sorted(THEMES), {}, 0
    for split, count in SPLIT_DATASETS.items():
        specs[split] = []
        for _ in range(count):
            specs[split].append((themes[index % len(themes)], DATASET_SEED_BASE + index, index % 4))
            index += 1
    return specs


def build_data_analysis_files() -> dict[str, bytes]:
    """Generate the bundled datasets, the train/dev/test tasks and the manifest, in memory.

    Returns:
        File name -> exact bytes.

    Raises:
        ValueError: A split cannot be filled, or misses a family or a difficulty.
    """
    files: dict[str, bytes] = {}
    datasets = {split: [generate_dataset(theme, seed, dirtiness, name=f"{theme}-{seed - DATASET_SEED_BASE:03d}")
                        for theme, seed, dirtiness in specs] for split, specs in bundled_dataset_specs().items()}
    lines = [json.dumps(dataset.to_dict(), ensure_ascii=False) for split in datasets for dataset in datasets[split]]
    files[DATASETS_FILE] = "".join(line + "\n" for line in lines).encode("utf-8")
    splits, dropped = {}, {}
    for split, size in SPLIT_SIZES.items():
        tasks, dropped[split] = _split_tasks(split, size, datasets[split])
        data = "".join(task.to_json() + "\n" for task in tasks).encode("utf-8")
        files[f"{split}.jsonl"] = data
        splits[split] = {"file": f"{split}.jsonl", "count": len(tasks), "sha256": hashlib.sha256(data).hexdigest(),
                         "datasets": [dataset.name for dataset in datasets[split]]}
    manifest = {
        "builder": BUILDER, "env": ENV,
        "generator_versions": {"datasets": GENERATOR_VERSION, "questions": QUESTIONS_VERSION},
        "dataset_seed_base": DATASET_SEED_BASE,
        "datasets": {"file": DATASETS_FILE, "count": len(lines),
                     "sha256": hashlib.sha256(files[DATASETS_FILE]).hexdigest()},
        "dropped": dropped, "splits": splits,
    }
    files[MANIFEST_NAME] = (json.dumps(manifest, indent=2, sort_keys=True) + "\n").encode("utf-8")
    return files


def _split_tasks(split: str, size: int, datasets: list[Dataset]) -> tuple[list[Task], dict[str, int]]:
    """A split's tasks (families interleaved) and the count of dropped drafts by reason."""
    dropped: Counter[str] = Counter()
    quotas = {family: size // len(FAMILIES) + (index < size % len(FAMILIES)) for index, family in enumerate(FAMILIES)}
    with tempfile.TemporaryDirectory() as folder, LoadedTables() as loaded:
        work_dirs = {dataset.name: str(write_files(materialize(dataset), Path(folder) / dataset.name))
                     for dataset in datasets}
        picked = {family: _family_tasks(family, quota, datasets, work_dirs, dropped, loaded)
                  for family, quota in quotas.items()}
    ordered = [task for position in range(max(quotas.values())) for family in FAMILIES
               for task in picked[family][position:position + 1]]
    tasks = [replace(task, id=f"data-analysis/{split}/{index:04d}") for index, task in enumerate(ordered)]
    _check_split(split, tasks, size)
    return tasks, dict(sorted(dropped.items()))


def _family_tasks(family: str, quota: int, datasets: list[Dataset], work_dirs: dict[str, str],
                  dropped: Counter[str], loaded: LoadedTables) -> list[Task]:
    """``quota`` tasks of one family, cycling through the difficulties its candidates reach."""
    by_level: dict[int, list[Task]] = {}
    seen: set[tuple[str, str, str]] = set()
    for task in _candidates(family, datasets, work_dirs, dropped, loaded):
        key = (task.metadata["dataset"], task.prompt, json.dumps(task.metadata["constraints"]))
        if key not in seen:
            seen.add(key)
            by_level.setdefault(task.difficulty, []).append(task)
        if sum(len(level) for level in by_level.values()) >= 2 * quota:
            break
    picked: list[Task] = []
    while len(picked) < quota and any(by_level.values()):
        for level in sorted(by_level):
            if by_level[level] and len(picked) < quota:
                picked.append(by_level[level].pop(0))
    if len(picked) < quota:
        raise ValueError(f"expected {quota} {family} tasks, got {len(picked)}; raise MAX_ROUNDS")
    return picked


def _candidates(family: str, datasets: list[Dataset], work_dirs: dict[str, str],
                dropped: Counter[str], loaded: LoadedTables) -> Iterator[Task]:
    """Audited tasks of one family, in rounds over the datasets and difficulty budgets (drops counted); the SQL
    references' tables stay ``loaded`` for the split."""
    for round_index in range(MAX_ROUNDS):
        for dataset in datasets:
            theme = THEMES[dataset.theme]
            for budget in range(4):
                rng = random.Random(f"{dataset.name}/{family}/{budget}/{round_index}")
                draft = DRAFTERS[family](Scene(dataset, theme, rng, budget))
                if draft is None:
                    continue
                outcome = build_task(draft, dataset, theme, work_dirs[dataset.name], rng, "candidate", loaded)
                if isinstance(outcome, Dropped):
                    dropped[f"{family}: {outcome.reason}"] += 1
                else:
                    yield outcome


def _check_split(split: str, tasks: list[Task], size: int) -> None:
    """Raise ValueError unless the split has its size, every family and every difficulty 1..5."""
    families = {task.family for task in tasks}
    levels = {task.difficulty for task in tasks}
    if len(tasks) != size or families != set(FAMILIES) or levels != set(range(1, 6)):
        raise ValueError(f"expected {size} {split} tasks of every family and difficulty 1..5, got {len(tasks)} of "
                         f"{sorted(families)} at {sorted(levels)}")
