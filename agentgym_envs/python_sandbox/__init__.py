"""PythonSandbox-v0: a persistent Python interpreter in a sandbox, with math and coding tasks."""

from agentgym_envs.lazy import lazy_exports

_EXPORTS = {
    "PythonSandboxEnv": "env",
    "default_reward": "env",
}
"""Each public name and the module it lives in (imported on first use)."""

__getattr__ = lazy_exports(__name__, _EXPORTS)
__all__ = sorted(_EXPORTS)
