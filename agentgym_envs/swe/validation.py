"""Validation of SWE-bench-format instances, as SWE-bench's and SWE-smith's validation runs do: the reference fix
and no change, each graded in the sandbox by the env itself, so that a broken instance is found before training
rather than scored 0 for every agent.

An instance is *usable* when, in its environment, with the fix every FAIL_TO_PASS test passes and every
PASS_TO_PASS test holds, and with no change no FAIL_TO_PASS test passes and every PASS_TO_PASS test holds (a run
that does not even collect without the fix, because the test patch imports what the fix adds, counts as every
FAIL_TO_PASS test failing). Otherwise the verdict names why (:data:`VERDICTS`), with a detail: the package whose
install failed, the collection error, which limit was hit, or a test id that no test has, with the closest id
the run reported.

The report (``<instances file>.validation.json`` by default, read back by
:func:`~tasks.swe.instances.load_swebench`) holds per instance ``usable``, ``reason``, ``detail``, the ``rules``
it was graded under, the ``key`` of what was validated (:func:`~tasks.swe.instances.validation_key`: a changed
instance or environment is no longer validated) and the two runs' ``info["grading"]``. SWEEnv refuses instances
that failed under its rules, naming the reason, and logs those never validated under them.
"""

from __future__ import annotations

import difflib
import json
import os
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from agentgym_envs.errors import ImageBuildError
from agentgym_envs.policies.base import tool_call_action
from agentgym_envs.swe.env import SWEEnv, test_ids
from agentgym_envs.swe.testing import prepare_tree
from rewards.swe import passing_tests
from tasks import Task
from tasks.swe.instances import as_test_ids, validation_key
from tasks.swe.patches import PatchError, apply_patch

VERDICTS = {
    "": "usable",
    "install_failed": "the environment could not be built (the package and pip's reason are in the detail)",
    "fix_does_not_apply": "the reference patch does not apply to the repository folder",
    "fix_run_invalid": "the run with the fix was invalid (its reason: memory, timeout, collection_error, "
                       "not_reported, ...)",
    "fix_fails": "with the fix, a FAIL_TO_PASS test did not pass",
    "fix_breaks": "with the fix, a PASS_TO_PASS test did not pass",
    "no_change_run_invalid": "the run with no change was invalid (other than a collection error)",
    "passes_without_fix": "with no change, a FAIL_TO_PASS test already passes",
    "broken_without_fix": "with no change, a PASS_TO_PASS test does not pass",
}
"""Why an instance is not usable (``""``: it is)."""


def _submit(env: SWEEnv, task: Task, tree: Mapping[str, bytes] | None) -> dict[str, Any]:
    """Reset on ``task``, put ``tree`` in the testbed (None: no change), submit; the step's info."""
    env.reset(seed=0, options={"task": task.id})
    if tree is not None:
        prepare_tree(env.sandbox, tree)
    *_, info = env.step(tool_call_action("submit"))
    return info


def _closest(missing: Sequence[str], reported: Sequence[str]) -> str:
    """``id -> closest reported id`` for each missing id, as text."""
    closest = {test_id: (difflib.get_close_matches(test_id, reported, n=1) or ["none"])[0] for test_id in missing[:3]}
    return "; ".join(f"{test_id} not found (closest reported: {near})" for test_id, near in closest.items())


def _failing(env: SWEEnv, task: Task, field: str, *, kept: bool) -> list[str]:
    """The ``field`` tests of ``task`` that the latest run did not pass (``kept``: a PASS_TO_PASS reading)."""
    run = env.last_test_run
    wanted = as_test_ids(task.metadata.get(field), field)
    passing = set(passing_tests(wanted, run.outcomes if run else {}, env.grading_rules, kept=kept))
    return [test_id for test_id in wanted if test_id not in passing]


