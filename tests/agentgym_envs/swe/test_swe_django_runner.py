"""A Django-style run end to end: Django 5.1.4's sdist from PyPI (which has ``tests/runtests.py``), a bug planted
in ``django.utils.text.get_text_list`` and its fix as a SWE-bench-format instance whose ids are in SWE-bench's
Django form, graded with ``test_runner: django`` (``runtests.py --verbosity 2 --settings=test_sqlite --parallel 1
utils_tests.test_text``, its log parsed) on docker and bwrap: it validates, the fix resolves, no change does not,
and ``info`` says the run was not tamper-checked.

To keep the tree small the repository is the sdist's ``django/`` (without GIS, the admin's static files and the
translations the tests do not use), ``pyproject.toml``, and ``tests/`` with only ``runtests.py``,
``test_sqlite.py``, ``urls.py`` and ``utils_tests/``.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentgym_envs.policies.base import tool_call_action
from agentgym_envs.swe import SWEEnv
from agentgym_envs.swe.__main__ import main
from tasks.swe.instances import load_swebench
from tests.agentgym_envs.swe.sdists import DJANGO, unpacked_sdist
from tests.conftest import require_backend

GOOD = '_(", ").join(str(i) for i in list_[:-1]),'
BAD = '_(", ").join(str(i) for i in list_[:-2]),'
CASE = "utils_tests.test_text.TestUtilsText"
FIX = "sed -i 's/list_\\[:-2\\]/list_[:-1]/' django/utils/text.py"


@pytest.fixture(scope="module")
def repository(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The trimmed sdist (see the module docstring) with the bug planted."""
    sdist = unpacked_sdist(DJANGO, tmp_path_factory.mktemp("django-sdist"))
    repo = tmp_path_factory.mktemp("django") / "django"
    shutil.copytree(sdist / "django", repo / "django", ignore=shutil.ignore_patterns("gis", "static", "locale"))
    for language in ("ar", "en"):
        shutil.copytree(sdist / f"django/conf/locale/{language}", repo / f"django/conf/locale/{language}")
    shutil.copy(sdist / "django/conf/locale/__init__.py", repo / "django/conf/locale/__init__.py")
    shutil.copy(sdist / "pyproject.toml", repo / "pyproject.toml")
    shutil.copytree(sdist / "tests/utils_tests", repo / "tests/utils_tests")
    for name in ("runtests.py", "test_sqlite.py", "urls.py"):
        shutil.copy(sdist / "tests" / name, repo / "tests" / name)
    text = repo / "django/utils/text.py"
    assert GOOD in text.read_text()
    text.write_text(text.read_text().replace(GOOD, BAD))
    return repo


@pytest.fixture(scope="module")
def instances(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The instance file (ids in SWE-bench's Django form) and the override that names the runner."""
    folder = tmp_path_factory.mktemp("instances")
    fix = ("diff --git a/django/utils/text.py b/django/utils/text.py\n--- a/django/utils/text.py\n"
           "+++ b/django/utils/text.py\n@@ -302,7 +302,7 @@ def get_text_list(list_, last_word=gettext_lazy(\"or\")):\n"
           "         return str(list_[0])\n     return \"%s %s %s\" % (\n"
           "         # Translators: This string is used as a separator between list elements\n"
           f"-        {BAD}\n+        {GOOD}\n         str(last_word),\n         str(list_[-1]),\n     )\n")
    instance = {"instance_id": "django__django-1", "repo": "django/django", "base_commit": "5.1.4", "version": "5.1",
                "problem_statement": "get_text_list(['a', 'b', 'c', 'd']) drops 'c'", "patch": fix, "test_patch": "",
                "FAIL_TO_PASS": json.dumps([f"test_get_text_list ({CASE})"]),
                "PASS_TO_PASS": json.dumps([f"test_wrap ({CASE})", f"test_slugify ({CASE})",
                                            f"test_truncate_chars ({CASE})"])}
    (folder / "django.jsonl").write_text(json.dumps(instance) + "\n")
    (folder / "overrides.yaml").write_text("repositories:\n  django/django:\n    '*': {test_runner: django}\n")
    return folder / "django.jsonl", folder / "overrides.yaml"


@pytest.fixture(scope="module", params=[pytest.param("docker", marks=pytest.mark.docker),
                                        pytest.param("bwrap", marks=pytest.mark.bwrap)])
def env(request: pytest.FixtureRequest, backend_problems: dict[str, str | None], repository: Path,
        instances: tuple[Path, Path]) -> Iterator[SWEEnv]:
    """The instance validated on the backend, then loaded with its report."""
    require_backend(request.param, backend_problems)
    path, overrides = instances
    assert main(["validate", str(path), "--repository", str(repository), "--overrides", str(overrides),
                 "--sandbox", request.param]) == 0
    env = SWEEnv(sandbox=request.param, tasks=load_swebench(path, repository=repository, overrides=overrides))
    yield env
    env.close()


def _graded(env: SWEEnv, command: str | None) -> tuple[float, dict]:
    env.reset(seed=0)
    if command:
        env.step(tool_call_action("bash", command=command))
    _, reward, terminated, _, info = env.step(tool_call_action("submit"))
    assert terminated
    return reward, info["grading"]


def test_django_s_runner_grades_the_fix_and_no_change(env):
    reward, grading = _graded(env, FIX)
    assert reward == 1.0, grading
    assert (grading["runner"], grading["tamper_checked"], grading["valid"]) == ("django", False, True)
    assert grading["tests"] >= 20  # the module's tests, as runtests.py reported them
    reward, grading = _graded(env, None)
    assert reward == 0.0 and grading["valid"], grading
