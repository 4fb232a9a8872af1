"""observation="webshop": pages as WebShop's own text environment writes them (web_agent_text_env.py's text_rich),
over WebShop-format files converted and served here."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from agentgym_envs.policies import tool_call_action
from agentgym_envs.webshop import WebShopEnv
from agentgym_envs.webshop.pages import parse_page
from tasks import Task, read_tasks
from tasks.webshop.original import main as convert

DATA = Path(__file__).parents[2] / "data" / "webshop"

# The item page of the shampoo, its size and scent chosen, as WebShop writes it: a "You have clicked" line per
# chosen option (the last on the page first), options indented by two spaces, the listing's price range, rating N.A.
SHAMPOO_ITEM_PAGE = """\
You have clicked tea tree.
You have clicked 16 fl oz (pack of 2).
Instruction:
I am looking for a sulfate free tea tree shampoo, 16 fl oz, pack of 2, and price lower than 50.00 dollars
[button] Back to Search [button_]
[button] < Prev [button_]
size
  [button] 8.12 fl oz (pack of 1) [button_]
  [button] 16 fl oz (pack of 1) [button_]
  [clicked button] 16 fl oz (pack of 2) [clicked button_]
  [button] 33.8 fl oz (pack of 1) [button_]
scent
  [clicked button] tea tree [clicked button_]
  [button] tea tree mint [button_]
  [button] lavender [button_]
Tea Tree Shampoo with Essential Oils, Sulfate Free
Price: $8.99 to $15.99
Rating: N.A.
[button] Description [button_]
[button] Features [button_]
[button] Reviews [button_]
[button] Buy Now [button_]
"""

# Its results page: each product after a blank line, prices as the listings give them
SHAMPOO_RESULTS_PAGE = """\
Instruction:
I am looking for a sulfate free tea tree shampoo, 16 fl oz, pack of 2, and price lower than 50.00 dollars
[button] Back to Search [button_]
Page 1 (Total results: 2)

[button] B08SHAMP01 [button_]
Tea Tree Shampoo with Essential Oils, Sulfate Free
$8.99 to $15.99

[button] B07COFFEE4 [button_]
Medium Roast Ground Coffee, 100% Arabica
$11.49 to $29.99
"""


@pytest.fixture(scope="module")
def webshop_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[WebShopEnv, list[Task]]]:
    out = tmp_path_factory.mktemp("webshop-observation")
    assert convert(["--items", str(DATA / "items_shuffle.json"), "--attributes", str(DATA / "items_ins_v2.json"),
                    "--instructions", str(DATA / "items_human_ins.json"), "--human", "--out", str(out)]) == 0
    tasks = read_tasks(out / "tasks.jsonl")
    env = WebShopEnv(tasks=tasks, catalogue=str(out / "catalogue.jsonl"), observation="webshop")
    yield env, tasks
    env.close()


def test_pages_read_as_webshops_own_text(webshop_env: tuple[WebShopEnv, list[Task]]) -> None:
    env, tasks = webshop_env
    task = next(t for t in tasks if t.answer == "B08SHAMP01")
    env.reset(seed=0, options={"task": task.id})
    results, *_ = env.step(tool_call_action("search", query="tea tree shampoo"))
    assert page_of(results) == SHAMPOO_RESULTS_PAGE
    env.step(tool_call_action("click", element="B08SHAMP01"))
    env.step(tool_call_action("click", element="16 fl oz (pack of 2)"))
    item, *_ = env.step(tool_call_action("click", element="tea tree"))
    assert page_of(item) == SHAMPOO_ITEM_PAGE
    _, reward, terminated, _, _ = env.step(tool_call_action("click", element="Buy Now"))
    assert (reward, terminated) == (1.0, True)  # the range is shown; the price paid is drawn within it


def page_of(observation: str) -> str:
    """The page of a tool result, without the result's header and the actions listed under it."""
    return observation.split("result (ok)]\n", 1)[1].split("\n\nAvailable actions:", 1)[0]


@pytest.mark.parametrize(
    ("html", "text"),
    [
        # a price as WebShop writes its numbers (Python's float): $20.0, $12.99
        ('<body data-page="item"><p>Price: $20.00</p></body>', "Price: $20.0\n"),
        ('<body data-page="results"><p>$12.99 to $24.90</p></body>', "$12.99 to $24.9\n"),
        # WebShop's data has no ratings
        ('<body data-page="item"><p>Rating: 4.5</p></body>', "Rating: N.A.\n"),
        # only on item and results pages: a review's rating and a done page's price stay
        ('<body data-page="subpage"><p>Rating: 4.5</p></body>', "Rating: 4.5\n"),
        ('<body data-page="done"><p>$20.00</p></body>', "$20.00\n"),
        # navigation on a results page is not a product
        ('<body data-page="results"><a class="clickable" href="/n">Next &gt;</a>'
         '<a class="clickable" href="/i">B01</a></body>', "[button] Next > [button_]\n\n[button] B01 [button_]\n"),
        # an option not chosen: indented, no click line
        ('<body data-page="item"><a class="clickable option" data-group="size" aria-pressed="false" '
         'href="/o">large</a></body>', "  [button] large [button_]\n"),
    ],
)
def test_webshop_text(html: str, text: str) -> None:
    assert parse_page(html).webshop_text() == text
