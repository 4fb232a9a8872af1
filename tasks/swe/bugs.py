"""Candidate bugs for a repository: one or several mutation sites, as the patch that plants them and its reverse.

A :class:`Bug` holds its sites and two patches: ``bug_patch`` turns the clean tree into the buggy one, and
``fix_patch`` (its reverse) is the reference fix. The SWE task builder (:mod:`tasks.swe.synthesis`) draws
candidates from here; the env layer runs each candidate's suite twice per tree and judges it with
:func:`tasks.swe.keep.judge_candidate`; a kept one becomes an instance (:func:`tasks.swe.instances.make_instance`).

Several bugs in one task (the harder levels) are sites in different functions, possibly in different files.

Example:
    >>> files = {"calc.py": b"def half(x):\\n    return x // 2\\n"}
    >>> bug = next(bug_candidates(files, ["calc.py"], random.Random(0), operators=["change_arithmetic"]))
    >>> bug.descriptions
    ("changed '//' to '/' in half (line 2)",)
    >>> apply_patch(bug.buggy_tree(files), bug.fix_patch) == files
    True
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from tasks.errors import TaskError
from tasks.swe.mutations import Site, apply_sites, candidates
from tasks.swe.patches import apply_patch, diff_trees


@dataclass(frozen=True)
class Bug:
    """One candidate bug (one or several sites).

    Attributes:
        sites: ``(path, site)`` pairs, in path then line order.
        bug_patch: The diff from the clean tree to the buggy one.
        fix_patch: The diff from the buggy tree to the clean one (the reference fix).
    """

    sites: tuple[tuple[str, Site], ...]
    bug_patch: str
    fix_patch: str

    @property
    def paths(self) -> tuple[str, ...]:
        """The file of each site."""
        return tuple(path for path, _ in self.sites)

    @property
    def functions(self) -> tuple[str, ...]:
        """The function of each site."""
        return tuple(site.function for _, site in self.sites)

    @property
    def descriptions(self) -> tuple[str, ...]:
        """What each site changed (never shown to an agent)."""
        return tuple(site.description for _, site in self.sites)

    def buggy_tree(self, files: Mapping[str, bytes]) -> dict[str, bytes]:
        """The clean tree ``files`` with the bug planted."""
        return apply_patch(files, self.bug_patch)


def plant(files: Mapping[str, bytes], sites: Sequence[tuple[str, Site]]) -> Bug:
    """The bug made of these sites (found in ``files``), with its two patches.

    Raises:
        TaskError: A site's file is not in ``files``, or the sites do not plant (overlap, bad result).
    """
    missing = sorted({path for path, _ in sites} - set(files))
    if missing:
        raise TaskError(f"expected the sites' files in the tree, got {missing} missing")
    ordered = tuple(sorted(sites, key=lambda pair: (pair[0], pair[1].line, pair[1].node)))
    buggy = dict(files)
    for path in sorted({path for path, _ in ordered}):
        source = files[path].decode("utf-8")
        buggy[path] = apply_sites(source, [site for where, site in ordered if where == path]).encode("utf-8")
    return Bug(sites=ordered, bug_patch=diff_trees(files, buggy), fix_patch=diff_trees(buggy, files))


def bug_candidates(files: Mapping[str, bytes], library: Iterable[str], rng: random.Random, *, bugs: int = 1,
                   operators: Iterable[str] | None = None, sites_per_file: int | None = 50) -> Iterator[Bug]:
    """Candidate bugs in an order drawn from ``rng`` (the same tree and seed give the same sequence).

    Each candidate has ``bugs`` sites, each in a different function; the files are visited in a shuffled
    order, and each file's sites come from :func:`tasks.swe.mutations.candidates`.

    Args:
        files: The clean tree.
        library: The paths bugs may be planted in (:func:`tasks.swe.repos.library_files`).
        rng: The random generator.
        bugs: Sites per candidate (the number of bugs of a task).
        operators: Operator names; all when ``None``.
        sites_per_file: The most sites drawn from one file (``None``: all).

    Raises:
        TaskError: ``bugs`` is below 1.
    """
    if bugs < 1:
        raise TaskError(f"expected at least 1 bug per candidate, got {bugs}")
    pool = _site_pool(files, sorted(library), rng, operators, sites_per_file)
    while len(pool) >= bugs:
        chosen = _take_distinct_functions(pool, bugs)
        if chosen is None:
            return
        yield plant(files, chosen)


def _site_pool(files: Mapping[str, bytes], library: list[str], rng: random.Random, operators: Iterable[str] | None,
               sites_per_file: int | None) -> list[tuple[str, Site]]:
    """Sites of all library files, interleaved file by file in a shuffled file order."""
    rng.shuffle(library)
    operator_names = None if operators is None else list(operators)
    per_file = [[(path, site) for site in candidates(files[path].decode("utf-8"), rng, operators=operator_names,
                                                     limit=sites_per_file)] for path in library]
    return [queue[index] for index in range(max(map(len, per_file), default=0)) for queue in per_file
            if index < len(queue)]


def _take_distinct_functions(pool: list[tuple[str, Site]], bugs: int) -> list[tuple[str, Site]] | None:
    """Remove and return the first ``bugs`` sites of the pool in pairwise different functions and lines."""
    chosen: list[tuple[str, Site]] = []
    for pair in list(pool):
        if all(_apart(pair, other) for other in chosen):
            chosen.append(pair)
            pool.remove(pair)
            if len(chosen) == bugs:
                return chosen
    return None


def _apart(first: tuple[str, Site], second: tuple[str, Site]) -> bool:
    """Whether two sites are in different functions and, in one file, on different lines."""
    (path, site), (other_path, other) = first, second
    return path != other_path or (site.function != other.function and not site.overlaps(other))
