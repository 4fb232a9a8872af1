"""``python -m agentgym_envs.swe``: build the environments of SWE-bench-format instances, and validate them.

    python -m agentgym_envs.swe env build --instances FILE --repository DIR [--overrides FILE] [--sandbox docker]
    python -m agentgym_envs.swe validate FILE --repository DIR [--overrides FILE] [--sandbox bwrap] [--out REPORT]

``--format swe-smith`` reads SWE-smith's files (each ``patch`` plants its bug) instead of SWE-bench's. Instances
that run in a local Docker image (an ``image`` field, or ``--image 'sweb.eval.x86_64.{instance_id}:latest'``) need
no ``--repository`` (their tree is the image's ``/testbed``); ``env build`` checks that their image is loaded.

``env build`` builds each distinct environment of the file once (by its build key: instances of one (repo,
version) share it), with a progress bar; a failed build names the package and pip's reason and the command
exits 1. ``validate`` builds them too, then runs each instance's fix and no change in the sandbox
(:mod:`agentgym_envs.swe.validation`; an instance whose environment did not build is ``install_failed``), writes
the report beside the file (``FILE.validation.json``; ``--out`` elsewhere) and exits 1 when an instance is not
usable, printing why.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from agentgym_envs.errors import EnvConfigError, ImageBuildError
from agentgym_envs.swe.env import refuse_missing_images, task_environment
from agentgym_envs.swe.environment import environment_image, host_environment_tree
from agentgym_envs.swe.validation import validate, write_report
from tasks.errors import TaskError
from tasks.records import Task
from tasks.swe.environments import RepoEnvironment
from tasks.swe.instances import load_swebench, load_swesmith, validation_report_path

LOADERS = {"swebench": load_swebench, "swe-smith": load_swesmith}
"""The instance file formats and their loaders."""


def _progress(console: Console) -> Progress:
    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    console=console)


def build_environments(environments: Sequence[RepoEnvironment], sandbox: str, console: Console) -> list[str]:
    """Build each environment for ``sandbox`` (its image on docker, its tree on bwrap); the failures, as text."""
    failures = []
    with _progress(console) as progress:
        bar = progress.add_task("environments", total=len(environments))
        for environment in environments:
            progress.update(bar, description=f"{environment.repo} {environment.version}")
            try:
                built = build_environment(environment, sandbox, progress.console.print)
                progress.console.print(f"[green]built[/green] {environment.repo} {environment.version}: {built}")
            except (ImageBuildError, EnvConfigError) as exc:
                failures.append(f"{environment.repo} {environment.version}: {exc}")
            progress.advance(bar)
    return failures


def build_environment(environment: RepoEnvironment, sandbox: str, log: Callable[[str], object]) -> str:
    """Build one environment for ``sandbox``: its image (docker) or its tree (bwrap); for an environment that names
    a local image, check that the image is there. What was built, as text.

    Raises:
        ImageBuildError: The build failed (which package or pre_install command, and why).
        EnvConfigError: An image environment on bwrap, or an image the local Docker lacks (what to do).
    """
    if environment.image:
        refuse_missing_images([_environment_task(environment)], sandbox)
        return f"{environment.image} (a local image: nothing to build)"
    if sandbox == "docker":
        return environment_image(environment, log=log)
    return str(host_environment_tree(environment, log=log))


def _environment_task(environment: RepoEnvironment) -> Task:
    """A stand-in task that carries only ``environment`` (for the env's check of its image)."""
    return Task(id=f"{environment.repo} {environment.version}", env="SWE", family="swebench", prompt="", answer="",
                metadata={"environment": environment.to_dict()})


def _distinct(tasks: Sequence[Task]) -> list[RepoEnvironment]:
    environments: dict[tuple[str, str], RepoEnvironment] = {}
    for task in tasks:
        environment = task_environment(task)
        if environment is not None:
            environments.setdefault((environment.build_key, environment.image), environment)
    return list(environments.values())


def build_parser() -> argparse.ArgumentParser:
    """The command line."""
    parser = argparse.ArgumentParser(prog="python -m agentgym_envs.swe", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    env = commands.add_parser("env", help="per-repository environments").add_subparsers(dest="action", required=True)
    build = env.add_parser("build", help="build the environments an instance file needs")
    build.add_argument("--instances", required=True, help="a SWE-bench-format instance file (JSON or JSONL)")
    check = commands.add_parser("validate", help="run each instance's fix and no change; write a report")
    check.add_argument("instances", help="a SWE-bench-format instance file (JSON or JSONL)")
    check.add_argument("--out", help="the report's path (default: FILE.validation.json beside the file)")
    check.add_argument("--rules", default="strict", choices=("strict", "swebench"), help="grading rules")
    for sub in (build, check):
        sub.add_argument("--repository", help="the folder (or git clone) holding the repository at base_commit; "
                                               "optional for instances that run in a local Docker image")
        sub.add_argument("--image", help="a local Docker image per instance, formatted with its fields (e.g. "
                                         "'sweb.eval.x86_64.{instance_id}:latest'), for instances without an 'image' "
                                         "field (SWE-bench format, docker only)")
        sub.add_argument("--overrides", help="a YAML or JSON file of environment overrides")
        sub.add_argument("--sandbox", default="docker", choices=("docker", "bwrap"), help="sandbox backend")
        sub.add_argument("--format", default="swebench", choices=sorted(LOADERS),
                         help="the file's format: SWE-bench's (and SWE-Gym's), or SWE-smith's (patch plants the bug)")
    return parser


def _load(args: argparse.Namespace) -> list[Task]:
    """The instance file's tasks, as the command line says.

    Raises:
        TaskError: The file, or an option that does not fit its format.
    """
    if args.format == "swe-smith":
        if args.image or not args.repository:
            raise TaskError("expected --repository (and no --image) for SWE-smith instances: their bug is planted "
                            "into the repository's clean tree")
        return load_swesmith(args.instances, repository=args.repository, overrides=args.overrides)
    return load_swebench(args.instances, repository=args.repository, image=args.image, overrides=args.overrides)


def main(argv: Sequence[str] | None = None) -> int:
    """Run a command; 1 when a build failed or an instance is not usable."""
    args = build_parser().parse_args(argv)
    console = Console()
    try:
        tasks = _load(args)
    except TaskError as exc:
        console.print(f"[red]error[/red]: {escape(str(exc))}")
        return 1
    failures = build_environments(_distinct(tasks), args.sandbox, console)
    for failure in failures:
        console.print(f"[red]build failed[/red] {escape(failure)}")
    if args.command == "env":
        return 1 if failures else 0
    with _progress(console) as progress:
        bar = progress.add_task("validating", total=len(tasks))
        report = validate(tasks, sandbox=args.sandbox, rules=args.rules, advance=lambda _: progress.advance(bar))
    path = write_report(report, args.out or validation_report_path(args.instances))
    for task_id, verdict in report["instances"].items():
        status = "[green]usable[/green]" if verdict["usable"] else f"[red]{verdict['reason']}[/red]"
        console.print(f"{escape(task_id)}: {status} {escape(verdict['detail'])}")
    console.print(f"wrote {path}: {report['summary']}")
    return 0 if all(verdict["usable"] for verdict in report["instances"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
