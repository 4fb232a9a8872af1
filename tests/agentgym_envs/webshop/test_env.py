"""WebShop-v0 in text mode against a real shop server: the contract, the baselines, malformed actions, faults."""

from __future__ import annotations

import re

import gymnasium as gym
import psutil
import pytest
from gymnasium.utils.env_checker import check_env

import agentgym_envs  # noqa: F401  (registers the ids)
from agentgym_envs import EnvConfigError, describe
from agentgym_envs.policies import run_episode, tool_call_action
from agentgym_envs.policies.base import prompt_only
from agentgym_envs.policies.webshop_oracle import WebShopOraclePolicy, WebShopRandomPolicy
from agentgym_envs.runner import success_rate
from agentgym_envs.webshop import ShopServer, WebShopEnv
from rewards import webshop_score
from tasks import load_split
from tasks.webshop import Goal, Product, Purchase

TEST = load_split("WebShop", "test")


@pytest.fixture
def env(shop):
    env = WebShopEnv(split="test", server=shop)
    yield env
    env.close()


def click(element: str) -> str:
    return tool_call_action("click", element=element)


def search(query: str) -> str:
    return tool_call_action("search", query=query)


def test_the_first_observation_is_the_search_page_with_the_instruction(env):
    task = TEST[0]
    prompt, info = env.reset(seed=0, options={"task": task.id})
    assert task.prompt in prompt
    assert "- search(query): search the shop" in prompt
    assert [tool["function"]["name"] for tool in info["tools"]] == ["search", "click"]


def test_the_oracle_buys_what_the_instruction_asks_for(env):
    episodes = [run_episode(env, WebShopOraclePolicy(), task, seed=0, shown_task=prompt_only(task)) for task in TEST]
    rate = success_rate(episodes)
    assert rate >= 0.95, f"oracle success {rate:.2f} on the test split"
    assert all(len(episode.turns) <= 15 for episode in episodes)


def test_a_random_agent_almost_never_succeeds(env):
    episodes = [run_episode(env, WebShopRandomPolicy(seed=i), task, seed=i) for i, task in enumerate(TEST[:40])]
    assert success_rate(episodes) <= 0.05


def test_buy_now_ends_the_episode_with_webshops_score_of_the_purchase(env, shop):
    task = TEST[0]
    goal = Goal.from_dict(task.metadata["goal"])
    env.reset(seed=0, options={"task": task.id})
    env.step(search(goal.product_type))
    observation, *_ = env.step(click(_first_result(observation_of(env))))
    observation, reward, terminated, truncated, info = env.step(click("Buy Now"))
    assert (terminated, truncated) == (True, False)
    assert "Thank you for shopping with us!" in observation
    bought = _bought(env)
    expected = webshop_score(goal, bought[0], bought[1])
    assert reward == pytest.approx(expected.value)
    assert info["reward_components"]["outcome/purchased"] == 1.0
    assert info["reward_components"]["outcome/success"] == float(expected.value == 1.0)


def test_the_target_bought_with_the_wanted_options_scores_one(env):
    task = TEST[5]
    goal = Goal.from_dict(task.metadata["goal"])
    env.reset(seed=0, options={"task": task.id})
    env.step(search(task.prompt))
    while goal.asin not in env.page.labels:
        env.step(click("Next >"))
    env.step(click(goal.asin))
    for value in goal.options.values():
        env.step(click(value))
    _, reward, terminated, _, info = env.step(click("Buy Now"))
    assert (reward, terminated, info["reward_components"]["outcome/success"]) == (1.0, True, 1.0)


@pytest.mark.parametrize(("grader", "reward"), [("strict", 1.0), ("webshop", 0.75)])
def test_the_grader_option_scores_the_purchase(shop, grader, reward):
    # TEST[4] wants size "standard": bought as asked, strict gives 1.0; WebShop's own colour rule turns the chosen
    # "standard" into "tan" (a substring), so its grader misses the option: (2 attributes + 0 + price) / 4
    task = TEST[4]
    goal = Goal.from_dict(task.metadata["goal"])
    assert dict(goal.options) == {"size": "standard"} and len(goal.attributes) == 2
    env = WebShopEnv(split="test", server=shop, grader=grader)
    try:
        env.reset(seed=0, options={"task": task.id})
        env.step(search(task.prompt))
        while goal.asin not in env.page.labels:
            env.step(click("Next >"))
        env.step(click(goal.asin))
        env.step(click("standard"))
        _, score, terminated, _, _ = env.step(click("Buy Now"))
        assert (score, terminated, describe(env).settings["grader"]) == (pytest.approx(reward), True, grader)
    finally:
        env.close()


def test_malformed_and_unavailable_actions_are_observations(env):
    env.reset(seed=0, options={"task": TEST[0].id})
    observation, reward, terminated, truncated, info = env.step(click("Buy Now"))
    assert (reward, terminated, truncated, info["ok"]) == (0.0, False, False, False)
    assert "no clickable element 'Buy Now'" in observation and '["Search"]' in observation
    observation, *_ = env.step(search("   "))
    assert "expected a query with at least one word" in observation
    env.step(search("henley"))
    observation, *_, info = env.step(search("hoodie"))
    assert "has no search box" in observation and "Back to Search" in observation and not info["ok"]
    observation, *_ = env.step(click("Back to Serch"))
    assert "Did you mean 'Back to Search'?" in observation
    observation, *_ = env.step('<tool_call>{"name": "click", "arguments": {"element": 3}}</tool_call>')
    assert "Invalid arguments for click" in observation
    observation, *_, info = env.step(click("back to search"))  # case does not matter
    assert info["ok"] and "- search(query)" in observation


