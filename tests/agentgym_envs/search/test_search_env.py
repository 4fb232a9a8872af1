"""Search-v0 end to end: episodes, rewards, agent errors as observations, infra errors, the Gymnasium contract."""

from __future__ import annotations

import json

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

import agentgym_envs  # noqa: F401  (registers the ids)
from agentgym_envs.errors import EnvConfigError
from agentgym_envs.search import RemoteRetriever, SearchEnv
from rewards import RewardResult

SCRIPTED_ACTIONS = [  # those of the shared registration test
    '<tool_call>{"name": "python", "arguments": {"code": "x = 21 * 2\\nprint(x)"}}</tool_call>',
    "not an action at all",
    '<tool_call>{"name": "pyhton", "arguments": {}}</tool_call>',
    "<answer>42</answer>",
]


def call(name: str, **arguments: object) -> str:
    return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"


@pytest.fixture
def env(tasks, corpus, retriever):
    """An env sharing the session's in-process retriever."""
    instance = gym.make("agentrl/Search-v0", tasks=tasks, corpus=corpus, retriever=retriever)
    yield instance
    instance.close()


@pytest.fixture
def own_index_env(tasks, corpus, index_dir):
    """An env that builds (here: loads) its own retriever from the corpus."""
    instance = SearchEnv(tasks=tasks, corpus=corpus, index_dir=str(index_dir))
    yield instance
    instance.close()


def test_search_open_answer_scores_one_with_every_component(env, tasks):
    observation, info = env.reset(options={"task": tasks[2].id})  # bridge: founder of Marrowick's birthplace
    assert tasks[2].prompt in observation and "short answer" in observation
    assert [tool["function"]["name"] for tool in info["tools"]] == ["search", "open"]

    observation, reward, terminated, truncated, info = env.step(call("search", query="founder of Marrowick", k=3))
    assert (reward, terminated, truncated) == (0.0, False, False)
    assert info["tool"] == "search" and info["ok"] and not info["infra_error"]
    assert observation.splitlines()[1].startswith("[1] doc-000001 | Marrowick")
    assert "Oskar Vell" in observation

    observation, *_ = env.step(call("open", doc_id="doc-000002"))
    assert "doc-000002 | Oskar Vell (page 1 of 1)" in observation and "born in Astrafel" in observation

    _, reward, terminated, truncated, info = env.step("<answer>Astrafel</answer>")
    assert (reward, terminated, truncated) == (1.0, True, False)
    components = info["reward_components"]
    assert components["outcome"] == 1.0 and components["f1"] == 1.0 and components["format"] == 1.0
    assert components["tool_use/right_tool"] > 0  # the required tool, search, was used


def test_aliases_count_and_wrong_answers_score_zero(env, tasks):
    env.reset(options={"task": tasks[1].id})
    assert env.step("<answer>the River Tess</answer>")[1] == 1.0
    env.reset(options={"task": tasks[1].id})
    _, reward, terminated, _, info = env.step("<answer>Sea of Oran</answer>")
    assert terminated and reward == 0.0
    assert info["reward_components"]["outcome"] == 0.0 and info["reward_components"]["tool_use"] == 0.0


@pytest.mark.parametrize(("action", "expected"), [
    (call("open", doc_id="doc-00002"), "unknown doc_id 'doc-00002'. Did you mean 'doc-000002'?"),
    (call("open", doc_id="Oskar Vell"), "Did you mean 'doc-000002'?"),             # a title, not an id
    (call("open", doc_id="doc-000002", page=2), "page 2 is out of range: doc-000002 has 1 page; expected 1 to 1"),
    (call("open", doc_id="doc-000002", page=0), "page: 0 is less than the minimum of 1"),
    (call("search", query="Marrowick", k=21), "k: 21 is greater than the maximum of 20"),
    (call("search", query="Marrowick", k=0), "k: 0 is less than the minimum of 1"),
    (call("search", query="   "), "expected a query with at least one keyword"),
    (call("search", query=""), "query: '' should be non-empty"),
    (call("search", text="Marrowick"), "'query' is a required property"),
])
def test_agent_mistakes_are_observations(env, action, expected):
    env.reset(seed=0)
    observation, reward, terminated, truncated, info = env.step(action)
    assert expected in observation
    assert (reward, terminated, truncated) == (0.0, False, False)
    assert not info["ok"] and not info["infra_error"]


