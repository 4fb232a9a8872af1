"""A short pretraining of the tiny model on echoing text: it learns to copy before it learns to act.

A model built from a config knows nothing; the first skill an agent needs is to copy: an entity name
from the question into a search query, a value from a tool result into the answer. Learning that from a
few thousand demonstrations is slow, so the tiny model first learns it on an echo task: plain text
holding a sentence twice, with the loss on the repeat only. The sentences come from the
encyclopedia of a *different* generated world than the bundled one, so no fact the agent is later asked
about is seen here. The result is cached next to the tiny model and reused.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from trainers.tiny_model import TinyModelConfig, default_model_dir, load_or_build_tiny_model, save_model_folder

PRETRAIN_WORLD_SEED = 9001
"""Seed of the world whose articles are echoed (the bundled world uses another seed)."""
ECHO_FORMAT = 2
"""Version of the echo text format (part of the cache folder's name)."""


@dataclass(frozen=True)
class EchoPretraining:
    """Settings of the echo pretraining.

    Attributes:
        steps: Optimizer steps.
        batch_size: Sentences per step.
        learning_rate: AdamW learning rate.
        seed: Seed of the sentence draws.
    """

    steps: int = 600
    batch_size: int = 32
    learning_rate: float = 3e-3
    seed: int = 0


def echo_sentences(n_entities: int = 400) -> list[str]:
    """Sentences of a generated world's articles that is not the bundled one."""
    from tasks.search import generate_search_world

    world = generate_search_world(PRETRAIN_WORLD_SEED, n_entities=n_entities, n_distractors=0)
    return [sentence.strip() for document in world.documents for sentence in document.text.split(". ")
            if 15 < len(sentence) < 140]


def echo_batch(tokenizer, sentences: Sequence[str], rng: random.Random, batch_size: int):
    """Input ids, attention mask and loss mask (1 on the repeat) of ``batch_size`` echo texts.

    Plain text, no chat turns: ``sentence\nsentence``, so that copying is learned without teaching the
    assistant turn to repeat the user (which would fight the agent's demonstrations later).
    """
    import torch

    rows, masks = [], []
    for sentence in rng.choices(sentences, k=batch_size):
        first = tokenizer.encode(sentence + "\n", add_special_tokens=False)
        repeat = [*tokenizer.encode(sentence, add_special_tokens=False), tokenizer.eos_token_id]
        rows.append(first + repeat)
        masks.append([0] * len(first) + [1] * len(repeat))
    width = max(len(row) for row in rows)
    input_ids = torch.full((batch_size, width), tokenizer.pad_token_id)
    attention = torch.zeros((batch_size, width), dtype=torch.long)
    loss_mask = torch.zeros((batch_size, width))
    for index, (row, mask) in enumerate(zip(rows, masks, strict=True)):
        input_ids[index, :len(row)] = torch.tensor(row)
        attention[index, :len(row)] = 1
        loss_mask[index, :len(row)] = torch.tensor(mask, dtype=torch.float)
    return input_ids, attention, loss_mask


def pretrain_echo(model, tokenizer, settings: EchoPretraining, *, progress: bool = False) -> list[float]:
    """Train ``model`` in place on the echo task; returns the copy accuracy every 50 steps."""
    import torch
    from rich.progress import Progress

    rng, sentences = random.Random(settings.seed), echo_sentences()
    optimizer = torch.optim.AdamW(model.parameters(), lr=settings.learning_rate, weight_decay=0.0)
    accuracies = []
    model.train()
    with Progress(disable=not progress, transient=True) as bar:
        task = bar.add_task("echo pretraining", total=settings.steps)
        for step in range(settings.steps):
            input_ids, attention, loss_mask = echo_batch(tokenizer, sentences, rng, settings.batch_size)
            logits = model(input_ids=input_ids, attention_mask=attention).logits[:, :-1]
            targets, mask = input_ids[:, 1:], loss_mask[:, 1:]
            logps = logits.log_softmax(-1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)
            loss = -(logps * mask).sum() / mask.sum()
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            if step % 50 == 0 or step == settings.steps - 1:
                accuracies.append(float(((logits.argmax(-1) == targets).float() * mask).sum() / mask.sum()))
            bar.advance(task)
    return accuracies


def load_or_build_pretrained(config: TinyModelConfig | None = None, settings: EchoPretraining | None = None,
                             *, progress: bool = False):
    """The tiny model after echo pretraining, built and saved the first time, then reused.

    Returns:
        ``(model, tokenizer)``.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    config, settings = config or TinyModelConfig(), settings or EchoPretraining()
    base = default_model_dir(config)
    directory = base.with_name(f"{base.name}-echo{ECHO_FORMAT}-{settings.steps}x{settings.batch_size}-s{settings.seed}")
    if not (directory / "config.json").exists():
        model, tokenizer = load_or_build_tiny_model(config)
        pretrain_echo(model, tokenizer, settings, progress=progress)
        save_model_folder(model, tokenizer, directory)
    return AutoModelForCausalLM.from_pretrained(directory), AutoTokenizer.from_pretrained(directory)

