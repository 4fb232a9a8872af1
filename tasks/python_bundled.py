"""The bundled PythonSandbox splits (``tasks/data/python_sandbox``), built in memory.

Each split alternates math and code tasks (half each) with difficulties cycling 1..5 in each family. Split ``s``
draws seeds upward from ``SEED_BASES[s]``; the ranges are a million apart, and a seed whose task repeats a prompt
already used (in this or an earlier split) is skipped, so train, dev and test never share a prompt. The output
depends only on the generators' code: there is no set iteration, string hashing or float formatting in it.
Written by ``python -m tasks.build_splits`` and checked by ``python -m tasks.build_splits --check``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable

from tasks import python_code, python_math
from tasks.records import Task
from tasks.splits import MANIFEST_NAME

ENV = "PythonSandbox"
SPLIT_SIZES = {"train": 400, "dev": 100, "test": 100}
SEED_BASES = {"train": 1_000_000, "dev": 2_000_000, "test": 3_000_000}
BUILDER = "tasks.python_bundled:build_python_sandbox_splits"
"""What the manifest names as its builder (``python -m tasks.build_splits`` calls it)."""

_Generator = Callable[..., Task]
_FAMILIES: tuple[_Generator, ...] = (python_math.generate_math_task, python_code.generate_code_task)


class _SeedStream:
    """Hands out consecutive seeds of one split, skipping tasks whose prompt was already used."""

    def __init__(self, split: str, used_prompts: set[str]) -> None:
        self.split = split
        self.next_seed = SEED_BASES[split]
        self.used_prompts = used_prompts

    def fresh_task(self, generate: _Generator, difficulty: int, index: int) -> Task:
        """The next task from ``generate`` whose prompt is new."""
        while True:
            task = generate(self.next_seed, difficulty, split=self.split, index=index)
            self.next_seed += 1
            if task.prompt not in self.used_prompts:
                self.used_prompts.add(task.prompt)
                return task


def _split_tasks(split: str, used_prompts: set[str]) -> list[Task]:
    """The tasks of one split: math and code alternating, difficulty cycling 1..5 per family."""
    stream = _SeedStream(split, used_prompts)
    tasks = []
    for index in range(SPLIT_SIZES[split] // len(_FAMILIES)):
        difficulty = 1 + index % 5
        tasks.extend(stream.fresh_task(generate, difficulty, index) for generate in _FAMILIES)
    return tasks


def build_python_sandbox_splits() -> dict[str, bytes]:
    """Generate every split file and the manifest, in memory.

    Returns:
        File name -> exact bytes, for ``train.jsonl``, ``dev.jsonl``, ``test.jsonl`` and
        ``MANIFEST.json``.
    """
    used_prompts: set[str] = set()
    files: dict[str, bytes] = {}
    entries = {}
    for split in SPLIT_SIZES:
        tasks = _split_tasks(split, used_prompts)
        data = "".join(task.to_json() + "\n" for task in tasks).encode("utf-8")
        name = f"{split}.jsonl"
        files[name] = data
        entries[split] = {"file": name, "count": len(tasks), "sha256": hashlib.sha256(data).hexdigest()}
    manifest = {
        "builder": BUILDER,
        "env": ENV,
        "generator_versions": {"code": python_code.GENERATOR_VERSION, "math": python_math.GENERATOR_VERSION},
        "seed_bases": SEED_BASES,
        "splits": entries,
    }
    files[MANIFEST_NAME] = (json.dumps(manifest, indent=2, sort_keys=True) + "\n").encode("utf-8")
    return files
