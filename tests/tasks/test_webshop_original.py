"""Tests of the loader of WebShop's original data files (tasks.webshop.original).

The tests write small files in WebShop's formats (items_shuffle, items_ins_v2, items_human_ins)
and check the products and goals made from them.
"""

from __future__ import annotations

import json
import logging
import random
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from rewards.webshop import webshop_score
from tasks.records import Task, read_tasks
from tasks.webshop import Goal, Product, Purchase, RecordFormatError, product_meets_goal
from tasks.webshop.bundled import DEFAULT_CATALOGUE, load_catalogue
from tasks.webshop.original import (
    DEFAULT_PRICE,
    NO_PRICE_LIMIT,
    PRICE_STEPS,
    SHUFFLE_SEED,
    convert_original,
    load_original_goals,
    load_original_products,
    main,
    write_original_format,
)

SHOES = "B07SHOE001"
TEE = "B07TEE0002"
HAIR = "B07HAIR003"
LAMP = "B07LAMP004"
SOFA = "B07SOFA005"


def _item(asin: str, name: str, **fields: Any) -> dict[str, Any]:
    """An item as items_shuffle.json holds it, with the keys WebShop's loader reads."""
    item = {
        "asin": asin,
        "name": name,
        "full_description": f"{name}. Ships in a gift box.",
        "small_description": [f"{name} bullet one", "Easy care"],
        "pricing": "$20.00",
        "list_price": "$29.99",
        "product_category": "Home & Kitchen › Decor",
        "query": "decor",
        "category": "garden",
        "customization_options": {},
        "images": ["https://example.com/a.jpg"],
        "brand": "Acme",
        "product_information": {"Item Weight": "1 pound"},
    }
    return item | fields


ITEMS: list[Any] = [
    _item(
        SHOES,
        "Men's Lightweight Running Shoes Breathable Mesh Sneakers",
        pricing="$39.99",
        product_category="Clothing, Shoes & Jewelry › Men › Shoes › Athletic › Running",
        query=" Men's Running Shoes ",
        category="fashion",
        customization_options={
            "Size": [{"value": "8", "image": None}, {"value": "9", "image": None}],
            "Color": [{"value": "Navy/White", "image": "https://example.com/n.jpg"}, {"value": "Black", "image": None}],
            "Width": None,
        },
        average_rating="4.5 out of 5 stars",
        Reviews=[
            {"title": "Great fit", "stars": "5.0 out of 5 stars", "review": "Light and comfy."},
            {"title": "Too loud", "score": 7, "body": "Rated above five."},
            {"title": "No stars", "stars": "n/a", "review": "Dropped."},
        ],
    ),
    _item(TEE, "Women's Cotton Crew Neck T-Shirt", pricing="$12.99 - $24.99", small_description="Soft cotton tee"),
    _item(
        HAIR,
        "Clip In Hair Extensions 18 Inch Natural Looking",
        pricing=None,
        product_category="Beauty & Personal Care › Hair Care › Hair Extensions",
        query="hair extensions",
        customization_options={"Color": [{"value": "Natural Black"}, {"value": "Dark Brown"}]},
    ),
    _item(LAMP, "Brass Floor Lamp", pricing="$1,299.00"),
    _item(SOFA, "Velvet Sofa", pricing="$985.00", customization_options={"Color": []}),
    _item("nan", "Scraped without an asin"),
    _item(SHOES, "A second listing of the shoes"),
    _item("B07BAD0006", "Options as text", customization_options="Color: red"),
    _item("B07BAD0007", "Price without digits", pricing="$abc"),
    "not a product",
]
SKIPPED = 5

