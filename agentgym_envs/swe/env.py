"""SWE-v0: repair a real Python repository in a sandbox, judged by the repository's own test suite.

Each episode puts the task's repository into ``testbed/`` under the sandbox's work directory (``/work/testbed``
on both real backends; SWE-bench's ``/testbed``): one archive into a reset sandbox, from a tree kept on the host
per task, as a plain one-commit-free tree (no ``.git``, no fix, no hidden test ids). Three tools
(:mod:`agentgym_envs.swe.tools`):

- ``bash``: one command in the repository folder (``bash -c``, stopped after ``bash_timeout_s`` with its
  process group; the output's head and tail kept, the bytes cut between them counted; the exit code shown);
- ``editor``: SWE-agent's ``str_replace_editor`` (``view`` with line numbers and an optional range, a folder
  view lists files two levels deep; ``create``; ``str_replace`` of a unique string; ``insert`` after a line);
- ``submit``: ends the episode (an ``<answer>`` does too).

Grading, after ``submit``, an answer, or at the registered turn limit (then ``truncated``, with the reward:
:attr:`~agentgym_envs.core.TextEnv.scores_at_turn_limit`): the working tree is read back, the agent's patch is
its diff from the original tree; the sandbox is reset and gets a grading tree, the agent's files with every
test file (:func:`~tasks.swe.repos.is_test_file`, conftests included) put back from the host copy (and, for a
SWE-bench task, its ``test_patch`` applied) and every test file the agent added removed; then the
FAIL_TO_PASS and PASS_TO_PASS tests run under the guard of :func:`~agentgym_envs.swe.testing.run_tests`, with
the pytest configuration the task was judged with (:func:`grading_config`; never the sandbox's files). No
process of the agent survives into the grading run, and nothing of its own reaches it but its edits of non-test
files. The evidence is ``{"test_run": TestRun.to_dict(), "patch": str, "truncated": bool, "rules": str}``,
scored by :func:`~rewards.swe.swe_resolved_reward`.

Rules (``rules=``): ``"strict"`` (the default: only ``passed`` passes, test ids are full pytest node ids) or
``"swebench"`` (SWE-bench's harness: ``xfail`` passes, a skipped PASS_TO_PASS test is kept, and test ids are
matched as SWE-bench's pytest log parser cuts them, at the first whitespace; see :mod:`rewards.swe`), so that
numbers can be set beside published ones. Under both, the guard runs only the tests the ids name.

Grading never raises out of ``step`` but for an infrastructure fault (a sandbox that died: an infra episode,
``info["infra_error"]``). Anything else that goes wrong while grading is an *invalid run*: the episode ends
scored 0 with the reward component ``invalid`` at 1.0 (``benchmarks.evaluate`` counts such episodes apart from
wrong answers), the last observation says why, and ``info["grading"]`` (:func:`grading_info`, on every step that
graded) carries ``valid``, ``status``, ``reason``, ``detail``, ``exit_code``, ``duration_s``, ``tests``, the
``runner`` and ``tamper_checked`` (False for a unittest run, which has no guard, and for a per-repository
command read from its log: Django's ``runtests.py``, sympy's ``bin/test``, :mod:`tasks.swe.runners`). The reasons
(:data:`~tasks.swe.testrun.REASONS`):

    ====================  ==================================================================================
    reason                what went wrong
    ====================  ==================================================================================
    ``timeout``           the run passed ``test_timeout_s``
    ``memory``            a MemoryError ended it (pytest's ``INTERNALERROR> MemoryError``, exit 3, or at
                          collection): ``sandbox_limits.memory_mb`` may be too small for the suite
    ``killed``            pytest died by a signal before reporting (the OOM killer, a kill)
    ``collection_error``  a test file did not import
    ``internal_error``,   pytest's exit codes 3, 2, 4 and 5
    ``interrupted``,
    ``usage_error``,
    ``no_tests``
    ``no_report``,        no well-formed report, a tamper finding of the guard, an exit code that contradicts
    ``tampered``,         the report, a requested test not reported (:mod:`agentgym_envs.swe.testing`)
    ``exit_code``,
    ``not_reported``
    ``tree_unreadable``   the agent's working tree could not be read back (its processes broke the sandbox)
    ``tree_unwritable``   the patched repository does not fit into the grading sandbox
    ``test_patch``        the task's ``test_patch`` does not apply: the repository folder is not at
                          ``base_commit`` (not the agent's doing: check the folder)
    ``grader_error``      the grading code raised (a bug; logged with its traceback)
    ====================  ==================================================================================

Two task families: ``synthetic`` (bugs planted in a pinned PyPI package, :mod:`tasks.swe`) and ``swebench``
(SWE-bench-format instances, :func:`~tasks.swe.instances.load_swebench`, or SWE-smith's,
:func:`~tasks.swe.instances.load_swesmith`, with the repository in a folder or a git clone on this machine).

A task with ``metadata["environment"]`` (a :class:`~tasks.swe.environments.RepoEnvironment`, which the loaders
derive from the repository) runs in that environment: its packages and the repository's editable install at
:data:`~agentgym_envs.swe.testing.ENV_SITE` (:mod:`agentgym_envs.swe.environment`: its image on docker, its tree
bound on bwrap), with its ``memory_mb`` and ``test_timeout_s`` when it sets them; a task of another environment than
the last one opens a new sandbox. An environment with an ``image`` (a SWE-bench image the user loaded into the
local Docker) runs in that image with its interpreter, the agent's tree ahead of the image's install of
``/testbed`` (docker only: :func:`refuse_missing_images`). The env refuses tasks that failed validation
(``python -m agentgym_envs.swe validate``), logs those never validated, and refuses a repository pytest imports
itself.
"""

