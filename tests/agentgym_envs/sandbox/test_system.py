"""Tests of host set-up detection, the doctor and the ``agentrl-sandbox`` command line."""

from __future__ import annotations

import contextlib
import os
import sys
import uuid

import pytest

from agentgym_envs.errors import SandboxUnavailableError
from agentgym_envs.sandbox import cli, doctor, system
from agentgym_envs.sandbox import docker as docker_backend
from agentgym_envs.sandbox.doctor import Check
from agentgym_envs.sandbox.labels import SANDBOX_LABEL

# ------------------------------------------------------------------------------------------- system


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('ID=debian\nVERSION_ID="12"\n', True),  # Debian itself
        ('ID=ubuntu\nID_LIKE="debian"\n', True),  # a derivative: apt-get works too
        ('ID="fedora"\n', False),  # no apt
        ("", False),  # empty file
    ],
)
def test_is_debian_reads_os_release(tmp_path, monkeypatch, text, expected):
    monkeypatch.setattr(system.shutil, "which", lambda name, path=None: f"/usr/bin/{name}")
    path = tmp_path / "os-release"
    path.write_text(text)
    assert system.is_debian(path) is expected


def test_is_debian_false_when_os_release_is_missing(tmp_path):
    assert system.is_debian(tmp_path / "missing") is False


def test_docker_instructions_give_the_exact_commands():
    message = system.docker_instructions("no daemon")
    assert message.startswith("Docker is not usable: no daemon.")
    assert "apt-get install -y docker.io" in message
    assert "dockerd --bridge=none --iptables=false --ip6tables=false" in message
    assert "sandbox='bwrap'" in message


def test_ensure_docker_returns_at_once_when_the_daemon_answers(monkeypatch):
    monkeypatch.setattr(system, "docker_daemon_reachable", lambda timeout_s=3.0: True)
    monkeypatch.setattr(system, "apt_install", lambda packages: pytest.fail("must not install"))
    monkeypatch.setattr(system, "start_dockerd", lambda: pytest.fail("must not start dockerd"))
    system.ensure_docker()


def test_ensure_docker_not_root_explains_instead_of_installing(monkeypatch):
    monkeypatch.delenv("DOCKER_HOST", raising=False)
    monkeypatch.setattr(system, "docker_daemon_reachable", lambda timeout_s=3.0: False)
    monkeypatch.setattr(system, "is_root", lambda: False)
    monkeypatch.setattr(system, "apt_install", lambda packages: pytest.fail("must not install"))
    with pytest.raises(SandboxUnavailableError, match=r"apt-get install -y docker\.io") as info:
        system.ensure_docker()
    assert "sandbox='bwrap'" in str(info.value)


def test_ensure_docker_not_debian_explains(monkeypatch):
    monkeypatch.delenv("DOCKER_HOST", raising=False)
    monkeypatch.setattr(system, "docker_daemon_reachable", lambda timeout_s=3.0: False)
    monkeypatch.setattr(system, "is_root", lambda: True)
    monkeypatch.setattr(system, "is_debian", lambda: False)
    with pytest.raises(SandboxUnavailableError, match="not a Debian-family system"):
        system.ensure_docker()


def test_ensure_docker_installs_only_when_dockerd_is_missing_and_starts_it(monkeypatch):
    calls: list[str] = []
    answers = iter([False, True])  # down before the start, up after
    monkeypatch.delenv("DOCKER_HOST", raising=False)
    monkeypatch.setattr(system, "docker_daemon_reachable", lambda timeout_s=3.0: next(answers))
    monkeypatch.setattr(system, "is_root", lambda: True)
    monkeypatch.setattr(system, "is_debian", lambda: True)
    monkeypatch.setattr(system, "find_executable", lambda name: None)
    monkeypatch.setattr(system, "apt_install", lambda packages: calls.append(f"apt {' '.join(packages)}"))
    monkeypatch.setattr(system, "_running_dockerd_pid", lambda: None)
    monkeypatch.setattr(system, "start_dockerd", lambda: calls.append("start") or 4242)
    system.ensure_docker(wait_s=5)
    assert calls == ["apt docker.io", "start"]


def test_ensure_docker_does_not_start_a_second_daemon(monkeypatch):
    answers = iter([False, True])
    monkeypatch.delenv("DOCKER_HOST", raising=False)
    monkeypatch.setattr(system, "docker_daemon_reachable", lambda timeout_s=3.0: next(answers))
    monkeypatch.setattr(system, "is_root", lambda: True)
    monkeypatch.setattr(system, "is_debian", lambda: True)
    monkeypatch.setattr(system, "find_executable", lambda name: "/usr/sbin/dockerd")
    monkeypatch.setattr(system, "_running_dockerd_pid", lambda: 4242)
    monkeypatch.setattr(system, "start_dockerd", lambda: pytest.fail("a dockerd is already running"))
    system.ensure_docker(wait_s=5)