def test_searching_on_an_item_page_is_refused_and_buys_nothing(env):
    """The item page's buy form carries the query as a hidden field: it is no search box."""
    env.reset(seed=0, options={"task": TEST[0].id})
    env.step(search("henley"))
    env.step(click(_first_result(observation_of(env))))
    observation, reward, terminated, _, info = env.step(search("henley"))
    assert "has no search box" in observation and (reward, terminated, info["ok"]) == (0.0, False, False)
    assert env.shop.purchase(env.session_id) is None


def test_answering_without_buying_scores_zero(env):
    env.reset(seed=0, options={"task": TEST[0].id})
    _, reward, terminated, _, info = env.step("<answer>done</answer>")
    assert (reward, terminated, info["reward_components"]["outcome/purchased"]) == (0.0, True, 0.0)


def test_the_turn_limit_truncates(shop):
    env = gym.make("agentrl/WebShop-v0", split="test", server=shop.url)
    try:
        env.reset(seed=0)
        steps = [env.step(click("Search")) for _ in range(15)]
        assert [truncated for *_, truncated, _ in steps] == [False] * 14 + [True]
    finally:
        env.close()


def test_check_env_and_determinism(shop):
    env = gym.make("agentrl/WebShop-v0", split="test", server=shop.url)
    try:
        check_env(env.unwrapped, skip_render_check=True)
        runs = []
        for _ in range(2):
            observations = [env.reset(seed=3)[0]]
            observations += [env.step(action)[0] for action in (search("pretzels"), click("Next >"), click("< Prev"))]
            runs.append(observations)
        assert runs[0] == runs[1]
    finally:
        env.close()


def test_pages_hold_no_hidden_state(env):
    """No script, comment or hidden input beyond the chosen options: nothing the reward could be read from."""
    task = TEST[1]
    run_episode(env, WebShopOraclePolicy(), task, seed=0, shown_task=prompt_only(task))
    for turn in env.trajectory.turns:
        assert "<script" not in turn.observation and "price_upper" not in turn.observation
    session = env.shop.session(env.session_id)  # the server knows the instruction and the purchase only
    assert set(session) == {"session", "instruction", "purchase"}


def test_a_dead_server_is_an_infrastructure_error_not_a_wrong_answer():
    server = ShopServer("generated-v1")
    server.start()
    env = WebShopEnv(split="test", server=server)
    try:
        env.reset(seed=0)
        server.stop()
        observation, reward, terminated, truncated, info = env.step(search("henley"))
        assert (reward, terminated, truncated, info["infra_error"]) == (0.0, False, True, True)
        assert "not your fault" in observation
    finally:
        env.close()


def test_a_session_the_shop_lost_is_an_infrastructure_error(env):
    """A restarted (or evicting) server no longer knows the episode's session: not the agent's fault, not a page."""
    env.reset(seed=0, options={"task": TEST[0].id})
    env.shop.delete_session(env.session_id)
    observation, reward, terminated, truncated, info = env.step(search("henley"))
    assert (reward, terminated, truncated, info["infra_error"]) == (0.0, False, True, True)
    assert "lost this episode's session" in observation


def test_close_stops_the_server_the_env_started():
    before = {child.pid for child in psutil.Process().children(recursive=True)}
    env = WebShopEnv(split="test")
    env.reset(seed=0)
    children = [child for child in psutil.Process().children(recursive=True) if child.pid not in before]
    assert children, "the env started a server process"
    env.close()
    _, alive = psutil.wait_procs(children, timeout=10)
    assert not alive


def test_the_card_describes_tools_modes_and_catalogue(env):
    card = describe(env)
    assert [tool["function"]["name"] for tool in card.tools] == ["search", "click"]
    assert card.families["shop"].required_tools == ("search", "click")
    assert card.settings["mode"] == "text" and card.settings["catalogue"] == "generated-v1"


def test_bad_configuration_is_refused():
    with pytest.raises(EnvConfigError, match="mode: expected one of"):
        WebShopEnv(mode="headless")
    with pytest.raises(EnvConfigError, match="needs mode='browser'"):
        WebShopEnv(observation="aria")
    with pytest.raises(EnvConfigError, match="written for catalogue 'generated-v1'"):
        WebShopEnv(split="test", catalogue="other.jsonl")
    with pytest.raises(EnvConfigError, match=r"grader: expected one of \['strict', 'webshop'\], got 'webshp'.*webshop"):
        WebShopEnv(grader="webshp")


# -- helpers ------------------------------------------------------------------------------------
def observation_of(env: WebShopEnv) -> str:
    return env.trajectory.turns[-1].observation


def _first_result(observation: str) -> str:
    return re.search(r"\[button\] (\S+) \[button_\]\n[^\n]+\n\$", observation).group(1)


def _bought(env: WebShopEnv) -> tuple[Product, Purchase]:
    purchase = env.shop.purchase(env.session_id)
    return env.shop.product(purchase.asin), purchase
