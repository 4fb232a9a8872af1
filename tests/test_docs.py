"""The examples of the README and docs/ run as written: every ```python and ```bash block, in a fresh process outside
the checkout (python blocks with this interpreter, bash blocks with it first on ``PATH``).

A block that cannot run here says why on the line before it, ``<!-- docs-test: not run: REASON -->``; a reason that
names a test (``tests/<path>.py`` or ``tests/<path>.py::test_name``) must name one that exists: the test that runs
the example's substance (a slow block is marked slow by measurement, as every test: tests/durations.py). A block
under ``<!-- file: PATH -->`` is a file of a package, not a command (docs/adding-an-environment.md's, which
tests/test_third_party_env.py compares with tests/plugins/ and installs). Blocks in other languages (text, toml,
yaml) are not examples to run. docs/serving.md's examples are run by their own test
(tests/agentgym_envs/serve/test_serving_docs.py), so they are left out here.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
RUN_ELSEWHERE = {ROOT / "docs" / "serving.md": ROOT / "tests" / "agentgym_envs" / "serve" / "test_serving_docs.py"}
"""Pages whose examples another test runs, and that test."""
LANGUAGES = {"python": "python", "bash": "bash", "sh": "bash", "shell": "bash"}
FENCE = re.compile(r"^```(\w*)\n(.*?)^```\s*$", re.DOTALL | re.MULTILINE)
MARKER = re.compile(r"<!--\s*docs-test:\s*(.*?)\s*-->\s*\Z", re.DOTALL)
FILE_MARKER = re.compile(r"<!--\s*file:\s*\S+\s*-->\s*\Z")
NAMED_TEST = re.compile(r"tests/[\w/.-]+\.py(?:::\w+)?")
TIMEOUT_S = 300


@dataclass(frozen=True)
class Block:
    """One fenced example: its page, line, language, code and the ``docs-test`` marker before it (or None)."""

    page: Path
    line: int
    language: str
    code: str
    marker: str | None

    @property
    def name(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"

    @property
    def not_run(self) -> str | None:
        """The reason it is not run, or None."""
        if self.marker is None or not self.marker.startswith("not run:"):
            return None
        return self.marker.removeprefix("not run:").strip()


def blocks() -> list[Block]:
    """Every python and bash block of the pages, in order."""
    found = []
    for page in PAGES:
        if page in RUN_ELSEWHERE:
            continue
        text = page.read_text(encoding="utf-8")
        for match in FENCE.finditer(text):
            language = LANGUAGES.get(match.group(1))
            before = text[:match.start()].rstrip("\n").rsplit("\n", 1)[-1]
            if language is None or FILE_MARKER.search(before):
                continue
            marker = MARKER.search(before)
            found.append(Block(page, text.count("\n", 0, match.start()) + 1, language, match.group(2),
                               marker.group(1) if marker else None))
    return found


BLOCKS = blocks()
RUN = [pytest.param(block, id=block.name) for block in BLOCKS if block.not_run is None]


def test_the_pages_left_out_are_run_by_their_own_tests() -> None:
    for page, test in RUN_ELSEWHERE.items():
        assert page.is_file() and test.is_file() and page.name in test.read_text(encoding="utf-8"), (page, test)


def test_the_readme_has_its_quick_start() -> None:
    readme = [block for block in BLOCKS if block.page.name == "README.md" and block.language == "python"]
    assert any("gym.make(" in block.code and "env.step(" in block.code and block.not_run is None for block in readme)


def test_every_marker_is_known_and_every_block_not_run_says_why() -> None:
    for block in BLOCKS:
        assert block.marker is None or block.not_run is not None, f"{block.name}: unknown {block.marker!r}"
        if block.not_run is not None:
            assert len(block.not_run.split()) >= 4, f"{block.name}: say why it is not run, got {block.not_run!r}"
            for named in NAMED_TEST.findall(block.not_run):
                path, _, test = named.partition("::")
                assert (ROOT / path).is_file(), f"{block.name}: names {path}, which does not exist"
                if test:
                    defined = {node.name for node in ast.walk(ast.parse((ROOT / path).read_text()))
                               if isinstance(node, ast.FunctionDef)}
                    assert test in defined, f"{block.name}: names {named}, which {path} does not define"


@pytest.mark.parametrize("block", RUN)
def test_an_example_runs_as_written(block: Block, tmp_path: Path) -> None:
    command = [sys.executable, "-c", block.code] if block.language == "python" else \
        ["bash", "-e", "-o", "pipefail", "-c", block.code]
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    done = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=TIMEOUT_S,
                          env={**os.environ, "PATH": path})
    assert done.returncode == 0, f"{block.name} failed:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    if block.page.name == "README.md" and "env.step(" in block.code:  # the quick start prints the components
        assert "'outcome':" in done.stdout


ENV_PAGE_SECTIONS = ["Tools", "Tasks and families", "Reward and its options", "Data formats it loads", "Limits",
                     "Sandbox notes", "Speed"]


def test_every_env_page_has_the_same_sections_in_the_same_order_and_is_linked() -> None:
    pages = sorted((ROOT / "docs" / "envs").glob("*.md"))
    assert len(pages) == 5
    index = (ROOT / "docs" / "environments.md").read_text(encoding="utf-8")
    for page in pages:
        text = page.read_text(encoding="utf-8")
        sections = re.findall(r"^## (.+)$", text, re.MULTILINE)
        assert sections == ENV_PAGE_SECTIONS, f"{page.name}: expected sections {ENV_PAGE_SECTIONS}, got {sections}"
        assert f"(envs/{page.name})" in index, f"docs/environments.md does not link {page.name}"
