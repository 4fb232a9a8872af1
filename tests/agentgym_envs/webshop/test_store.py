"""The shop's on-disk store ranks as bm25s's own index over the same documents and gives the products back."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from agentgym_envs.errors import EnvConfigError
from agentgym_envs.search.retriever import BM25Retriever, bm25_scores
from agentgym_envs.webshop.store import DATABASE_NAME, META_NAME, TOKEN_IDS_NAME, ShopStore, product_document
from tasks.webshop import Product, generate_catalogue

CATALOGUE = [*generate_catalogue(0), Product(asin="B999999999", title="Plain Test Mug", category=("Home", "Mugs"),
                                             product_type="mug", query="mug", price=5.0, price_range=(4.0, 6.5))]
QUERIES = ["navy henley", "home kitchen", "gluten free pretzels sea salt", "mug", "lavender face serum travel",
           "the", "zzz unknown words", "slim fit machine wash red large", "Kelvaro Classic"]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> ShopStore:
    return ShopStore.open(CATALOGUE, index_dir=tmp_path_factory.mktemp("store") / "shop")


def write_jsonl(path: Path, products: list[Product]) -> Path:
    path.write_text("".join(json.dumps(p.to_dict(), ensure_ascii=False) + "\n" for p in products), encoding="utf-8")
    return path


def test_scores_are_those_of_bm25s_indexing_the_token_lists_itself(store, tmp_path):
    # The Search env's retriever hands bm25s the token lists of the same documents; the store streams ids.
    reference = BM25Retriever([product_document(p) for p in CATALOGUE], index_dir=tmp_path / "reference")
    for query in QUERIES:
        assert store.search(query, 50) == tuple(asin for asin, _ in reference.rank(query, 50)), query
        ours, theirs = (sorted({index.vocab_dict[t] for t in reference.tokenizer(query) if t in index.vocab_dict})
                        for index in (store._index(), reference._index()))
        if theirs:
            assert np.array_equal(bm25_scores(store._index(), ours), bm25_scores(reference._index(), theirs))
    assert store.search("the", 10) == () and store.search("zzz unknown words", 10) == ()


def test_products_come_back_whole_and_unknown_asins_are_none(store):
    assert len(store) == len(CATALOGUE)
    for product in CATALOGUE[::7]:
        assert store.product(product.asin) == product
    assert store.product("B000000000-nope") is None


def test_a_jsonl_file_gives_the_same_store_as_the_products(store, tmp_path):
    path = write_jsonl(tmp_path / "catalogue.jsonl", CATALOGUE)
    from_file = ShopStore.open(path, index_dir=tmp_path / "from-file")
    assert from_file.key == store.key
    assert [from_file.search(q, 50) for q in QUERIES] == [store.search(q, 50) for q in QUERIES]
    names = {p.name for p in (tmp_path / "from-file").iterdir()}
    assert {DATABASE_NAME, META_NAME} <= names and TOKEN_IDS_NAME not in names  # the spill file of token ids is gone
    again = ShopStore.open(path, index_dir=tmp_path / "from-file")  # opened, not rebuilt
    assert again.product(CATALOGUE[3].asin) == CATALOGUE[3]


def test_an_index_dir_of_another_catalogue_is_refused(store, tmp_path):
    with pytest.raises(EnvConfigError, match="holds the store of another catalogue"):
        ShopStore.open(CATALOGUE[:5], index_dir=store.folder)
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("mine")
    with pytest.raises(EnvConfigError, match="holding other files"):
        ShopStore.open(CATALOGUE[:5], index_dir=tmp_path / "other")


@pytest.mark.parametrize(("lines", "message"), [
    ([], "expected at least one product, got none"),
    ([CATALOGUE[0].to_dict(), {"asin": "B1"}], r"catalogue.jsonl:2: expected a product"),
    ([CATALOGUE[0].to_dict(), CATALOGUE[1].to_dict(), CATALOGUE[0].to_dict()],
     f"expected unique ASINs, got products sharing {CATALOGUE[0].asin}"),
])
def test_a_broken_catalogue_is_named_and_leaves_no_store(tmp_path, lines, message):
    path = tmp_path / "catalogue.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    with pytest.raises(EnvConfigError, match=message):
        ShopStore.open(path, index_dir=tmp_path / "shop")
    assert not (tmp_path / "shop").exists() and [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_a_missing_file_is_named(tmp_path):
    with pytest.raises(EnvConfigError, match="which does not exist"):
        ShopStore.open(tmp_path / "missing.jsonl", index_dir=tmp_path / "shop")


def test_a_closed_store_says_so(tmp_path):
    closed = ShopStore.open(CATALOGUE[:3], index_dir=tmp_path / "shop")
    closed.close()
    closed.close()
    with pytest.raises(EnvConfigError, match="closed"):
        closed.search("henley", 5)


def test_listings_are_what_a_results_page_shows_in_the_order_asked(store):
    asked = [CATALOGUE[-1].asin, "B-not-in-the-shop", CATALOGUE[2].asin]
    assert [(x.asin, x.title, x.price, x.price_range) for x in store.listings(asked)] == [
        (p.asin, p.title, p.price, p.price_range) for p in (CATALOGUE[-1], CATALOGUE[2])]
    assert store.listings([CATALOGUE[-1].asin])[0].price_range == (4.0, 6.5)
    assert store.listings([]) == []


def test_a_build_says_so_on_stderr_and_an_open_is_silent(tmp_path, capsys):
    ShopStore.open(CATALOGUE[:20], index_dir=tmp_path / "shop").close()
    lines = capsys.readouterr().err.splitlines()
    assert lines[0] == (f"building the shop's product store and BM25 index in {tmp_path / 'shop'} (once; later runs "
                        "open it) ...")
    assert " done in " in lines[-1]
    ShopStore.open(CATALOGUE[:20], index_dir=tmp_path / "shop").close()
    assert capsys.readouterr().err == ""


def test_a_server_process_building_its_store_passes_the_progress_lines_on(tmp_path, capfd):
    """The env's own shop server builds in a child process: its progress lines reach this process's stderr."""
    from agentgym_envs.webshop import ShopServer

    catalogue = write_jsonl(tmp_path / "products.jsonl", CATALOGUE[:20])
    with ShopServer(str(catalogue), index_dir=tmp_path / "shop"):
        pass
    err = capfd.readouterr().err
    assert f"building the shop's product store and BM25 index in {tmp_path / 'shop'}" in err and " done in " in err


def test_a_second_builder_waits_for_the_first_and_says_so(tmp_path, capsys):
    # servers started together: one builds, the others report that they wait (a silent one would look hung)
    import threading

    from tasks.locks import file_lock, lock_path

    holding, release = threading.Event(), threading.Event()

    def first() -> None:
        with file_lock(lock_path(tmp_path / "shop")):
            holding.set()
            release.wait(5)

    thread = threading.Thread(target=first)
    thread.start()
    holding.wait(5)
    threading.Timer(0.3, release.set).start()
    opened = ShopStore.open(CATALOGUE[:3], index_dir=tmp_path / "shop")
    thread.join()
    assert len(opened) == 3
    assert f"waiting for another process to build the shop's store in {tmp_path / 'shop'}" in capsys.readouterr().err
