"""Package attributes imported on first use (PEP 562), so that importing an env's spec does not import its env.

``import agentgym_envs`` reads every env's spec; an env package whose ``__init__`` imported the env itself would
load its dependencies (bm25s, libcst, Playwright's client, ...) into every program that imports agentgym_envs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from importlib import import_module
from typing import Any


def lazy_exports(package: str, exports: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package`` that imports ``name`` from ``package.<exports[name]>`` on first use.

    Example:
        >>> __getattr__ = lazy_exports(__name__, {"SearchEnv": "env"})  # doctest: +SKIP
    """

    def __getattr__(name: str) -> Any:
        if name not in exports:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(import_module(f"{package}.{exports[name]}"), name)

    return __getattr__
