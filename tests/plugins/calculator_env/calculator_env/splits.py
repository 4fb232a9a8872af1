"""The bundled splits: ``python -m calculator_env.splits`` writes ``data/`` (train, dev, test)."""

from __future__ import annotations

import random
from pathlib import Path

from tasks import Task
from tasks.splits import write_bundle

DATA = Path(__file__).parent / "data"
"""The bundle folder the spec names."""
SIZES = {"train": 40, "dev": 10, "test": 10}


def arithmetic_tasks(split: str, count: int, seed: int) -> list[Task]:
    """``count`` questions ``What is a op b?`` with their integer answers."""
    rng = random.Random(seed)
    tasks = []
    for index in range(count):
        a, b, op = rng.randint(10, 999), rng.randint(2, 99), rng.choice("+-*%")
        answer = {"+": a + b, "-": a - b, "*": a * b, "%": a % b}[op]
        tasks.append(Task(id=f"calculator/{split}/{index:04d}", env="Calculator", family="arithmetic",
                          prompt=f"What is {a} {op} {b}?", answer=str(answer), difficulty=1 + (op == "*")))
    return tasks


def main() -> None:
    """Write the bundle."""
    write_bundle(DATA, "Calculator", {split: arithmetic_tasks(split, count, seed)
                                      for seed, (split, count) in enumerate(SIZES.items())})


if __name__ == "__main__":
    main()