ATTRIBUTES = {
    SHOES: {
        "attributes": ["lightweight", "non slip", "rubber sole"],
        "instruction": "i need men's running shoes that are lightweight and non slip",
        "instruction_attributes": ["lightweight", "non slip"],
        "instruction_options": ["navy | white", "9"],
    },
    TEE: {"attributes": ["machine wash"], "instruction": None},
    HAIR: {
        "attributes": ["natural looking", "easy to apply"],
        "instruction": "i want natural looking clip in hair extensions",
        "instruction_attributes": ["natural looking"],
    },
    LAMP: {"attributes": ["brass"], "instruction": "i want a brass floor lamp", "instruction_attributes": ["brass"]},
    SOFA: {"attributes": ["velvet"], "instruction": "i want a velvet sofa", "instruction_attributes": ["velvet"]},
}
SYNTHETIC_COUNT = 2 * 2 + 2 + 1 + 0  # shoes: colours x sizes; hair: colours; lamp: no options; sofa: an empty group

HUMAN = {
    SHOES: [
        {
            "asin": SHOES,
            "instruction": "i'm looking for lightweight running shoes in navy white, size 9.",
            "instruction_attributes": ["lightweight"],
            "instruction_options": ["Navy/White", "9"],
            "assignment_id": "A1",
            "worker_id": "W1",
        },
        {"asin": SHOES, "instruction": "shoes please", "instruction_attributes": [], "instruction_options": []},
    ],
    HAIR: [
        {
            "instruction": "i need clip in hair extensions that look natural, in dark brown",
            "instruction_attributes": ["natural looking"],
            "instruction_options": ["dark brown"],
        },
        {
            "instruction": "hair extensions in platinum blonde that are easy to apply",
            "instruction_attributes": ["easy to apply"],
            "instruction_options": ["platinum blonde"],
        },
    ],
    "B0NOTLOADED": [{"instruction": "x", "instruction_attributes": ["y"], "instruction_options": []}],
}
HUMAN_COUNT = 3


def _write(folder: Path, name: str, data: Any) -> Path:
    path = folder / name
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


@pytest.fixture()
def files(tmp_path: Path) -> dict[str, Path]:
    return {
        "items": _write(tmp_path, "items_shuffle_1000.json", ITEMS),
        "attributes": _write(tmp_path, "items_ins_v2_1000.json", ATTRIBUTES),
        "human": _write(tmp_path, "items_human_ins.json", HUMAN),
    }


@pytest.fixture()
def products(files: dict[str, Path]) -> list[Product]:
    return load_original_products(files["items"], files["attributes"])


def _by_asin(products: list[Product]) -> dict[str, Product]:
    return {product.asin: product for product in products}


def test_fields_are_mapped_as_webshop_loads_them(products: list[Product]) -> None:
    shoes = _by_asin(products)[SHOES]
    assert shoes.title == "Men's Lightweight Running Shoes Breathable Mesh Sneakers"
    assert shoes.product_type == shoes.title  # WebShop's type reward compares product names
    assert shoes.category == ("Clothing, Shoes & Jewelry", "Men", "Shoes", "Athletic", "Running")
    assert shoes.query == "men's running shoes"  # lower-cased and stripped
    assert shoes.options == {"size": ("8", "9"), "color": ("navy | white", "black")}  # null group dropped
    assert shoes.attributes == ("lightweight", "non slip", "rubber sole")
    assert shoes.description.startswith(shoes.title)
    assert shoes.features == (f"{shoes.title} bullet one", "Easy care")
    assert shoes.rating == 4.5
    assert [(r.rating, r.title, r.text) for r in shoes.reviews] == [
        (5.0, "Great fit", "Light and comfy."),
        (5.0, "Too loud", "Rated above five."),  # clamped to 5; the review without stars is left out
    ]
    tee = _by_asin(products)[TEE]
    assert tee.features == ("Soft cotton tee",)  # a text is one bullet
    assert tee.rating is None and tee.reviews == ()
    assert _by_asin(products)[SOFA].options == {"color": ()}
    assert _by_asin(products)[LAMP].options == {}


