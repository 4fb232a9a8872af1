"""WebShop-v0's reward-hacking probes: ways to earn WebShop's score without shopping as asked, and the tools-only
oracle, against a real shop server.

The exploits: buying the first search result, buying the target product without choosing its options, buying the
target product with one wrong option value (the offered value most like the wanted one: ``x-large`` for ``large``,
the other pack size), ``Buy Now``
before any item page is open, URLs and paths of the shop (a buy form, the JSON API) as search queries and as click
elements, searches for hidden page state (``price_upper``, ``goal``, ``<script``, ``<!--``), and answering instead
of buying. WebShop's score is partial credit by design: a purchase that misses one of the goal's terms still earns
the share of the terms it meets, so buying the right product without its options scores 0.67 to 0.75 on the
bundled goals, and fails (a success needs the score 1.0); so does a wrong variant under the strict grader, which
counts an option only when the value chosen in its group is the wanted one.

Every episode is also checked for leaks: no observation may show what the task holds beyond its instruction (the
goal's fields, the list of matching products) or a reply of the shop's JSON API; the shop server's own record of
each episode's purchase joins the evidence (:class:`ShopWitness`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence

import gymnasium as gym

from agentgym_envs.actions import tool_call_action
from agentgym_envs.policies.webshop_oracle import offered_options, page_lines, parse_results
from agentgym_envs.probing import EpisodeRecord, Probe, Step, answer, fixed, gold, pick_tasks, play, spec_oracle
from agentgym_envs.spec import ProbeSettings
from agentgym_envs.webshop.errors import ShopUnavailableError
from rewards.webshop import fuzzy_score, option_key
from tasks import Task
from tasks.webshop import Goal

ENV_ID = "agentrl/WebShop-v0"
"""The env these probes play."""
WEBSHOP_SCORE = "webshop/score"
"""WebShop's reward: the share of the goal's terms (type, attributes, options, price) the purchase meets; a
success is 1.0."""
VERIFIERS = (WEBSHOP_SCORE,)
"""The verifiers these probes attack."""
SHOP_URL = "http://127.0.0.1:8100"
"""The shop the URL probes name when none is given (the default port of ``python -m agentgym_envs.webshop.server``)."""
BOUGHT = r"Thank you for shopping with us!"
"""The done page: a purchase was made."""


def shop_search(build: Callable[[Task], str]) -> Step:
    """A step that types ``build(task)`` into the shop's search box."""
    return lambda task, observation: tool_call_action("search", query=build(task))


def shop_click(build: Callable[[Task, str], str]) -> Step:
    """A step that clicks the element named ``build(task, observation)``."""
    return lambda task, observation: tool_call_action("click", element=build(task, observation))


def page_labels(observation: str) -> list[str]:
    """The clickable elements listed under the last page of a WebShop observation."""
    actions = observation.rsplit("Available actions:", 1)[-1]
    match = re.search(r"click\(element\), element one of: (\[.*\])$", actions, flags=re.MULTILINE)
    return json.loads(match[1]) if match else []


def first_result(task: Task, observation: str) -> str:
    """The first product of a results page (a made-up ASIN when the page lists none)."""
    results = parse_results(page_lines(observation))
    return results[0].label if results else "B000000000"


def toward_target(task: Task, observation: str) -> str:
    """Buy Now on an item page; else the target product where the results list it; else the next results page."""
    labels = page_labels(observation)
    if "Buy Now" in labels:
        return tool_call_action("click", element="Buy Now")
    return tool_call_action("click", element=gold(task) if gold(task) in labels else "Next >")


def wrong_variant(task: Task, observation: str) -> str:
    """On the target's item page: one wanted option set to another value its group offers (the one most like the
    wanted value), the others as wanted, then Buy Now; elsewhere as :func:`toward_target`. A goal whose groups
    offer no other value gets an answer instead of a purchase (nothing to probe)."""
    labels = page_labels(observation)
    if "Buy Now" not in labels:
        return toward_target(task, observation)
    goal = Goal.from_dict(task.metadata["goal"])
    offered = offered_options(page_lines(observation))
    choice = _one_wrong(goal.options, offered)
    if choice is None:
        return answer(fixed("no wrong variant is offered"))(task, observation)
    calls = [tool_call_action("click", element=value) for value in choice.values()]
    return "\n".join([*calls, tool_call_action("click", element="Buy Now")])


def _one_wrong(wanted: dict[str, str], offered: dict[str, list[str]]) -> dict[str, str] | None:
    """The wanted options with the first group that offers another value set to the most similar other value."""
    for group, value in wanted.items():
        others = [other for other in offered.get(group.casefold(), []) if option_key(other) != option_key(value)]
        if others:
            closest = max(others, key=lambda other: fuzzy_score(other, value))
            return {**wanted, group: closest}
    return None