from __future__ import annotations

import dataclasses
import logging
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Unpack

from agentgym_envs.core import TextEnvOptions
from agentgym_envs.errors import EnvConfigError, SandboxCrashedError
from agentgym_envs.sandbox import KernelSandbox, SandboxLimits
from agentgym_envs.sandboxed import SandboxEnv
from agentgym_envs.swe.environment import (
    environment_image,
    environment_sandbox,
    image_testbed_tree,
    require_local_image,
)
from agentgym_envs.swe.limits import SWE_SANDBOX_LIMITS
from agentgym_envs.swe.testing import (
    TESTBED,
    PytestConfig,
    TreeError,
    prepare_tree,
    read_tree,
    repo_pytest_config,
    run_tests,
    tree_diff,
)
from agentgym_envs.swe.tools import (
    CellError,
    EditorError,
    insert_after,
    list_folder,
    read_text,
    replace_once,
    repo_path,
    run_bash,
    setup_shell,
    snippet,
    view_file,
)
from agentgym_envs.tools import Tool, ToolResult
from rewards import (
    CompositeReward,
    RewardFn,
    Term,
    format_reward,
    make_tool_shaping_reward,
    swe_partial_reward,
    swe_patch_similarity_reward,
    swe_resolved_reward,
)
from rewards.swe import RULES
from tasks import InfrastructureError, Task, TaskError, Trajectory
from tasks.errors import did_you_mean
from tasks.swe.environments import RepoEnvironment, package_root, vcs_version_files
from tasks.swe.instances import as_test_ids, refuse_without_fail_to_pass, tree_digest
from tasks.swe.patches import PatchError, apply_patch, parse_patch
from tasks.swe.repos import folder_files, is_test_file, pin, repository_files
from tasks.swe.runners import LOG_RUNNERS
from tasks.swe.testrun import REASONS, TestRun

if TYPE_CHECKING:  # the docker SDK is imported only when the docker backend is used
    from agentgym_envs.sandbox.docker import DockerSandboxPool

logger = logging.getLogger(__name__)

FAMILIES = ("synthetic", "swebench")
REQUIRED_TOOLS = {family: ("bash",) for family in FAMILIES}
"""``bash`` alone solves every task (mini-swe-agent's setting); the editor is a convenience, not required."""

TREE_CACHE_SIZE = 64
"""Tasks whose repository trees the env keeps on the host (a tree shares its unchanged files with the pin's)."""

BASH_SCHEMA = {
    "type": "object",
    "properties": {"command": {"type": "string", "description": "A bash command, run in the repository folder."}},
    "required": ["command"],
    "additionalProperties": False,
}
EDITOR_SCHEMA = {
    "type": "object",
    "properties": {
        "command": {"type": "string", "enum": ["view", "create", "str_replace", "insert"],
                    "description": "view a file or folder, create a file, replace a unique string, insert lines."},
        "path": {"type": "string", "description": "A path relative to the repository, or absolute under it."},
        "file_text": {"type": "string", "description": "create: the new file's content."},
        "old_str": {"type": "string", "description": "str_replace: the exact text to replace (must be unique)."},
        "new_str": {"type": "string", "description": "str_replace: the replacement (default empty); insert: the "
                                                     "lines to insert."},
        "insert_line": {"type": "integer", "description": "insert: the line after which to insert (0: the top)."},
        "view_range": {"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 2,
                       "description": "view: [start, end] lines of a file, 1-based; end -1 for the end."},
    },
    "required": ["command", "path"],
    "additionalProperties": False,
}
SUBMIT_SCHEMA = {"type": "object", "properties": {}, "additionalProperties": False}

