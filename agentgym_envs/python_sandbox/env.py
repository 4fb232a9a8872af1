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

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Unpack

from agentgym_envs.core import TextEnvOptions
from agentgym_envs.python_sandbox.hidden_tests import run_hidden_tests
from agentgym_envs.sandbox import SandboxLimits
from agentgym_envs.sandboxed import SandboxEnv
from agentgym_envs.tools import Tool, ToolResult
from rewards import (
    CompositeReward,
    RewardFn,
    Term,
    format_reward,
    make_tool_shaping_reward,
    math_equivalence_reward,
    unit_test_reward,
)
from tasks import Task, Trajectory

if TYPE_CHECKING:  # the docker SDK is imported only when the docker backend is used
    from agentgym_envs.sandbox.docker import DockerSandboxPool

FAMILIES = ("math", "code")
REQUIRED_TOOLS = {"math": ("python",), "code": ("python",)}
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
        Term("tool_use", make_tool_shaping_reward(required_tools=REQUIRED_TOOLS[family]), weight=0.0),
    ])


class PythonSandboxEnv(SandboxEnv):
    """A code-interpreter environment over a Docker, bubblewrap or local sandbox.

    Args:
        test_timeout_s: Time limit of each hidden unit test.
        sandbox, sandbox_limits, sandbox_pool: See :class:`~agentgym_envs.sandboxed.SandboxEnv`.
        **options: Every env's options (:class:`~agentgym_envs.core.TextEnvOptions`: ``split``, ``splits_dir``,
            ``families``, ``tasks``, ``reward``, the limits, ``render_mode``, ``prompt_style``); see
            :class:`~agentgym_envs.core.TextEnv`. Families: ``"math"``, ``"code"``.

    Example:
        >>> import gymnasium as gym, agentgym_envs                          # doctest: +SKIP
        >>> env = gym.make("agentrl/PythonSandbox-v0", sandbox="bwrap")     # doctest: +SKIP
        >>> obs, info = env.reset(seed=0)                                  # doctest: +SKIP
    """

    env_name: ClassVar[str] = "PythonSandbox"
    task_families: ClassVar[tuple[str, ...]] = FAMILIES
    required_tools: ClassVar[dict[str, tuple[str, ...]]] = REQUIRED_TOOLS

    def __init__(self, *, sandbox: str = "docker", sandbox_limits: SandboxLimits | None = None,
                 sandbox_pool: DockerSandboxPool | None = None, test_timeout_s: float = 5.0,
                 **options: Unpack[TextEnvOptions]) -> None:
        super().__init__(sandbox=sandbox, sandbox_limits=sandbox_limits, sandbox_pool=sandbox_pool, **options)
        self.test_timeout_s = test_timeout_s
        self._tools = (Tool("python", "Run Python code in a persistent, sandboxed interpreter and return "
                                      "its output.", PYTHON_TOOL_SCHEMA, self._python),)

    @property
    def tools(self) -> Sequence[Tool]:
        """The single ``python`` tool."""
        return self._tools

    def default_reward(self, family: str) -> RewardFn:
        """:func:`default_reward` of ``family``."""
        return default_reward(family)

    def _instructions(self, task: Task) -> str:
        return INSTRUCTIONS

    def _settings(self) -> dict[str, Any]:
        return {"test_timeout_s": self.test_timeout_s}

    def _python(self, code: str) -> ToolResult:
        result = self.sandbox.run_code(code)
        return ToolResult(result.output if result.output.strip() else "(no output)", ok=result.ok)

    def _evidence(self, task: Task, trajectory: Trajectory) -> dict[str, Any]:
        """For ``code`` tasks, the hidden unit tests run on the answer in the episode's sandbox."""
        if task.family != "code":
            return {}
        return {"unit_tests": run_hidden_tests(self.sandbox, trajectory.final_answer or "",
                                               task.metadata["entry_point"], task.metadata["tests"],
                                               per_test_timeout_s=self.test_timeout_s)}