def test_prices_follow_webshops_rules(files: dict[str, Path], products: list[Product]) -> None:
    by_asin = _by_asin(products)
    assert by_asin[SHOES].price == 39.99
    assert by_asin[LAMP].price == 1299.0  # thousands separator dropped
    assert by_asin[HAIR].price == DEFAULT_PRICE  # no pricing: WebShop's default, product kept
    drawn = {_by_asin(load_original_products(files["items"], seed=seed))[TEE].price for seed in range(8)}
    assert all(12.99 <= price <= 24.99 and round(price, 2) == price for price in drawn)  # within the range, cents
    assert len(drawn) > 1
    # the range is kept, for the pages to show as WebShop does; one price has none
    assert (by_asin[TEE].price_range, by_asin[SHOES].price_range, by_asin[HAIR].price_range) == ((12.99, 24.99),
                                                                                                 None, None)
    assert by_asin[TEE].price == _by_asin(load_original_products(files["items"], seed=0))[TEE].price


def test_unreadable_items_are_skipped_and_counted(files: dict[str, Path], caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="tasks.webshop.original"):
        products = load_original_products(files["items"], files["attributes"])
    assert [p.asin for p in products] == [SHOES, TEE, HAIR, LAMP, SOFA]
    [record] = caplog.records
    assert f"skipped {SKIPPED} of {len(ITEMS)} WebShop items" in record.getMessage()
    assert "'nan'" in record.getMessage() and "repeats an earlier item" in record.getMessage()
    assert products[0].title != "A second listing of the shoes"  # the first listing is kept