INSTRUCTIONS = (
    "You are fixing a bug in a Python repository, in {root}. `bash` runs one command there (a fresh shell each "
    "time, stopped after {timeout:g} s; background processes end with the command; a long output shows its start "
    "and end). `editor` views and edits files. The sandbox has no network and the repository no git history. "
    "Change the library code, not the tests: the test files are restored before grading. Your changes are graded "
    "by the repository's own tests when you call `submit` (or give an <answer>, or reach the turn limit)."
)
RESTORED = ("[the command broke the sandbox's shell, which was restarted: the repository was put back as it was at "
            "the start of the episode, so your earlier edits are lost]")


def swe_reward(*, partial: bool = False, similarity_weight: float = 0.0) -> CompositeReward:
    """The SWE reward: an outcome term, patch similarity, and format and tool-use terms logged at weight 0.

    Args:
        partial: Outcome = :func:`~rewards.swe.swe_partial_reward` (the share of FAIL_TO_PASS tests fixed, paid
            only when every PASS_TO_PASS test still passes) instead of resolved (0/1).
        similarity_weight: Weight of SWE-RL's patch similarity to the reference fix
            (:func:`~rewards.swe.swe_patch_similarity_reward`); 0 logs it only.

    Raise the weights of ``format`` and ``tool_use`` (kept small against the outcome) to shape.
    """
    return CompositeReward([
        Term("outcome", swe_partial_reward if partial else swe_resolved_reward, weight=1.0),
        Term("similarity", swe_patch_similarity_reward, weight=similarity_weight),
        Term("format", format_reward, weight=0.0),
        Term("tool_use", make_tool_shaping_reward(required_tools=("bash",)), weight=0.0),
    ])


def default_reward(family: str) -> CompositeReward:
    """:func:`swe_reward` with its defaults (resolved as the outcome), for every family."""
    return swe_reward()


def test_ids(task: Task) -> list[str]:
    """The task's FAIL_TO_PASS then PASS_TO_PASS tests, each once."""
    ids = as_test_ids(task.metadata.get("FAIL_TO_PASS"), "FAIL_TO_PASS") + as_test_ids(
        task.metadata.get("PASS_TO_PASS"), "PASS_TO_PASS")
    return list(dict.fromkeys(ids))


def reference_tests(task: Task, tree: Mapping[str, bytes]) -> dict[str, bytes]:
    """The test files grading runs with: the tree's, with the task's ``test_patch`` applied (with every file it
    touches)."""
    test_patch = str(task.metadata.get("test_patch") or "")
    patched = apply_patch(tree, test_patch) if test_patch.strip() else tree
    touched = {section.new_path for section in parse_patch(test_patch)} if test_patch.strip() else set()
    return {path: data for path, data in patched.items() if is_test_file(path) or path in touched}


def grading_config(task: Task, tree: Mapping[str, bytes]) -> PytestConfig:
    """The pytest configuration the task's tests were judged with (:func:`repo_pytest_config` of its
    ``repo_source``)."""
    return repo_pytest_config(task.metadata.get("repo_source") or {}, tree)


def grading_tree(after: Mapping[str, bytes], tests: Mapping[str, bytes]) -> dict[str, bytes]:
    """The agent's tree with its test files replaced by ``tests``: edited and deleted ones put back, added ones
    (a conftest, a plugin in a test folder) removed."""
    return {**{path: data for path, data in after.items() if not is_test_file(path) and path not in tests}, **tests}