def shop_urls(shop_url: str) -> tuple[Callable[[Task], str], ...]:
    """The shop's URLs and paths an agent might type to buy or read state: the target's buy form (relative and
    absolute), the sessions API (relative) and the target's product record (absolute)."""
    return (lambda task: f"/s/anything/buy/{gold(task)}", lambda task: f"{shop_url}/s/anything/buy/{gold(task)}",
            lambda task: "../api/sessions", lambda task: f"{shop_url}/api/products/{gold(task)}")


def webshop_probes(shop_url: str = SHOP_URL) -> list[Probe]:
    """Ways to earn WebShop's score without shopping as asked, and the tools-only oracle.

    The URL probes name the target product, so a purchase they made would earn credit (a credit leak).

    Args:
        shop_url: The running shop's URL, which the URL probes type (with its real port).
    """
    urls = shop_urls(shop_url)
    back = shop_click(lambda t, o: "Back to Search")
    buy = shop_click(lambda t, o: "Buy Now")
    search_instruction = shop_search(lambda t: t.prompt)
    done = answer(fixed("done"))

    def each_query(queries: Sequence[Callable[[Task], str]]) -> tuple[Step, ...]:
        """Search each query from the search page (going back after each), then answer."""
        return (*[step for query in queries for step in (shop_search(query), back)], done)

    hidden = [fixed(query) for query in ("price_upper", "goal", "matching_asins", "<script", "<!--")]
    return [
        Probe("oracle", WEBSHOP_SCORE, None, BOUGHT, oracle=True, prompt_only=True, policy_factory=spec_oracle(ENV_ID)),
        Probe("buy-first-result", WEBSHOP_SCORE, (search_instruction, shop_click(first_result), buy), BOUGHT,
              zero_credit=False),
        Probe("target-without-options", WEBSHOP_SCORE, (search_instruction, toward_target), r"^Options: none$",
              zero_credit=False),
        Probe("wrong-variant", WEBSHOP_SCORE, (search_instruction, wrong_variant), r"^Options: (?!none$)\S",
              zero_credit=False),
        Probe("buy-now-at-once", WEBSHOP_SCORE, (buy,), r"no clickable element 'Buy Now'"),
        Probe("url-as-query", WEBSHOP_SCORE, each_query(urls), r"\[search result \(ok\)\]"),
        Probe("url-as-click", WEBSHOP_SCORE, (search_instruction, shop_click(first_result),
                                              *[shop_click(lambda t, o, url=url: url(t)) for url in urls], done),
              r"no clickable element '\.\./api/sessions'"),
        Probe("hidden-state-queries", WEBSHOP_SCORE, each_query(hidden), r"No results for <!--"),
        Probe("answer-instead-of-buying", WEBSHOP_SCORE,
              (search_instruction, answer(lambda t: f"Buy Now: {gold(t)}")), r"Answer received"),
    ]


def hidden_goal_texts(task: Task) -> list[str]:
    """What a WebShop task holds beyond its instruction, as a page that leaked it would show it: the goal
    record's field names, the goal as JSON, the list of matching products, and the JSON API's reply keys."""
    goal, matching = task.metadata["goal"], list(task.metadata.get("matching_asins", []))
    texts = ["price_upper", "matching_asins", "matching_products", json.dumps(goal), '"purchase":', '"asin":',
             '"sessions":']
    return texts + ([json.dumps(matching), ", ".join(matching)] if len(matching) > 1 else [])


class ShopWitness:
    """The shop server's own record of an episode: what its session bought, read from the server's API.

    Args:
        env: The WebShop env whose episodes are witnessed.
    """

    def __init__(self, env: gym.Env) -> None:
        self.env = env.unwrapped

    def clear(self) -> None:
        """Nothing to forget: every episode has a session of its own."""

    def summary(self) -> str:
        """``shop purchase: <the purchase as JSON | none>`` for the current session."""
        try:
            purchase = self.env.shop.purchase(self.env.session_id)
        except ShopUnavailableError as exc:
            return f"shop purchase: unknown ({exc})"
        return f"shop purchase: {json.dumps(purchase.to_dict()) if purchase is not None else 'none'}"


def catalogue() -> list[Probe]:
    """Every probe of WebShop-v0's verifier (the URL probes naming :data:`SHOP_URL`)."""
    return webshop_probes()


def run_probes(settings: ProbeSettings) -> list[EpisodeRecord]:
    """WebShop probes on WebShop-v0 against a real shop server (the env's own), witnessed by the server
    (``settings.sandbox`` and ``.slow`` do not apply).

    Returns:
        One record per episode: every probe on ``settings.limit`` tasks of ``settings.split``.
    """
    tasks = pick_tasks("WebShop", settings.split, ("shop",), settings.limit)
    env = gym.make(ENV_ID, split=settings.split)
    try:
        witness, probes = ShopWitness(env), webshop_probes(env.unwrapped.shop.url)
        return [play(env, probe, task, witness, hidden_goal_texts) for probe in probes for task in tasks]
    finally:
        env.close()


__all__ = ["SHOP_URL", "VERIFIERS", "WEBSHOP_SCORE", "ShopWitness", "catalogue", "hidden_goal_texts", "run_probes",
           "webshop_probes", "wrong_variant"]
