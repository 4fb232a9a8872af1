"""TransformersGenerator's own decode loop: equal to ``model.generate``, exact prefix reuse, seeded rows."""

from __future__ import annotations

import pytest
import torch

from trainers.generation import TransformersGenerator
from trainers.tiny_model import load_or_build_tiny_model

pytestmark = pytest.mark.usefixtures("one_torch_thread")

LENGTHS = (5, 23, 40, 11)
"""Context lengths of the ragged batches."""
SEEDS = [11, 12, 13, 14]


@pytest.fixture(scope="module")
def tiny():
    return load_or_build_tiny_model()


@pytest.fixture(scope="module")
def contexts() -> list[list[int]]:
    rng = torch.Generator().manual_seed(0)
    return [torch.randint(10, 8000, (n,), generator=rng).tolist() for n in LENGTHS]


def greedy(generator, contexts, limit=10, **kwargs):
    return generator.generate(contexts, [limit] * len(contexts), stop_token_ids=[-1], temperature=0, top_p=1.0,
                              **kwargs)


def sample(generator, contexts, limit=10, **kwargs):
    return generator.generate(contexts, [limit] * len(contexts), stop_token_ids=[-1], temperature=1.0, top_p=1.0,
                              **kwargs)


def assert_same_turns(turns, expected):
    for turn, other in zip(turns, expected, strict=True):
        assert turn.ids == other.ids
        torch.testing.assert_close(torch.tensor(turn.logprobs), torch.tensor(other.logprobs), atol=1e-4, rtol=0)


def test_greedy_turns_equal_those_of_model_generate_on_a_ragged_batch(tiny, contexts):
    model, tokenizer = tiny
    width = max(LENGTHS)
    input_ids = torch.full((len(contexts), width), tokenizer.pad_token_id)
    attention = torch.zeros((len(contexts), width), dtype=torch.long)
    for row, ids in enumerate(contexts):
        input_ids[row, width - len(ids):], attention[row, width - len(ids):] = torch.tensor(ids), 1
    with torch.no_grad():
        output = model.generate(input_ids=input_ids, attention_mask=attention, max_new_tokens=10, do_sample=False,
                                temperature=None, top_p=None, top_k=None, pad_token_id=tokenizer.pad_token_id,
                                eos_token_id=[-1], return_dict_in_generate=True, output_logits=True)
    expected_ids = output.sequences[:, width:]
    expected_logprobs = torch.stack(output.logits, 1).log_softmax(-1).gather(-1, expected_ids[..., None])[..., 0]

    turns = greedy(TransformersGenerator(model, tokenizer.pad_token_id), contexts)

    assert [turn.ids for turn in turns] == expected_ids.tolist()
    torch.testing.assert_close(torch.tensor([turn.logprobs for turn in turns]), expected_logprobs, atol=1e-4, rtol=0)


def next_contexts(contexts, turns):
    """Each context, its turn, then a few ids of template and observation (a different count per row)."""
    return [context + turn.ids + list(range(100, 100 + 3 * row + 1))
            for row, (context, turn) in enumerate(zip(contexts, turns, strict=True))]


def test_a_turn_continued_from_the_cached_prefix_equals_one_computed_from_scratch(tiny, contexts):
    model, tokenizer = tiny
    cached = TransformersGenerator(model, tokenizer.pad_token_id)
    cold = TransformersGenerator(model, tokenizer.pad_token_id, cache_prefixes=False)
    keys = ["a", "b", "c", "d"]
    # ragged limits: rows finish at different steps and leave the batch early, their caches kept as they go
    first = cached.generate(contexts, [10, 3, 6, 1], stop_token_ids=[-1], temperature=1.0, top_p=1.0, keys=keys,
                            seeds=SEEDS)
    assert [len(turn.ids) for turn in first] == [10, 3, 6, 1]
    assert cached.fed_tokens == sum(LENGTHS) + (9 + 2 + 5 + 0)  # a finished row is fed no further token
    assert cached.cached_tokens == sum(len(c) + len(t.ids) - 1 for c, t in zip(contexts, first, strict=True))
    second_contexts = next_contexts(contexts, first)
    fed_before = cached.fed_tokens

    second = sample(cached, second_contexts, keys=keys, seeds=SEEDS)

    assert_same_turns(second, sample(cold, second_contexts, keys=keys, seeds=SEEDS))
    new_ids = sum(len(c) for c in second_contexts) - cached.reused_tokens
    assert cached.reused_tokens == sum(len(c) + len(t.ids) - 1 for c, t in zip(contexts, first, strict=True))
    # the second turn fed only what the caches did not hold (and its decode steps), not the whole contexts
    assert cached.fed_tokens - fed_before == new_ids + 9 * len(contexts)
    assert cold.fed_tokens == sum(len(c) for c in second_contexts) + 9 * len(contexts)


def test_a_context_that_does_not_extend_the_cached_prefix_is_computed_from_scratch(tiny, contexts):
    model, tokenizer = tiny
    cached = TransformersGenerator(model, tokenizer.pad_token_id)
    cold = TransformersGenerator(model, tokenizer.pad_token_id, cache_prefixes=False)
    keys = ["a", "b", "c", "d"]
    first = sample(cached, contexts, keys=keys, seeds=SEEDS)
    changed = next_contexts(contexts, first)
    changed[2][1] += 1  # an edited history: the cache of "c" no longer matches
    reused_before = cached.reused_tokens

    turns = sample(cached, changed, keys=keys, seeds=SEEDS)

    assert_same_turns(turns, sample(cold, changed, seeds=SEEDS))
    assert cached.reused_tokens - reused_before == sum(
        len(c) + len(t.ids) - 1 for row, (c, t) in enumerate(zip(contexts, first, strict=True)) if row != 2)


