"""Envs in Ray actors behave as local envs, and a killed actor is an infrastructure fault that is replaced.

One local Ray cluster (loopback only, no dashboard, no usage statistics) serves the whole module; the
local reference runs in this process (the env actors are other processes with other string-hash seeds,
which must not change what an env returns).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import gymnasium as gym
import pytest
from gymnasium.error import ResetNeeded

from agentgym_envs import EnvConfigError, describe
from agentgym_envs.policies import SearchOraclePolicy
from agentgym_envs.policies.base import ScriptedAgent, answer_action, prompt_only, tool_call_action
from agentgym_envs.ray_workers import RemoteEnv, connect_ray, ray_env_factory
from agentgym_envs.runner import AgentTurn, EnvPool, Episode, EpisodeRequest, EpisodeRunner
from tasks import Task, load_split

psutil = pytest.importorskip("psutil")
ray = pytest.importorskip("ray")

ENV_ID = "agentrl/Search-v0"
KWARGS = {"split": "test"}
TASKS = load_split("Search", "test")[:4]
SEARCH = tool_call_action("search", query=TASKS[0].prompt, k=3)
ACTIONS = [SEARCH, "not an action", tool_call_action("open", doc_id="no-such-doc"), answer_action(TASKS[0].answer[0])]
ACTOR_OPTIONS = {"num_cpus": 0.25}


@pytest.fixture(scope="module", autouse=True)
def ray_cluster() -> Iterator[None]:
    """A local cluster for the module, shut down at its end."""
    connect_ray(num_cpus=2)
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # workers cannot import a test module
    yield
    ray.shutdown()


@pytest.fixture
def remote() -> Iterator[RemoteEnv]:
    env = factory()(ENV_ID)
    yield env
    env.close()


def factory() -> Any:
    return ray_env_factory({ENV_ID: KWARGS}, actor_options=ACTOR_OPTIONS)


def make_local(env_id: str) -> gym.Env:
    return gym.make(env_id, **KWARGS)


def play_locally(actions: Sequence[str]) -> tuple:
    """Reset on the first task and play ``actions`` in an in-process env: results, trajectory, tasks."""
    env = make_local(ENV_ID)
    try:
        reset = env.reset(seed=7, options={"task": TASKS[0]})
        steps = [env.step(action) for action in actions]
        return reset, steps, env.unwrapped.trajectory, list(env.unwrapped.tasks)
    finally:
        env.close()


def run_batch_locally(tasks: Sequence[Task]) -> list[Episode]:
    """The oracle's batch on in-process envs."""
    pool = EnvPool(make_local)
    try:
        return EpisodeRunner(pool).run(oracle(), requests(tasks))
    finally:
        pool.close()


def without_timing(info: Mapping[str, Any]) -> dict[str, Any]:
    """An info dict without its wall-clock latencies (the only part that may differ between two runs)."""
    kept = {key: value for key, value in info.items() if key != "latency_s"}
    if "tool_calls" in kept:
        kept["tool_calls"] = [{k: v for k, v in call.items() if k != "latency_s"} for call in kept["tool_calls"]]
    return kept


def kill(env: RemoteEnv) -> str:
    """Kill the env's actor and wait until Ray reports it dead; returns its id."""
    actor, actor_id = env.actor, env.actor_id
    assert actor is not None and actor_id is not None
    ray.kill(actor, no_restart=True)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            ray.get(actor.pid.remote(), timeout=5)
        except ray.exceptions.RayActorError:
            return actor_id
        time.sleep(0.05)
    raise AssertionError("the killed actor still answers after 30 s")


def connections(process: Any) -> list[Any]:
    """A process's TCP/UDP sockets (``net_connections`` from psutil 6 on, ``connections`` before)."""
    listing = getattr(process, "net_connections", None) or process.connections
    return listing(kind="inet")


def requests(tasks: Sequence[Task]) -> list[EpisodeRequest]:
    return [EpisodeRequest(ENV_ID, task, group, seed=group) for group, task in enumerate(tasks)]


def oracle() -> ScriptedAgent:
    """The tools-only Search oracle (it is told only the question)."""
    return ScriptedAgent(lambda request: SearchOraclePolicy(), shown=prompt_only)


def outcome(episode: Episode) -> tuple:
    """What two runs of the same episode must agree on."""
    return (episode.task_id, episode.reward, episode.reward_components, episode.stop_reason, episode.infra_error,
            [(turn.action, turn.observation, turn.tools, turn.ok, turn.infra_error) for turn in episode.turns],
            [without_timing(call) for call in episode.tool_calls])


@pytest.fixture(scope="module")
def local_episodes() -> list[Episode]:
    """The oracle's batch on local envs: what the remote envs must reproduce."""
    return run_batch_locally(TASKS)


# --- a remote env is the same env ----------------------------------------------------------------


def test_remote_env_gives_the_same_observations_rewards_and_infos_as_a_local_env(remote: RemoteEnv) -> None:
    reset, steps, trajectory, tasks = play_locally(ACTIONS)
    assert remote.reset(seed=7, options={"task": TASKS[0]}) == reset
    for action, expected in zip(ACTIONS, steps, strict=True):
        observation, reward, terminated, truncated, info = remote.step(action)
        assert (observation, reward, terminated, truncated) == expected[:4]
        assert without_timing(info) == without_timing(expected[4])
    assert terminated and reward > 0  # the scripted answer is right: the rewards compared are not all 0
    assert remote.unwrapped.trajectory == trajectory
    assert list(remote.unwrapped.tasks) == tasks


