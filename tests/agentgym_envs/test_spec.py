"""Env specs: the registry of ids and aliases, the bundled specs, and specs from installed packages' entry points."""

from __future__ import annotations

import sys
from pathlib import Path

import gymnasium as gym
import pytest

from agentgym_envs.errors import UnknownEnvError
from agentgym_envs.registration import SPECS, env_spec
from agentgym_envs.spec import EnvSpec, SpecRegistry, installed_specs

TOY = EnvSpec(id="toy/Toy-v0", entry_point="toy_env:ToyEnv", max_episode_steps=3, aliases=("toy",))


def test_every_bundled_env_is_registered_in_gymnasium_with_its_spec_and_alias():
    for spec in SPECS:
        assert gym.spec(spec.id).entry_point == spec.entry_point
        assert gym.spec(spec.id).max_episode_steps == spec.max_episode_steps
        for alias in spec.aliases:
            assert env_spec(alias) is spec
    assert {spec.aliases[0] for spec in SPECS if spec.id.startswith("agentrl/")} == {
        "data", "python", "search", "swe", "webshop"}


def test_an_unknown_name_lists_what_is_registered():
    with pytest.raises(UnknownEnvError, match=r"expected an id or alias among .*'search'"):
        env_spec("serach")


def test_ids_and_aliases_are_unique_and_a_spec_registers_once():
    registry = SpecRegistry([TOY])
    registry.add(TOY)  # the same spec again: nothing happens
    assert registry.ids() == ["toy/Toy-v0"] and registry.names() == ["toy", "toy/Toy-v0"]
    with pytest.raises(ValueError, match=r"already registered"):
        registry.add(EnvSpec(id="toy/Other-v0", entry_point="toy_env:Other", max_episode_steps=3, aliases=("toy",)))
    assert registry.resolve(["toy", "toy/Toy-v0"]) == [TOY]


def test_a_spec_checks_its_id_entry_point_and_turn_limit():
    with pytest.raises(ValueError, match="namespace/Name-vN"):
        EnvSpec(id="Toy", entry_point="toy_env:ToyEnv", max_episode_steps=3)
    with pytest.raises(ValueError, match="module:Class"):
        EnvSpec(id="toy/Toy-v0", entry_point="toy_env.ToyEnv", max_episode_steps=3)
    with pytest.raises(ValueError, match="max_episode_steps"):
        EnvSpec(id="toy/Toy-v0", entry_point="toy_env:ToyEnv", max_episode_steps=0)


def test_make_kwargs_puts_the_splits_dir_under_the_defaults_and_the_overrides():
    spec = EnvSpec(id="toy/Toy-v0", entry_point="toy_env:ToyEnv", max_episode_steps=3,
                   kwargs={"families": ["a"]}, splits_dir=Path("/data/toy"))
    assert spec.make_kwargs(split="dev") == {"splits_dir": "/data/toy", "families": ["a"], "split": "dev"}


def write_distribution(site: Path, name: str, entry_points: dict[str, str], modules: dict[str, str]) -> None:
    """An installed distribution as pip leaves it: a ``.dist-info`` folder with its entry points, and its modules."""
    info = site / f"{name}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    lines = "".join(f"{key} = {value}\n" for key, value in entry_points.items())
    (info / "entry_points.txt").write_text(f"[agentrl.envs]\n{lines}")
    for module, source in modules.items():
        (site / f"{module}.py").write_text(source)


def test_installed_packages_specs_load_and_a_broken_one_is_named_in_a_warning(tmp_path, monkeypatch):
    spec_source = ("from agentgym_envs.spec import EnvSpec\n"
                   "SPEC = EnvSpec(id='toy/Toy-v0', entry_point='toy_env:ToyEnv', max_episode_steps=3)\n"
                   "NOT_A_SPEC = 42\n")
    write_distribution(tmp_path, "toy_env", {"toy": "toy_spec:SPEC", "broken": "toy_spec:NOT_A_SPEC",
                                             "missing": "no_such_module:SPEC"}, {"toy_spec": spec_source})
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.warns(RuntimeWarning) as warned:
        specs = installed_specs()
    assert [spec.id for spec in specs] == ["toy/Toy-v0"]
    messages = sorted(str(w.message) for w in warned)
    assert len(messages) == 2
    assert "'broken'" in messages[0] and "expected an agentgym_envs.spec.EnvSpec or a list of them, got int" \
        in messages[0]
    assert "'missing'" in messages[1] and "ModuleNotFoundError" in messages[1]
    sys.modules.pop("toy_spec", None)


@pytest.mark.parametrize(("name", "applies"), [
    ("search", True),  # a real entity named by the answer answers another question
    ("python", False),  # a wrong math answer is not right for another problem; nor is failing code
    ("webshop", True),  # the purchased item satisfies a goal built from its own attributes
    ("swe", False),  # a failing patch fixes no other issue
])
def test_each_spec_says_whether_hindsight_relabeling_applies_and_why(name: str, applies: bool):
    relabeling = env_spec(name).relabeling
    assert relabeling is not None and relabeling.applies is applies
    assert relabeling.reason.startswith("yes" if applies else "no:")


def test_the_python_sandbox_spec_says_plainly_why_relabeling_does_not_apply():
    reason = env_spec("agentrl/PythonSandbox-v0").relabeling.reason
    assert "a wrong answer to one problem is not the right answer to another generated problem" in reason
    assert "a failing program is not a correct solution" in reason
