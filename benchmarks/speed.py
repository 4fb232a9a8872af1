"""Speed of one environment: runs the speed benchmark its spec names, with the arguments that follow.

Each env that has one keeps its speed benchmark in its own folder (``agentgym_envs/<env>/speed.py``) and names
it in its spec (``EnvSpec.speed``); this command finds it by id or alias, so a third-party env's benchmark runs
the same way. With no env, it lists the envs that have one.

Usage::

    python -m benchmarks.speed                         # which envs have a speed benchmark
    python -m benchmarks.speed search --articles 2000  # Search-v0: bm25s against rank_bm25, a search step
    python -m benchmarks.speed webshop --help          # that benchmark's own options
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from agentgym_envs.errors import UnknownEnvError
from agentgym_envs.registration import SPECS
from agentgym_envs.spec import EnvSpec


def benchmarked_specs() -> list[EnvSpec]:
    """The registered specs that name a speed benchmark, by id."""
    return [spec for spec in map(SPECS.get, SPECS.ids()) if spec.speed is not None]


def listing() -> str:
    """One line per env with a speed benchmark: its names and the benchmark's first docstring line."""
    lines = ["usage: python -m benchmarks.speed ENV [ARGS...]   (ENV: an id or alias below; ARGS: see ENV --help)"]
    for spec in benchmarked_specs():
        lines.append(f"  {', '.join(spec.names)}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point; returns the benchmark's exit status (2 for an env without one)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(listing())
        return 0
    name, rest = args[0], args[1:]
    try:
        spec = SPECS.get(name)
    except UnknownEnvError as exc:
        print(f"error: {exc}\n{listing()}", file=sys.stderr)
        return 2
    if spec.speed is None:
        print(f"error: {spec.id} names no speed benchmark in its spec\n{listing()}", file=sys.stderr)
        return 2
    return spec.speed(rest)


if __name__ == "__main__":
    raise SystemExit(main())
