"""WebShop's own data files on this shop, unchanged: converted by ``python -m tasks.webshop.original``, served
by the shop server, played through the env and scored 1.0 by the grader when the right product is bought."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentgym_envs import EnvConfigError
from agentgym_envs.policies import tool_call_action
from agentgym_envs.webshop import ShopServer, WebShopEnv
from tasks import Task, read_tasks
from tasks.webshop import Goal
from tasks.webshop.original import main as convert

SHOES, MUG = "B07SHOE001", "B07MUG0002"
ITEMS = [  # items_shuffle.json: the keys WebShop's loader reads
    {"asin": SHOES, "name": "Men's Lightweight Running Shoes", "full_description": "Breathable running shoes.",
     "small_description": ["Lightweight mesh", "Non slip rubber sole"], "pricing": "$39.99",
     "product_category": "Clothing, Shoes & Jewelry › Men › Shoes › Athletic", "query": "men's running shoes",
     "customization_options": {"Size": [{"value": "8", "image": None}, {"value": "9", "image": None}],
                               "Color": [{"value": "Navy/White", "image": None}, {"value": "Black", "image": None}]}},
    {"asin": MUG, "name": "Ceramic Coffee Mug 12 oz", "full_description": "A mug.", "small_description": ["Ceramic"],
     "pricing": "$9.99", "product_category": "Home & Kitchen › Kitchen & Dining › Mugs", "query": "coffee mug",
     "customization_options": {}},
]
INSTRUCTIONS = {  # items_ins_v2.json
    SHOES: {"attributes": ["lightweight", "non slip"], "instruction": "i need men's running shoes that are lightweight",
            "instruction_attributes": ["lightweight"], "instruction_options": ["navy | white", "9"]},
    MUG: {"attributes": ["ceramic"], "instruction": "i want a ceramic coffee mug",
          "instruction_attributes": ["ceramic"]},
}


@pytest.fixture(scope="module")
def converted(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Task]]:
    folder = tmp_path_factory.mktemp("webshop-original")
    (folder / "items_shuffle_1000.json").write_text(json.dumps(ITEMS), encoding="utf-8")
    (folder / "items_ins_v2_1000.json").write_text(json.dumps(INSTRUCTIONS), encoding="utf-8")
    assert convert(["--items", str(folder / "items_shuffle_1000.json"),
                    "--attributes", str(folder / "items_ins_v2_1000.json"),
                    "--instructions", str(folder / "items_ins_v2_1000.json"), "--out", str(folder / "out")]) == 0
    return folder / "out" / "catalogue.jsonl", read_tasks(folder / "out" / "tasks.jsonl")


def test_the_original_data_runs_on_this_shop_and_pays_for_the_right_purchase(converted):
    catalogue, tasks = converted
    task = next(t for t in tasks if Goal.from_dict(t.metadata["goal"]).asin == SHOES)
    goal = Goal.from_dict(task.metadata["goal"])
    env = WebShopEnv(tasks=tasks, catalogue=str(catalogue))  # the env starts a server on that catalogue
    try:
        prompt, _ = env.reset(seed=0, options={"task": task.id})
        assert task.prompt in prompt
        env.step(tool_call_action("search", query="men's running shoes lightweight"))
        env.step(tool_call_action("click", element=SHOES))
        for value in goal.options.values():
            env.step(tool_call_action("click", element=value))
        _, reward, terminated, _, info = env.step(tool_call_action("click", element="Buy Now"))
        assert (reward, terminated, info["reward_components"]["outcome/success"]) == (1.0, True, 1.0)
    finally:
        env.close()


def test_tasks_of_a_catalogue_that_is_not_bundled_need_its_file_or_a_server(converted):
    _, tasks = converted
    with pytest.raises(EnvConfigError, match="not bundled; pass catalogue="):
        WebShopEnv(tasks=tasks)


def test_a_shared_server_of_the_original_catalogue_serves_its_tasks(converted):
    catalogue, tasks = converted
    with ShopServer(str(catalogue)) as server:
        env = WebShopEnv(tasks=tasks, server=server)
        try:
            prompt, _ = env.reset(seed=0)
            assert "- search(query)" in prompt and env.shop.health()["products"] == len(ITEMS)
        finally:
            env.close()
