"""The rollout engine: token-in/token-out round trip, exact observation spans, concurrency = sequential,
async = rounds, prefix reuse = none."""

from __future__ import annotations

import itertools
import random
import time
from collections.abc import Sequence

import gymnasium as gym
import pytest
import torch

import agentgym_envs  # noqa: F401
from tasks import load_split
from trainers.chat import ChatTokens
from trainers.generation import GeneratedTurn, TransformersGenerator
from trainers.rollout import EnvPool, RolloutConfig, RolloutEngine, group_requests
from trainers.tiny_model import load_or_build_tiny_model

pytestmark = pytest.mark.usefixtures("one_torch_thread")

ENV_ID = "agentrl/Search-v0"
TASKS = load_split("Search", "train")[:3]


@pytest.fixture(scope="module")
def tiny():
    return load_or_build_tiny_model()


class RecordingGenerator:
    """Wraps a generator and keeps every turn it returned, in order per context position."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.turns: list[tuple[list[int], GeneratedTurn]] = []

        self.batch_sizes: list[int] = []

    def generate(self, contexts: Sequence[list[int]], max_new_tokens: Sequence[int], **kwargs) -> list[GeneratedTurn]:
        turns = self.inner.generate(contexts, max_new_tokens, **kwargs)
        self.turns += [(list(context), turn) for context, turn in zip(contexts, turns, strict=True)]
        self.batch_sizes.append(len(contexts))
        return turns

    def release(self, keys) -> None:
        self.inner.release(keys)


class ScriptedGenerator:
    """Emits fixed action texts (tokenized once), so episodes get tool results; a unit-test double."""

    def __init__(self, tokenizer, actions: Sequence[str]) -> None:
        self.tokenizer = tokenizer
        self.actions = list(actions)
        self.calls = 0

    def generate(self, contexts: Sequence[list[int]], max_new_tokens: Sequence[int], **_) -> list[GeneratedTurn]:
        ids = self.tokenizer.encode(self.actions[min(self.calls, len(self.actions) - 1)], add_special_tokens=False)
        self.calls += 1
        return [GeneratedTurn(ids=list(ids), logprobs=[-1.0] * len(ids)) for _ in contexts]

    def release(self, keys) -> None:
        pass


def make_engine(generator, tokenizer, **config) -> RolloutEngine:
    return RolloutEngine(generator, tokenizer, EnvPool(lambda env_id: gym.make(env_id, split="train")),
                         RolloutConfig(**{"max_turns": 3, "max_tokens_per_turn": 12, **config}))


def test_the_ids_sent_to_the_loss_are_the_ids_the_generator_produced(tiny):
    model, tokenizer = tiny
    recorder = RecordingGenerator(TransformersGenerator(model, tokenizer.pad_token_id))
    engine = make_engine(recorder, tokenizer)
    torch.manual_seed(0)
    episodes = engine.run(group_requests([(ENV_ID, task) for task in TASKS], 2, seed=0))
    engine.envs.close()
    by_context: dict[tuple[int, ...], list[GeneratedTurn]] = {}
    for context, turn in recorder.turns:
        by_context.setdefault(tuple(context), []).append(turn)
    for episode in episodes:
        for turn in episode.turns:
            context = tuple(episode.prompt_ids + episode.completion_ids[:turn.start])
            span = slice(turn.start, turn.start + turn.length)
            sent = GeneratedTurn(ids=episode.completion_ids[span], logprobs=episode.logprobs[span])
            assert sent in by_context[context]  # generated from exactly this context, kept exactly as sampled
            assert set(episode.env_mask[span]) == {1}
        assert sum(episode.env_mask) == sum(turn.length for turn in episode.turns)  # nothing else is trainable


def test_each_observation_span_is_masked_and_holds_exactly_the_wrapped_observation(tiny):
    _, tokenizer = tiny
    chat = ChatTokens(tokenizer)
    search = '<tool_call>{"name": "search", "arguments": {"query": "Maemton population"}}</tool_call>'
    engine = make_engine(ScriptedGenerator(tokenizer, [search, search, "<answer>52,000</answer>"]), tokenizer)
    episodes = engine.run(group_requests([(ENV_ID, TASKS[0])], 1, seed=0))
    trajectory = engine.envs.take(group_requests([(ENV_ID, TASKS[0])], 1, seed=0))[0].unwrapped.trajectory
    engine.envs.close()
    episode = episodes[0]
    assert [turn.tools for turn in episode.turns] == [("search",), ("search",), ()]
    for turn, next_turn, step in zip(episode.turns, episode.turns[1:], trajectory.turns, strict=False):
        between = slice(turn.start + turn.length, next_turn.start)
        expected = chat.close_turn_ids(episode.completion_ids[turn.start:turn.start + turn.length])
        expected += chat.observation_ids(step.observation)
        assert episode.completion_ids[between] == expected
        assert set(episode.env_mask[between]) == {0}
        assert "[search result (ok)]" in tokenizer.decode(episode.completion_ids[between])
    assert episode.stop_reason == "answered" and episode.terminated


def test_concurrent_tool_calls_give_the_same_episodes_as_sequential_ones(tiny):
    model, tokenizer = tiny
    runs = []
    for workers in (1, 8):
        engine = make_engine(TransformersGenerator(model, tokenizer.pad_token_id), tokenizer, tool_workers=workers)
        torch.manual_seed(1)
        runs.append(engine.run(group_requests([(ENV_ID, task) for task in TASKS], 2, seed=5)))
        engine.envs.close()
    sequential, concurrent = runs
    assert [e.completion_ids for e in sequential] == [e.completion_ids for e in concurrent]
    assert [e.env_mask for e in sequential] == [e.env_mask for e in concurrent]
    assert [(e.reward, e.stop_reason) for e in sequential] == [(e.reward, e.stop_reason) for e in concurrent]


class ScrambledLatency(gym.Wrapper):
    """Sleeps a different time after each step (seeded per env), so that episodes return in a scrambled order."""

    def __init__(self, env: gym.Env, seed: int) -> None:
        super().__init__(env)
        self.rng = random.Random(seed)

    def step(self, action: str):
        result = self.env.step(action)
        time.sleep(self.rng.choice([0.0, 0.002, 0.03]))
        return result


def test_the_async_schedule_plays_the_same_episodes_as_rounds_whatever_the_batches(tiny):
    model, tokenizer = tiny
    made = itertools.count()
    runs, batches = [], []
    for schedule in ("rounds", "async"):
        recorder = RecordingGenerator(TransformersGenerator(model, tokenizer.pad_token_id))
        engine = RolloutEngine(recorder, tokenizer, EnvPool(lambda env_id: ScrambledLatency(
            gym.make(env_id, split="train"), next(made))), RolloutConfig(
            max_turns=3, max_tokens_per_turn=12, schedule=schedule, batch_window_s=0.0))
        torch.manual_seed(3)
        runs.append(engine.run(group_requests([(ENV_ID, task) for task in TASKS], 2, seed=5)))
        engine.envs.close()
        batches.append(recorder.batch_sizes)
    in_rounds, in_async = runs
    assert batches[0] != batches[1]  # the schedules really batched the turns differently
    assert [e.completion_ids for e in in_async] == [e.completion_ids for e in in_rounds]
    assert [e.env_mask for e in in_async] == [e.env_mask for e in in_rounds]
    for async_episode, rounds_episode in zip(in_async, in_rounds, strict=True):
        assert async_episode.logprobs == pytest.approx(rounds_episode.logprobs, abs=1e-4)
        assert (async_episode.reward, async_episode.stop_reason) == (rounds_episode.reward, rounds_episode.stop_reason)


def test_prefix_reuse_plays_the_same_episodes_and_frees_every_cache(tiny):
    model, tokenizer = tiny
    runs = []
    for cache_prefixes in (False, True):
        generator = TransformersGenerator(model, tokenizer.pad_token_id)
        engine = make_engine(generator, tokenizer, cache_prefixes=cache_prefixes)
        torch.manual_seed(4)
        runs.append(engine.run(group_requests([(ENV_ID, task) for task in TASKS], 2, seed=1)))
        engine.envs.close()
        assert generator.cached_keys() == set()  # every episode's cache was dropped when it ended
    cold, reused = runs
    assert max(len(e.turns) for e in reused) > 1  # later turns continued a cached prefix
    assert [e.completion_ids for e in reused] == [e.completion_ids for e in cold]
    for reused_episode, cold_episode in zip(reused, cold, strict=True):
        assert reused_episode.logprobs == pytest.approx(cold_episode.logprobs, abs=1e-4)


def test_the_context_budget_ends_episodes_cleanly(tiny):
    model, tokenizer = tiny
    budget, per_turn, smallest = 600, 40, 8  # the full Search prompt is ~460 tokens: room for one turn
    engine = make_engine(TransformersGenerator(model, tokenizer.pad_token_id), tokenizer, max_context_tokens=budget,
                         max_tokens_per_turn=per_turn, min_turn_tokens=smallest)
    torch.manual_seed(0)
    episodes = engine.run(group_requests([(ENV_ID, TASKS[1])], 2, seed=0))
    engine.envs.close()
    for episode in episodes:
        for turn in episode.turns:
            used = len(episode.prompt_ids) + turn.start
            assert used <= budget - smallest  # a turn only starts with room for a useful turn
            assert turn.length <= min(per_turn, budget - used)  # and never runs past the budget
    assert "context" in {episode.stop_reason for episode in episodes}


def test_rollout_config_refuses_inconsistent_limits():
    with pytest.raises(ValueError, match="min_turn_tokens"):
        RolloutConfig(max_tokens_per_turn=4, min_turn_tokens=8)
    with pytest.raises(ValueError, match="temperature"):
        RolloutConfig(temperature=-1.0)


class ResetFailsEnv(gym.Wrapper):
    """An env whose sandbox cannot be reset (as when the Docker daemon is down)."""

    def reset(self, **kwargs):
        from agentgym_envs.errors import SandboxCrashedError

        raise SandboxCrashedError("container is gone")


def test_an_env_that_fails_to_reset_gives_an_infrastructure_episode_not_a_crash(tiny):
    model, tokenizer = tiny
    engine = RolloutEngine(TransformersGenerator(model, tokenizer.pad_token_id), tokenizer,
                           EnvPool(lambda env_id: ResetFailsEnv(gym.make(env_id, split="train"))),
                           RolloutConfig(max_turns=2, max_tokens_per_turn=8))
    episodes = engine.run(group_requests([(ENV_ID, TASKS[0])], 2, seed=0))
    engine.envs.close()
    assert [(e.infra_error, e.stop_reason, e.completion_ids) for e in episodes] == [(True, "infra_error", [])] * 2