def test_a_search_without_matches_says_so(env):
    env.reset(seed=0)
    observation, _, _, _, info = env.step(call("search", query="zyzzyva"))
    assert "No article matches 'zyzzyva'" in observation and info["ok"]


def test_long_articles_are_read_page_by_page(env):
    env.reset(seed=0)
    first, *_ = env.step(call("open", doc_id="doc-000007"))
    second, *_ = env.step(call("open", doc_id="doc-000007", page=2))
    assert "(page 1 of " in first and '"page": 2 for more' in first
    assert "(page 2 of " in second
    assert first.split("\n\n")[1] != second.split("\n\n")[1]
    assert all(len(page.split("\n\n")[1]) <= 1500 for page in (first, second))


def test_unknown_tools_and_format_errors_are_answered(env):
    env.reset(seed=0)
    observations = [env.step(action)[0] for action in SCRIPTED_ACTIONS[:3]]
    assert "Unknown tool 'python'; expected one of: search, open" in observations[0]
    assert "Unknown tool 'pyhton'" in observations[2]
    _, reward, terminated, _, info = env.step(SCRIPTED_ACTIONS[3])
    assert terminated and reward == 0.0 and info["reward_components"]["tool_use/unknown"] < 0


def test_the_service_gives_the_same_episode_as_in_process(tasks, corpus, retriever, server):
    actions = [call("search", query="architect Astrafel town hall"), call("open", doc_id="doc-000004"),
               call("open", doc_id="doc-0004"), "<answer>Edda Morn</answer>"]
    transcripts = []
    for backend in (retriever, server.url):
        env = SearchEnv(tasks=tasks, corpus=corpus, retriever=backend)
        try:
            transcript = [env.reset(options={"task": tasks[3].id})[0]]
            transcript += [env.step(action)[:4] for action in actions]
            transcripts.append(transcript)
        finally:
            env.close()
    assert transcripts[0] == transcripts[1]
    assert transcripts[0][-1][1] == 1.0


def test_a_dead_service_truncates_with_infra_error_not_a_wrong_answer(tasks, dead_url):
    env = gym.make("agentrl/Search-v0", tasks=tasks, retriever=dead_url)
    try:
        env.reset(seed=0)  # connecting is lazy: reset needs no service
        env.unwrapped.retriever.attempts = 2
        env.unwrapped.retriever.backoff_s = 0.01
        observation, reward, terminated, truncated, info = env.step(call("search", query="Marrowick"))
        assert info["infra_error"] and info["tool_calls"][0]["infra_error"]
        assert truncated and not terminated and reward == 0.0
        assert "not your fault" in observation
        assert "reward_components" not in info  # never scored
    finally:
        env.close()


def test_close_releases_what_the_env_created(tasks, server, retriever):
    env = SearchEnv(tasks=tasks, retriever=server.url)
    env.reset(seed=0)
    env.step(call("search", query="Marrowick"))
    remote = env.retriever
    assert isinstance(remote, RemoteRetriever) and remote._connections
    env.close()
    env.close()  # idempotent
    assert remote._connections == []

    shared = SearchEnv(tasks=tasks, retriever=retriever)
    shared.reset(seed=0)
    shared.close()
    assert retriever.search("Marrowick", 1)  # a retriever passed in is not closed


def test_reward_gets_the_retrieval_evidence(tasks, retriever):
    seen = {}

    def reward(task, trajectory, evidence):
        seen.update(evidence)
        return RewardResult(value=0.5, components={"custom": 0.5})

    env = SearchEnv(tasks=tasks, retriever=retriever, reward=reward)
    env.reset(options={"task": tasks[0].id})
    env.step(call("search", query="Marrowick", k=2))
    env.step(call("open", doc_id="doc-000001"))
    _, value, *_, info = env.step("<answer>Oskar Vell</answer>")
    assert value == 0.5 and info["reward_components"] == {"custom": 0.5}
    assert seen["opened_doc_ids"] == ("doc-000001",) and seen["retrieved_doc_ids"][0] == "doc-000001"


