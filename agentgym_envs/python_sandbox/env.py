"""PythonSandbox-v0: a code interpreter in a real sandbox, with math and programming tasks.

The agent has one tool, ``python``, which runs code in the sandbox's persistent kernel
(variables, imports and files survive across calls, as in a notebook), and ends the episode
with ``<answer>``. Two task families:

- ``math``: tool-integrated math (the ToRL setting); the answer is checked for mathematical
  equivalence (fractions, radicals, intervals, equivalent forms).
- ``code``: write a function; after the episode its hidden unit tests run in the reset
  sandbox and each passing test earns partial credit.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from agentgym_envs.core import TextEnv
from agentgym_envs.errors import EnvConfigError
from agentgym_envs.python_sandbox.hidden_tests import run_hidden_tests
from agentgym_envs.sandbox import BACKENDS, KernelSandbox, SandboxLimits, open_sandbox
from agentgym_envs.tools import Tool, ToolResult
from rewards import (
    CompositeReward,
    RewardFn,
    RewardResult,
    Term,
    format_reward,
    make_tool_shaping_reward,
    math_equivalence_reward,
    unit_test_reward,
)
from tasks import Task, Trajectory, load_split

if TYPE_CHECKING:  # the docker SDK is imported only when the docker backend is used
    from agentgym_envs.sandbox.docker import DockerSandboxPool

FAMILIES = ("math", "code")
PYTHON_TOOL_SCHEMA = {
    "type": "object",
    "properties": {"code": {"type": "string", "description": "Python source to run, as a notebook cell."}},
    "required": ["code"],
    "additionalProperties": False,
}
INSTRUCTIONS = (
    "You are solving a task with a Python interpreter. Code you run keeps its variables, imports and "
    "files between calls, like a notebook; the value of a final expression is printed. The sandbox has "
    "no network. Use the tool as often as you need, then give your final answer once."
)


def default_reward(family: str) -> CompositeReward:
    """The verifier for a family, with format and tool-use terms logged at weight 0.

    Raise the weights of ``format`` and ``tool_use`` (kept small against the outcome) to shape.
    """
    outcome = math_equivalence_reward if family == "math" else unit_test_reward
    return CompositeReward([
        Term("outcome", outcome, weight=1.0),
        Term("format", format_reward, weight=0.0),
        Term("tool_use", make_tool_shaping_reward(required_tools=("python",)), weight=0.0),
    ])


class PythonSandboxEnv(TextEnv):
    """A code-interpreter environment over a Docker, bubblewrap or local sandbox.

    Args:
        split: Bundled split to draw tasks from (``"train"``, ``"dev"``, ``"test"``).
        families: Task families to keep (``"math"``, ``"code"``).
        tasks: Explicit tasks instead of a split.
        sandbox: Backend: ``"docker"`` (default), ``"bwrap"`` or ``"local"`` (debugging only).
        sandbox_limits: Limits of the sandbox (timeout, memory, pids, output, disk).
        sandbox_pool: A :class:`~agentgym_envs.sandbox.docker.DockerSandboxPool` to borrow a sandbox
            from, shared by many envs; the sandbox goes back to the pool on ``close()``.
        rewards: Reward function per family (``"math"``, ``"code"``); defaults to :func:`default_reward`.
        test_timeout_s: Time limit of each hidden unit test.
        max_action_chars, max_tool_calls_per_turn, max_observation_chars, render_mode, prompt_style: See
            :class:`~agentgym_envs.core.TextEnv`.

    Example:
        >>> import gymnasium as gym, agentgym_envs                          # doctest: +SKIP
        >>> env = gym.make("agentrl/PythonSandbox-v0", sandbox="bwrap")     # doctest: +SKIP
        >>> obs, info = env.reset(seed=0)                                  # doctest: +SKIP
    """

    env_name: ClassVar[str] = "PythonSandbox"

    def __init__(self, *, split: str = "train", families: Sequence[str] = FAMILIES,
                 tasks: Sequence[Task] | None = None, sandbox: str = "docker",
                 sandbox_limits: SandboxLimits | None = None, sandbox_pool: DockerSandboxPool | None = None,
                 rewards: Mapping[str, RewardFn] | None = None, test_timeout_s: float = 5.0,
                 max_action_chars: int = 32_768, max_tool_calls_per_turn: int = 4,
                 max_observation_chars: int = 32_768, render_mode: str | None = None,
                 prompt_style: str = "full") -> None:
        unknown = set(families) - set(FAMILIES)
        if unknown:
            raise EnvConfigError(f"families: expected a subset of {FAMILIES}, got {sorted(unknown)}")
        if sandbox not in BACKENDS:
            raise EnvConfigError(f"sandbox: expected one of {BACKENDS}, got {sandbox!r}")
        selected = list(tasks) if tasks is not None else load_split(self.env_name, split)
        super().__init__([t for t in selected if t.family in families], max_action_chars=max_action_chars,
                         max_tool_calls_per_turn=max_tool_calls_per_turn,
                         max_observation_chars=max_observation_chars, render_mode=render_mode,
                         prompt_style=prompt_style)
        self.backend = sandbox
        self.sandbox_limits = sandbox_limits or SandboxLimits()
        self.rewards = dict(rewards) if rewards is not None else {family: default_reward(family) for family in FAMILIES}
        missing = set(families) - set(self.rewards)
        if missing:
            raise EnvConfigError(f"rewards: expected a reward function for every family in {sorted(families)}, "
                                 f"missing {sorted(missing)}")
        self.test_timeout_s = test_timeout_s
        self._pool = sandbox_pool
        self._sandbox: KernelSandbox | None = None
        self._tools = (Tool("python", "Run Python code in a persistent, sandboxed interpreter and return "
                                      "its output.", PYTHON_TOOL_SCHEMA, self._python),)

    @property
    def tools(self) -> Sequence[Tool]:
        """The single ``python`` tool."""
        return self._tools

    def _instructions(self, task: Task) -> str:
        return INSTRUCTIONS

    def _python(self, code: str) -> ToolResult:
        result = self._require_sandbox().run_code(code)
        return ToolResult(result.output if result.output.strip() else "(no output)", ok=result.ok)

    def _require_sandbox(self) -> KernelSandbox:
        if self._sandbox is None:
            raise EnvConfigError("the sandbox is not started: call reset() first")
        return self._sandbox

    def _begin_episode(self, task: Task) -> None:
        """A clean sandbox: the current one reset, or a new one when it is gone or broken."""
        if self._sandbox is not None and self._sandbox.healthy():
            self._sandbox.reset()
            return
        self._release_sandbox()
        if self._pool is not None:
            self._sandbox = self._pool.acquire()
        else:
            self._sandbox = open_sandbox(self.backend, self.sandbox_limits)

    def _score(self, task: Task, trajectory: Trajectory) -> RewardResult:
        evidence: dict[str, Any] = {}
        if task.family == "code":
            evidence["unit_tests"] = run_hidden_tests(
                self._require_sandbox(), trajectory.final_answer or "", task.metadata["entry_point"],
                task.metadata["tests"], per_test_timeout_s=self.test_timeout_s)
        return self.rewards[task.family](task, trajectory, evidence)

    def _release_sandbox(self) -> None:
        sandbox, self._sandbox = self._sandbox, None
        if sandbox is None:
            return
        if self._pool is not None:
            self._pool.release(sandbox)
        else:
            sandbox.close()

    def close(self) -> None:
        """Close (or return to its pool) the sandbox; idempotent."""
        self._release_sandbox()
        super().close()