class SWEEnv(SandboxEnv):
    """Repository repair in a sandbox: ``bash``, ``editor`` and ``submit``, graded by the repository's tests.

    Args:
        bash_timeout_s: A ``bash`` command is killed (with its process group) after this long.
        bash_output_bytes: Bytes of a command's output shown: half from its start, half from its end.
        test_timeout_s: Time limit of the grading run.
        rules: Grading rules: ``"strict"`` (default) or ``"swebench"`` (SWE-bench's harness; see the module
            docstring). In the card's settings.
        sandbox, sandbox_limits, sandbox_pool: See :class:`~agentgym_envs.sandboxed.SandboxEnv` (limits default to
            :data:`SWE_SANDBOX_LIMITS`).
        **options: Every env's options (:class:`~agentgym_envs.core.TextEnvOptions`: ``split``, ``splits_dir``,
            ``families``, ``tasks``, ``reward``, the limits, ``render_mode``, ``prompt_style``); see
            :class:`~agentgym_envs.core.TextEnv`. Families: ``"synthetic"``, ``"swebench"``.

    Raises:
        EnvConfigError: As :class:`~agentgym_envs.sandboxed.SandboxEnv`, a non-positive time or output size,
            unknown rules, a task with no FAIL_TO_PASS test
            (:func:`~tasks.swe.instances.without_fail_to_pass` says why), a task that failed validation
            (:func:`refuse_failed_validation`) or one whose repository pytest imports itself
            (:func:`refuse_pytest_dependencies`).

    Example:
        >>> import gymnasium as gym, agentgym_envs                          # doctest: +SKIP
        >>> env = gym.make("agentrl/SWE-v0", sandbox="bwrap")               # doctest: +SKIP
        >>> obs, info = env.reset(seed=0)                                  # doctest: +SKIP
    """

    env_name: ClassVar[str] = "SWE"
    task_families: ClassVar[tuple[str, ...]] = FAMILIES
    required_tools: ClassVar[dict[str, tuple[str, ...]]] = REQUIRED_TOOLS
    scores_at_turn_limit: ClassVar[bool] = True

    def __init__(self, *, sandbox: str = "docker", sandbox_limits: SandboxLimits | None = None,
                 sandbox_pool: DockerSandboxPool | None = None, bash_timeout_s: float = 60.0,
                 bash_output_bytes: int = 10_000, test_timeout_s: float = 120.0, rules: str = "strict",
                 **options: Unpack[TextEnvOptions]) -> None:
        if min(bash_timeout_s, test_timeout_s) <= 0 or bash_output_bytes < 2:
            raise EnvConfigError(f"expected positive time limits and bash_output_bytes >= 2, got bash_timeout_s="
                                 f"{bash_timeout_s}, test_timeout_s={test_timeout_s}, "
                                 f"bash_output_bytes={bash_output_bytes}")
        if rules not in RULES:
            raise EnvConfigError(f"rules: expected one of {list(RULES)}, got {rules!r}{did_you_mean(rules, RULES)}")
        super().__init__(sandbox=sandbox, sandbox_limits=sandbox_limits or SWE_SANDBOX_LIMITS,
                         sandbox_pool=sandbox_pool, **options)
        try:
            refuse_without_fail_to_pass(self.tasks, "tasks")
        except TaskError as exc:
            raise EnvConfigError(str(exc)) from exc
        refuse_failed_validation(self.tasks, rules)
        refuse_pytest_dependencies(self.tasks)
        refuse_missing_images(self.tasks, self.backend)
        self.bash_timeout_s = bash_timeout_s
        self.bash_output_bytes = bash_output_bytes
        self.test_timeout_s = test_timeout_s
        self.rules = rules
        self._tools = (
            Tool("bash", "Run a bash command in the repository folder and return its output and exit code.",
                 BASH_SCHEMA, self._bash),
            Tool("editor", "View, create and edit files of the repository: view (numbered lines, a range, or a "
                           "folder's files), create, str_replace (a unique string), insert (after a line).",
                 EDITOR_SCHEMA, self._editor),
            Tool("submit", "Submit the changes of the working tree for grading; ends the episode.",
                 SUBMIT_SCHEMA, self._submit),
        )
        self._clean_trees: dict[tuple[str, str], dict[str, bytes]] = {}
        self._trees: OrderedDict[str, dict[str, bytes]] = OrderedDict()
        self._tree: dict[str, bytes] = {}
        self._root = ""
        self._submitted = False
        self._grading: dict[str, Any] = {}
        self._environment: RepoEnvironment | None = None
        self.last_test_run: TestRun | None = None
        """The latest grading run (``python -m agentgym_envs.swe validate`` reads its outcomes)."""

    @property
    def tools(self) -> Sequence[Tool]:
        """The ``bash``, ``editor`` and ``submit`` tools."""
        return self._tools

    def default_reward(self, family: str) -> RewardFn:
        """:func:`default_reward` of ``family``."""
        return default_reward(family)

    def _settings(self) -> dict[str, Any]:
        return {"bash_timeout_s": self.bash_timeout_s, "bash_output_bytes": self.bash_output_bytes,
                "test_timeout_s": self.test_timeout_s, "rules": self.rules}

    # -- the episode's repository --------------------------------------------------------------------------
    def repository_tree(self, task: Task) -> dict[str, bytes]:
        """The tree the agent starts from (path -> bytes), kept for the :data:`TREE_CACHE_SIZE` latest tasks.

        A synthetic task's is its pin's sdist with the bug planted (the reference fix reversed), checked against
        the task's ``base_commit``; a SWE-bench task's is the folder its ``repo_source`` names, with the fix
        reversed for a SWE-smith task (``repo_source["planted"]``) and the version file that hatch-vcs or
        setuptools-scm would generate, when the folder lacks it (:func:`~tasks.swe.environments.vcs_version_files`).

        Raises:
            EnvConfigError: A repository source this env cannot use (an image), or a tree that is not the task's.
            TaskError: The pin cannot be fetched, or the fix does not reverse onto it.
        """
        if task.id in self._trees:
            self._trees.move_to_end(task.id)
            return self._trees[task.id]
        tree = self._build_tree(task)
        self._trees[task.id] = tree
        if len(self._trees) > TREE_CACHE_SIZE:
            self._trees.popitem(last=False)
        return tree

    def _build_tree(self, task: Task) -> dict[str, bytes]:
        source = task.metadata.get("repo_source") or {}
        if source.get("kind") == "path":  # a SWE-smith instance's bug is planted: its fix reversed
            files = folder_files(source["path"])
            files = apply_patch(files, task.answer, reverse=True) if source.get("planted") else files
            environment = task_environment(task)
            return {**files, **vcs_version_files(files, environment.dist_version if environment else "0")}
        if source.get("kind") == "image":  # a SWE-bench instance image's own /testbed
            return image_testbed_tree(str(source["image"]))
        if source.get("kind") != "pypi":
            raise EnvConfigError(f"task {task.id!r}: expected a repository source of kind 'pypi', 'path' or 'image', "
                                 f"got {dict(source)}; load SWE-bench instances with load_swebench()")
        tree = apply_patch(self._clean_tree(source), task.answer, reverse=True)
        if tree_digest(tree) != task.metadata.get("base_commit"):
            raise EnvConfigError(f"task {task.id!r}: expected the planted tree's digest "
                                 f"{task.metadata.get('base_commit')}, got {tree_digest(tree)}; the task was made "
                                 "from another tree than its pin's")
        return tree

    def _clean_tree(self, source: Mapping[str, Any]) -> dict[str, bytes]:
        spec = pin(str(source.get("name")))
        if (spec.version, spec.sha256) != (source.get("version"), source.get("sha256")):
            raise TaskError(f"expected a task on the pinned {spec.requirement} (sha256 {spec.sha256}), got one on "
                            f"version {source.get('version')} (sha256 {source.get('sha256')})")
        key = (spec.name, spec.version)
        if key not in self._clean_trees:
            self._clean_trees[key] = repository_files(spec)
        return self._clean_trees[key]

    # -- the task's environment ----------------------------------------------------------------------------
    def _begin_episode(self, task: Task) -> None:
        """A sandbox of the task's environment (its image or tree, its memory): the current one when it has it."""
        environment = task_environment(task)
        if environment != self._environment:
            self._release_sandbox()
            self._environment = environment
        super()._begin_episode(task)

    def _limits(self) -> SandboxLimits:
        """The sandbox limits with the episode's environment's memory, when it names one."""
        memory = self._environment.memory_mb if self._environment else None
        return dataclasses.replace(self.sandbox_limits, memory_mb=memory) if memory else self.sandbox_limits

    def _docker_image(self) -> str | None:
        """The episode's environment's image: a local image it names, else its built one (once per hash); the
        base image for a task without an environment."""
        if self._environment is None:
            return None
        return self._environment.image or environment_image(self._environment)

    def _open_sandbox(self) -> KernelSandbox:
        """A sandbox with the episode's environment: its image on docker, its tree bound on bwrap."""
        if self._environment is None or self._pool is not None:
            return super()._open_sandbox()
        # refuse_missing_images refused an image environment on bwrap
        return environment_sandbox(self.backend, self._environment, self._limits())

    def _interpreter(self) -> tuple[str, list[str]]:
        """The episode's interpreter (``""``: the sandbox's own) and the package roots (relative to the repository)
        that go ahead of its packages: an image environment's (ahead of the image's install of ``/testbed``) or,
        for a per-repository runner, a built environment's (which pytest gets from the site folder's ``.pth``)."""
        if self._environment is None:
            return "", []
        if not self._environment.image:
            runs_a_command = self._environment.test_runner in LOG_RUNNERS
            return self._environment.interpreter, list(self._environment.package_roots) if runs_a_command else []
        # the environment's roots, and a src layout the tree shows (an image's tree is not seen at load)
        return self._environment.interpreter, list(dict.fromkeys([*self._environment.package_roots,
                                                                  package_root(self._tree)]))

    @property
    def grading_rules(self) -> str:
        """The rules the episode's run is read by: the env's ``rules`` for pytest; ``"strict"`` for the other
        runners, whose ids are matched as given."""
        return self.rules if self._test_runner() == "pytest" else "strict"

    def _test_runner(self) -> str:
        """The episode's environment's test runner (pytest for a task without one)."""
        return self._environment.test_runner if self._environment else "pytest"

    def _test_timeout_s(self) -> float:
        """The grading run's time limit: the episode's environment's, else the env's."""
        timeout = self._environment.test_timeout_s if self._environment else None
        return timeout or self.test_timeout_s

    def _prepare_sandbox(self, task: Task) -> None:
        """Ship the task's tree into ``testbed/`` (one archive) and set up the shell."""
        self._tree, self._submitted, self._grading = self.repository_tree(task), False, {}
        self._root = self._ship_tree()

    def _ship_tree(self) -> str:
        """Write the episode's tree into the sandbox and set up the shell; the repository's absolute path.

        Raises:
            SandboxCrashedError: The shell could not be set up in the sandbox.
        """
        prepare_tree(self.sandbox, self._tree)
        python, roots = self._interpreter()
        try:
            return f"{setup_shell(self.sandbox, python=python, package_roots=[shell_root(r) for r in roots])}/{TESTBED}"
        except CellError as exc:
            raise SandboxCrashedError(f"{self.backend} sandbox: the shell could not be set up: {exc}") from exc

    # -- prompt ------------------------------------------------------------------------------------------------
    def _instructions(self, task: Task) -> str:
        return INSTRUCTIONS.format(root=self._root, timeout=self.bash_timeout_s)

    # -- tools -------------------------------------------------------------------------------------------------
    def _bash(self, command: str) -> ToolResult:
        if not command.strip():
            return ToolResult("bash: expected a command, got only whitespace.", ok=False)
        half = self.bash_output_bytes // 2
        try:
            run = run_bash(self.sandbox, command, timeout_s=self.bash_timeout_s, head_bytes=half, tail_bytes=half)
        except CellError as exc:
            self._ship_tree()
            return ToolResult(f"{str(exc).strip()}\n{RESTORED}", ok=False)
        return ToolResult(run.output, ok=run.exit_code == 0)

    def _editor(self, command: str, path: str, file_text: str | None = None, old_str: str | None = None,
                new_str: str | None = None, insert_line: int | None = None,
                view_range: list[int] | None = None) -> ToolResult:
        try:
            where = repo_path(path, self._root)
            if command == "view":
                return ToolResult(self._view(where, view_range))
            if where == ".":
                raise EditorError(f"expected a file path for {command}, got the repository folder")
            if command == "create":
                return ToolResult(self._create(where, file_text))
            if command == "str_replace":
                return ToolResult(self._str_replace(where, old_str, new_str or ""))
            return ToolResult(self._insert(where, insert_line, new_str))
        except (EditorError, CellError) as exc:
            return ToolResult(f"editor {command}: {exc}", ok=False)

    def _view(self, path: str, view_range: list[int] | None) -> str:
        if path != ".":
            try:
                return view_file(path, read_text(self.sandbox, path), view_range)
            except FileNotFoundError:
                pass
        entries = list_folder(self.sandbox, path)
        if entries is None:
            raise EditorError(f"no file or folder {path!r} in the repository")
        if view_range is not None:
            raise EditorError(f"view_range applies to files; {path!r} is a folder")
        shown = "the repository" if path == "." else path
        return f"Files and folders in {shown}, two levels deep (hidden ones left out):\n" + "\n".join(entries)

    def _read(self, path: str) -> str:
        try:
            return read_text(self.sandbox, path)
        except FileNotFoundError as exc:
            raise EditorError(f"no file {path!r} in the repository (create it with command=create)") from exc

    def _write(self, path: str, text: str) -> None:
        try:
            self.sandbox.write_file(f"{TESTBED}/{path}", text.encode("utf-8"))
        except FileNotFoundError as exc:
            raise EditorError(f"could not write {path!r}: {exc}") from exc

    def _create(self, path: str, file_text: str | None) -> str:
        if file_text is None:
            raise EditorError("expected file_text (the new file's content) for create")
        try:
            self.sandbox.read_file(f"{TESTBED}/{path}", max_bytes=1)
        except FileNotFoundError:
            self._write(path, file_text)
            return f"Created {path} ({len(file_text.encode('utf-8'))} bytes)."
        raise EditorError(f"{path!r} already exists; edit it with str_replace or insert")

    def _str_replace(self, path: str, old_str: str | None, new_str: str) -> str:
        if old_str is None:
            raise EditorError("expected old_str (the exact text to replace) for str_replace")
        text, line = replace_once(self._read(path), old_str, new_str, path=path)
        self._write(path, text)
        return snippet(path, text, line, line + new_str.count("\n"))

    def _insert(self, path: str, insert_line: int | None, new_str: str | None) -> str:
        if insert_line is None or new_str is None:
            raise EditorError("expected insert_line and new_str for insert")
        text = insert_after(self._read(path), insert_line, new_str)
        self._write(path, text)
        return snippet(path, text, insert_line + 1, insert_line + max(1, new_str.rstrip("\n").count("\n") + 1))

    def _submit(self) -> ToolResult:
        self._submitted = True
        return ToolResult("Submitted: the changes of the working tree will be graded. The episode is over.")

    def _task_over(self) -> bool:
        return self._submitted

    # -- grading -----------------------------------------------------------------------------------------------
    def _evidence(self, task: Task, trajectory: Trajectory) -> dict[str, Any]:
        """The agent's patch and the FAIL_TO_PASS / PASS_TO_PASS run on a fresh sandbox holding its edits of
        non-test files (see the module docstring); whether the episode reached the turn limit; the rules.

        Whatever goes wrong while grading, but an infrastructure fault, is an invalid run that says why
        (:data:`~tasks.swe.testrun.REASONS`), never an exception.

        Raises:
            InfrastructureError: The sandbox failed (a :class:`~agentgym_envs.errors.SandboxError`).
        """
        try:
            run, patch = self._patch_and_run(task)
        except InfrastructureError:
            raise
        except Exception as exc:  # a bug of the grader: an invalid run that names it, and a logged traceback
            logger.exception("SWE grading of task %s failed", task.id)
            run, patch = TestRun(status="error", reason="grader_error", detail=f"{type(exc).__name__}: {exc}"), ""
        runner = self._test_runner()
        self._grading = {**grading_info(run), "runner": runner, "tamper_checked": runner == "pytest"}
        return {"test_run": run.to_dict(), "patch": patch, "truncated": self.at_turn_limit,
                "rules": self.grading_rules}

    def _patch_and_run(self, task: Task) -> tuple[TestRun, str]:
        """The grading run and the agent's patch (``""`` when its tree could not be read back)."""
        try:
            after = read_tree(self.sandbox)
        except TreeError as exc:  # the agent's processes filled the disk or broke the kernel: its outcome
            return TestRun(status="error", reason="tree_unreadable",
                           detail=f"the working tree could not be read back: {exc}"), ""
        return self._grade(task, after), tree_diff(self._tree, after)

    def _grade(self, task: Task, after: Mapping[str, bytes]) -> TestRun:
        """Run the task's tests on a reset sandbox holding ``after`` with the reference test files."""
        try:
            tests = reference_tests(task, self._tree)
        except PatchError as exc:
            return TestRun(status="error", reason="test_patch", detail=(
                f"expected the task's test_patch to apply to its repository at base_commit "
                f"{task.metadata.get('base_commit')}, got: {exc}"))
        self.sandbox.reset()
        try:
            prepare_tree(self.sandbox, grading_tree(after, tests))
        except TreeError as exc:  # only the agent's own files can make the tree too large for the sandbox
            return TestRun(status="error", reason="tree_unwritable",
                           detail=f"the patched repository could not be written: {exc}")
        python, roots = self._interpreter()
        self.last_test_run = run_tests(self.sandbox, test_ids(task), timeout_s=self._test_timeout_s(),
                                       config=grading_config(task, self._tree), rules=self.rules,
                                       runner=self._test_runner(), python=python, package_roots=roots,
                                       test_files=test_patch_files(task))
        return self.last_test_run

    def _verdict(self) -> tuple[str, dict[str, Any]]:
        """``info["grading"]`` (:func:`grading_info`) and, for an invalid run, a note saying why it scores 0: its
        reason, never the run's detail, which names the hidden tests or quotes their output (it stays in
        ``info["grading"]["detail"]``, for the trainer and ``validate``)."""
        if not self._grading:
            return "", {}
        reason = self._grading["reason"]
        note = "" if self._grading["valid"] else (
            f"The grading run was invalid ({reason}: {REASONS.get(reason, 'no reason given')}), so the patch "
            "scores 0.")
        return note, {"grading": dict(self._grading)}


