"""SWE tasks: bugs planted in real Python repositories, judged by the repositories' own test suites.

* :class:`TestRun` and :func:`parse_junit_xml` (:mod:`tasks.swe.testrun`): one run of a test suite, as the env
  layer reports it and the keep/drop rules and rewards read it.
* :data:`PINS`, :func:`fetch_sdist`, :func:`repository_files`, :func:`folder_files`, :func:`library_files`
  (:mod:`tasks.swe.repos`): the real repositories, pinned PyPI sdists fetched into a cache, as path -> bytes.
* :data:`OPERATORS`, :func:`find_sites`, :func:`apply_sites`, :func:`candidates` (:mod:`tasks.swe.mutations`):
  SWE-smith-style bug operators on libcst; :func:`diff_trees`, :func:`apply_patch` (:mod:`tasks.swe.patches`).
* :class:`Bug`, :func:`plant`, :func:`bug_candidates` (:mod:`tasks.swe.bugs`): candidate bugs as patches.
* :func:`pin_source`, :func:`folder_source`, :func:`task_plan`, :func:`report_tasks` (:mod:`tasks.swe.synthesis`):
  the one SWE task builder, everything but the suite runs (:mod:`agentgym_envs.swe.synthesize` runs them).
* :func:`judge_candidate` (:mod:`tasks.swe.keep`): FAIL_TO_PASS / PASS_TO_PASS from two clean and two buggy runs.
* :func:`problem_statement` (:mod:`tasks.swe.statements`): the statement at hint level 1, 2 or 3.
* :class:`SWEInstance`, :func:`make_instance`, :func:`load_swebench` (:mod:`tasks.swe.instances`): SWE-bench's
  instance fields, as tasks. ``python -m tasks.swe`` fetches the pins and writes candidate bugs.
"""

from tasks.swe.bugs import Bug, bug_candidates, plant
from tasks.swe.instances import SWEInstance, instance_from_task, load_swebench, make_instance, read_instances
from tasks.swe.keep import Judgement, judge_candidate
from tasks.swe.mutations import OPERATORS, MutationError, Site, apply_sites, candidates, find_sites
from tasks.swe.patches import PatchError, apply_patch, diff_trees
from tasks.swe.repos import PINS, RepoError, RepoSpec, fetch_sdist, folder_files, library_files, pin, repository_files
from tasks.swe.statements import HINT_LEVELS, problem_statement
from tasks.swe.synthesis import SynthesisError, folder_source, pin_source, report_tasks, task_plan
from tasks.swe.testrun import OUTCOMES, STATUSES, TestRun, TestRunError, parse_junit_xml

__all__ = [
    "HINT_LEVELS",
    "OPERATORS",
    "OUTCOMES",
    "PINS",
    "STATUSES",
    "Bug",
    "Judgement",
    "MutationError",
    "PatchError",
    "RepoError",
    "RepoSpec",
    "SWEInstance",
    "Site",
    "SynthesisError",
    "TestRun",
    "TestRunError",
    "apply_patch",
    "apply_sites",
    "bug_candidates",
    "candidates",
    "diff_trees",
    "fetch_sdist",
    "find_sites",
    "folder_files",
    "folder_source",
    "instance_from_task",
    "judge_candidate",
    "library_files",
    "load_swebench",
    "make_instance",
    "parse_junit_xml",
    "pin",
    "pin_source",
    "plant",
    "problem_statement",
    "read_instances",
    "report_tasks",
    "repository_files",
    "task_plan",
]
