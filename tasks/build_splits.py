"""Build the bundled benchmark splits, or check that they are current, from what each bundle's manifest names.

Usage::

    python -m tasks.build_splits                     # (re)write every bundle under tasks/data/ that names a builder
    python -m tasks.build_splits --check             # exit 1, with a summary, if a rebuild would change any byte
    python -m tasks.build_splits --env Search        # only one bundle (its manifest's env name)
    python -m tasks.build_splits --folder my/data    # a bundle of your own (your env's ``splits_dir``)

A bundle is a folder with a ``MANIFEST.json`` (:mod:`tasks.splits`). Its manifest's ``builder`` names the function
that makes every file of the folder in memory, as ``module:function`` returning file name -> exact bytes (the
manifest included, with the same ``builder``): for instance ``tasks.search.bundled:build_search_files``. So this
command lists no environment, and a third-party env whose bundle names its builder is rebuilt and checked the same
way. A bundle without a builder (SWE-v0's, built in sandboxes by ``python -m agentgym_envs.swe.synthesize --bundle``)
is skipped, and said to be.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from importlib import import_module
from pathlib import Path

from tasks.splits import MANIFEST_NAME

BUNDLED_ROOT = Path(__file__).parent / "data"
"""The folder of the bundles installed with the project, one sub-folder each."""


def _describe_difference(name: str, fresh: bytes, bundled: bytes) -> str:
    """One line saying how a bundled file differs from its regeneration."""
    if name.endswith(".jsonl"):
        fresh_lines, bundled_lines = fresh.splitlines(), bundled.splitlines()
        pairs = zip(fresh_lines, bundled_lines, strict=False)  # lengths may differ
        changed = [i for i, (fresh_line, bundled_line) in enumerate(pairs) if fresh_line != bundled_line]
        where = ""
        if changed:
            where = f", first at line {changed[0] + 1} ({_record_id(fresh_lines[changed[0]])})"
        return (
            f"{name}: {len(changed)} of {len(fresh_lines)} lines differ{where}; "
            f"{len(bundled_lines)} lines bundled, {len(fresh_lines)} regenerated"
        )
    return f"{name}: differs from the regenerated version"


def _record_id(line: bytes) -> str:
    """The id of a JSONL record: a task's or document's ``id``, a product's ``asin``, a dataset's ``name``."""
    record = json.loads(line)
    for key in ("id", "asin", "name"):
        if key in record:
            return record[key]
    raise ValueError(f"expected a JSONL record with an id, asin or name, got keys {sorted(record)}")


def check_bundled(files: dict[str, bytes], folder: Path) -> list[str]:
    """Differences between freshly built ``files`` and those in ``folder``; empty when identical."""
    problems = []
    for name, fresh in files.items():
        path = folder / name
        if not path.is_file():
            problems.append(f"{name}: missing from {folder}")
        elif (bundled := path.read_bytes()) != fresh:
            problems.append(_describe_difference(name, fresh, bundled))
    return problems


def bundle_folders(root: Path = BUNDLED_ROOT) -> dict[str, Path]:
    """Env name (the manifest's ``env``) -> folder, for every sub-folder of ``root`` holding a manifest."""
    folders = [folder for folder in sorted(root.iterdir()) if (folder / MANIFEST_NAME).is_file()]
    return {read_manifest(folder)["env"]: folder for folder in folders}


def read_manifest(folder: Path) -> dict:
    """The parsed manifest of a bundle folder.

    Raises:
        ValueError: ``folder`` holds no manifest.
    """
    path = folder / MANIFEST_NAME
    if not path.is_file():
        raise ValueError(f"expected a bundle folder with a {MANIFEST_NAME}, got {folder}")
    return json.loads(path.read_text(encoding="utf-8"))


def build_files(manifest: Mapping[str, object]) -> Mapping[str, bytes]:
    """Every file of a bundle, made in memory by the builder its manifest names (``module:function``).

    Raises:
        ValueError: The manifest names no builder, or one that cannot be imported.
    """
    builder = manifest.get("builder")
    if not isinstance(builder, str) or ":" not in builder:
        raise ValueError(f"{manifest.get('env')}: expected the manifest's 'builder' as 'module:function', got "
                         f"{builder!r}")
    module, function = builder.split(":", 1)
    try:
        return getattr(import_module(module), function)()
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"{manifest.get('env')}: the manifest's builder {builder!r} cannot be loaded: {exc}") from exc


def selected(envs: Sequence[str] | None, folders: Sequence[Path], out: Path | None) -> dict[str, tuple[dict, Path]]:
    """Env name -> (its manifest, the folder to build or check) for the named bundled envs (default all, unless
    folders are given) and the given folders; with ``out``, the one selected bundle goes there instead.

    Raises:
        ValueError: An env name with no bundle, a folder with no manifest, or ``out`` with more than one bundle.
    """
    bundled = bundle_folders()
    unknown = sorted(set(envs or ()) - set(bundled))
    if unknown:
        raise ValueError(f"--env: expected bundled env names among {sorted(bundled)}, got {unknown}")
    chosen = [bundled[env] for env in envs or ([] if folders else bundled)] + list(folders)
    targets = {manifest["env"]: (manifest, folder) for folder in chosen for manifest in [read_manifest(folder)]}
    if out is not None:
        if len(targets) != 1:
            raise ValueError(f"--out: expected exactly one bundle (--env or --folder), got {sorted(targets)}")
        targets = {env: (manifest, out) for env, (manifest, _) in targets.items()}
    return targets


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point; returns the exit status."""
    parser = argparse.ArgumentParser(prog="python -m tasks.build_splits", description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare a rebuild with the files; write nothing")
    parser.add_argument("--env", action="append",
                        help=f"a bundled env's name (repeatable; default: every bundle under {BUNDLED_ROOT})")
    parser.add_argument("--folder", action="append", type=Path, default=[],
                        help="a bundle folder of your own whose manifest names its builder (repeatable)")
    parser.add_argument("--out", type=Path, default=None,
                        help="build or check the one selected bundle in this folder instead of its own")
    args = parser.parse_args(argv)
    try:
        targets = selected(args.env, args.folder, args.out)
    except ValueError as exc:
        parser.error(str(exc))
    problems = []
    for env, (manifest, folder) in targets.items():
        if "builder" not in manifest:
            print(f"skipped {env}: its manifest names no builder")
            continue
        try:
            files = build_files(manifest)
        except ValueError as exc:
            parser.error(str(exc))
        if args.check:
            problems.extend(f"{env}: {problem}" for problem in check_bundled(files, folder))
            continue
        folder.mkdir(parents=True, exist_ok=True)
        for name, data in files.items():
            (folder / name).write_bytes(data)
        print(f"wrote {len(files)} {env} files to {folder}")
    if args.check:
        for problem in problems:
            print(problem, file=sys.stderr)
        print("bundled splits are up to date" if not problems else f"{len(problems)} file(s) out of date")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