def test_check_env_passes(own_index_env):
    check_env(own_index_env, skip_render_check=True)


def rollout(tasks, corpus, index_dir, seed: int) -> list[str]:
    env = gym.make("agentrl/Search-v0", tasks=tasks, corpus=corpus, index_dir=str(index_dir))
    try:
        observation, info = env.reset(seed=seed)
        transcript = [observation, json.dumps(info["tools"], sort_keys=True)]
        for action in [call("search", query="Marrowick Tess", k=4), call("open", doc_id="doc-000007", page=2),
                       *SCRIPTED_ACTIONS]:
            observation, reward, terminated, truncated, _ = env.step(action)
            transcript.append(f"{observation}|{reward}|{terminated}|{truncated}")
            if terminated or truncated:
                break
        return transcript
    finally:
        env.close()


def test_same_seed_same_episode(tasks, corpus, index_dir):
    first = rollout(tasks, corpus, index_dir, seed=123)
    assert first == rollout(tasks, corpus, index_dir, seed=123)
    assert any(first[0] != rollout(tasks, corpus, index_dir, seed=s)[0] for s in (1, 2, 3))  # the seed picks the task


@pytest.mark.parametrize("vector", [gym.vector.SyncVectorEnv, gym.vector.AsyncVectorEnv])
def test_vector_envs_share_the_saved_index(vector, tasks, corpus, retriever, index_dir):
    def make():
        return gym.make("agentrl/Search-v0", tasks=tasks, corpus=corpus, index_dir=str(index_dir))

    options = {"shared_memory": False} if vector is gym.vector.AsyncVectorEnv else {}
    envs = vector([make, make], **options)
    try:
        observations, _ = envs.reset(seed=[0, 1])
        assert all("short answer" in observation for observation in observations)
        observations, rewards, terminated, truncated, _ = envs.step([call("search", query="Oskar Vell", k=1)] * 2)
        assert all("[1] doc-000002 | Oskar Vell" in observation for observation in observations)
        assert not any(terminated) and not any(truncated) and list(rewards) == [0.0, 0.0]
    finally:
        envs.close()


def test_families_select_tasks_and_bad_arguments_are_refused(tasks, corpus):
    env = SearchEnv(tasks=tasks, corpus=corpus, families=("bridge",))
    assert {task.family for task in env.tasks} == {"bridge"}
    with pytest.raises(EnvConfigError, match="families"):
        SearchEnv(tasks=tasks, corpus=corpus, families=("trivia",))
    with pytest.raises(EnvConfigError, match="did you mean 'bridge'"):
        SearchEnv(tasks=tasks, corpus=corpus, families=("bridg",))
    with pytest.raises(EnvConfigError, match="written for corpus"):
        SearchEnv(tasks=tasks, corpus="fictional-v1")  # these tasks are about another world
    with pytest.raises(EnvConfigError, match="retriever"):
        SearchEnv(tasks=tasks, corpus=corpus, retriever=42)


def test_prompt_style_task_shows_only_the_question():
    import gymnasium as gym

    full = gym.make("agentrl/Search-v0", split="test")
    short = gym.make("agentrl/Search-v0", split="test", prompt_style="task")
    full_prompt, _ = full.reset(seed=3)
    short_prompt, info = short.reset(seed=3)
    assert short_prompt == short.unwrapped.task.prompt  # the question alone
    assert full_prompt.endswith(short_prompt) and "<tool_call>" in full_prompt and "<tool_call>" not in short_prompt
    assert info["tools"]  # the schemas still reach a tool-aware chat template
    full.close()
    short.close()


def test_unknown_prompt_style_is_refused_with_the_choices():
    import gymnasium as gym

    from agentgym_envs import EnvConfigError

    with pytest.raises(EnvConfigError, match="prompt_style: expected one of"):
        gym.make("agentrl/Search-v0", prompt_style="short")
