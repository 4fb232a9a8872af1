"""Command line: fetch the pinned repositories, or write candidate bugs for a pin or for your own repository.

Usage::

    python -m tasks.swe fetch                      # every pin into the cache (CI's set-up step)
    python -m tasks.swe fetch --pin toolz
    python -m tasks.swe candidates --pin toolz --seed 7 --count 20 --bugs 2 --out runs/swe/toolz.jsonl
    python -m tasks.swe candidates --path ~/src/mylib --source mylib --tests tests --seed 7 --out bugs.jsonl

``candidates`` writes one JSON object a line: ``sites`` (path, operator, line, function, description),
``bug_patch`` and ``fix_patch``. The repository is read as the SWE task builder reads it
(:func:`tasks.swe.synthesis.pin_source`, :func:`~tasks.swe.synthesis.folder_source`). Nothing here runs a test
suite: ``python -m agentgym_envs.swe.synthesize`` runs each candidate's suite in a sandbox and keeps those that
:func:`tasks.swe.keep.judge_candidate` keeps.
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import sys
from collections.abc import Sequence
from pathlib import Path

from tasks.errors import TaskError
from tasks.swe.bugs import Bug, bug_candidates
from tasks.swe.mutations import OPERATORS
from tasks.swe.repos import PINS, fetch_sdist, pin
from tasks.swe.synthesis import folder_source, pin_source


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m tasks.swe", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    fetch = commands.add_parser("fetch", help="download the pinned sdists into the cache and check their sha256")
    fetch.add_argument("--pin", action="append", choices=sorted(PINS), help="only this pin (repeatable)")
    make = commands.add_parser("candidates", help="candidate bugs of a pin or a local repository, as JSONL")
    where = make.add_mutually_exclusive_group(required=True)
    where.add_argument("--pin", choices=sorted(PINS), help="a pinned repository")
    where.add_argument("--path", type=Path, help="a repository folder of your own")
    make.add_argument("--source", action="append", help="with --path: a package folder or module to mutate")
    make.add_argument("--tests", action="append", default=[], help="with --path: the suite's paths (never mutated)")
    make.add_argument("--seed", type=int, required=True, help="seed of the candidates' order")
    make.add_argument("--count", type=int, default=10, help="number of candidates")
    make.add_argument("--bugs", type=int, default=1, help="bugs per candidate, each in a different function")
    make.add_argument("--operator", action="append", choices=list(OPERATORS), help="only these operators")
    make.add_argument("--out", type=Path, required=True, help="JSONL file to write")
    return parser


def _fetch(names: Sequence[str]) -> None:
    for name in names:
        print(f"{pin(name).requirement}: {fetch_sdist(pin(name))}")


def _bug_record(bug: Bug) -> dict[str, object]:
    sites = [{"path": path, "operator": site.operator, "line": site.line, "function": site.function,
              "description": site.description} for path, site in bug.sites]
    return {"sites": sites, "bug_patch": bug.bug_patch, "fix_patch": bug.fix_patch}


def _candidates(args: argparse.Namespace) -> None:
    if args.pin:
        source = pin_source(args.pin)
    else:
        if not args.source:
            raise TaskError("expected --source (a package folder or module to mutate) with --path, got none")
        source = folder_source(args.path, args.source, args.tests)
    bugs = bug_candidates(source.files, source.library, random.Random(args.seed), bugs=args.bugs,
                          operators=args.operator)
    records = [_bug_record(bug) for bug in itertools.islice(bugs, args.count)]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("".join(json.dumps(record, sort_keys=True) + "\n" for record in records), encoding="utf-8")
    print(f"wrote {len(records)} candidate bugs to {args.out}")


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point; returns the exit status (2 on a task error, with its message)."""
    args = _parser().parse_args(argv)
    try:
        if args.command == "fetch":
            _fetch(args.pin or sorted(PINS))
        else:
            _candidates(args)
    except TaskError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
