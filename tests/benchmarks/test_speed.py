"""``python -m benchmarks.speed``: finds an env's speed benchmark through its spec, for bundled and added envs."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from agentgym_envs.registration import SPECS
from agentgym_envs.spec import EnvSpec
from benchmarks import speed


def test_listing_names_every_bundled_env_with_a_speed_benchmark() -> None:
    listed = {spec.id for spec in speed.benchmarked_specs()}
    assert listed == {"agentrl/Search-v0", "agentrl/WebShop-v0", "agentrl/DataAnalysis-v0", "agentrl/SWE-v0"}
    assert "agentrl/WebShop-v0, webshop" in speed.listing()


def test_an_added_spec_gets_its_benchmark_run_with_the_remaining_arguments() -> None:
    seen: list[Sequence[str]] = []

    def benchmark(argv: Sequence[str]) -> int:
        seen.append(list(argv))
        return 7

    spec = EnvSpec(id="thirdparty/Timed-v0", entry_point="somewhere:Env", max_episode_steps=3, aliases=("timed",),
                   speed=benchmark)
    with SPECS.added(spec):
        assert speed.main(["timed", "--episodes", "2"]) == 7
        assert "thirdparty/Timed-v0, timed" in speed.listing()
    assert seen == [["--episodes", "2"]]


@pytest.mark.parametrize(("name", "message"), [("nosuch", "nosuch"), ("python", "names no speed benchmark")])
def test_an_env_without_a_benchmark_is_refused_with_the_list(name: str, message: str,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    assert speed.main([name]) == 2
    error = capsys.readouterr().err
    assert message in error and "agentrl/Search-v0, search" in error
