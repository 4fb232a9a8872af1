"""SWE-v0 end to end on a real repository the project does not bundle, loaded the way docs/envs/swe.md says:
humanize 4.9.0's sdist from PyPI (a ``src/`` layout, ``importlib.metadata`` at import, a test-only dependency, test ids
with spaces) and its real fix of ``metric``'s precision (PR 159) as a SWE-bench-format instance.

The environment is derived from the repository's metadata and built here (pip at set-up time), the instance
validates on both backends, then the fix resolves, no change does not, and a wrong edit does not; an instance that
failed validation is refused by the env, naming why.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentgym_envs.errors import EnvConfigError
from agentgym_envs.policies.base import tool_call_action
from agentgym_envs.swe import SWEEnv
from agentgym_envs.swe.__main__ import main
from tasks.swe.environments import derive_environment
from tasks.swe.instances import load_swebench, validation_report_path
from tasks.swe.repos import folder_files
from tests.agentgym_envs.swe.sdists import HUMANIZE, unpacked_sdist
from tests.conftest import require_backend

DATA = Path(__file__).parent / "data" / "humanize.jsonl"
FIX = "sed -i 's/% (precision - (exponent % 3) - 1)/% max(0, precision - (exponent % 3) - 1)/' src/humanize/number.py"
WRONG = "sed -i 's/% (precision - (exponent % 3) - 1)/% abs(precision - (exponent % 3) - 1)/' src/humanize/number.py"
"""The fix as the agent would type it, and a wrong one (abs instead of max: the error goes, the digits are wrong)."""


@pytest.fixture(scope="module")
def repository(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """humanize 4.9.0's sdist from PyPI, unpacked (the repository at the instance's base commit)."""
    return unpacked_sdist(HUMANIZE, tmp_path_factory.mktemp("humanize"))


@pytest.fixture(scope="module")
def instances(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The instance file, copied where its validation report may be written."""
    path = tmp_path_factory.mktemp("instances") / DATA.name
    shutil.copy(DATA, path)
    return path


@pytest.fixture(scope="module", params=[pytest.param("docker", marks=pytest.mark.docker),
                                        pytest.param("bwrap", marks=pytest.mark.bwrap)])
def backend(request: pytest.FixtureRequest, backend_problems: dict[str, str | None]) -> str:
    require_backend(request.param, backend_problems)
    return request.param


def test_the_environment_is_derived_from_the_repositorys_metadata(repository):
    environment = derive_environment("python-humanize/humanize", "4.9", folder_files(repository))
    assert environment.requirements == ("freezegun", "pytest", "pytest-cov")  # its 'tests' extra
    assert (environment.package_roots, environment.dist_name, environment.dist_version) == (("src",), "humanize",
                                                                                             "4.9")


@pytest.fixture(scope="module")
def env(backend: str, repository: Path, instances: Path) -> Iterator[SWEEnv]:
    """The instance validated on ``backend`` (the command writes the report beside the file), then loaded."""
    assert main(["validate", str(instances), "--repository", str(repository), "--sandbox", backend]) == 0
    report = json.loads(validation_report_path(instances).read_text())
    assert report["instances"]["python-humanize__humanize-159"]["usable"] is True
    tasks = load_swebench(instances, repository=repository)
    assert tasks[0].metadata["validation"]["usable"] is True
    made = SWEEnv(tasks=tasks, sandbox=backend)
    yield made
    made.close()


def submit_after(env: SWEEnv, command: str) -> tuple[float, dict]:
    env.reset(seed=0)
    env.step(tool_call_action("bash", command=command))
    _, reward, terminated, _, info = env.step(tool_call_action("submit"))
    assert terminated and info["grading"]["valid"], info["grading"]
    return reward, info


def test_fix_resolves_no_change_and_a_wrong_edit_do_not(env):
    reward, info = submit_after(env, FIX)
    assert (reward, info["grading"]["tests"]) == (1.0, 212)
    reward, info = submit_after(env, "true")
    assert (reward, info["reward_components"]["outcome/f2p_passed"]) == (0.0, 0.0)
    assert info["reward_components"]["outcome/p2p_passed"] == 202.0
    reward, info = submit_after(env, WRONG)
    assert (reward, info["reward_components"]["outcome/f2p_passed"]) == (0.0, 0.0)


def test_the_agent_imports_the_repository_it_edits_with_its_test_dependency(env):
    env.reset(seed=0)
    observation, *_ = env.step(tool_call_action("bash", command=(
        "python -c 'import humanize, freezegun; print(humanize.__file__, humanize.__version__)'")))
    assert "/work/testbed/src/humanize/__init__.py 4.9" in observation
    observation, *_ = env.step(tool_call_action("bash", command="touch /opt/agentrl-swe-env/site/x.pth"))
    assert "Read-only file system" in observation  # the environment is not the agent's to change


@pytest.mark.bwrap
def test_an_instance_that_failed_validation_is_refused_naming_why(repository, instances, tmp_path, backend_problems):
    require_backend("bwrap", backend_problems)
    record = json.loads(instances.read_text())
    record["FAIL_TO_PASS"] = json.dumps(["tests/test_number.py::test_metric[[1.5123, '', 0]-3]"])  # no such test
    broken = tmp_path / "broken.jsonl"
    broken.write_text(json.dumps(record) + "\n")
    assert main(["validate", str(broken), "--repository", str(repository), "--sandbox", "bwrap"]) == 1
    verdict = json.loads(validation_report_path(broken).read_text())["instances"]["python-humanize__humanize-159"]
    assert verdict["reason"] == "fix_run_invalid" and verdict["detail"].startswith("not_reported")
    assert "-3] not found (closest reported: tests/test_number.py::test_metric[[" in verdict["detail"]
    with pytest.raises(EnvConfigError, match="got 1 that failed it: python-humanize__humanize-159: fix_run_invalid"):
        SWEEnv(tasks=load_swebench(broken, repository=repository), sandbox="bwrap")
    SWEEnv(tasks=load_swebench(broken, repository=repository), sandbox="bwrap", rules="swebench").close()  # not
    # validated under SWE-bench's rules: logged, not refused


@pytest.mark.bwrap
def test_swebench_cut_ids_validate_and_grade_under_swebench_rules(repository, tmp_path, backend_problems):
    # ids as SWE-bench's pytest log parser stores them: cut at the first space ("[[1000, '', 0]-1 k]" -> "[[1000,"),
    # each in one list
    require_backend("bwrap", backend_problems)
    record = json.loads(DATA.read_text())
    cut = {field: list(dict.fromkeys(test_id.split(" ")[0] for test_id in json.loads(record[field])))
           for field in ("FAIL_TO_PASS", "PASS_TO_PASS")}
    cut["PASS_TO_PASS"] = [test_id for test_id in cut["PASS_TO_PASS"] if test_id not in cut["FAIL_TO_PASS"]]
    record |= {field: json.dumps(ids) for field, ids in cut.items()}  # one status per cut id, as SWE-bench's maps
    path = tmp_path / "cut.jsonl"
    path.write_text(json.dumps(record) + "\n")
    assert main(["validate", str(path), "--repository", str(repository), "--sandbox", "bwrap",
                 "--rules", "swebench"]) == 0
    made = SWEEnv(tasks=load_swebench(path, repository=repository), sandbox="bwrap", rules="swebench")
    try:
        assert submit_after(made, FIX)[0] == 1.0
        assert submit_after(made, "true")[0] == 0.0
    finally:
        made.close()
