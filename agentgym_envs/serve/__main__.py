"""``python -m agentgym_envs.serve ID [--host H] [--port P] [--max-sessions N] [--idle-timeout S] [--env-kwargs JSON]``.

Binds to 127.0.0.1 unless ``--host`` says otherwise; any other address needs ``--token`` (or ``AGENTRL_SERVE_TOKEN``),
which every request must then carry (see :mod:`agentgym_envs.serve.app`).
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import os
import sys
from collections.abc import Sequence
from contextlib import ExitStack
from typing import Any

LOOPBACK_HOSTS = frozenset({"localhost"})
TOKEN_VARIABLE = "AGENTRL_SERVE_TOKEN"


def build_parser() -> argparse.ArgumentParser:
    """The command line."""
    parser = argparse.ArgumentParser(prog="python -m agentgym_envs.serve", description=__doc__.splitlines()[0])
    parser.add_argument("env_id", help="a registered id (agentrl/Search-v0, or a third-party package's)")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default loopback; any other needs "
                        "--token)")
    parser.add_argument("--port", type=int, default=8000, help="port (default 8000)")
    parser.add_argument("--max-sessions", type=int, default=64, help="most sessions alive at once, over both "
                        "protocols (default 64)")
    parser.add_argument("--idle-timeout", type=float, default=600.0, help="seconds after which a session without "
                        "requests is closed (default 600)")
    parser.add_argument("--env-kwargs", type=parse_env_kwargs, default={}, metavar="JSON",
                        help='keyword arguments of gym.make for every session\'s env, e.g. \'{"sandbox": "bwrap"}\'')
    parser.add_argument("--token", default=os.environ.get(TOKEN_VARIABLE),
                        help=f"token every request must carry (default ${TOKEN_VARIABLE}); required off loopback")
    return parser


def parse_env_kwargs(text: str) -> dict[str, Any]:
    """``--env-kwargs``: a JSON object."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"expected a JSON object, got {text!r} ({exc.msg})") from exc
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"expected a JSON object, got {type(value).__name__}")
    return value


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback addresses."""
    if host in LOOPBACK_HOSTS:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def main(argv: Sequence[str] | None = None) -> int:
    """Probe the env, then serve it until interrupted."""
    os.environ.setdefault("OPENREWARD_DISABLE_UPDATE_CHECK", "1")  # the SDK would ask PyPI for its latest version
    os.environ.setdefault("OPENREWARD_LOG_LEVEL", "WARNING")  # the SDK logs every request at info level
    args = build_parser().parse_args(argv)
    if not is_loopback(args.host) and not args.token:
        raise SystemExit(f"--host {args.host}: serving off loopback needs a token (--token or ${TOKEN_VARIABLE}); "
                         "every request must then carry it")
    skip_web_interface()
    import uvicorn

    import agentgym_envs  # noqa: F401  (registers the ids)
    from agentgym_envs.errors import AgentgymError
    from agentgym_envs.serve.app import build_app
    from agentgym_envs.serve.session import ServeConfig, ServedEnv

    with ExitStack() as stack:
        try:
            env_kwargs = {**shared_service_kwargs(args.env_id, args.env_kwargs, stack), **args.env_kwargs}
            config = ServeConfig(args.env_id, env_kwargs, args.max_sessions, args.idle_timeout)
            served = ServedEnv.probe(config)
        except (AgentgymError, ValueError, TypeError) as exc:
            raise SystemExit(f"{args.env_id}: {exc}") from exc
        print(f"serving {args.env_id} (tools: {', '.join(served.tool_names)}; {len(served.tasks)} tasks of split "
              f"{served.split}) on http://{args.host}:{args.port}: OpenEnv (/ws, /mcp, /reset, /step) and ORS "
              f"(/create, /<env>/call); at most {args.max_sessions} sessions", file=sys.stderr, flush=True)
        uvicorn.run(build_app(served, token=args.token), host=args.host, port=args.port, log_level="warning",
                    ws_max_size=64 << 20)
    return 0


def skip_web_interface() -> None:
    """Keep openenv-core from importing gradio, for a web UI this server never mounts: openenv-core treats gradio as
    optional (its package falls back when the import fails), and the import is about half of a server's start-up."""
    sys.modules.setdefault("gradio", None)  # type: ignore[arg-type]  (None in sys.modules: the import fails)


def shared_service_kwargs(env_id: str, env_kwargs: dict[str, Any], stack: ExitStack) -> dict[str, Any]:
    """Start the service every env of ``env_id`` shares when its spec has one (WebShop's shop server), once for the
    whole server, stopped with it; the env kwargs that reach it ({} for an env without one)."""
    from agentgym_envs.registration import env_spec

    start = env_spec(env_id).service
    if start is None:
        return {}
    service = start(env_kwargs.get("split") or "train")
    stack.callback(service.close)
    return service.env_kwargs()


if __name__ == "__main__":
    sys.exit(main())
