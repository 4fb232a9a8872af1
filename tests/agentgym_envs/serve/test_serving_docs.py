"""Every example of ``docs/serving.md`` runs as written, on a free port instead of the page's 8000 (8001).

The page's first block is the command of the server its Python examples talk to: the session's shared server
(``conftest.py``) is started with the same arguments, which is checked here. Every other ``python -m
agentgym_envs.serve`` line is parsed by the server's own parser and its env probed as the server does before it
serves (a start costs ~25 s, and serving itself is what the other tests here check); ``export`` lines set the
environment of every block, as in one shell; each Python block and every other command runs in a fresh process
outside the checkout.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("openenv")
pytest.importorskip("openreward")

PAGE = Path(__file__).resolve().parents[3] / "docs" / "serving.md"
BLOCK = re.compile(r"```(python|bash)\n(.*?)```", re.DOTALL)
PAGE_URL = re.compile(r"http://127\.0\.0\.1:800\d")
SERVE = ["python", "-m", "agentgym_envs.serve"]


def blocks() -> list[tuple[str, str]]:
    """The page's ``(language, code)`` blocks, in order."""
    return BLOCK.findall(PAGE.read_text(encoding="utf-8"))


def exports(url: str) -> dict[str, str]:
    """The variables the page's ``export`` lines set, the page's URL replaced by ``url``."""
    variables = {}
    for language, code in blocks():
        for line in code.splitlines():
            if language == "bash" and line.startswith("export "):
                variables.update(word.split("=", 1) for word in shlex.split(line)[1:])
    return {name: PAGE_URL.sub(url, value) for name, value in variables.items()}


def without_port(words: list[str]) -> list[str]:
    """A command's words less ``--port N`` (the test picks a free port)."""
    index = words.index("--port")
    return words[:index] + words[index + 2:]


def test_the_first_block_is_the_command_of_the_shared_server(search_server):
    language, code = blocks()[0]
    assert language == "bash"
    words = without_port(shlex.split(code.strip()))
    assert words == [*SERVE, search_server.env_id, *search_server.args]


@pytest.mark.parametrize("index", range(1, len(blocks())))
def test_an_example_runs_as_written(index, search_server, backend_problems, tmp_path):
    language, code = blocks()[index]
    environment = {**os.environ, **exports(search_server.url)}
    if language == "python":
        done = subprocess.run([sys.executable, "-c", PAGE_URL.sub(search_server.url, code)], cwd=tmp_path,
                              env=environment, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
        return
    for line in filter(None, (line.strip() for line in code.splitlines())):
        words = shlex.split(PAGE_URL.sub(search_server.url, line))
        if words[0] == "export":
            continue
        if words[:3] == SERVE:
            check_server_command(without_port(words)[3:], backend_problems)
        elif words[:3] == ["python", "-m", "benchmarks.evaluate"]:
            done = subprocess.run([sys.executable, *words[1:]], cwd=tmp_path, env=environment, capture_output=True,
                                  text=True, timeout=600)
            assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        else:
            pytest.fail(f"docs/serving.md: {line!r} is a command this test does not know how to run; teach it")


def check_server_command(args: list[str], backend_problems: dict[str, str | None]) -> None:
    """Parse a server command of the page (its words after the module) as the server does, and probe its env."""
    from agentgym_envs.serve.__main__ import build_parser
    from agentgym_envs.serve.session import ServeConfig, ServedEnv
    from tests.conftest import require_backend

    parsed = build_parser().parse_args(args)
    if parsed.env_kwargs.get("sandbox") == "bwrap":
        require_backend("bwrap", backend_problems)
    served = ServedEnv.probe(ServeConfig(parsed.env_id, parsed.env_kwargs, parsed.max_sessions, parsed.idle_timeout))
    assert served.tasks and served.tool_names[-1] == "answer"