def test_ensure_docker_start_false_says_how_to_start(monkeypatch):
    monkeypatch.delenv("DOCKER_HOST", raising=False)
    monkeypatch.setattr(system, "docker_daemon_reachable", lambda timeout_s=3.0: False)
    monkeypatch.setattr(system, "is_root", lambda: True)
    monkeypatch.setattr(system, "is_debian", lambda: True)
    monkeypatch.setattr(system, "find_executable", lambda name: "/usr/sbin/dockerd")
    monkeypatch.setattr(system, "_running_dockerd_pid", lambda: None)
    with pytest.raises(SandboxUnavailableError, match="installed but not running"):
        system.ensure_docker(start=False)


def test_start_dockerd_detaches_into_its_own_session_and_logs(tmp_path, monkeypatch):
    fake = tmp_path / "dockerd"
    fake.write_text(f"#!{sys.executable}\nimport os, sys\n"
                    "print(os.getsid(0) == os.getpid(), ' '.join(sys.argv[1:]), sys.stdin.read() == '')\n")
    fake.chmod(0o755)
    log = tmp_path / "log" / "dockerd.log"
    monkeypatch.setattr(system, "DOCKERD_LOG", log)
    monkeypatch.setattr(system, "find_executable", lambda name: str(fake))
    pid = system.start_dockerd()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert log.read_text().split() == ["True", *system.DOCKERD_ARGS, "True"]


def test_wait_for_docker_reports_a_dead_daemon_with_its_log(tmp_path, monkeypatch):
    log = tmp_path / "dockerd.log"
    log.write_text("failed to start daemon: boom\n")
    monkeypatch.setattr(system, "DOCKERD_LOG", log)
    monkeypatch.setattr(system, "docker_daemon_reachable", lambda timeout_s=3.0: False)
    monkeypatch.setattr(system, "_reap", lambda pid: 1)
    with pytest.raises(SandboxUnavailableError, match=r"(?s)dockerd exited with status 1.*boom"):
        system._wait_for_docker(4242, wait_s=5)


def test_apt_install_refuses_without_root(monkeypatch):
    monkeypatch.setattr(system, "is_root", lambda: False)
    with pytest.raises(SandboxUnavailableError, match="expected root on a Debian-family system"):
        system.apt_install(["bubblewrap"])


def test_missing_package_without_install_says_the_apt_command(monkeypatch):
    monkeypatch.setattr(system, "find_executable", lambda name: None)
    with pytest.raises(SandboxUnavailableError, match="apt-get install -y debootstrap"):
        system.ensure_debootstrap(install=False)


@pytest.mark.bwrap
def test_bwrap_probe_works_here():
    if system.find_executable("bwrap") is None:
        pytest.skip("bubblewrap is not installed")
    ok, detail = system.bwrap_usable()
    assert ok, detail


# ------------------------------------------------------------------------------------------- doctor


def test_run_checks_covers_every_check_once_in_order():
    checks = doctor.run_checks()
    assert [c.name for c in checks] == [
        doctor.PYTHON, doctor.DOCKER_SDK, doctor.DOCKER_DAEMON, doctor.BASE_IMAGE, doctor.BWRAP,
        doctor.USER_NAMESPACES, doctor.DEBOOTSTRAP, doctor.ROOT, doctor.DEBIAN,
    ]
    assert all(isinstance(c, Check) and isinstance(c.ok, bool) and c.detail for c in checks)
    assert all(c.fix for c in checks if not c.ok)  # every failure says how to fix it


def checks_with(*ok_names: str) -> list[Check]:
    """Fake doctor outcomes: the named checks pass, all others fail."""
    names = [doctor.PYTHON, doctor.DOCKER_SDK, doctor.DOCKER_DAEMON, doctor.BASE_IMAGE, doctor.BWRAP,
             doctor.USER_NAMESPACES, doctor.DEBOOTSTRAP, doctor.ROOT, doctor.DEBIAN]
    return [Check(n, n in ok_names, "fake", None if n in ok_names else "fix it") for n in names]


@pytest.mark.parametrize(
    ("ok_names", "expected"),
    [
        ((doctor.DOCKER_DAEMON, doctor.BASE_IMAGE, doctor.BWRAP, doctor.USER_NAMESPACES), "docker"),
        ((doctor.DOCKER_DAEMON, doctor.BASE_IMAGE), "docker"),  # docker alone is enough
        ((doctor.DOCKER_DAEMON, doctor.BWRAP, doctor.USER_NAMESPACES), "bwrap"),  # no image yet
        ((doctor.BWRAP, doctor.USER_NAMESPACES), "bwrap"),
        ((doctor.BWRAP,), "local"),  # installed but no namespaces
        ((doctor.DOCKER_DAEMON,), "local"),  # daemon without image, no bwrap
        ((), "local"),
    ],
)
def test_recommended_backend(ok_names, expected):
    assert doctor.recommended_backend(checks_with(*ok_names)) == expected


