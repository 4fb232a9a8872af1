"""A repository in a sandbox: ship its tree in, run its test suite unforgeably, read the agent's patch back out.

The repository lives in ``testbed/`` under the sandbox's work directory (``/work/testbed`` on both real
backends). Every transfer is one archive and one kernel cell (:func:`prepare_tree`, :func:`restore_files`,
:func:`read_tree`), which is several times faster than a ``write_file`` per file for a real repository.

:func:`run_tests` runs pytest (or, for an environment that names it, unittest, with no guard: such a run is not
tamper-checked) as a child process of the kernel, in its own process group, killed at the time
limit. Nothing of the run's machinery is inside the repository: a per-run folder ``.agentrl-run-<nonce>/``
next to it holds the bootstrap, the guard plugin (:mod:`agentgym_envs.swe.pytest_guard`), the configuration (a
copy of the host's, so edits to ``setup.cfg`` or ``pyproject.toml`` change nothing) and the report. The
bootstrap imports pytest and the guard before the repository joins ``sys.path`` (so a ``pytest.py`` or
``_pytest/`` in the repository cannot stand in for them), with ``PYTEST_DISABLE_PLUGIN_AUTOLOAD=1``,
``-p no:cacheprovider``, no user site-packages and no ``PYTHON*`` variables. The run is ``"error"`` when:

    ======================================================  ===============================================
    what happened                                           how it is seen
    ======================================================  ===============================================
    pytest died before reporting (``os._exit`` at import,   no report with this run's nonce
    a crash, a kill)
    pytest's reporting was tampered with (a report          the guard's findings (identities, hooks,
    rewritten to passed, ``_pytest`` monkeypatched, a       reports checked against what each phase raised)
    plugin registered during the run)
    a collection error, a usage error, an internal error    the report's collection errors, the exit code
    the exit code contradicts the report (0 with failures,  report vs exit code (an ``atexit`` handler
    1 with none, a different code than the session's)       calling ``os._exit(0)`` is caught here)
    a requested test was not reported (deleted, renamed)    requested ids missing from the outcomes
    ======================================================  ===============================================

and ``"timeout"`` past ``timeout_s``. Each such run names its reason (:attr:`TestRun.reason`, one of
:data:`~tasks.swe.testrun.REASONS`): ``no_report`` (``memory`` when a MemoryError ended pytest, ``killed`` when a
signal did), ``tampered``, ``memory`` (a MemoryError at collection or as pytest's internal error),
``collection_error``, ``internal_error`` / ``interrupted`` / ``usage_error`` / ``no_tests`` (the exit codes),
``exit_code``, ``not_reported``, ``timeout``. Code under test runs inside the pytest process, so the guard is a
tripwire, not a wall (see :mod:`agentgym_envs.swe.pytest_guard`): grading must run on a fresh sandbox with only
the agent's diff applied and the test files restored (:func:`restore_files`), so that no process of the
agent lives on and no file of its own survives but through its diff.

Example:
    >>> prepare_tree(sandbox, files)                                     # doctest: +SKIP
    >>> run = run_tests(sandbox, ["tests/test_ops.py::test_add"], timeout_s=60)  # doctest: +SKIP
    >>> run.status, run.outcomes                                         # doctest: +SKIP
    ('ok', {'tests/test_ops.py::test_add': 'passed'})
"""

from __future__ import annotations

import difflib
import io
import json
import re
import secrets
import tarfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from agentgym_envs.errors import SandboxError
from agentgym_envs.sandbox.base import Sandbox
from rewards.swe import RULES, swebench_matches, swebench_test_key
from tasks.errors import TaskError
from tasks.swe.runners import LOG_RUNNERS, LogRunner
from tasks.swe.testrun import OUTCOMES, SEVERITY, TestRun

TESTBED = "testbed"
"""The repository's folder, relative to the sandbox's work directory."""

CACHE_DIRS = frozenset({"__pycache__", ".pytest_cache"})
"""Folders that are never part of a patch."""

CONFIG_FILES = ("pytest.ini", ".pytest.ini", "pyproject.toml", "tox.ini", "setup.cfg")
"""pytest's configuration files at a repository's root, in the order pytest looks for them."""

CONFIG_SECTIONS = {"pyproject.toml": b"[tool.pytest.ini_options]", "tox.ini": b"[pytest]",
                   "setup.cfg": b"[tool:pytest]"}
"""The section that makes a shared configuration file pytest's (``pytest.ini`` counts whatever it holds)."""

GUARD_MODULE = "agentrl_pytest_guard"
GUARD_SOURCE = (Path(__file__).parent / "pytest_guard.py").read_text(encoding="utf-8")
"""The guard plugin, written into each run's folder as :data:`GUARD_MODULE`."""

ENV_SITE = "/opt/agentrl-swe-env/site"
"""Where a per-repository environment's installed tree is in the sandbox (:mod:`agentgym_envs.swe.environment`)."""

PTH_FILE = "agentrl-testbed.pth"
"""The file of an environment's tree that puts the repository's package roots on ``sys.path``."""

ENV_SITE_PATH_SOURCE = f"""\
if os.path.isdir({ENV_SITE!r}):  # the repository's environment, ahead of the interpreter's own packages
    before = list(sys.path)
    site.addsitedir({ENV_SITE!r})
    sys.path[:] = [path for path in sys.path if path not in before] + before
"""
"""Source lines (needing ``os``, ``site`` and ``sys``) that put the repository's environment at :data:`ENV_SITE`,
when the sandbox has one, ahead of the interpreter's own packages: every bootstrap that starts tests runs them."""

