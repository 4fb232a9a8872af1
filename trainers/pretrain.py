"""A short pretraining of the tiny model on echoing text: it learns to copy before it learns to act.

A model built from a config knows nothing; the first skill an agent needs is to copy: an entity name
from the question into a search query, a value from a tool result into the answer. Learning that from a
few thousand demonstrations is slow, so the tiny model first learns it on an echo task: plain text
holding a sequence twice, with the loss on the repeat only, then on report drills. Four phases:

1. random token strings: nothing but copying can predict the repeat, so the copy circuit (an induction
   head) forms;
2. sentences of the encyclopedia of a *different* generated world than the bundled one (no fact the
   agent is later asked about is seen here), a quarter of their tokens swapped for random ones;
3. lines of random numbers (:func:`number_echo_batch`): numbers are made of a few hundred digit tokens, so a
   token recurs within a text and copying it takes more than the last token as a cue;
4. report drills (:func:`report_batch`): agent episodes of random content whose answer repeats the last
   line of the tool result. Echo copies a span that follows a copy of its context; the answer has no
   such cue (nothing before ``<answer>`` matches what precedes the result), and 1,200 demonstrations
   do not teach it: without the drills, the SFT models' programs printed the right answer in 33-38% of
   held-out episodes, but they answered with digits of their own (success 0 for seeds 0 and 1); with
   the drills greedy success was 0.83 and 0.79 (on an earlier build).

**Targets, not step counts.** Phases 1 and 4 each learn their skill in a sudden transition whose step moves with the
draws, and with the floating-point rounding of the machine (torch's own kernels, MKL's and oneDNN's each round
differently by instruction set and processor, as do different thread counts). Fixed step counts made the outcome a
matter of luck: with the drills at lr 1e-3 for 1,000 steps, seed 1 built a good model on the machine it was checked
on and a useless one (drill accuracy 0.21) on an AVX512 machine. So each of those phases now trains until its
accuracy over the last ``window`` steps reaches its target (0.95 for random strings, 0.9 for the drills' number
answers), within a budget (5,000 and 6,000 steps); one that spends its budget stops the build with
:class:`PretrainingError`, saving nothing. A budget stops only a build that would miss (a phase that reaches its
target stops at the same step with any budget), so the budgets sit above the slowest builds measured: 1,237 steps
for random strings but one seed of 2,857 (AVX512 seed 5, which a budget of 2,000 stopped at 0.860, still rising),
and 2,439 for the drills (default seed 4). **Drills that stall start the build again.** Every other build had ended
its drills by step 1,000 or stood at 0.5 or more there (the slowest climbed from about 0.2: default seed 4 0.54 at
step 994, AVX2 seed 4 0.52 at 1,006, default seed 3 0.76 at 1,022), while AVX512 seed 5's stayed at 0.19-0.22 for
1,200 steps and stood at 0.36 after 3,453. So drills below 0.3 at step 1,000 have not begun to learn: that attempt
is dropped, and the build starts again from the untrained model with new draws (:func:`draws`; at most
``attempts``). AVX512 seed 5 stalled at 0.219 and its second attempt reached every target (drills 387 steps). A
build whose drills do not stall is the same bits with or without the rule. The drills run at lr 3e-3 (from the same
phase-2 model, lr 1e-3 sat at 0.22 for 800 steps, lr 3e-3 crossed 0.9 after 386) with AdamW's beta2 at 0.95. Their
target counts the number answers: the answers of random tokens are learned in a second jump whose step moves
chaotically with the draws and the rounding, and a target on all answers made some builds miss (AVX512 seeds 1 and 2
under format 7). The number answers crawled too, from some phase-2 models (AVX512 seed 4 of format 8: 0.514 after
3,000 steps), until the number phase came before the drills: from that phase-2 model the drills stood at 0.19 after
200 steps without it and reached 0.9 in 203 steps after it (on the same draws), and the whole build of seed 4 now
reaches the target in 913 drill steps. Known problem: over the builds that reached in one attempt the drills take
from 28 to 2,439 steps and random strings from 631 to 1,237 (2,857 in seed 5's stalled first attempt), and a stall
costs its attempt: a slow build makes a slow main job. Builds over seeds, kernel paths and thread counts: ``python
-m benchmarks.pretraining``; measured in ``docs/pretraining.md``.

**Reproducibility.** A build draws its random tokens from a sorted list (the vocabulary's own order
changes from process to process) and runs on one torch thread, so the same settings give the same model on
any core count of one machine; another kernel path or processor gives another model.

Echoing plain sentences alone teaches a model to copy the tokens those sentences hold, and the bundled
world's names are tokens they never hold. Measured with :func:`copy_accuracy` on the bundled world's
sentences (``python -m trainers.pretrain``): 600 steps of plain sentences copy 0.84 of all tokens but
none of the never-echoed ones; the two echo phases 0.975 and 0.90. The report drills lower that plain
echo again (0.36 and 0.24 for a drilled model of an earlier format; 0.002 for format 9's AVX512 seed 4): what
the agent needs afterwards is the drills' copy, not the echo's. The output head runs only where the loss looks
(a third of the step time of a full-vocabulary head). The result is cached next to the tiny model and reused.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import random
import sys
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tasks.locks import file_lock, lock_path
from trainers.tiny_model import TinyModelConfig, default_model_dir, load_or_build_tiny_model, save_model_folder

PRETRAIN_WORLD_SEED = 9001
"""Seed of the world whose articles are echoed (the bundled world uses another seed)."""
ECHO_FORMAT = 9
"""Version of the echo curriculum (part of the cache folder's name)."""


@dataclass(frozen=True)
class EchoPretraining:
    """Settings of the echo pretraining.

    Each phase with a target trains until its accuracy (the mean over the last ``window`` steps, on fresh
    draws every step) reaches the target, within a budget of steps; a phase that spends its budget below
    its target raises :class:`PretrainingError`.

    Attributes:
        random_target: Copy accuracy on random token strings that ends phase 1.
        random_max_steps: Most optimizer steps of phase 1.
        sentence_steps: Optimizer steps on sentences with substituted tokens (phase 2; no target: it adds the
            text's own tokens to a copy that phase 1 made).
        number_steps: Optimizer steps on lines of random numbers (phase 3; no target: it teaches copying a
            sequence whose tokens repeat, as the digit tokens of numbers do).
        report_target: Accuracy on the drills whose answer is a number that ends phase 4.
        report_max_steps: Most optimizer steps of phase 4.
        window: Last steps each phase's accuracy is averaged over.
        batch_size: Sequences per step.
        learning_rate: AdamW learning rate of phase 1.
        sentence_learning_rate: AdamW learning rate of phase 2.
        number_learning_rate: AdamW learning rate of phase 3.
        report_learning_rate: AdamW learning rate of phase 4.
        report_beta2: AdamW's second-moment decay in phase 4 (the other phases keep torch's 0.999).
        report_stall_steps: Step of phase 4 at which its accuracy must stand at ``report_stall_accuracy`` or
            above; below it, the drills have not begun to learn, and the attempt stops there.
        report_stall_accuracy: See ``report_stall_steps``.
        attempts: Most attempts of a build. The first draws with ``seed``; an attempt whose drills stall starts
            the build again from the untrained model with the next attempt's draws (:func:`draws`).
        substitution: Share of each sentence's tokens replaced by random ordinary tokens in phase 2.
        seed: Seed of the draws. Seeds and kernel paths differ in the steps a phase takes (measured in
            ``docs/pretraining.md``); a build whose phase misses its target, or whose every attempt stalls, stops
            with :class:`PretrainingError`.
    """

    random_target: float = 0.95
    random_max_steps: int = 5000
    sentence_steps: int = 300
    number_steps: int = 300
    report_target: float = 0.9
    report_max_steps: int = 6000
    window: int = 20
    batch_size: int = 32
    learning_rate: float = 3e-3
    sentence_learning_rate: float = 1e-3
    number_learning_rate: float = 1e-3
    report_learning_rate: float = 3e-3
    report_beta2: float = 0.95
    report_stall_steps: int = 1000
    report_stall_accuracy: float = 0.3
    attempts: int = 3
    substitution: float = 0.25
    seed: int = 0

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise ValueError(f"attempts: expected at least 1, got {self.attempts}")
        for name in ("random_target", "report_target", "report_stall_accuracy"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"{name}: expected an accuracy in [0, 1], got {getattr(self, name)}")
        if self.window < 1 or min(self.random_max_steps, self.report_max_steps) < self.window:
            raise ValueError(f"window: expected 1 <= window <= every phase's step budget, got window {self.window}, "
                             f"budgets {self.random_max_steps} and {self.report_max_steps}")

    @property
    def key(self) -> str:
        """Names the settings that change the model in the cache folder's name."""
        return (f"echo{ECHO_FORMAT}-r{self.random_target:g}x{self.random_max_steps}-{self.sentence_steps}s"
                f"-{self.number_steps}n-d{self.report_target:g}x{self.report_max_steps}-w{self.window}-b{self.batch_size}"
                f"-lr{self.learning_rate:g}-{self.sentence_learning_rate:g}-{self.number_learning_rate:g}"
                f"-{self.report_learning_rate:g}"
                f"-b{self.report_beta2:g}-st{self.report_stall_accuracy:g}x{self.report_stall_steps}-a{self.attempts}"
                f"-p{self.substitution:g}-s{self.seed}")


@dataclass
class PhaseResult:
    """How one pretraining phase went.

    Attributes:
        name: The phase.
        steps: Optimizer steps it took.
        accuracy: Its accuracy over the last ``window`` steps.
        target: The accuracy that ends it (None: it runs a fixed number of steps).
        seconds: Wall-clock time it took.
        stalled: It stopped below its stall accuracy at its stall step (see :class:`Phase`).
        attempt: The build's attempt it belongs to (0: the first).
    """

    name: str
    steps: int
    accuracy: float
    target: float | None = None
    seconds: float = 0.0
    stalled: bool = False
    attempt: int = 0

    def line(self) -> str:
        """``echo pretraining, <name>: N steps, copy accuracy A (target T), S s``, and ``: stalled`` after it."""
        target = f" (target {self.target:g})" if self.target is not None else ""
        return (f"echo pretraining, {self.name}: {self.steps} steps, copy accuracy {self.accuracy:.3f}{target}, "
                f"{self.seconds:.0f} s{': stalled' if self.stalled else ''}")

    @property
    def summary(self) -> str:
        """``<name> A in N steps``, `` (stalled)`` after it."""
        return f"{self.name} {self.accuracy:.3f} in {self.steps} steps{' (stalled)' if self.stalled else ''}"

    @property
    def missed(self) -> bool:
        """It has a target and ended below it (stalled or out of budget)."""
        return self.target is not None and self.accuracy < self.target


def phases_summary(phases: Sequence[PhaseResult]) -> str:
    """Each phase's :attr:`~PhaseResult.summary`, each later attempt's first one preceded by ``attempt N:``."""
    return ", ".join(f"attempt {phase.attempt + 1}: {phase.summary}"
                     if phase.attempt and (index == 0 or phases[index - 1].attempt != phase.attempt) else phase.summary
                     for index, phase in enumerate(phases))


def last_attempt(phases: Sequence[PhaseResult]) -> list[PhaseResult]:
    """The phases of the last attempt among ``phases``."""
    last = max((phase.attempt for phase in phases), default=0)
    return [phase for phase in phases if phase.attempt == last]


class PretrainingError(RuntimeError):
    """A pretraining phase spent its step budget below its target accuracy, or every attempt's drills stalled.

    Attributes:
        phases: How each phase of each attempt went up to the failed one, which comes last.
        phase: The failed phase.
    """

    def __init__(self, phases: Sequence[PhaseResult], settings: EchoPretraining) -> None:
        self.phases, self.phase = list(phases), phases[-1]
        phase = self.phase
        if phase.stalled:
            what = (f"stood below copy accuracy {settings.report_stall_accuracy:g} after {phase.steps} steps in each "
                    f"of {settings.attempts} attempts (the last: {phase.accuracy:.3f}), expected {phase.target:g} in "
                    f"the end")
        else:
            what = (f"reached copy accuracy {phase.accuracy:.3f} after its budget of {phase.steps} steps, "
                    f"expected {phase.target:g}")
        super().__init__(
            f"echo pretraining: phase '{phase.name}' {what}. The warm start built on such a model does not learn to "
            f"answer, so the build stops here and saves nothing. What to do: build with other draws "
            f"(`python -m trainers.pretrain --seed {settings.seed + 1}`, or the main job's --pretrain_seed), or give "
            f"the phase more steps, attempts or a lower target (EchoPretraining's *_max_steps, attempts, *_target); "
            f"please report the seed, the processor, the torch version and the kernel variables set "
            f"(ATEN_CPU_CAPABILITY, MKL_ENABLE_INSTRUCTIONS, ONEDNN_MAX_CPU_ISA) with it.")


def echo_sentences(n_entities: int = 400) -> list[str]:
    """Sentences of a generated world's articles that is not the bundled one."""
    from tasks.search import generate_search_world

    return article_sentences(generate_search_world(PRETRAIN_WORLD_SEED, n_entities=n_entities, n_distractors=0))


def article_sentences(world) -> list[str]:
    """The sentences of ``world``'s articles that are neither fragments nor run-ons (15-140 characters)."""
    return [sentence.strip() for document in world.documents for sentence in document.text.split(". ")
            if 15 < len(sentence) < 140]


def echo_batch(tokenizer, sentences: Sequence[str], rng: random.Random, batch_size: int,
               substitution: float = 0.0, substitutes: Sequence[int] = ()):
    """Input ids, attention mask and loss mask (1 on the repeat) of ``batch_size`` echo texts.

    Plain text, no chat turns: ``sentence\nsentence``, so that copying is learned without teaching the
    assistant turn to repeat the user (which would fight the agent's demonstrations later). A share
    ``substitution`` of the sentence's tokens is replaced by tokens drawn from ``substitutes`` (default:
    every ordinary token): names the echoed world never uses (those of the bundled world, say) would
    otherwise keep untrained embeddings and be copied little better than chance.
    """
    if substitution and not substitutes:
        substitutes = ordinary_token_ids(tokenizer)
    newline = tokenizer.encode("\n", add_special_tokens=False)
    rows, masks = [], []
    for sentence in rng.choices(sentences, k=batch_size):
        tokens = [rng.choice(substitutes) if rng.random() < substitution else token
                  for token in tokenizer.encode(sentence, add_special_tokens=False)]
        first, repeat = tokens + newline, [*tokens, tokenizer.eos_token_id]
        rows.append(first + repeat)
        masks.append([0] * len(first) + [1] * len(repeat))
    return _padded(rows, masks, tokenizer.pad_token_id)


def number_tokens(tokenizer, rng: random.Random) -> list[int]:
    """The tokens of a random number of 1 to 16 digits (its length drawn first, so long and short ones are alike
    common)."""
    return tokenizer.encode(str(rng.randint(0, 10 ** rng.randint(1, 15))), add_special_tokens=False)


def number_echo_batch(tokenizer, rng: random.Random, batch_size: int):
    """Input ids, attention mask and loss mask (1 on the repeat) of ``batch_size`` echo texts of random numbers.

    A text is 2 to 8 random numbers (:func:`number_tokens`) joined by spaces, commas and line breaks, then a line
    break and the same numbers again. Numbers are a few hundred digit tokens, so a token of the repeat often
    occurs at several places of the first copy: copying it needs more than the last token as a cue, as a
    number in a tool result among other numbers does (what the report drills then teach).
    """
    def encode(text: str) -> list[int]:
        return tokenizer.encode(text, add_special_tokens=False)

    rows, masks = [], []
    for _ in range(batch_size):
        tokens = number_tokens(tokenizer, rng)
        for _ in range(rng.randint(1, 7)):
            tokens += encode(rng.choice([" ", "\n", ", "])) + number_tokens(tokenizer, rng)
        first, repeat = tokens + encode("\n"), [*tokens, tokenizer.eos_token_id]
        rows.append(first + repeat)
        masks.append([0] * len(first) + [1] * len(repeat))
    return _padded(rows, masks, tokenizer.pad_token_id)


def report_batch(tokenizer, rng: random.Random, batch_size: int, substitutes: Sequence[int]):
    """Input ids, attention mask, loss mask (1 on the answer) and measured mask (1 on the answer of the drills
    whose answer is a number) of ``batch_size`` report drills.

    A drill is one agent episode in the chat template with random content: a user turn and a tool call of
    random tokens and numbers, a tool result (a header line of random tokens, up to two lines of random
    tokens and numbers, then a random number, one time in five a few random tokens instead), and the answer
    ``<answer>{that last line}</answer>``. The numbers elsewhere are distractors: only the tool result's
    last line is the answer. The accuracy that ends the drills counts the number answers only: every answer of
    the main job's tasks is one (a python result's last line), and they are learned within a few hundred
    steps, while the answers of random tokens are learned in a later, sudden transition whose step moves with
    the draws (``docs/pretraining.md``).
    """
    from trainers.chat import ChatFormat

    chat = ChatFormat.from_tokenizer(tokenizer)

    def encode(text: str) -> list[int]:
        return tokenizer.encode(text, add_special_tokens=False)

    def number() -> list[int]:
        return number_tokens(tokenizer, rng)

    def mixed(shortest: int, longest: int) -> list[int]:
        return [token for _ in range(rng.randint(shortest, longest))
                for token in (number() if rng.random() < 0.3 else [rng.choice(substitutes)])]

    rows, masks, measured = [], [], []
    for _ in range(batch_size):
        is_number = rng.random() < 0.8
        value = number() if is_number else [rng.choice(substitutes) for _ in range(rng.randint(1, 4))]
        header = [rng.choice(substitutes) for _ in range(rng.randint(1, 6))]
        lines = [header + encode("\n")] + [mixed(1, 6) + encode("\n") for _ in range(rng.randint(0, 2))]
        context = (encode(chat.prompt_prefix) + mixed(5, 30) + encode(f"{chat.prompt_suffix}<tool_call>")
                   + mixed(3, 25) + encode(f"</tool_call>{chat.turn_end}{chat.tool_prefix}")
                   + [token for line in lines for token in line] + value + encode(f"{chat.tool_suffix}<answer>"))
        answer = value + encode("</answer>")
        rows.append(context + answer)
        masks.append([0] * len(context) + [1] * len(answer))
        measured.append([0] * len(context) + [int(is_number)] * len(answer))
    return (*_padded(rows, masks, tokenizer.pad_token_id), _padded(rows, measured, tokenizer.pad_token_id)[2])


def _padded(rows: Sequence[list[int]], masks: Sequence[list[int]], pad_token_id: int):
    """Right-padded tensors: input ids, attention mask, loss mask."""
    import torch

    batch_size, width = len(rows), max(len(row) for row in rows)
    input_ids = torch.full((batch_size, width), pad_token_id)
    attention = torch.zeros((batch_size, width), dtype=torch.long)
    loss_mask = torch.zeros((batch_size, width))
    for index, (row, mask) in enumerate(zip(rows, masks, strict=True)):
        input_ids[index, :len(row)] = torch.tensor(row)
        attention[index, :len(row)] = 1
        loss_mask[index, :len(row)] = torch.tensor(mask, dtype=torch.float)
    return input_ids, attention, loss_mask


def ordinary_token_ids(tokenizer) -> list[int]:
    """Ids of every token but the special ones and those holding a line break, in increasing order.

    Sorted because the vocabulary's own order changes from process to process: the draws from this
    list, and with them the pretrained model, would otherwise differ from build to build.
    """
    special = set(tokenizer.all_special_ids) | set(tokenizer.added_tokens_decoder)
    return sorted(index for token, index in tokenizer.get_vocab().items()
                  if index not in special and "\n" not in tokenizer.convert_tokens_to_string([token]))


Batch = tuple[Any, ...]
"""Input ids, attention mask and loss mask of one step, and optionally the mask of the positions its accuracy
counts (default: the loss mask's)."""


@dataclass(frozen=True)
class Phase:
    """One phase of the pretraining: fresh batches every step until the target accuracy, within a budget.

    Attributes:
        name: What it trains on.
        learning_rate: Its AdamW learning rate (a fresh optimizer per phase).
        next_batch: Makes the next step's batch.
        budget: Most optimizer steps (with no target: the steps it runs).
        target: Accuracy over the last ``window`` steps that ends the phase (None: run ``budget`` steps).
        beta2: AdamW's second-moment decay.
        stall_step: Step at which the phase stops, stalled, if its accuracy stands below ``stall_accuracy``
            (None: never).
        stall_accuracy: See ``stall_step``.
    """

    name: str
    learning_rate: float
    next_batch: Callable[[], Batch]
    budget: int
    target: float | None = None
    beta2: float = 0.999
    stall_step: int | None = None
    stall_accuracy: float = 0.0


def draws(seed: int, attempt: int = 0) -> random.Random:
    """The random generator of a build's ``attempt``: seeded with ``seed`` for the first, with a string naming both
    for the others (Python seeds from a string's SHA-512, the same in every process)."""
    return random.Random(seed if attempt == 0 else f"echo pretraining, seed {seed}, attempt {attempt}")


def echo_phases(tokenizer, settings: EchoPretraining, attempt: int = 0) -> list[Phase]:
    """The four phases of ``settings``, drawing from one random generator (:func:`draws` of the seed and
    ``attempt``)."""
    rng, sentences, substitutes = draws(settings.seed, attempt), echo_sentences(), ordinary_token_ids(tokenizer)
    size = settings.batch_size
    return [
        Phase("random strings", settings.learning_rate,
              lambda: echo_batch(tokenizer, sentences, rng, size, 1.0, substitutes),
              settings.random_max_steps, settings.random_target),
        Phase("sentences", settings.sentence_learning_rate,
              lambda: echo_batch(tokenizer, sentences, rng, size, settings.substitution, substitutes),
              settings.sentence_steps),
        Phase("numbers", settings.number_learning_rate, lambda: number_echo_batch(tokenizer, rng, size),
              settings.number_steps),
        Phase("report drills", settings.report_learning_rate,
              lambda: report_batch(tokenizer, rng, size, substitutes),
              settings.report_max_steps, settings.report_target, settings.report_beta2,
              settings.report_stall_steps, settings.report_stall_accuracy),
    ]


def pretrain_echo(model, tokenizer, settings: EchoPretraining,
                  progress: Callable[[str], None] | None = None) -> list[PhaseResult]:
    """Train ``model`` in place on the four phases; returns how each phase of each attempt went.

    An attempt whose drills stall (below ``settings.report_stall_accuracy`` at step
    ``settings.report_stall_steps``) is dropped: the model goes back to its weights before the first phase and the
    next attempt draws anew. A build whose drills do not stall is the same with any number of attempts.

    Args:
        progress: Called with a line when a phase starts, about every :data:`PROGRESS_EVERY_S` seconds within
            one, and when one ends (None: silent).

    Raises:
        PretrainingError: A phase spent its budget below its target, or the drills of every attempt stalled.
    """
    progress = progress or (lambda line: None)
    untrained = {name: tensor.detach().clone() for name, tensor in model.state_dict().items()}
    model.train()
    results: list[PhaseResult] = []
    for attempt in range(settings.attempts):
        if attempt:
            model.load_state_dict(untrained)
            progress(f"echo pretraining: the drills stood below {settings.report_stall_accuracy:g} at step "
                     f"{settings.report_stall_steps}; attempt {attempt + 1} of {settings.attempts} starts again from "
                     f"the untrained model with new draws")
        for phase in echo_phases(tokenizer, settings, attempt):
            result = train_phase(model, phase, settings.window, progress)
            result.attempt = attempt
            results.append(result)
            if result.missed and not result.stalled:
                raise PretrainingError(results, settings)
            if result.stalled:
                break
        else:  # no phase stalled
            return results
    raise PretrainingError(results, settings)


PROGRESS_EVERY_S = 60.0
"""Seconds between two progress lines of one phase."""


def train_phase(model, phase: Phase, window: int, progress: Callable[[str], None],
                clock: Callable[[], float] = time.monotonic) -> PhaseResult:
    """Train ``model`` on ``phase`` until its accuracy over the last ``window`` steps reaches its target, or
    for its whole budget; or until its stall step, if its accuracy stands below its stall accuracy there."""
    import torch

    optimizer = torch.optim.AdamW(model.parameters(), lr=phase.learning_rate, betas=(0.9, phase.beta2),
                                  weight_decay=0.0)
    recent: deque[float] = deque(maxlen=window)
    started = last_line = clock()
    until = f"until copy accuracy {phase.target:g}, at most " if phase.target is not None else ""
    stalled = False
    progress(f"echo pretraining, {phase.name}: {until}{phase.budget} steps")
    for step in range(1, phase.budget + 1):
        accuracy = _echo_step(model, optimizer, *phase.next_batch())
        if not math.isnan(accuracy):  # a batch with nothing measured (no drill with a number answer) has none
            recent.append(accuracy)
        if phase.target is not None and len(recent) == window and float(np.mean(recent)) >= phase.target:
            break
        if step == phase.stall_step and float(np.mean(recent)) < phase.stall_accuracy:
            stalled = True
            break
        if clock() - last_line >= PROGRESS_EVERY_S:
            progress(f"echo pretraining, {phase.name}: step {step}, copy accuracy {np.mean(recent):.3f}, "
                     f"{clock() - started:.0f} s")
            last_line = clock()
    result = PhaseResult(phase.name, step, float(np.mean(recent)), phase.target, clock() - started, stalled)
    progress(result.line())
    return result


def _echo_step(model, optimizer, input_ids, attention, loss_mask, measured=None) -> float:
    """One optimizer step on an echo batch; returns the copy accuracy on it (before the step) where ``measured``
    is 1 (default: wherever the loss looks)."""
    import torch

    loss, accuracy = masked_copy_loss(model, input_ids, attention, loss_mask, measured)
    optimizer.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    return accuracy


def masked_copy_loss(model, input_ids, attention, loss_mask, measured=None):
    """Mean next-token loss over the positions ``loss_mask`` scores, and accuracy over those of them that
    ``measured`` marks (default: all of them; nan when it marks none).

    The output head runs at those positions only: over the 8k-token vocabulary it is most of a step's
    work, and a drill's answer is a few tokens of a long context.

    Returns:
        ``(loss tensor, accuracy)``.
    """
    import torch

    hidden = model.get_decoder()(input_ids=input_ids, attention_mask=attention).last_hidden_state[:, :-1]
    scored = loss_mask[:, 1:].bool()
    logits, targets = model.get_output_embeddings()(hidden[scored]), input_ids[:, 1:][scored]
    hits = (logits.argmax(-1) == targets).float()
    if measured is not None:
        hits = hits[measured[:, 1:][scored].bool()]
    return torch.nn.functional.cross_entropy(logits, targets), float(hits.mean()) if len(hits) else float("nan")


def copy_accuracy(model, tokenizer, sentences: Sequence[str], *, batches: int = 8, batch_size: int = 32,
                  seed: int = 0) -> tuple[float, float]:
    """How well ``model`` echoes ``sentences``: accuracy on every repeated token, and on the tokens the
    echo pretraining's sentences never hold (the ones only substitution teaches)."""
    import torch

    seen = {token for sentence in echo_sentences() for token in tokenizer.encode(sentence, add_special_tokens=False)}
    seen.update(tokenizer.all_special_ids)  # the end of the repeat is not a copied token
    rng, hits, total, unseen_hits, unseen_total = random.Random(seed), 0.0, 0.0, 0.0, 0.0
    model.eval()
    for _ in range(batches):
        input_ids, attention, loss_mask = echo_batch(tokenizer, sentences, rng, batch_size)
        with torch.no_grad():
            predicted = model(input_ids=input_ids, attention_mask=attention).logits[:, :-1].argmax(-1)
        targets, mask = input_ids[:, 1:], loss_mask[:, 1:]
        unseen = torch.tensor([[int(token) not in seen for token in row] for row in targets.tolist()]) * mask
        correct = (predicted == targets).float()
        hits, total = hits + float((correct * mask).sum()), total + float(mask.sum())
        unseen_hits, unseen_total = unseen_hits + float((correct * unseen).sum()), unseen_total + float(unseen.sum())
    return hits / total, unseen_hits / max(unseen_total, 1.0)


PHASES_FILE = "pretraining.json"
"""The record of a build's phases (:class:`PhaseResult` fields) in its model folder."""


def load_or_build_pretrained(config: TinyModelConfig | None = None, settings: EchoPretraining | None = None,
                             *, progress: Callable[[str], None] | None = None, threads: int = 1):
    """The tiny model after echo pretraining, built and saved the first time, then reused (one process builds;
    another that needs it meanwhile waits for it).

    Args:
        config: The tiny model's shape (default :class:`TinyModelConfig`).
        settings: The pretraining (default :class:`EchoPretraining`).
        progress: Where the build's progress lines go (None: nowhere); a reused model reports nothing.
        threads: Torch threads of the build (one by default: see :func:`torch_threads`).

    Returns:
        ``(model, tokenizer)``.

    Raises:
        PretrainingError: A phase missed its target; nothing is saved.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    directory = pretrained_dir(config, settings)
    if not (directory / "config.json").exists():
        with file_lock(lock_path(directory), waiting=f"waiting for another process to pretrain the tiny model in "
                                                     f"{directory}"):
            if not (directory / "config.json").exists():  # not built while this one waited
                _build_pretrained(config, settings, directory, progress, threads)
    return AutoModelForCausalLM.from_pretrained(directory), AutoTokenizer.from_pretrained(directory)


def _build_pretrained(config: TinyModelConfig | None, settings: EchoPretraining | None, directory: Path,
                      progress: Callable[[str], None] | None, threads: int) -> None:
    """Pretrain the tiny model of ``config`` with ``settings`` and save it, with its phases, to ``directory``."""
    model, tokenizer = load_or_build_tiny_model(config)
    with torch_threads(threads):
        phases = pretrain_echo(model, tokenizer, settings or EchoPretraining(), progress)
    save_model_folder(model, tokenizer, directory,  # the record lands with the model: a reader never sees one alone
                      extra_files={PHASES_FILE: json.dumps([asdict(phase) for phase in phases], indent=2)})


def pretrained_dir(config: TinyModelConfig | None = None, settings: EchoPretraining | None = None) -> Path:
    """Where the model of ``config`` pretrained with ``settings`` is cached (beside the untrained one)."""
    base = default_model_dir(config or TinyModelConfig())
    return base.with_name(f"{base.name}-{(settings or EchoPretraining()).key}")


def built_phases(config: TinyModelConfig | None = None, settings: EchoPretraining | None = None) -> list[PhaseResult]:
    """How the cached build's phases went (empty when it was not built yet)."""
    record = pretrained_dir(config, settings) / PHASES_FILE
    return [PhaseResult(**phase) for phase in json.loads(record.read_text())] if record.exists() else []


@contextmanager
def torch_threads(threads: int) -> Iterator[None]:
    """Torch runs on ``threads`` intra-op threads inside the block (restored after it).

    The floating-point order of a step changes with the thread count: on a fixed count (one, by default) a
    build gives the same model on any number of cores of one machine. The targets are reached on any count.
    """
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def one_torch_thread() -> contextlib.AbstractContextManager[None]:
    """:func:`torch_threads` with one thread."""
    return torch_threads(1)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m trainers.pretrain``: build (or reuse) the pretrained tiny model and report its copying."""
    from tasks.search import load_world

    parser = argparse.ArgumentParser(
        prog="python -m trainers.pretrain",
        description="Build the echo-pretrained tiny model (cached under $AGENTRL_CACHE or ~/.cache/agentrl, "
                    "models/; reused when present) and print how well it copies the bundled world's sentences.")
    parser.add_argument("--seed", type=int, default=EchoPretraining.seed, help="Seed of the pretraining's draws.")
    parser.add_argument("--threads", type=int, default=1, help="Torch threads of the build.")
    parser.add_argument("--json", type=Path, help="Write how each phase went here (the failed one last, if any).")
    args = parser.parse_args(argv)
    settings = EchoPretraining(seed=args.seed)
    try:
        model, tokenizer = load_or_build_pretrained(settings=settings, progress=print_flushed, threads=args.threads)
    except PretrainingError as error:
        _write_phases(args.json, error.phases)
        print(f"error: {error}", file=sys.stderr)
        return 1
    _write_phases(args.json, built_phases(settings=settings))
    every, unseen = copy_accuracy(model, tokenizer, article_sentences(load_world()))
    print(f"model: {pretrained_dir(settings=settings)}")
    print(f"echo of the bundled world's sentences: {every:.3f} of tokens copied, "
          f"{unseen:.3f} of those the echo text never held")
    return 0


def _write_phases(path: Path | None, phases: Sequence[PhaseResult]) -> None:
    if path is not None:
        path.write_text(json.dumps([asdict(phase) for phase in phases], indent=2))


def print_flushed(line: str) -> None:
    """Print ``line`` at once, whatever stdout is (a file or pipe buffers otherwise)."""
    print(line, flush=True)


if __name__ == "__main__":
    sys.exit(main())
