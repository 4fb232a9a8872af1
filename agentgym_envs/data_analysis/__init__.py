"""DataAnalysis-v0: questions about data files, answered with ``python`` and ``sql`` tools in a sandbox."""

from agentgym_envs.lazy import lazy_exports

_EXPORTS = {
    "DataAnalysisEnv": "env",
    "FAMILIES": "env",
    "default_reward": "env",
    "extract_query": "env",
}
"""Each public name and the module it lives in (imported on first use)."""

__getattr__ = lazy_exports(__name__, _EXPORTS)
__all__ = sorted(_EXPORTS)