BOOTSTRAP_SOURCE = f'''"""Start pytest with the guard, imported before the repository and its environment."""
import os
import site
import sys

import pytest
import {GUARD_MODULE}  # noqa: F401

{ENV_SITE_PATH_SOURCE}# the repository's package roots, ahead of an image's own install of it (editable, /testbed)
sys.path[:0] = [root for root in os.environ.get("AGENTRL_PACKAGE_ROOTS", "").split(":") if root]
sys.path.insert(0, os.getcwd())
raise SystemExit(pytest.console_main())
'''

UNITTEST_BOOTSTRAP_SOURCE = f'''"""Run unittest tests and write this run's report (not tamper-checked: no guard)."""
import json
import os
import re
import site
import sys
import unittest

SETTINGS = json.load(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "guard.json")))
{ENV_SITE_PATH_SOURCE}sys.path.insert(0, os.getcwd())


def dotted(test_id):
    """SWE-bench's Django form 'test_f (pkg.module.Class)' as unittest's 'pkg.module.Class.test_f'."""
    match = re.fullmatch(r"(\\S+) \\(([\\w.]+)\\)", test_id)
    return f"{{match.group(2)}}.{{match.group(1)}}" if match else test_id


REQUESTED = None if SETTINGS["test_ids"] is None else {{dotted(i): i for i in SETTINGS["test_ids"]}}
SEVERITY = {SEVERITY!r}
outcomes, collection_errors = {{}}, []


class Result(unittest.TextTestResult):
    def record(self, test, outcome):
        if type(test).__name__ in ("_FailedTest", "ModuleImportFailure"):
            collection_errors.append(test.id())
            return
        key = REQUESTED.get(test.id(), test.id()) if REQUESTED else test.id()
        if key not in outcomes or SEVERITY[outcome] > SEVERITY[outcomes[key]]:
            outcomes[key] = outcome

    def addSuccess(self, test):
        super().addSuccess(test)
        self.record(test, "passed")

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self.record(test, "failed")

    def addError(self, test, err):
        super().addError(test, err)
        self.record(test, "error")

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self.record(test, "skipped")

    def addExpectedFailure(self, test, err):
        super().addExpectedFailure(test, err)
        self.record(test, "xfailed")

    def addUnexpectedSuccess(self, test):
        super().addUnexpectedSuccess(test)
        self.record(test, "xpassed")

    def addSubTest(self, test, subtest, err):
        super().addSubTest(test, subtest, err)
        if err is not None:
            self.record(test, "failed" if issubclass(err[0], test.failureException) else "error")


loader = unittest.TestLoader()
suite = unittest.TestSuite()
if REQUESTED is None:
    suite.addTests(loader.discover(SETTINGS["start"], top_level_dir=os.getcwd()))
else:
    for name in REQUESTED:
        try:
            suite.addTests(loader.loadTestsFromName(name))
        except AttributeError as error:  # a name that names no test: it is not reported
            print(f"cannot load {{name}}: {{error!r}}")
        except Exception as error:  # its module does not import: a collection error
            print(f"cannot load {{name}}: {{error!r}}")
            collection_errors.append(name)
result = unittest.TextTestRunner(stream=sys.stdout, resultclass=Result, verbosity=2).run(suite)
exitstatus = 2 if collection_errors else 5 if result.testsRun == 0 else 0 if result.wasSuccessful() else 1
with open(SETTINGS["report"], "w") as report:
    json.dump({{"nonce": SETTINGS["nonce"], "outcomes": outcomes, "exitstatus": exitstatus,
               "collection_errors": collection_errors, "not_collected": [], "tamper": []}}, report)
sys.stdout.flush()
os._exit(exitstatus)
'''
"""The unittest runner's bootstrap: unittest's own loader and result, SWE-bench's Django ids read as dotted
names, outcomes keyed by the requested ids. No guard: such a run is not tamper-checked (``info["grading"]``
says so)."""

TEST_RUNNERS = ("pytest", "unittest", *LOG_RUNNERS)
"""The runners :func:`run_tests` drives: pytest under the guard, unittest with its own result, and the
per-repository commands of :data:`~tasks.swe.runners.LOG_RUNNERS`, read from their logs."""

MAX_TREE_BYTES = 64 << 20
"""Largest archive of a working tree :func:`read_tree` reads back."""

MAX_REPORT_BYTES = 64 << 20
"""Largest guard report read back."""

CELL_GRACE_S = 30.0
"""Seconds a harness cell may take beyond the suite's own time limit (killing, writing the status)."""

EXIT_CODES = {2: "interrupted", 3: "internal error", 4: "usage error", 5: "no tests collected"}
"""pytest's exit codes other than 0 (all passed) and 1 (some failed)."""

EXIT_REASONS = {2: "interrupted", 3: "internal_error", 4: "usage_error", 5: "no_tests"}
"""The :data:`~tasks.swe.testrun.REASONS` of pytest's exit codes other than 0 and 1."""