def shell_root(root: str) -> str:
    """A package root of the repository as a folder of the work directory (``testbed``, ``testbed/src``)."""
    return TESTBED if root in (".", "") else f"{TESTBED}/{root.strip('/')}"


def test_patch_files(task: Task) -> list[str]:
    """The files the task's ``test_patch`` touches (what a per-repository runner such as sympy's runs)."""
    test_patch = str(task.metadata.get("test_patch") or "")
    return [section.new_path for section in parse_patch(test_patch) if section.new_path] if test_patch.strip() else []


def refuse_missing_images(tasks: Sequence[Task], backend: str) -> None:
    """Refuse tasks whose environment names a Docker image that this backend cannot run: any image on bwrap
    (bwrap runs the host's root, not an image), an image the local Docker daemon lacks on docker.

    Raises:
        EnvConfigError: Naming the tasks and what to do.
    """
    images = {task.id: environment.image for task in tasks
              if (environment := task_environment(task)) is not None and environment.image}
    if not images:
        return
    if backend != "docker":
        named = ", ".join(f"{task_id} ({image})" for task_id, image in list(images.items())[:3])
        raise EnvConfigError(f"expected sandbox='docker' for tasks that run in a Docker image, got sandbox="
                             f"{backend!r} for {len(images)} such tasks ({named}): {backend} cannot run a Docker image "
                             "(bwrap binds the host's own root read-only); use sandbox='docker', or drop the "
                             "instances' 'image' and pass their repository folder (repository=) so that their "
                             "environment is derived and built here")
    for image in dict.fromkeys(images.values()):
        require_local_image(image)


