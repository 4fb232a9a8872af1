"""SWE-v0: repair a real Python repository in a sandbox, judged by its own test suite.

* :class:`SWEEnv` (:mod:`agentgym_envs.swe.env`): the environment (``bash``, ``editor``, ``submit``; grading on a
  fresh sandbox after the episode).
* :mod:`agentgym_envs.swe.tools`: the ``bash`` command runner and the editor's operations.
* :mod:`agentgym_envs.swe.testing`: :func:`prepare_tree`, :func:`restore_files`, :func:`read_tree`,
  :func:`working_tree_diff` and :func:`run_tests` (a :class:`~tasks.swe.testrun.TestRun`).
* :mod:`agentgym_envs.swe.pytest_guard`: the pytest plugin shipped into each run (source only; never imported
  on the host).
* :mod:`agentgym_envs.swe.environment`: per-repository environments (:func:`environment_image` for docker,
  :func:`host_environment_tree` for bwrap).
* :mod:`agentgym_envs.swe.validation`: :func:`validate` runs each instance's fix and no change; ``python -m
  agentgym_envs.swe env build | validate`` on the command line.
"""

from agentgym_envs.lazy import lazy_exports

_EXPORTS = {
    "SWEEnv": "env",
    "SWE_SANDBOX_LIMITS": "env",
    "default_reward": "env",
    "swe_reward": "env",
    "environment_image": "environment",
    "host_environment_tree": "environment",
    "validate": "validation",
    "PytestConfig": "testing",
    "TESTBED": "testing",
    "TreeError": "testing",
    "judge_run": "testing",
    "prepare_tree": "testing",
    "pytest_config": "testing",
    "read_tree": "testing",
    "restore_files": "testing",
    "run_tests": "testing",
    "tree_diff": "testing",
    "working_tree_diff": "testing",
}
"""Each public name and the module it lives in (imported on first use)."""

__getattr__ = lazy_exports(__name__, _EXPORTS)
__all__ = sorted(_EXPORTS)