UNPACK_CELL = r'''
def _agentrl_unpack(archive, folder, clear, keep_conftests, nonce):
    import os, shutil, tarfile
    if clear:
        shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(folder, exist_ok=True)
    with tarfile.open(archive) as tar:
        members = tar.getmembers()
        for member in members:  # a symlink or folder the agent put where a file goes is removed, not followed
            path = os.path.join(folder, member.name)
            if os.path.islink(path) or (os.path.isfile(path) and member.isdir()):
                os.remove(path)
            elif os.path.isdir(path) and not member.isdir():
                shutil.rmtree(path)
        extra = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
        tar.extractall(folder, members, **extra)
    os.remove(archive)
    removed = []
    if keep_conftests is not None:
        for root, dirs, names in os.walk(folder):
            for name in names:
                path = os.path.relpath(os.path.join(root, name), folder)
                if name == "conftest.py" and path not in keep_conftests:
                    os.remove(os.path.join(root, name))
                    removed.append(path)
    print(nonce + ":" + json.dumps({"removed": sorted(removed)}))
'''

PACK_CELL = r'''
def _agentrl_pack(folder, archive, skip_dirs, nonce):
    import os, tarfile
    os.makedirs(os.path.dirname(archive), exist_ok=True)
    unreadable = []
    with tarfile.open(archive, "w:gz", compresslevel=1) as tar:
        for root, dirs, names in os.walk(folder):
            dirs[:] = sorted(d for d in dirs if d not in skip_dirs and not os.path.islink(os.path.join(root, d)))
            for name in sorted(names):
                path = os.path.join(root, name)
                if name.endswith(".pyc") or os.path.islink(path) or not os.path.isfile(path):
                    continue
                try:
                    tar.add(path, arcname=os.path.relpath(path, folder), recursive=False)
                except OSError:
                    unreadable.append(os.path.relpath(path, folder))
    print(nonce + ":" + json.dumps({"exists": os.path.isdir(folder), "size": os.path.getsize(archive),
                                    "unreadable": unreadable}))
'''

MALLOC_ARENA_MAX = "2"
"""glibc's malloc arenas per process in the test run and the agent's commands. The memory limit caps address
space, and each thread's arena reserves 64 MB of it: at 1024 MB a suite that starts 32 threads died of
``MemoryError`` (docker) or "can't start new thread" (bwrap); with 2 arenas 64 threads run in 512 MB."""

RUN_CELL = r'''
def _agentrl_run_pytest(run_dir, repo, python, argv, extra_env, timeout_s, nonce):
    import os, signal, subprocess, sys, time
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": run_dir, "LANG": "C.UTF-8",
           "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "MALLOC_ARENA_MAX": "@MALLOC_ARENA_MAX@", **extra_env}
    command = [python or sys.executable, *argv]
    os.makedirs(run_dir, exist_ok=True)
    log_path = os.path.join(run_dir, "pytest.log")
    with open(log_path, "wb") as log:
        started = time.monotonic()
        child = subprocess.Popen(command, cwd=repo, env=env, stdin=subprocess.DEVNULL, stdout=log,
                                 stderr=subprocess.STDOUT, start_new_session=True)
        try:
            returncode = child.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            returncode = None
        duration = time.monotonic() - started
        try:  # the whole process group: the suite's own children too
            os.killpg(child.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        child.wait()
    with open(log_path, "rb") as log:
        log.seek(max(0, os.path.getsize(log_path) - 1500))
        tail = log.read().decode("utf-8", "replace")
    print(nonce + ":" + json.dumps({"returncode": returncode, "duration_s": duration, "log_tail": tail[-600:]}))
'''.replace("@MALLOC_ARENA_MAX@", MALLOC_ARENA_MAX)

CLEANUP_CELL = ("import shutil as _agentrl_shutil; _agentrl_shutil.rmtree({path!r}, ignore_errors=True)\n"
                "del _agentrl_shutil")


class TreeError(SandboxError):
    """A repository tree could not be written into or read back from the sandbox; the message says why.

    In a fresh sandbox this is an infrastructure fault (or limits too small for the repository); in one where
    the agent's code ran, that code may have broken the kernel, which is the agent's outcome.
    """


@dataclass(frozen=True)
class PytestConfig:
    """The configuration file a run uses, from the host's copy of the repository.

    Attributes:
        name: Its file name (pytest reads the format from it: ``pytest.ini``, ``setup.cfg``, ``tox.ini``,
            ``pyproject.toml``).
        data: Its bytes.
    """

    name: str = "pytest.ini"
    data: bytes = b"[pytest]\n"


def pytest_config(files: Mapping[str, bytes]) -> PytestConfig:
    """The configuration pytest would read at the root of the repository ``files`` (an empty one if none).

    Only the root is searched, as pytest does with ``--rootdir`` at the root. ini-options of type "paths"
    (``pythonpath``) are read relative to the copy's folder outside the repository, so a repository that needs
    them does not run as is.
    """
    for name in CONFIG_FILES:
        data = files.get(name)
        if data is not None and (name not in CONFIG_SECTIONS or CONFIG_SECTIONS[name] in data):
            return PytestConfig(name=name, data=data)
    return PytestConfig()


def repo_pytest_config(repo_source: Mapping[str, Any], files: Mapping[str, bytes]) -> PytestConfig:
    """The pytest configuration a task's tests run with, by ``repo_source["pytest_config"]``, at synthesis and grading.

    ``"empty"`` (a pin's own configuration may ask for plugins the sandbox lacks) or ``"repository"``
    (:func:`pytest_config` of ``files``, the host's copy); when absent, empty for a pin and the repository's for a
    folder.
    """
    choice = repo_source.get("pytest_config", "empty" if repo_source.get("kind") == "pypi" else "repository")
    return pytest_config(files) if choice == "repository" else PytestConfig()