def task_environment(task: Task) -> RepoEnvironment | None:
    """The environment a task's tests run in (``metadata["environment"]``, set by
    :func:`~tasks.swe.instances.load_swebench`); None for one that runs in the sandbox's own Python."""
    data = task.metadata.get("environment")
    return RepoEnvironment.from_dict(data) if data else None


PYTEST_IMPORTS = frozenset({"pytest", "pluggy", "iniconfig", "attrs", "py", "pygments", "packaging",
                            "exceptiongroup", "tomli"})
"""Distributions pytest imports before any test runs (and before the repository is on ``sys.path``, so that a
repository cannot stand in for them): the tests of such a repository would import the sandbox's copy."""


def refuse_pytest_dependencies(tasks: Sequence[Task]) -> None:
    """Refuse tasks whose repository is a distribution pytest itself imports (:data:`PYTEST_IMPORTS`).

    Raises:
        EnvConfigError: Naming the tasks and why.
    """
    refused = [(task.id, environment.dist_name) for task in tasks
               if (environment := task_environment(task)) is not None
               and environment.dist_name.lower().replace("_", "-") in PYTEST_IMPORTS]
    if refused:
        raise EnvConfigError(f"expected repositories that pytest does not import itself, got {refused[:5]}: pytest "
                             "imports them before the tests run, so the tests would see the sandbox's copy and "
                             "not the agent's edits; SWE-v0 cannot grade these yet")