def test_caches_are_dropped_when_the_weights_change(tiny, contexts):
    model, tokenizer = tiny
    cached = TransformersGenerator(model, tokenizer.pad_token_id)
    first = greedy(cached, contexts, keys=["a", "b", "c", "d"])
    with torch.no_grad():
        model.model.norm.weight.mul_(1.0)  # an in-place update, as an optimizer step makes

    greedy(cached, next_contexts(contexts, first), keys=["a", "b", "c", "d"])

    assert cached.reused_tokens == 0


def test_a_seeded_row_is_the_same_alone_and_in_any_batch(tiny, contexts):
    model, tokenizer = tiny
    generator = TransformersGenerator(model, tokenizer.pad_token_id)
    alone = sample(generator, contexts[1:2], seeds=[7])[0]
    in_batch = sample(generator, [contexts[0], contexts[2], contexts[1]], seeds=[1, 2, 7])[2]
    in_other_batch = sample(generator, [contexts[3], contexts[1]], seeds=[7, 7])[1]

    assert alone.ids == in_batch.ids == in_other_batch.ids
    torch.testing.assert_close(torch.tensor(in_batch.logprobs), torch.tensor(alone.logprobs), atol=1e-4, rtol=0)
    others = {tuple(sample(generator, contexts[1:2], seeds=[seed])[0].ids) for seed in range(8, 12)}
    assert len(others | {tuple(alone.ids)}) > 2


def test_without_seeds_torch_manual_seed_makes_sampling_reproducible(tiny, contexts):
    model, tokenizer = tiny
    generator = TransformersGenerator(model, tokenizer.pad_token_id)
    torch.manual_seed(3)
    first = sample(generator, contexts)
    torch.manual_seed(3)
    second = sample(generator, contexts)
    torch.manual_seed(4)
    third = sample(generator, contexts)

    assert [t.ids for t in first] == [t.ids for t in second]
    assert [t.ids for t in first] != [t.ids for t in third]


@pytest.mark.parametrize("top_p", [1.0, 0.8])
def test_sampled_logprobs_are_those_of_a_full_forward_pass_at_the_temperature(tiny, contexts, top_p):
    model, tokenizer = tiny
    temperature = 0.7
    turns = TransformersGenerator(model, tokenizer.pad_token_id).generate(
        contexts, [10] * len(contexts), stop_token_ids=[-1], temperature=temperature, top_p=top_p,
        seeds=[0, 1, 2, 3])
    for context, turn in zip(contexts, turns, strict=True):
        with torch.no_grad():
            logits = model(input_ids=torch.tensor([context + turn.ids])).logits[0, len(context) - 1:-1]
        expected = (logits / temperature).log_softmax(-1).gather(-1, torch.tensor(turn.ids)[:, None])[:, 0]
        torch.testing.assert_close(torch.tensor(turn.logprobs), expected, atol=1e-4, rtol=0)


def test_top_p_samples_only_from_the_nucleus(tiny, contexts):
    model, tokenizer = tiny
    top_p = 0.3
    turns = TransformersGenerator(model, tokenizer.pad_token_id).generate(
        contexts, [10] * len(contexts), stop_token_ids=[-1], temperature=1.0, top_p=top_p, seeds=[0, 1, 2, 3])
    for context, turn in zip(contexts, turns, strict=True):
        with torch.no_grad():
            logits = model(input_ids=torch.tensor([context + turn.ids])).logits[0, len(context) - 1:-1]
        probs, order = logits.softmax(-1).sort(dim=-1, descending=True)
        in_nucleus = (probs.cumsum(-1) - probs) < top_p
        for step, token in enumerate(turn.ids):
            nucleus = order[step][in_nucleus[step]]
            assert len(nucleus) < logits.shape[-1] // 4 and token in nucleus.tolist()


def test_turns_end_at_a_stop_id_or_their_own_limit(tiny, contexts):
    model, tokenizer = tiny
    generator = TransformersGenerator(model, tokenizer.pad_token_id)
    seeds = [0, 1, 2, 3]
    free = sample(generator, contexts, limit=12, seeds=seeds)
    stop = free[0].ids[4]
    limits = [12, 3, 12, 7]

    turns = generator.generate(contexts, limits, stop_token_ids=[stop], temperature=1.0, top_p=1.0, seeds=seeds)

    ends = [expected.ids.index(stop) + 1 if stop in expected.ids[:limit] else limit
            for expected, limit in zip(free, limits, strict=True)]
    assert ends[0] <= 5 and ends[1] == 3  # one row cut by the stop id, one by its own limit
    for turn, expected, end in zip(turns, free, ends, strict=True):
        assert turn.ids == expected.ids[:end]
        assert turn.logprobs == pytest.approx(expected.logprobs[:end], abs=1e-4)


def test_release_forgets_the_keys_cache(tiny, contexts):
    model, tokenizer = tiny
    generator = TransformersGenerator(model, tokenizer.pad_token_id)
    first = greedy(generator, contexts[:2], keys=["a", "b"])

    generator.release(["a", "unknown"])

    assert generator.cached_keys() == {"b"}
    assert generator.cached_tokens == len(contexts[1]) + len(first[1].ids) - 1
    greedy(generator, next_contexts(contexts[:2], first), keys=["a", "b"])
    assert generator.reused_tokens == len(contexts[1]) + len(first[1].ids) - 1


def test_the_model_is_left_in_the_mode_it_was_in(tiny, contexts):
    model, tokenizer = tiny
    model.train()
    greedy(TransformersGenerator(model, tokenizer.pad_token_id), contexts[:1])
    assert model.training
    model.eval()
