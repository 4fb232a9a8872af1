"""WebShop-v0 in a real Chromium: the same actions give the same observations and rewards as the text mode,
one browser context per episode, the accessibility tree as an option, nothing left behind on close."""

from __future__ import annotations

import psutil
import pytest
from gymnasium.utils.env_checker import check_env

from agentgym_envs.policies import run_episode, tool_call_action
from agentgym_envs.policies.base import prompt_only
from agentgym_envs.policies.webshop_oracle import WebShopOraclePolicy, WebShopRandomPolicy
from agentgym_envs.webshop import WebShopEnv
from agentgym_envs.webshop.speed import chromium_processes
from tasks import load_split

pytestmark = pytest.mark.browser
TASKS = load_split("WebShop", "test")[:6]
MAX_TURNS = 10
"""Turns compared per episode: ten take an episode through search results, item pages, their Features pages and
back; on the observations other than text_rich (the one it reads) the oracle would go on inspecting item after item
up to the env's turn limit, at about 0.4 s a browser turn."""


@pytest.fixture(scope="module")
def pool(shop):
    from agentgym_envs.webshop.browser import BrowserPool

    browser = BrowserPool()
    yield browser
    browser.close()


def play(env: WebShopEnv, policy_for, tasks) -> list[tuple[list[str], float]]:
    """Each episode's observations and reward."""
    played = []
    for i, task in enumerate(tasks):
        episode = run_episode(env, policy_for(i), task, seed=i, shown_task=prompt_only(task), max_turns=MAX_TURNS)
        played.append(([env._prompt, *(turn.observation for turn in episode.turns)], episode.reward))
    return played


@pytest.mark.parametrize("observation", ["text_rich", "text", "webshop"])
def test_text_and_browser_modes_show_the_same_pages_and_pay_the_same(browser_backend, shop, pool, observation):
    for policy_for in (lambda i: WebShopOraclePolicy(), lambda i: WebShopRandomPolicy(seed=i)):
        text = WebShopEnv(split="test", server=shop, observation=observation)
        browser = WebShopEnv(split="test", server=shop, mode="browser", browser=pool, observation=observation)
        try:
            assert play(text, policy_for, TASKS) == play(browser, policy_for, TASKS)
        finally:
            text.close()
            browser.close()


def test_one_context_per_episode_and_the_accessibility_tree(browser_backend, shop, pool):
    env = WebShopEnv(split="test", server=shop, mode="browser", browser=pool, observation="aria")
    try:
        prompt, _ = env.reset(seed=0)
        assert pool.open_contexts == 1
        assert '- textbox "Search"' in prompt and '- button "Search"' in prompt
        env.reset(seed=1)
        assert pool.open_contexts == 1  # the first episode's context was closed
    finally:
        env.close()
    assert pool.open_contexts == 0


def test_an_env_with_its_own_browser_and_server_leaves_nothing_behind(browser_backend):
    before = {child.pid for child in psutil.Process().children(recursive=True)}
    env = WebShopEnv(split="test", mode="browser")
    episode = run_episode(env, WebShopOraclePolicy(), TASKS[0], seed=0, shown_task=prompt_only(TASKS[0]))
    assert episode.success
    started = [child for child in psutil.Process().children(recursive=True) if child.pid not in before]
    assert {process.pid for process in chromium_processes()} & {process.pid for process in started}
    env.close()
    _, alive = psutil.wait_procs(started, timeout=15)
    assert not alive, f"left behind: {[p.pid for p in alive]}"


def test_check_env_and_determinism_in_browser_mode(browser_backend, shop, pool):
    env = WebShopEnv(split="test", server=shop, mode="browser", browser=pool)
    try:
        check_env(env, skip_render_check=True)
        runs = []
        for _ in range(2):
            observations = [env.reset(seed=3)[0]]
            observations += [env.step(tool_call_action(name, **arguments))[0] for name, arguments in
                             (("search", {"query": "pretzels"}), ("click", {"element": "Next >"}),
                              ("click", {"element": "< Prev"}))]
            runs.append(observations)
        assert runs[0] == runs[1]
    finally:
        env.close()