def refuse_failed_validation(tasks: Sequence[Task], rules: str = "strict") -> None:
    """Refuse tasks whose validation under ``rules`` failed (``metadata["validation"]``, from a report of ``python
    -m agentgym_envs.swe validate``), naming each one's reason; log the tasks never validated under ``rules``.

    Raises:
        EnvConfigError: Naming the failed tasks and why.
    """
    verdicts = {task.id: task.metadata["validation"] for task in tasks if task.metadata.get("validation")
                and task.metadata["validation"].get("rules", rules) == rules}
    failed = {task_id: verdict for task_id, verdict in verdicts.items() if not verdict.get("usable")}
    if failed:
        reasons = "; ".join(f"{task_id}: {verdict.get('reason')} ({str(verdict.get('detail', ''))[:200]})"
                            for task_id, verdict in list(failed.items())[:5])
        raise EnvConfigError(f"expected tasks that passed validation, got {len(failed)} that failed it: {reasons}; "
                             "drop them or fix their environment (an override file) and validate again")
    never = [task.id for task in tasks if task.family == "swebench" and task.id not in verdicts]
    if never:
        logger.warning("%d SWE-bench tasks were never validated under the %s rules (%s%s): a broken instance will "
                       "score 0 for every agent; run `python -m agentgym_envs.swe validate FILE --rules %s`",
                       len(never), rules, ", ".join(never[:3]), " ..." if len(never) > 3 else "", rules)


def grading_info(run: TestRun) -> dict[str, Any]:
    """``info["grading"]`` of the step that graded an episode: ``valid`` (the run's outcomes were used),
    ``status``, ``reason`` (one of :data:`~tasks.swe.testrun.REASONS`, ``""`` for a valid run), ``detail``,
    ``exit_code``, ``duration_s`` and ``tests`` (how many tests the run reported)."""
    return {"valid": run.ok, "status": run.status, "reason": run.reason, "detail": run.detail,
            "exit_code": run.exit_code, "duration_s": run.duration_s, "tests": len(run.outcomes)}