def test_limit_reads_the_first_items_only(files: dict[str, Path]) -> None:
    assert [p.asin for p in load_original_products(files["items"], limit=2)] == [SHOES, TEE]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        # our JSONL catalogue: the file opens with an object
        ('{"asin": "B1", "title": "t"}\n{"asin": "B2", "title": "u"}\n', "expected a JSON list.*got a JSON dict"),
        # a list cut short: found where it breaks, as the file is streamed
        ('[{"asin": "B1", "name": "t"', "got invalid JSON"),
        ("", "got an empty file"),
        ("nope", "got invalid JSON"),
        (json.dumps(ATTRIBUTES), "expected a JSON list of WebShop products.*got a JSON dict"),  # the wrong file
        (json.dumps([{"id": 1}, {"id": 2}]), "got none readable among 2 items"),  # a list, but not of products
        ("[]", "got none readable among 0 items"),
    ],
)
def test_a_file_not_in_webshops_format_is_refused(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "items.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(RecordFormatError, match=message):
        load_original_products(path)


def test_instructions_of_the_other_kind_are_refused(files: dict[str, Path], products: list[Product]) -> None:
    with pytest.raises(RecordFormatError, match=r"got list for asin 'B07SHOE001' \(is it items_human_ins.json\?\)"):
        load_original_goals(products, instructions_path=files["human"])
    with pytest.raises(RecordFormatError, match=r"got dict .*\(is it items_ins_v2\*.json\?\)"):
        load_original_goals(products, instructions_path=files["attributes"], human=True)
    with pytest.raises(RecordFormatError, match=r"expected items_ins_v2\*.json: asin -> \{...\}, got list"):
        load_original_products(files["items"], files["human"])


def test_synthetic_goals_one_per_option_combination(files: dict[str, Path], products: list[Product]) -> None:
    tasks = load_original_goals(products, instructions_path=files["attributes"])
    assert len(tasks) == SYNTHETIC_COUNT
    assert [t.id for t in tasks] == [f"webshop-original/synthetic/{i}" for i in range(SYNTHETIC_COUNT)]
    shoes = [Goal.from_dict(t.metadata["goal"]) for t in tasks if t.answer == SHOES]
    assert sorted(tuple(g.options.items()) for g in shoes) == [
        (("color", c), ("size", s)) for c in ("black", "navy | white") for s in ("8", "9")
    ]
    for goal in shoes:
        assert goal.attributes == ("lightweight", "non slip")
        assert goal.instruction.startswith(
            f"i need men's running shoes that are lightweight and non slip with color: {goal.options['color']}, "
            f"and size: {goal.options['size']}, and price lower than "
        )
    assert len({g.price_upper for g in shoes}) == 1  # one draw per product
    lamp = next(t for t in tasks if t.answer == LAMP)
    assert lamp.prompt == "i want a brass floor lamp"  # no options, no limit above $990
    assert {t.metadata["weight"] for t in tasks if t.answer == LAMP} == {1.0}  # its attribute is in one goal only


def test_human_goals_map_option_values_to_groups(files: dict[str, Path], products: list[Product]) -> None:
    tasks = load_original_goals(products, instructions_path=files["human"], human=True)
    assert len(tasks) == HUMAN_COUNT  # the instruction without attributes and the unknown asin are left out
    by_prompt = {t.prompt.split(",")[0]: t for t in tasks}
    shoes = by_prompt["i'm looking for lightweight running shoes in navy white"]
    goal = Goal.from_dict(shoes.metadata["goal"])
    assert goal.options == {"color": "navy | white", "size": "9"}
    assert goal.instruction.startswith("i'm looking for lightweight running shoes in navy white, size 9, and price")
    assert shoes.metadata["weight"] == 1.0 and shoes.metadata["unmatched_options"] == []
    blonde = next(t for t in tasks if "platinum" in t.prompt)
    assert blonde.metadata["unmatched_options"] == ["platinum blonde"]
    assert blonde.metadata["goal"]["options"] == {"unmatched 1": "platinum blonde"}
    assert blonde.metadata["matching_products"] == 0  # honest: its own product does not offer the colour


def test_each_goal_is_met_by_its_own_product(files: dict[str, Path], products: list[Product]) -> None:
    by_asin = _by_asin(products)
    tasks = load_original_goals(products, instructions_path=files["attributes"])
    tasks += load_original_goals(products, instructions_path=files["human"], human=True)
    for task in tasks:
        if task.metadata["unmatched_options"]:
            continue
        goal = Goal.from_dict(task.metadata["goal"])
        assert product_meets_goal(goal, by_asin[task.answer]), task.prompt
        assert task.answer in task.metadata["matching_asins"]
        assert (task.env, task.family, task.metadata["catalogue"]) == ("WebShop", "shop", "original")
        assert task.difficulty == (1 if len(goal.attributes) + len(goal.options) < 3 else 2)


def test_price_limit_follows_webshops_rule(files: dict[str, Path], products: list[Product]) -> None:
    by_asin = _by_asin(products)
    tasks = load_original_goals(products, instructions_path=files["attributes"])
    tasks += load_original_goals(products, instructions_path=files["human"], human=True)
    for task in tasks:
        goal = Goal.from_dict(task.metadata["goal"])
        steps = [step for step in PRICE_STEPS if step > by_asin[task.answer].price][:4]
        if len(steps) >= 2:
            assert goal.price_upper in steps[1:]  # the larger of two distinct steps drawn
            assert goal.instruction.endswith(f", and price lower than {goal.price_upper:.2f} dollars")
        else:
            assert goal.price_upper == NO_PRICE_LIMIT and "price lower than" not in goal.instruction


def test_goals_come_in_webshops_shuffled_order(files: dict[str, Path], products: list[Product]) -> None:
    tasks = load_original_goals(products, instructions_path=files["attributes"])
    # In WebShop's order before the shuffle: products in file order, groups by name, values as listed.
    made = [(SHOES, c, s) for c in ("navy | white", "black") for s in ("8", "9")]
    made += [(HAIR, c, None) for c in ("natural black", "dark brown")] + [(LAMP, None, None)]
    order = list(range(len(made)))
    random.Random(SHUFFLE_SEED).shuffle(order)  # as WebShop's server shuffles its goal list
    options = [t.metadata["goal"]["options"] for t in tasks]
    assert [(t.answer, o.get("color"), o.get("size")) for t, o in zip(tasks, options, strict=True)] == [
        made[i] for i in order
    ]
    assert {t.metadata["original_split"] for t in tasks} == {"test"}  # indices below 500


def test_goals_are_the_same_for_a_seed_and_limit_takes_a_prefix(
    files: dict[str, Path], products: list[Product]
) -> None:
    def lines(seed: int, limit: int | None = None) -> list[str]:
        tasks = load_original_goals(products, instructions_path=files["attributes"], seed=seed, limit=limit)
        return [t.to_json() for t in tasks]

    assert lines(3) == lines(3)
    assert lines(3, limit=2) == lines(3)[:2]
    assert len({tuple(lines(seed)) for seed in range(6)}) > 1  # the price limits follow the seed


def test_every_goal_scores_one_with_the_grader(files: dict[str, Path], products: list[Product]) -> None:
    by_asin = _by_asin(products)
    tasks = load_original_goals(products, instructions_path=files["human"], human=True)
    tasks += load_original_goals(products, instructions_path=files["attributes"])
    for task in (t for t in tasks if not t.metadata["unmatched_options"]):
        goal, target = Goal.from_dict(task.metadata["goal"]), by_asin[task.answer]
        purchase = Purchase(asin=target.asin, options=dict(goal.options), price=target.price)
        assert webshop_score(goal, target, purchase).value == 1.0, task.prompt


def test_cli_writes_a_catalogue_and_tasks_the_shop_loads(files: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "out"
    argv = ["--items", str(files["items"]), "--attributes", str(files["attributes"]),
            "--instructions", str(files["human"]), "--human", "--seed", "1", "--out", str(out)]
    assert main(argv) == 0
    products = load_original_products(files["items"], files["attributes"], seed=1)
    assert load_catalogue(out / "catalogue.jsonl") == products
    lines = (out / "tasks.jsonl").read_text(encoding="utf-8").splitlines()
    tasks = load_original_goals(products, instructions_path=files["human"], human=True, seed=1)
    assert [Task.from_dict(json.loads(line)) for line in lines] == tasks


def test_cli_reports_a_wrong_file_without_a_traceback(
    files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--items", str(files["attributes"]), "--out", str(tmp_path / "out")])
    assert exit_info.value.code == 2
    assert "expected a JSON list of WebShop products" in capsys.readouterr().err


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """2,500 items in WebShop's formats, copied from the bundled catalogue."""
    return write_original_format(tmp_path_factory.mktemp("webshop-format"), load_catalogue(DEFAULT_CATALOGUE), 2_500)


@pytest.mark.parametrize(("instructions", "human"), [("attributes", False), ("human", True)])
def test_the_streamed_conversion_is_what_the_whole_file_loaders_make(
    written: dict[str, Path], tmp_path: Path, instructions: str, human: bool
) -> None:
    counts = convert_original(tmp_path, written["items"], written["attributes"], written[instructions], human=human,
                              seed=3)
    products = load_original_products(written["items"], written["attributes"], seed=3)
    tasks = load_original_goals(products, instructions_path=written[instructions], human=human, seed=3)
    assert counts == (2_500, len(tasks)) and len(tasks) >= 25
    assert load_catalogue(tmp_path / "catalogue.jsonl") == products
    assert read_tasks(tmp_path / "tasks.jsonl") == tasks


def test_the_conversion_memory_grows_far_slower_than_the_file(tmp_path: Path) -> None:
    # the whole-file loader held the parsed file and every product (139 MB peak for 5,000 products); streamed,
    # only each asin's id and attributes remain: about 230 bytes an item (an item of the file is about 1,100)
    catalogue = load_catalogue(DEFAULT_CATALOGUE)
    peaks, sizes = [], []
    for count in (2_000, 8_000):
        files = write_original_format(tmp_path / str(count), catalogue, count)
        tracemalloc.start()
        try:
            convert_original(tmp_path / f"out-{count}", files["items"], files["attributes"])
            peaks.append(tracemalloc.get_traced_memory()[1])
        finally:
            tracemalloc.stop()
        sizes.append(files["items"].stat().st_size)
    assert (peaks[1] - peaks[0]) / 6_000 < 400 and peaks[1] < sizes[1] / 2, (peaks, sizes)
