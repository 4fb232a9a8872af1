"""Real repositories for the SWE tests: PyPI sdists fetched once through tasks.swe.repos (pinned by sha256, cached)."""

from __future__ import annotations

import tarfile
from pathlib import Path

from tasks.swe.repos import PINS, RepoSpec, fetch_sdist

HUMANIZE = PINS["humanize"]
"""humanize 4.9.0: a ``src/`` layout, a test-only dependency (freezegun), parametrize ids with spaces."""
DJANGO = RepoSpec("Django", "5.1.4", "de450c09e91879fa5a307f696e57c851955c910a438a35e6b4c895e86bedc82a",
                  "BSD-3-Clause", ("django",), ("tests",), suite_seconds=0.0, tests_passed=0)
"""Django 5.1.4, whose sdist holds its own test runner (tests/runtests.py)."""


def unpacked_sdist(spec: RepoSpec, folder: Path) -> Path:
    """``spec``'s sdist unpacked into ``folder``; returns the sdist's top folder (``<name>-<version>``).

    Raises:
        tasks.swe.repos.RepoError: PyPI could not be reached, or the download is not the pinned file.
    """
    with tarfile.open(fetch_sdist(spec)) as tar:
        tar.extractall(folder, filter="data")
    return folder / f"{spec.name}-{spec.version}"
