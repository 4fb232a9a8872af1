"""agentrl environments: multi-turn, text-in/text-out Gymnasium environments with real tools.

Importing this package registers the ``agentrl/...-v0`` ids in Gymnasium's registry:

    >>> import gymnasium as gym
    >>> import agentgym_envs
    >>> "agentrl/PythonSandbox-v0" in gym.registry
    True
"""

from agentgym_envs.actions import ParsedAction, ParsedToolCall, parse_action
from agentgym_envs.card import EnvCard, FamilyCard, LimitsCard, RewardTermCard, TaskSourceCard, describe
from agentgym_envs.core import TextEnv
from agentgym_envs.errors import (
    AgentgymError,
    EnvConfigError,
    SandboxCrashedError,
    SandboxError,
    SandboxUnavailableError,
    UnknownEnvError,
)
from agentgym_envs.registration import make, register_envs, registered_ids
from agentgym_envs.sandbox import SandboxLimits, open_sandbox
from agentgym_envs.sandboxed import SandboxEnv
from agentgym_envs.spaces import UnicodeText
from agentgym_envs.tools import Tool, ToolResult

register_envs()

__all__ = [
    "AgentgymError",
    "EnvCard",
    "EnvConfigError",
    "FamilyCard",
    "LimitsCard",
    "ParsedAction",
    "ParsedToolCall",
    "RewardTermCard",
    "SandboxCrashedError",
    "SandboxEnv",
    "SandboxError",
    "SandboxLimits",
    "SandboxUnavailableError",
    "TaskSourceCard",
    "TextEnv",
    "Tool",
    "ToolResult",
    "UnicodeText",
    "UnknownEnvError",
    "describe",
    "make",
    "open_sandbox",
    "parse_action",
    "register_envs",
    "registered_ids",
]