def is_cache_path(path: str) -> bool:
    """True for byte-code and pytest caches, which never belong to a patch."""
    return path.endswith(".pyc") or any(part in CACHE_DIRS for part in PurePosixPath(path).parts)


def _archive(files: Mapping[str, bytes]) -> bytes:
    """A gzipped tar of ``files`` (path -> bytes), every file mode 0644."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz", compresslevel=1) as tar:
        for path, data in sorted(files.items()):
            info = tarfile.TarInfo(_checked_path(path))
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def _checked_path(path: str) -> str:
    """``path`` when it is a relative POSIX path that stays inside its folder.

    Raises:
        ValueError: An absolute path, or one with ``..`` or empty parts.
    """
    parts = path.split("/")
    if not path or path.startswith("/") or any(part in ("", ".", "..") for part in parts):
        raise ValueError(f"expected a relative path inside the repository, got {path!r}")
    return path


def _cell_status(sandbox: Sandbox, definition: str, call: str, nonce: str, timeout_s: float) -> dict[str, Any]:
    """Run a harness cell that ends by printing ``<nonce>:<json>``; that JSON.

    Raises:
        TreeError: The cell failed or printed no status line (its output says why).
    """
    result = sandbox.run_code(definition + "\n" + call, timeout_s=timeout_s)
    match = re.search(rf"(?:^|\n){nonce}:(\{{.*\}})\n?$", result.output)
    if not result.ok or match is None:
        raise TreeError(f"a harness cell failed in the {sandbox.backend} sandbox: {result.output[-1500:]}")
    return json.loads(match.group(1))


def _unpack(sandbox: Sandbox, files: Mapping[str, bytes], folder: str, *, clear: bool,
            keep_conftests: list[str] | None) -> list[str]:
    """Ship ``files`` as one archive and unpack it into ``folder``; the conftest files removed."""
    nonce = secrets.token_hex(8)
    archive = f".agentrl-tree-{nonce}.tar.gz"
    sandbox.write_file(archive, _archive(files))
    call = f"_agentrl_unpack({archive!r}, {folder!r}, {clear!r}, {keep_conftests!r}, {nonce!r}); del _agentrl_unpack"
    status = _cell_status(sandbox, "import json\n" + UNPACK_CELL, call, nonce, max(sandbox.limits.timeout_s, 60.0))
    return status["removed"]


def prepare_tree(sandbox: Sandbox, files: Mapping[str, bytes], *, folder: str = TESTBED) -> None:
    """Make ``folder`` in the sandbox's work directory hold exactly the repository ``files`` (path -> bytes).

    Raises:
        ValueError: A path that is absolute or leaves the repository.
        TreeError: The archive could not be unpacked (is the sandbox's ``disk_mb`` large enough?).
        SandboxError: The sandbox itself failed.
    """
    _unpack(sandbox, files, folder, clear=True, keep_conftests=None)


def restore_files(sandbox: Sandbox, files: Mapping[str, bytes], *, folder: str = TESTBED) -> list[str]:
    """Put the host's copy of ``files`` (the test files) back, and remove every ``conftest.py`` not among them.

    ``files`` must hold every ``conftest.py`` of the original repository (:func:`tasks.swe.repos.is_test_file`
    selects them with the tests). A symlink or folder standing where one of ``files`` goes is removed first.

    Returns:
        The paths of the conftest files that were removed.

    Raises:
        TreeError: The archive could not be unpacked.
        SandboxError: The sandbox itself failed.
    """
    keep = sorted(path for path in files if PurePosixPath(path).name == "conftest.py")
    return _unpack(sandbox, files, folder, clear=False, keep_conftests=keep)


def read_tree(sandbox: Sandbox, *, folder: str = TESTBED) -> dict[str, bytes]:
    """The regular files under ``folder`` in the sandbox (path -> bytes), caches and symlinks left out.

    A missing folder reads as empty; a file the sandbox user cannot read is left out (as if deleted).

    Raises:
        TreeError: The tree could not be packed, or its archive is larger than :data:`MAX_TREE_BYTES`.
        SandboxError: The sandbox itself failed.
    """
    nonce = secrets.token_hex(8)
    scratch = f".agentrl-tree-{nonce}"
    archive = f"{scratch}/tree.tar.gz"
    call = f"_agentrl_pack({folder!r}, {archive!r}, {sorted(CACHE_DIRS)!r}, {nonce!r}); del _agentrl_pack"
    status = _cell_status(sandbox, "import json\n" + PACK_CELL, call, nonce, max(sandbox.limits.timeout_s, 60.0))
    try:
        if status["size"] > MAX_TREE_BYTES:
            raise TreeError(f"the working tree's archive is {status['size']} bytes, more than {MAX_TREE_BYTES}")
        data = sandbox.read_file(archive, max_bytes=MAX_TREE_BYTES)
    finally:
        sandbox.run_code(CLEANUP_CELL.format(path=scratch))
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        return {member.name: tar.extractfile(member).read() for member in tar.getmembers() if member.isfile()}


def _lines(text: str) -> list[str]:
    """``text`` split after each ``\\n`` only (``str.splitlines`` also splits at form feeds and the like)."""
    lines = text.split("\n")
    return [line + "\n" for line in lines[:-1]] + ([lines[-1]] if lines[-1] else [])


def _file_diff(path: str, old: bytes | None, new: bytes | None) -> str:
    """The ``git diff`` of one file (``None`` = absent on that side), with ``a/`` and ``b/`` prefixes."""
    header = f"diff --git a/{path} b/{path}\n"
    if old is None:
        header += "new file mode 100644\n"
    elif new is None:
        header += "deleted file mode 100644\n"
    source, target = ("/dev/null" if old is None else f"a/{path}"), ("/dev/null" if new is None else f"b/{path}")
    try:
        old_lines, new_lines = _lines((old or b"").decode()), _lines((new or b"").decode())
    except UnicodeDecodeError:
        return header + f"Binary files {source} and {target} differ\n"
    body = difflib.unified_diff(old_lines, new_lines, fromfile=source, tofile=target)
    return header + "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n"
                            for line in body)


def tree_diff(before: Mapping[str, bytes], after: Mapping[str, bytes]) -> str:
    """The unified diff (``git diff`` style) that turns tree ``before`` into tree ``after``, caches excluded.

    Files are compared by content only (modes and symlinks are not part of a tree here); a file that is not
    UTF-8 text appears as ``Binary files ... differ``, which ``patch`` cannot apply.
    """
    paths = sorted(path for path in before.keys() | after.keys() if not is_cache_path(path))
    return "".join(_file_diff(path, before.get(path), after.get(path))
                   for path in paths if before.get(path) != after.get(path))


def working_tree_diff(sandbox: Sandbox, files: Mapping[str, bytes], *, folder: str = TESTBED) -> str:
    """The agent's patch: the diff from the host's copy ``files`` to the tree in the sandbox's ``folder``.

    Computed on the host from the files read back (:func:`read_tree`); applies to the host's copy with
    ``patch -p1`` or ``git apply``.

    Raises:
        TreeError: The tree could not be read back.
        SandboxError: The sandbox itself failed.
    """
    return tree_diff(files, read_tree(sandbox, folder=folder))


def _pytest_argv(test_ids: Sequence[str] | None, suite_paths: Sequence[str], config_path: str,
                 repo: str) -> list[str]:
    """pytest's arguments: the guard first, no cache, the given configuration and root, then the requested tests'
    files (or ``suite_paths`` when no test is named)."""
    files = sorted({test_id.split("::", 1)[0] for test_id in test_ids}) if test_ids is not None else list(suite_paths)
    return ["-p", GUARD_MODULE, "-p", "no:cacheprovider", "-c", config_path, "--rootdir", repo,
            "-q", "--tb=short", "--color=no", *files]


def _write_run_folder(sandbox: Sandbox, run_dir: str, nonce: str, test_ids: Sequence[str] | None,
                      config: PytestConfig, workdir: str, rules: str, runner: str = "pytest",
                      start: str = ".") -> None:
    """Write the runner's bootstrap, the guard, its settings and the configuration into ``run_dir``."""
    settings = {"nonce": nonce, "test_ids": None if test_ids is None else list(test_ids), "rules": rules,
                "report": f"{workdir}/{run_dir}/report.json", "start": start}
    bootstrap = UNITTEST_BOOTSTRAP_SOURCE if runner == "unittest" else BOOTSTRAP_SOURCE
    sandbox.write_file(f"{run_dir}/bootstrap.py", bootstrap.encode())
    sandbox.write_file(f"{run_dir}/{GUARD_MODULE}.py", GUARD_SOURCE.encode())
    sandbox.write_file(f"{run_dir}/guard.json", json.dumps(settings).encode())
    sandbox.write_file(f"{run_dir}/config/{config.name}", config.data)


def _work_directory(sandbox: Sandbox) -> str:
    """The kernel's working directory (the sandbox's work directory), as an absolute path."""
    nonce = secrets.token_hex(8)
    return _cell_status(sandbox, "import json, os", f"print({nonce!r} + ':' + json.dumps({{'cwd': os.getcwd()}}))",
                        nonce, 30.0)["cwd"]


def run_tests(sandbox: Sandbox, test_ids: Sequence[str] | None, *, timeout_s: float, folder: str = TESTBED,
              config: PytestConfig | None = None, suite_paths: Sequence[str] = (), rules: str = "strict",
              runner: str = "pytest", python: str = "", package_roots: Sequence[str] = (),
              test_files: Sequence[str] = ()) -> TestRun:
    """Run the repository's tests ``test_ids`` (the whole suite when None) in the sandbox, under the guard.

    Args:
        sandbox: A sandbox whose ``folder`` holds the repository. For grading, a fresh one where no code of the
            agent ever ran (the harness runs in its kernel).
        test_ids: pytest node ids relative to the repository's root; None runs the whole suite: every test
            pytest collects from ``suite_paths``.
        timeout_s: Wall-clock limit of the pytest process; past it, its process group is killed.
        folder: The repository's folder, relative to the work directory.
        config: The configuration to run with (:func:`pytest_config` of the host's copy); an empty one when
            None. The repository's own configuration files are never read.
        suite_paths: Files or folders that hold the suite, relative to the repository's root (e.g. a pin's
            ``test_paths``), collected when ``test_ids`` is None; none means the configuration's ``testpaths``,
            else the whole repository.
        rules: How ``test_ids`` name tests: ``"strict"``, each a full node id; ``"swebench"``, as SWE-bench's
            grading reads them (:func:`rewards.swe.swebench_matches`: the tests whose node id, cut at its first
            whitespace, is the id, or begins with an id cut mid-parameter). The outcomes are keyed by full node
            id either way.
        runner: ``"pytest"`` (under the guard), ``"unittest"`` (:data:`UNITTEST_BOOTSTRAP_SOURCE`: unittest's
            dotted ids, or SWE-bench's Django form ``test_f (module.Class)``) or a per-repository command of
            :data:`~tasks.swe.runners.LOG_RUNNERS` (``"django"``, ``"sympy"``: its log parsed, :func:`judge_log_run`).
            Only pytest's runs are tamper-checked; the others' ids are matched as given whatever ``rules`` say.
        python: The interpreter in the sandbox that runs the tests (``""``: the kernel's own).
        package_roots: The repository's package roots, relative to it (``"."``, ``"src"``), put ahead of the
            interpreter's own packages (an image's install of the repository at ``/testbed`` included).
        test_files: The test files the task's test patch touches (what sympy's runner runs).

    Returns:
        The run; see the module's table for when it is ``"error"`` (:attr:`TestRun.reason` names which).

    Raises:
        ValueError: ``test_ids`` is empty, unknown ``rules`` or an unknown ``runner``.
        SandboxError: The sandbox itself failed, or the harness could not run (an infrastructure fault in a
            fresh sandbox).
    """
    if test_ids is not None and not test_ids:
        raise ValueError("expected test ids to run (or None for the whole suite), got none")
    if rules not in RULES or runner not in TEST_RUNNERS:
        raise ValueError(f"rules, runner: expected one of {list(RULES)} and {list(TEST_RUNNERS)}, got {rules!r} and "
                         f"{runner!r}")
    workdir = _work_directory(sandbox)
    repo = f"{workdir}/{folder}"
    roots = tuple(repo if root in (".", "") else f"{repo}/{root.strip('/')}" for root in package_roots)
    command = _Command(workdir, repo, python, roots)
    log_runner = LOG_RUNNERS.get(runner)
    if log_runner is not None:
        return _run_log_runner(sandbox, log_runner, test_ids, test_files, command, timeout_s)
    return _run_guarded(sandbox, test_ids, command, timeout_s=timeout_s, config=config or PytestConfig(),
                        suite_paths=suite_paths, rules=rules if runner == "pytest" else "strict", runner=runner)


@dataclass(frozen=True)
class _Command:
    """Where and with what a test run's command runs: the sandbox's work directory, the repository's absolute
    path (the command's working directory), the interpreter (``""``: the kernel's own) and the package roots."""

    workdir: str
    repo: str
    python: str
    roots: tuple[str, ...]


def _run_guarded(sandbox: Sandbox, test_ids: Sequence[str] | None, command: _Command, *, timeout_s: float,
                 config: PytestConfig, suite_paths: Sequence[str], rules: str, runner: str) -> TestRun:
    """pytest under the guard (or unittest with its own result): the run folder written, the run, its report
    judged (:func:`judge_run`)."""
    nonce = secrets.token_hex(16)
    run_dir = f".agentrl-run-{nonce[:16]}"
    _write_run_folder(sandbox, run_dir, nonce, test_ids, config, command.workdir, rules, runner,
                      start=suite_paths[0] if suite_paths else ".")
    argv = ["-B", "-E", "-s", f"{command.workdir}/{run_dir}/bootstrap.py"] + (
        _pytest_argv(test_ids, suite_paths, f"{command.workdir}/{run_dir}/config/{config.name}", command.repo)
        if runner == "pytest" else [])
    status, report = _run_in_kernel(sandbox, run_dir, nonce, command, argv,
                                    {"AGENTRL_PACKAGE_ROOTS": ":".join(command.roots)}, timeout_s, "report.json")
    return judge_run(status, _parse_report(report), nonce=nonce, test_ids=test_ids, rules=rules)


def _run_log_runner(sandbox: Sandbox, runner: LogRunner, test_ids: Sequence[str] | None, test_files: Sequence[str],
                    command: _Command, timeout_s: float) -> TestRun:
    """A per-repository runner's command: the run, its log parsed and judged (:func:`judge_log_run`); a usage
    error, with no run, when the task names nothing it can run."""
    try:
        argv, extra_env = _log_runner_command(runner, test_ids, test_files, command.roots)
    except ValueError as exc:
        return TestRun(status="error", reason="usage_error", detail=str(exc))
    nonce = secrets.token_hex(16)
    status, log = _run_in_kernel(sandbox, f".agentrl-run-{nonce[:16]}", nonce, command, argv, extra_env, timeout_s,
                                 "pytest.log")
    return judge_log_run(status, (log or b"").decode("utf-8", "replace"), runner, test_ids=test_ids or ())


def _run_in_kernel(sandbox: Sandbox, run_dir: str, nonce: str, command: _Command, argv: Sequence[str],
                   extra_env: Mapping[str, str], timeout_s: float, result_file: str) -> tuple[dict[str, Any],
                                                                                              bytes | None]:
    """The one kernel call of every runner: ``command``'s interpreter with ``argv`` run by :data:`RUN_CELL` (its
    output in ``run_dir/pytest.log``), then ``run_dir/result_file`` read back (None when missing) and ``run_dir``
    removed. Returns the cell's status and that file's bytes.

    Raises:
        TreeError: The harness cell failed.
        SandboxError: The sandbox itself failed.
    """
    call = (f"_agentrl_run_pytest({command.workdir + '/' + run_dir!r}, {command.repo!r}, {command.python!r}, "
            f"{list(argv)!r}, {dict(extra_env)!r}, {timeout_s!r}, {nonce!r}); del _agentrl_run_pytest")
    try:
        status = _cell_status(sandbox, "import json\n" + RUN_CELL, call, nonce, timeout_s + CELL_GRACE_S)
        try:
            result = sandbox.read_file(f"{run_dir}/{result_file}", max_bytes=MAX_REPORT_BYTES)
        except FileNotFoundError:
            result = None
    finally:
        sandbox.run_code(CLEANUP_CELL.format(path=run_dir))
    return status, result


def _log_runner_command(runner: LogRunner, test_ids: Sequence[str] | None, test_files: Sequence[str],
                        roots: Sequence[str]) -> tuple[list[str], dict[str, str]]:
    """The interpreter's arguments and environment of a per-repository runner: its script and the tests, with the
    package roots (and a built environment's site folder) on ``PYTHONPATH``, ahead of the interpreter's own.

    Raises:
        ValueError: No test ids, or ids and files that name nothing to run.
    """
    if not test_ids:
        raise ValueError(f"the {runner.name} runner runs named tests; got no test ids")
    try:
        argv = ["-B", *runner.arguments(test_ids, test_files)]
    except TaskError as exc:
        raise ValueError(str(exc)) from exc
    return argv, {"PYTHONPATH": ":".join([*roots, ENV_SITE]), "PYTHONDONTWRITEBYTECODE": "1"}


def _parse_report(data: bytes | None) -> Any:
    """The guard's report as JSON; None when it is missing or not JSON."""
    if data is None:
        return None
    try:
        return json.loads(data)
    except (ValueError, RecursionError):
        return None


def _report_problem(report: Any, nonce: str) -> str | None:
    """Why ``report`` is not this run's well-formed guard report, or None when it is."""
    if not isinstance(report, dict) or report.get("nonce") != nonce:
        return "no report with this run's nonce was written"
    outcomes = report.get("outcomes")
    if not isinstance(outcomes, dict) or not all(outcome in OUTCOMES for outcome in outcomes.values()):
        return "the report's outcomes are malformed"
    if type(report.get("exitstatus")) is not int:
        return "the report has no exit status"
    if not all(isinstance(report.get(key), list) for key in ("collection_errors", "not_collected", "tamper")):
        return "the report is malformed"
    return None


def _listed(items: Iterable[str], limit: int = 3) -> str:
    """The first ``limit`` items, comma-separated, and how many more."""
    items = list(items)
    more = f" and {len(items) - limit} more" if len(items) > limit else ""
    return ", ".join(items[:limit]) + more


Problem = tuple[str, str]
"""Why a run is invalid: its reason (:data:`~tasks.swe.testrun.REASONS`) and a detail for a reader."""


def _exit_problem(returncode: int, report: dict[str, Any]) -> Problem | None:
    """Why the exit code contradicts the report or the run, or None when it agrees."""
    if returncode != report["exitstatus"]:
        return "exit_code", f"pytest exited with code {returncode} but its session ended with {report['exitstatus']}"
    if returncode in EXIT_CODES:
        return EXIT_REASONS[returncode], f"pytest exited with code {returncode} ({EXIT_CODES[returncode]})"
    failures = [test_id for test_id, outcome in report["outcomes"].items() if outcome in ("failed", "error")]
    if returncode == 0 and failures:
        return "exit_code", f"pytest exited with code 0 but reported failures ({_listed(failures)})"
    if returncode == 1 and not failures:
        return "exit_code", "pytest exited with code 1 but reported no failure"
    if returncode not in (0, 1):
        return "exit_code", f"pytest exited with code {returncode}"
    return None


def _missing(test_ids: Sequence[str] | None, outcomes: Mapping[str, str], rules: str) -> list[str]:
    """The requested tests the outcomes lack: by full node id, or by SWE-bench's cut ids under its rules."""
    if rules == "strict":
        return sorted(set(test_ids or ()) - set(outcomes))
    keys = {swebench_test_key(test_id): None for test_id in outcomes}
    return sorted(test_id for test_id in set(test_ids or ()) if not swebench_matches(test_id, keys))


def _dead_run(status: dict[str, Any], problem: str) -> Problem:
    """Why a run without a usable report is invalid: out of memory, killed by a signal, or just no report."""
    returncode, tail = status["returncode"], status["log_tail"].strip()[-300:]
    detail = f"{problem} (pytest exited with code {returncode}): {tail}"
    if "MemoryError" in tail:
        return "memory", detail
    if returncode < 0:
        return "killed", f"{problem} (pytest was killed by signal {-returncode}): {tail}"
    return "no_report", detail


def _run_problem(status: dict[str, Any], report: Any, nonce: str, test_ids: Sequence[str] | None,
                 rules: str) -> Problem | None:
    """Why a finished run is invalid, or None when its outcomes may be used."""
    tail = status["log_tail"].strip()[-300:]
    problem = _report_problem(report, nonce)
    if problem is not None:
        return _dead_run(status, problem)
    if report["tamper"]:
        return "tampered", f"the test run was tampered with: {'; '.join(report['tamper'][:3])}"
    if report["collection_errors"]:
        problem = "collection_error", f"collection errors in {_listed(report['collection_errors'])}"
    else:
        problem = _exit_problem(status["returncode"], report)
    if problem is not None and "MemoryError" in tail:  # pytest ended abnormally for want of memory
        return "memory", f"the test run ran out of memory ({problem[1]}): {tail}"
    missing = _missing(test_ids, report["outcomes"], rules)
    if problem is not None and not (problem[0] == "no_tests" and missing):  # no test: the ids name none
        return problem[0], f"{problem[1]}: {tail}"
    if missing:
        return "not_reported", f"{len(missing)} requested tests were not reported: {_listed(missing)}"
    return None


def judge_run(status: dict[str, Any], report: Any, *, nonce: str, test_ids: Sequence[str] | None,
              rules: str = "strict") -> TestRun:
    """The :class:`TestRun` of one run, from the harness's status and the guard's report.

    Args:
        status: What the kernel cell saw: ``returncode`` (None when killed at the time limit), ``duration_s``
            and ``log_tail`` (the end of pytest's output).
        report: The guard's report as read back (None when there was none).
        nonce: This run's nonce, which the report must carry.
        test_ids: The requested tests (None: whatever pytest collected).
        rules: How a requested id names a reported test: ``"strict"``, by its full node id; ``"swebench"``, as
            SWE-bench's grading finds it (:func:`rewards.swe.swebench_matches`).

    Returns:
        ``"timeout"`` when killed, ``"error"`` with the reason (one of :data:`~tasks.swe.testrun.REASONS`) when
        the run is invalid, else ``"ok"``. The outcomes of a well-formed report are kept whatever the status.
    """
    valid_report = _report_problem(report, nonce) is None
    outcomes = report["outcomes"] if valid_report else {}
    duration = round(float(status["duration_s"]), 3)
    if status["returncode"] is None:
        return TestRun(status="timeout", outcomes=outcomes, exit_code=None, duration_s=duration, reason="timeout",
                       detail=f"the test run passed its time limit and was killed: {status['log_tail'][-300:]}")
    problem = _run_problem(status, report, nonce, test_ids, rules)
    reason, detail = problem or ("", "")
    return TestRun(status="ok" if problem is None else "error", outcomes=outcomes, exit_code=status["returncode"],
                   duration_s=duration, detail=detail, reason=reason)


def judge_log_run(status: dict[str, Any], log: str, runner: LogRunner, *, test_ids: Sequence[str]) -> TestRun:
    """The :class:`TestRun` of a per-repository runner's run, from the harness's status and the command's log.

    The outcomes are the runner's parse of the log (:mod:`tasks.swe.runners`; not tamper-checked). The run is
    ``"timeout"`` when killed at the limit, else ``"error"`` when: the command was killed by a signal
    (``killed``; ``memory`` when the log shows a MemoryError), reported no test at all (``no_report``), a test
    module did not import (``collection_error``: unittest's ``_FailedTest``), exited with another code than 0
    or 1, or with one that contradicts the outcomes (``exit_code``), or a requested test was not reported
    (``not_reported``).

    Example:
        >>> status = {"returncode": 0, "duration_s": 1.0, "log_tail": ""}
        >>> judge_log_run(status, "test_a ok\\n", LOG_RUNNERS["sympy"], test_ids=["test_a"]).outcomes
        {'test_a': 'passed'}
    """
    outcomes = runner.parse(log)
    duration, tail = round(float(status["duration_s"]), 3), log.strip()[-300:]
    if status["returncode"] is None:
        return TestRun(status="timeout", outcomes=outcomes, exit_code=None, duration_s=duration, reason="timeout",
                       detail=f"the test run passed its time limit and was killed: {tail}")
    reason, detail = _log_run_problem(status["returncode"], outcomes, tail, runner.name, test_ids) or ("", "")
    return TestRun(status="error" if reason else "ok", outcomes=outcomes, exit_code=status["returncode"],
                   duration_s=duration, detail=detail, reason=reason)


def _log_run_problem(returncode: int, outcomes: Mapping[str, str], tail: str, name: str,
                     test_ids: Sequence[str]) -> Problem | None:
    """Why a per-repository runner's run is invalid, or None when its outcomes may be used."""
    failures = [test for test, outcome in outcomes.items() if outcome in ("failed", "error", "xpassed")]
    broken = [test for test in failures if "unittest.loader._FailedTest" in test or "ModuleImportFailure" in test]
    if "MemoryError" in tail and (returncode < 0 or not outcomes):
        return "memory", f"the {name} run ran out of memory (exit code {returncode}): {tail}"
    if returncode < 0:
        return "killed", f"the {name} run was killed by signal {-returncode}: {tail}"
    if not outcomes:
        return "no_report", f"the {name} run (exit code {returncode}) reported no test: {tail}"
    if broken:
        return "collection_error", f"test modules did not import: {_listed(broken)}"
    if returncode not in (0, 1) or (returncode == 0) == bool(failures):
        return "exit_code", (f"the {name} run exited with code {returncode} and reported "
                             f"{len(failures)} failures ({_listed(failures)}): {tail}")
    missing = sorted(set(test_ids) - set(outcomes))
    if missing:
        return "not_reported", f"{len(missing)} requested tests were not reported: {_listed(missing)}"
    return None