def test_describe_reads_the_remote_env_as_the_local_one(remote: RemoteEnv) -> None:
    local = gym.make(ENV_ID, **KWARGS)
    try:
        assert describe(remote) == describe(local)
        assert remote.unwrapped is remote and remote.spec == local.spec
        assert (remote.observation_space, remote.action_space) == (local.observation_space, local.action_space)
    finally:
        local.close()


def test_env_exceptions_keep_their_type_through_the_actor(remote: RemoteEnv) -> None:
    with pytest.raises(ResetNeeded):
        remote.step(SEARCH)
    with pytest.raises(EnvConfigError, match="no-such-task"):
        remote.reset(seed=0, options={"task": "no-such-task"})


def test_an_env_that_cannot_be_made_in_its_actor_is_a_clear_error() -> None:
    env = ray_env_factory({ENV_ID: {"split": "test", "no_such_argument": 1}})(ENV_ID)
    with pytest.raises(RuntimeError, match="failed in its Ray actor"):
        describe(env)
    env.close()


# --- the runner over remote envs ------------------------------------------------------------------


def test_runner_over_remote_envs_plays_the_batch_as_on_local_envs(local_episodes: list[Episode]) -> None:
    pool = EnvPool(factory())
    try:
        episodes = EpisodeRunner(pool).run(oracle(), requests(TASKS))
        envs = pool.take(requests(TASKS))
        pids = {ray.get(env.actor.pid.remote()) for env in envs}
    finally:
        pool.close()
    assert [outcome(episode) for episode in episodes] == [outcome(episode) for episode in local_episodes]
    assert [episode.trajectory for episode in episodes] == [episode.trajectory for episode in local_episodes]
    assert any(episode.success for episode in episodes)
    assert len(pids) == len(TASKS) and os.getpid() not in pids  # one actor process per env, none of them this one


class KillingAgent:
    """The oracle, which kills the actor of the first task's env once its first turn was played (mid-episode)."""

    def __init__(self, victim: RemoteEnv) -> None:
        self.inner = oracle()
        self.victim = victim
        self.killed: str | None = None

    def start(self, episode: Episode, task: Task, prompt: str, info: Mapping[str, Any]) -> None:
        self.inner.start(episode, task, prompt, info)

    def act(self, episodes: Sequence[Episode], observations: Sequence[str],
            infos: Sequence[Mapping[str, Any]]) -> list[AgentTurn | None]:
        if self.killed is None and any(e.task_id == TASKS[0].id and e.turns for e in episodes):
            self.killed = kill(self.victim)
        return self.inner.act(episodes, observations, infos)

    def finish(self, episode: Episode) -> None:
        self.inner.finish(episode)


def test_a_killed_actor_makes_an_infra_episode_and_is_replaced_for_the_next_batch(
        local_episodes: list[Episode]) -> None:
    pool = EnvPool(factory())
    try:
        victim = pool.take(requests(TASKS))[0]
        agent = KillingAgent(victim)
        episodes = EpisodeRunner(pool).run(agent, requests(TASKS))
        killed = agent.killed
        assert killed is not None and victim.actor is None  # the lost actor was dropped
        hit = episodes[0]
        assert hit.infra_error and hit.stop_reason == "infra_error" and not hit.scored
        assert hit.turns[-1].infra_error and len(hit.trajectory.turns) == len(hit.turns) == 2
        assert [outcome(e) for e in episodes[1:]] == [outcome(e) for e in local_episodes[1:]]  # others unaffected

        again = EpisodeRunner(pool).run(oracle(), requests(TASKS))
        assert victim.actor_id is not None and victim.actor_id != killed  # a fresh actor
        assert [outcome(e) for e in again] == [outcome(e) for e in local_episodes]
    finally:
        pool.close()


def test_an_actor_killed_between_episodes_is_replaced_at_the_next_reset(remote: RemoteEnv) -> None:
    first = remote.reset(seed=1, options={"task": TASKS[1]})
    killed = kill(remote)
    assert remote.reset(seed=1, options={"task": TASKS[1]}) == first  # no episode lost
    assert remote.actor_id not in (None, killed)


# --- loopback only --------------------------------------------------------------------------------


def test_the_local_cluster_listens_and_connects_on_loopback_only(remote: RemoteEnv) -> None:
    remote.reset(seed=0, options={"task": TASKS[0]})  # an actor is up
    processes = [psutil.Process(), *psutil.Process().children(recursive=True)]
    sockets = [conn for process in processes for conn in connections(process)]
    listening = [conn for conn in sockets if conn.status == psutil.CONN_LISTEN]
    assert listening  # the cluster's services were found
    addresses = {conn.laddr.ip for conn in sockets} | {conn.raddr.ip for conn in sockets if conn.raddr}
    assert addresses <= {"127.0.0.1", "::ffff:127.0.0.1"}, addresses

