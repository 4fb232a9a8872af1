"""The options every env takes are declared once (``TextEnv.__init__``, typed as ``TextEnvOptions``); a typo is a
``TypeError``; ``split`` and ``tasks`` exclude each other; ``splits_dir`` loads a split bundle of one's own."""

from __future__ import annotations

import inspect
import re
import typing
from pathlib import Path

import gymnasium as gym
import pytest
from gymnasium.envs.registration import load_env_creator

import agentgym_envs
from agentgym_envs import EnvConfigError, TextEnv
from agentgym_envs.core import DEFAULT_SPLIT, TextEnvOptions
from agentgym_envs.sandboxed import SandboxEnv
from tasks import UnknownTaskError, load_split
from tasks.splits import write_bundle

SEARCH = "agentrl/Search-v0"
SHARED = set(TextEnvOptions.__annotations__)
ENV_CLASSES = sorted({load_env_creator(gym.spec(env_id).entry_point) for env_id in agentgym_envs.registered_ids()}
                     | {SandboxEnv}, key=lambda cls: cls.__name__)


def test_text_env_options_are_the_keyword_options_of_text_env() -> None:
    parameters = inspect.signature(TextEnv.__init__).parameters
    assert {name for name, p in parameters.items() if p.kind is p.KEYWORD_ONLY} == SHARED
    assert typing.get_type_hints(TextEnvOptions) == {name: hint for name, hint in
                                                      typing.get_type_hints(TextEnv.__init__).items() if name in SHARED}
    assert len(SHARED) == 10 and "splits_dir" in SHARED


@pytest.mark.parametrize("cls", ENV_CLASSES, ids=lambda cls: cls.__name__)
def test_no_env_declares_a_shared_option_again(cls: type[TextEnv]) -> None:
    parameters = inspect.signature(cls.__init__).parameters
    assert not SHARED & set(parameters), f"{cls.__name__} declares {sorted(SHARED & set(parameters))} again"
    rest = [p for p in parameters.values() if p.kind is p.VAR_KEYWORD]
    assert [str(p.annotation) for p in rest] == ["Unpack[TextEnvOptions]"]


@pytest.mark.parametrize("cls", ENV_CLASSES, ids=lambda cls: cls.__name__)
def test_every_env_documents_its_own_options_and_points_to_the_shared_ones(cls: type[TextEnv]) -> None:
    doc = inspect.getdoc(cls) or ""
    args = doc.split("Args:", 1)[1]
    own = [name for name, p in inspect.signature(cls.__init__).parameters.items() if p.kind is p.KEYWORD_ONLY]
    undocumented = [name for name in own if not re.search(rf"^\s+(?:\S+, )*{name}\b.*:", args, re.MULTILINE)]
    assert not undocumented, f"{cls.__name__}'s Args do not document {undocumented}"
    assert "**options:" in args and "TextEnvOptions" in args and "splits_dir" in args


def test_a_misspelt_option_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="unexpected keyword argument 'splt'"):
        gym.make(SEARCH, splt="dev")


def test_split_with_tasks_is_an_error_not_ignored() -> None:
    tasks = load_split("Search", "dev")[:3]
    with pytest.raises(EnvConfigError, match="expected either a split or tasks, got split='test' and tasks"):
        gym.make(SEARCH, split="test", tasks=tasks)
    # tasks alone still work, and a split alone or nothing draws from the bundle
    env = gym.make(SEARCH, tasks=tasks)
    assert env.unwrapped.tasks == tuple(tasks) and env.unwrapped.split is None
    assert gym.make(SEARCH).unwrapped.split == DEFAULT_SPLIT == "train"
    assert gym.make(SEARCH, split="dev").unwrapped.tasks == tuple(load_split("Search", "dev"))


def test_splits_dir_loads_the_split_from_a_bundle_of_ones_own(tmp_path: Path) -> None:
    mine = [task for task in load_split("Search", "test") if task.family == "bridge"][:5]
    manifest = write_bundle(tmp_path / "bundle", "Search", {"bridges": mine})
    env = gym.make(SEARCH, split="bridges", splits_dir=tmp_path / "bundle")
    assert env.unwrapped.tasks == tuple(mine)
    source = agentgym_envs.describe(env).source
    assert (source.split, source.tasks) == ("bridges", 5)
    assert source.split_sha256 == manifest["splits"]["bridges"]["sha256"]
    with pytest.raises(UnknownTaskError, match="expected a split of Search among \\['bridges'\\], got 'train'"):
        gym.make(SEARCH, splits_dir=tmp_path / "bundle")  # the default split is looked up there too
