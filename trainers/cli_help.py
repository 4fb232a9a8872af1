"""A short ``--help`` for the training commands: agentrl's own options first, then the TRL options most runs set.

TRL's parsers list every field of its config and of ``transformers.TrainingArguments`` (about 1,400 lines), with
agentrl's options at the end. :func:`short_help` prints agentrl's options and a few common ones, and says how to
see the rest (``--help-trl``, TRL's full help as it is).
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Iterable

FULL_HELP_FLAG = "--help-trl"
"""The flag that prints TRL's own, full help."""


def own_fields(config_class: type, base_class: type) -> list[str]:
    """The fields ``config_class`` adds to ``base_class``, in declaration order."""
    inherited = {field.name for field in dataclasses.fields(base_class)}
    return [field.name for field in dataclasses.fields(config_class) if field.name not in inherited]


def short_help(parser: argparse.ArgumentParser, prog: str, own: Iterable[str], common: Iterable[str]) -> str:
    """Help listing the options whose destination is in ``own`` ("agentrl options"), then those in ``common``
    ("common TRL options"), then how many more ``--help-trl`` shows.

    Args:
        parser: The command's full parser (TRL's ``TrlParser``).
        prog: The command as a user types it, e.g. ``python -m trainers.grpo``.
        own: Destinations of agentrl's options, in the order to show them.
        common: Destinations of the TRL options to show after them.
    """
    by_dest: dict[str, list[argparse.Action]] = {}
    for action in parser._actions:
        if action.option_strings:
            by_dest.setdefault(action.dest, []).append(action)  # a boolean has --name and --no_name
    sections = [("agentrl options", [action for name in own for action in by_dest.get(name, [])]),
                ("common TRL options", [action for name in common for action in by_dest.get(name, [])])]
    shown = {action.dest for _, actions in sections for action in actions}
    hidden = len({dest for dest in by_dest if dest not in shown and dest != "help"})
    formatter = parser._get_formatter()
    formatter.add_usage(f"{prog} [--config YAML] [--OPTION VALUE ...]", None, [])
    for title, actions in sections:
        formatter.start_section(title)
        formatter.add_arguments(actions)
        formatter.end_section()
    formatter.add_text(f"{hidden} more options of TRL and transformers (the model, the optimizer, logging, "
                       f"precision, vLLM, ...): {prog} {FULL_HELP_FLAG}")
    return formatter.format_help()
