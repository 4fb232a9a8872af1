"""The data image: its tag follows its recipe, and the built image runs the host's analysis stack (numpy,
pandas, pyarrow, duckdb, scipy, scikit-learn, statsmodels, matplotlib, openpyxl) as ``nobody`` with no network."""

from __future__ import annotations

import io
import tarfile
from importlib.metadata import version

import pytest

from agentgym_envs.sandbox import data_image
from agentgym_envs.sandbox.data_image import ANALYSIS_MODULES, DATA_IMAGE_WHEELS, SITE_PACKAGES, data_image_tag


def test_the_tag_follows_the_base_image_and_the_pins(monkeypatch):
    tag = data_image_tag("agentrl/base:aaaa")
    assert tag.startswith("agentrl/data:") and tag == data_image_tag("agentrl/base:aaaa")
    assert data_image_tag("agentrl/base:bbbb") != tag
    monkeypatch.setattr(data_image, "DATA_IMAGE_WHEELS", (*DATA_IMAGE_WHEELS[:-1], "six==1.0.0"))
    assert data_image_tag("agentrl/base:aaaa") != tag


def test_the_pins_are_the_host_versions():
    pins = dict(pin.split("==") for pin in DATA_IMAGE_WHEELS)
    assert pins == {name: version(name) for name in pins}  # bwrap and local run the host's packages


def test_the_smoke_test_imports_the_first_pins():
    assert [distribution for _, distribution in ANALYSIS_MODULES] == [
        pin.split("==")[0] for pin in DATA_IMAGE_WHEELS[:len(ANALYSIS_MODULES)]]


def test_the_archive_puts_the_tree_in_site_packages_owned_by_root(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("x = 1\n")
    (tmp_path / "pkg" / "__init__.py").chmod(0o600)
    buffer = io.BytesIO()
    data_image._write_archive(buffer, tmp_path)
    buffer.seek(0)
    with tarfile.open(fileobj=buffer) as tar:
        members = {member.name: member for member in tar.getmembers()}
    module = members[f"{SITE_PACKAGES.lstrip('/')}/pkg/__init__.py"]
    assert (module.uid, module.gid, module.mode) == (0, 0, 0o644)
    assert members[f"{SITE_PACKAGES.lstrip('/')}/pkg"].mode == 0o755


@pytest.mark.docker
def test_the_built_image_runs_the_pinned_stack(backend_problems):
    import docker

    from tests.conftest import require_backend

    require_backend("docker", backend_problems)
    tag = data_image.ensure_data_image()
    client = docker.from_env()
    try:
        printed = data_image.smoke_test(client, tag)  # as nobody, --network none; writes and reads a Parquet file
        attrs = client.images.get(tag).attrs
    finally:
        client.close()
    assert printed == " ".join(DATA_IMAGE_WHEELS[:len(ANALYSIS_MODULES)])  # t-test, regressions, Agg plot, xlsx ran
    assert attrs["Config"]["User"] == "65534:65534" and attrs["Config"]["Labels"]["agentrl.image-recipe"]
    tree = data_image.installed_wheels()
    assert not list(tree.glob("pandas/tests")) and list(tree.glob("pandas/__pycache__/__init__.cpython-311.pyc"))