def test_render_prints_every_check_fix_and_backend():
    from rich.console import Console

    console = Console(record=True, width=200)
    doctor.render(checks_with(doctor.BWRAP, doctor.USER_NAMESPACES), console=console)
    text = console.export_text()
    assert "user namespaces" in text and "fix it" in text
    assert "recommended backend: sandbox='bwrap'" in text


# ---------------------------------------------------------------------------------------------- cli


@pytest.mark.parametrize(
    ("ok_names", "status"),
    [
        ((doctor.DOCKER_DAEMON, doctor.BASE_IMAGE), 0),
        ((doctor.BWRAP, doctor.USER_NAMESPACES), 0),
        ((doctor.PYTHON,), 1),  # only local: no real backend
    ],
)
def test_cli_doctor_exit_status(monkeypatch, capsys, ok_names, status):
    monkeypatch.setattr(doctor, "run_checks", lambda: checks_with(*ok_names))
    assert cli.main(["doctor"]) == status
    assert "recommended backend" in capsys.readouterr().out


def test_cli_setup_falls_back_to_bwrap_when_docker_cannot_be_set_up(monkeypatch, capsys):
    def no_docker() -> None:
        raise SandboxUnavailableError(system.docker_instructions("this process is not root"))

    monkeypatch.setattr(system, "ensure_docker", no_docker)
    monkeypatch.setattr(system, "ensure_bwrap", lambda: None)
    monkeypatch.setattr(cli, "build_base_image", lambda: pytest.fail("no image without Docker"))
    monkeypatch.setattr(cli, "build_webshop_image", lambda: pytest.fail("no image without Docker"))
    assert cli.main(["setup"]) == 0
    out = capsys.readouterr().out
    assert "apt-get install -y docker.io" in out
    assert "falling back to sandbox='bwrap'" in out


def test_cli_setup_fails_when_no_real_backend(monkeypatch, capsys):
    def unavailable() -> None:
        raise SandboxUnavailableError("nope")

    monkeypatch.setattr(system, "ensure_docker", unavailable)
    monkeypatch.setattr(system, "ensure_bwrap", unavailable)
    assert cli.main(["setup"]) == 1
    assert "only sandbox='local'" in capsys.readouterr().out


def test_cli_setup_builds_the_images_when_docker_works(monkeypatch, capsys):
    built: list[str] = []
    monkeypatch.setattr(system, "ensure_docker", lambda: None)
    monkeypatch.setattr(system, "ensure_bwrap", lambda: None)
    monkeypatch.setattr(cli, "build_base_image", lambda: built.append("base"))
    monkeypatch.setattr(cli, "build_data_image", lambda: built.append("data"))
    monkeypatch.setattr(cli, "build_webshop_image", lambda: built.append("webshop"))
    assert cli.main(["setup"]) == 0
    assert built == ["base", "data", "webshop"]
    assert "ready: sandbox='docker'" in capsys.readouterr().out


def test_cli_sweep_reports_the_count(monkeypatch, capsys):
    monkeypatch.setattr(system, "docker_daemon_reachable", lambda timeout_s=3.0: True)
    monkeypatch.setattr(docker_backend, "sweep", lambda: 3)
    assert cli.main(["sweep"]) == 0
    assert f"removed 3 container(s) labelled {SANDBOX_LABEL}" in capsys.readouterr().out


def test_cli_rejects_unknown_commands(capsys):
    with pytest.raises(SystemExit) as info:
        cli.main(["frobnicate"])
    assert info.value.code == 2
    assert "invalid choice" in capsys.readouterr().err


@pytest.mark.docker
def test_sweep_removes_labelled_containers_only():
    if not system.docker_daemon_reachable():
        pytest.skip("no Docker daemon answers")
    import docker

    from agentgym_envs.sandbox.image import base_image_tag, image_exists

    client = docker.from_env()
    tag = base_image_tag()
    if not image_exists(client, tag):
        pytest.skip(f"{tag} is not built")
    run_id = f"agentrl.test-sweep={uuid.uuid4().hex}"  # only this test's containers are swept
    key, value = run_id.split("=")
    labelled = [client.containers.create(tag, ["sleep", "60"], network_mode="none",
                                         labels={SANDBOX_LABEL: "test", key: value}) for _ in range(2)]
    labelled[0].start()
    other = client.containers.create(tag, ["true"], network_mode="none", labels={key: value})
    try:
        assert docker_backend.sweep(extra_labels=(run_id,)) == 2
        left = {c.id for c in client.containers.list(all=True, filters={"label": run_id})}
        assert left == {other.id}
    finally:
        for container in [*labelled, other]:
            with contextlib.suppress(docker.errors.NotFound):
                container.remove(force=True)
        client.close()
