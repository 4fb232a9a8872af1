"""The README's examples run as written: each Python block in a fresh interpreter outside the checkout."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
PYTHON_BLOCK = re.compile(r"```python\n(.*?)```", re.DOTALL)


def python_blocks() -> list[str]:
    """Every ```python block of the README, in order."""
    return PYTHON_BLOCK.findall(README.read_text(encoding="utf-8"))


def test_the_readme_has_its_quick_start() -> None:
    assert any("gym.make(" in block and "env.step(" in block for block in python_blocks())


@pytest.mark.parametrize("index", range(len(python_blocks())))
def test_a_readme_python_block_runs_as_written(index: int, tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-c", python_blocks()[index]], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    if "env.step(" in python_blocks()[index]:  # an episode played: its reward components are printed
        assert "'outcome':" in done.stdout
