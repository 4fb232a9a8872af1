"""Scripted agents: baselines and oracles that act through an environment's text API.

A scripted policy reads the prompt and each observation and returns action text, exactly as a
model would. They serve as sanity checks of the environments (an oracle that uses only the tools
must solve the tasks, a random agent must not), as sources of demonstrations for SFT warm-start,
and as load generators for the stress harness.
"""

from agentgym_envs.policies.base import Policy, ScriptedAgent, answer_action, prompt_only, run_episode, tool_call_action
from agentgym_envs.policies.python_oracle import PythonOraclePolicy
from agentgym_envs.policies.random_policy import RandomPolicy
from agentgym_envs.policies.search_oracle import SearchOraclePolicy

__all__ = [
    "Policy",
    "PythonOraclePolicy",
    "RandomPolicy",
    "ScriptedAgent",
    "SearchOraclePolicy",
    "answer_action",
    "prompt_only",
    "run_episode",
    "tool_call_action",
]