def validate_task(env: SWEEnv, task: Task) -> dict[str, Any]:
    """The verdict of one task (see the module docstring): ``usable``, ``reason``, ``detail``, ``key``, ``fix``
    and ``no_change`` (the two runs' ``info["grading"]``)."""
    verdict: dict[str, Any] = {"usable": False, "reason": "", "detail": "", "key": validation_key(task)}
    try:
        fixed = apply_patch(env.repository_tree(task), task.answer)
        fix = _submit(env, task, fixed)
    except PatchError as exc:
        return {**verdict, "reason": "fix_does_not_apply", "detail": str(exc)[:500]}
    except ImageBuildError as exc:
        return {**verdict, "reason": "install_failed", "detail": str(exc)[:1000]}
    verdict["fix"] = fix.get("grading", {})
    reason, detail = _fix_problem(env, task, verdict["fix"])
    if not reason:
        verdict["no_change"] = _submit(env, task, None).get("grading", {})
        reason, detail = _no_change_problem(env, task, verdict["no_change"])
    return {**verdict, "usable": not reason, "reason": reason, "detail": detail}


def _fix_problem(env: SWEEnv, task: Task, grading: Mapping[str, Any]) -> tuple[str, str]:
    if not grading.get("valid"):
        detail = f"{grading.get('reason')}: {grading.get('detail', '')[:500]}"
        if grading.get("reason") == "not_reported" and env.last_test_run is not None:
            missing = [test_id for test_id in test_ids(task) if test_id not in env.last_test_run.outcomes]
            detail += f"; {_closest(missing, sorted(env.last_test_run.outcomes))}"
        return "fix_run_invalid", detail
    failing = _failing(env, task, "FAIL_TO_PASS", kept=False)
    if failing:
        return "fix_fails", f"{len(failing)} FAIL_TO_PASS tests did not pass: {', '.join(failing[:3])}"
    broken = _failing(env, task, "PASS_TO_PASS", kept=True)
    if broken:
        return "fix_breaks", f"{len(broken)} PASS_TO_PASS tests did not pass: {', '.join(broken[:3])}"
    return "", ""


def _no_change_problem(env: SWEEnv, task: Task, grading: Mapping[str, Any]) -> tuple[str, str]:
    if not grading.get("valid"):
        if grading.get("reason") == "collection_error":  # the test patch needs the fix to import: all fail
            return "", ""
        return "no_change_run_invalid", f"{grading.get('reason')}: {grading.get('detail', '')[:500]}"
    total = len(as_test_ids(task.metadata.get("FAIL_TO_PASS"), "FAIL_TO_PASS"))
    failing = _failing(env, task, "FAIL_TO_PASS", kept=False)
    if len(failing) < total:
        passing = sorted(set(as_test_ids(task.metadata.get("FAIL_TO_PASS"), "FAIL_TO_PASS")) - set(failing))
        return "passes_without_fix", f"{len(passing)} FAIL_TO_PASS tests pass with no change: {', '.join(passing[:3])}"
    broken = _failing(env, task, "PASS_TO_PASS", kept=True)
    if broken:
        return "broken_without_fix", f"{len(broken)} PASS_TO_PASS tests fail with no change: {', '.join(broken[:3])}"
    return "", ""


def validate(tasks: Sequence[Task], *, sandbox: str, rules: str = "strict",
             advance: Callable[[str], object] = lambda task_id: None, **env_options: Any) -> dict[str, Any]:
    """Validate every task in one env of backend ``sandbox``; the report (``instances`` and a ``summary``)."""
    being_validated = {"usable": True, "reason": "", "detail": "being validated", "rules": rules}  # earlier set aside
    unvalidated = [{**task.metadata, "validation": being_validated} for task in tasks]
    plain = [Task(id=t.id, env=t.env, family=t.family, prompt=t.prompt, answer=t.answer, difficulty=t.difficulty,
                  metadata=m) for t, m in zip(tasks, unvalidated, strict=True)]
    env = SWEEnv(tasks=plain, sandbox=sandbox, rules=rules, **env_options)
    verdicts = {}
    try:
        for task in plain:
            verdicts[task.id] = {**validate_task(env, task), "rules": rules}
            advance(task.id)
    finally:
        env.close()
    reasons = Counter(verdict["reason"] or "usable" for verdict in verdicts.values())
    return {"sandbox": sandbox, "rules": rules, "summary": dict(reasons), "instances": verdicts}


def write_report(report: Mapping[str, Any], path: str | os.PathLike[str]) -> Path:
    """Write the report as JSON; its path."""
    path = Path(path)
    path.write_text(json.dumps(report, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return path
