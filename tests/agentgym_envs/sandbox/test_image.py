"""Tests of the base image recipe: mirror discovery, the recipe tag, rootfs slimming, the built image."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentgym_envs.sandbox import image
from agentgym_envs.sandbox.image import (
    BASE_IMAGE_PACKAGES,
    ImageBuildError,
    base_image_tag,
    debian_mirror,
    parse_deb822_sources,
    parse_one_line_sources,
    recipe_hash,
)
from agentgym_envs.sandbox.labels import IMAGE_RECIPE_LABEL, SANDBOX_LABEL
from agentgym_envs.sandbox.system import docker_daemon_reachable

DEB822 = """\
Types: deb
# http://snapshot.debian.org/archive/debian/20250520T000000Z
URIs: http://mirror.example/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://mirror.example/debian-security
Suites: bookworm-security
Components: main
"""

ONE_LINE = """\
# a comment: deb http://commented.example/debian bookworm main
deb-src http://src.example/debian bookworm main
deb [arch=amd64 signed-by=/usr/share/keyrings/x.gpg] http://one.example/debian/ bookworm main contrib
deb http://one.example/security bookworm-security main  # trailing comment
"""


def write_apt_dir(root: Path, *, sources_list: str = "", sources: dict[str, str] | None = None) -> Path:
    """Create a fake /etc/apt with the given sources.list and sources.list.d files."""
    (root / "sources.list.d").mkdir(parents=True)
    (root / "sources.list").write_text(sources_list)
    for name, text in (sources or {}).items():
        (root / "sources.list.d" / name).write_text(text)
    return root


# ------------------------------------------------------------------------------------------ parsing


def test_parse_deb822_gives_each_stanza_uri_and_suites():
    assert parse_deb822_sources(DEB822) == [
        ("http://mirror.example/debian", ["bookworm", "bookworm-updates"]),
        ("http://mirror.example/debian-security", ["bookworm-security"]),
    ]


def test_parse_deb822_skips_disabled_and_source_stanzas_and_joins_continuations():
    text = (
        "Types: deb-src\nURIs: http://src.example/debian\nSuites: bookworm\n\n"
        "Enabled: no\nTypes: deb\nURIs: http://off.example/debian\nSuites: bookworm\n\n"
        "Types: deb deb-src\nURIs: http://a.example/debian\n http://b.example/debian\nSuites: bookworm\n"
    )
    assert parse_deb822_sources(text) == [
        ("http://a.example/debian", ["bookworm"]),
        ("http://b.example/debian", ["bookworm"]),
    ]


def test_parse_one_line_keeps_deb_lines_and_drops_options_and_comments():
    assert parse_one_line_sources(ONE_LINE) == [
        ("http://one.example/debian/", ["bookworm"]),
        ("http://one.example/security", ["bookworm-security"]),
    ]


def test_debian_mirror_reads_deb822_sources(tmp_path):
    apt_dir = write_apt_dir(tmp_path, sources={"debian.sources": DEB822})
    assert debian_mirror("bookworm", apt_dir) == "http://mirror.example/debian"


def test_debian_mirror_matches_the_suite_exactly(tmp_path):
    # bookworm-security must not count as bookworm, and vice versa
    apt_dir = write_apt_dir(tmp_path, sources={"debian.sources": DEB822})
    assert debian_mirror("bookworm-security", apt_dir) == "http://mirror.example/debian-security"


def test_debian_mirror_reads_one_line_sources_list_and_strips_slash(tmp_path):
    apt_dir = write_apt_dir(tmp_path, sources_list=ONE_LINE)
    assert debian_mirror("bookworm", apt_dir) == "http://one.example/debian"


def test_debian_mirror_ignores_disabled_files(tmp_path):
    apt_dir = write_apt_dir(tmp_path, sources={"debian.sources.disabled": DEB822})
    with pytest.raises(ImageBuildError, match="expected an apt source for Debian suite 'bookworm'"):
        debian_mirror("bookworm", apt_dir)


def test_debian_mirror_without_a_matching_source_says_what_to_add(tmp_path):
    apt_dir = write_apt_dir(tmp_path, sources_list="deb http://x.example/debian bullseye main\n")
    with pytest.raises(ImageBuildError, match="Suites: bookworm"):
        debian_mirror("bookworm", apt_dir)


# ---------------------------------------------------------------------------------------------- tag


def test_tag_has_repository_and_short_hash():
    tag = base_image_tag()
    repository, _, version = tag.rpartition(":")
    assert repository == "agentrl/base"
    assert len(version) == 12 and int(version, 16) >= 0
    assert version == recipe_hash()


def test_tag_changes_with_the_package_list():
    assert base_image_tag((*BASE_IMAGE_PACKAGES, "python3-scipy")) != base_image_tag()
    assert base_image_tag(BASE_IMAGE_PACKAGES[:-1]) != base_image_tag()


def test_tag_changes_with_the_suite_and_recipe_version(monkeypatch):
    assert base_image_tag(suite="trixie") != base_image_tag(suite="bookworm")
    before = base_image_tag()
    monkeypatch.setattr(image, "RECIPE_VERSION", image.RECIPE_VERSION + 1)
    assert base_image_tag() != before


def test_tag_does_not_depend_on_package_order():
    assert base_image_tag(tuple(reversed(BASE_IMAGE_PACKAGES))) == base_image_tag()


# ---------------------------------------------------------------------------------------- slimming


def test_prune_removes_only_tests_dirs_of_listed_packages(tmp_path):
    for rel in ("sympy/core/tests/test_a.py", "sympy/tests/x.py", "sympy/testing/runtests.py",
                "pandas/tests/io/tests/t.py", "requests/tests/t.py", "numpy/core/multiarray.py"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("")
    image._prune_test_dirs(tmp_path)
    left = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*.py"))
    assert left == ["numpy/core/multiarray.py", "requests/tests/t.py", "sympy/testing/runtests.py"]


def test_empty_dir_keeps_the_directory_and_does_not_follow_symlinks(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("keep")
    target = tmp_path / "cache"
    (target / "sub").mkdir(parents=True)
    (target / "sub" / "f").write_text("x")
    (target / "link").symlink_to(outside)
    image._empty_dir(target)
    assert target.is_dir() and not any(target.iterdir())
    assert (outside / "keep.txt").read_text() == "keep"


# ------------------------------------------------------------------------------------- built image


@pytest.fixture(scope="module")
def base_image() -> str:
    """The tag of the built base image; skips when there is no daemon or no image."""
    if not docker_daemon_reachable():
        pytest.skip("no Docker daemon answers")
    import docker

    client = docker.from_env()
    try:
        if not image.image_exists(client, base_image_tag()):
            pytest.skip(f"{base_image_tag()} is not built: run `python -m agentgym_envs.sandbox setup`")
    finally:
        client.close()
    return base_image_tag()


@pytest.mark.docker
def test_image_runs_the_scientific_stack_as_nobody_without_network(base_image):
    import docker

    client = docker.from_env()
    try:
        out = client.containers.run(
            base_image,
            ["python3", "-c", "import os, numpy, pandas, sympy; print(os.getuid(), os.getcwd(),"
                              " sorted(os.listdir('/sys/class/net')))"],
            user="nobody", network_mode="none", remove=True, labels={SANDBOX_LABEL: "test"},
        )
    finally:
        client.close()
    assert out.decode().split() == ["65534", "/work", "['lo']"]


@pytest.mark.docker
def test_image_carries_its_recipe_label_and_runs_as_nobody_by_default(base_image):
    import docker

    client = docker.from_env()
    try:
        attrs = client.images.get(base_image).attrs
    finally:
        client.close()
    assert attrs["Config"]["Labels"][IMAGE_RECIPE_LABEL] == recipe_hash()
    assert attrs["Config"]["User"] == "65534:65534"


@pytest.mark.docker
def test_build_is_cached_when_the_tag_exists(base_image):
    lines: list[str] = []
    assert image.build_base_image(log=lines.append) == base_image
    assert "cached" in lines[0]


def test_a_first_build_reports_debootstrap_when_it_starts_and_ends(monkeypatch):
    class Images:
        def get(self, tag):
            return type("Image", (), {"attrs": {"Size": 0}})()

    client = type("Client", (), {"images": Images()})()
    monkeypatch.setattr(image, "image_exists", lambda client, tag: False)
    monkeypatch.setattr(image, "is_root", lambda: True)
    for step in ("ensure_debootstrap", "run_debootstrap", "slim_rootfs", "import_rootfs", "smoke_test"):
        monkeypatch.setattr(image, step, lambda *args, **kwargs: None)
    monkeypatch.setattr(image, "debian_mirror", lambda suite: "http://mirror.example/debian")
    lines: list[str] = []
    image.build_image(BASE_IMAGE_PACKAGES, repository="agentrl/test", tag="agentrl/test:x", client=client,
                      log=lines.append)
    started = f"debootstrap bookworm from http://mirror.example/debian with {len(BASE_IMAGE_PACKAGES)} extra packages"
    assert lines[0] == f"{started} ..."  # the heartbeat of tasks.progress.reported says it runs every minute
    assert lines[1].startswith(f"{started}: done in ")
