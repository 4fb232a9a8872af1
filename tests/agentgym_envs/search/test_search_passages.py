"""Pages and snippets: deterministic, bounded, cut at natural breaks."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from agentgym_envs.search import Tokenizer, best_passage, paginate

TEXT = " ".join(f"Sentence number {n} talks about topic{n}." for n in range(200))


def test_pages_cover_the_text_in_order_within_the_limit():
    pages = paginate(TEXT, 500)
    assert all(len(page) <= 500 for page in pages)
    assert " ".join(pages) == TEXT  # breaks fall on spaces: nothing lost, nothing added
    assert all(page.endswith(".") for page in pages)  # cut at sentence ends


@pytest.mark.parametrize(("text", "limit", "expected"), [
    ("", 100, [""]),                                        # an empty article has one empty page
    ("short", 100, ["short"]),                              # fits on one page
    ("First paragraph. It ends.\n\nSecond. More", 32, ["First paragraph. It ends.", "Second. More"]),  # a paragraph
    ("Short one.\n\nThe first sentence. Then more", 32, ["Short one.\n\nThe first sentence.", "Then more"]),
    ("x" * 25, 10, ["x" * 10, "x" * 10, "x" * 5]),          # no break at all: hard cuts
])
def test_page_breaks(text, limit, expected):
    assert paginate(text, limit) == expected


def test_passage_prefers_the_window_with_the_rarest_terms():
    tokenize = Tokenizer().find
    text = "The mill is old. " * 30 + "The mill burned in 1533 after a flood. " + "The mill is old. " * 30
    passage = best_passage(text, {"mill": 0.1, "1533": 3.0, "flood": 2.0}, tokenize, width=120)
    assert "1533" in passage and "flood" in passage
    assert passage.startswith("…") and passage.endswith("…")
    assert len(passage) <= 124


def test_a_single_long_sentence_is_cut_around_the_match():
    text = " ".join(["filler"] * 200 + ["Zanzibar"] + ["filler"] * 200)
    passage = best_passage(text, {"zanzibar": 1.0}, Tokenizer().find, width=100)
    assert "Zanzibar" in passage and len(passage) <= 104


def test_words_are_matched_in_their_sentence():
    text = "Alpha beta. Gamma delta. Epsilon zeta."
    assert best_passage(text, {"gamma": 1.0}, width=12) == "… Gamma delta. …"
    assert best_passage(text, {"alpha": 1.0, "zeta": 1.0}, width=100) == text  # everything fits
    assert best_passage(text, {"omega": 1.0}, width=12) == "Alpha beta. …"  # no match: the lead
    assert best_passage("", {"alpha": 1.0}) == ""


def test_tokenizer_positions_agree_with_its_tokens():
    tokenizer = Tokenizer()
    text = "The Founders of MARROWICK founded it; they were founding fathers."
    positions = tokenizer.positions(text)
    assert [token for _, token in positions] == tokenizer(text)
    assert all(text[offset:].lower().startswith(token[:3]) for offset, token in positions)
    wanted = {"founder", "found", "marrowick"}
    assert tokenizer.find(text, wanted) == [(o, t) for o, t in positions if t in wanted]
    assert tokenizer.find("İstanbul was FOUNDED", {"found"}) == [(13, "found")]  # lower() lengthens İ


FIRST_OBSERVATIONS = """
import hashlib, gymnasium as gym, agentgym_envs
from tasks import load_split
env = gym.make("agentrl/Search-v0", split="train")
digest = hashlib.sha256()
for task in load_split("Search", "train")[:40]:
    env.reset(seed=0, options={"task": task})
    action = '<tool_call>{"name": "search", "arguments": {"query": "%s"}}</tool_call>' % task.prompt.replace('"', "")
    digest.update(env.step(action)[0].encode())
print(digest.hexdigest())
"""


def test_snippets_are_the_same_in_every_process_whatever_its_hash_seed():
    # a float sum over a set of terms depends on the set's order, which depends on PYTHONHASHSEED; before the sum
    # was exact, four hash seeds gave four different digests of these observations
    digests = {subprocess.run([sys.executable, "-c", FIRST_OBSERVATIONS], capture_output=True, text=True, check=True,
                              env={**os.environ, "PYTHONHASHSEED": str(seed)}).stdout for seed in (1, 2, 3)}
    assert len(digests) == 1
