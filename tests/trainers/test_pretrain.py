"""Echo pretraining: the text it learns from, its two phases, and how copying is measured."""

from __future__ import annotations

import dataclasses
import random
import re

import pytest
import torch

from trainers import pretrain
from trainers.pretrain import (
    EchoPretraining,
    Phase,
    PretrainingError,
    built_phases,
    copy_accuracy,
    draws,
    echo_batch,
    echo_sentences,
    load_or_build_pretrained,
    main,
    masked_copy_loss,
    number_echo_batch,
    ordinary_token_ids,
    phases_summary,
    pretrain_echo,
    pretrained_dir,
    report_batch,
    train_phase,
)
from trainers.tiny_model import TinyModelConfig, load_or_build_tiny_model

pytestmark = pytest.mark.usefixtures("one_torch_thread")

SENTENCES = ["The Velmar Museum was founded in 1873", "Ada Quill wrote The Glass Harbor"]


def _rows(input_ids, attention):
    return [row[:int(mask.sum())].tolist() for row, mask in zip(input_ids, attention, strict=True)]


def test_an_echo_text_is_the_sentence_twice_with_the_loss_on_the_repeat_only():
    _, tokenizer = load_or_build_tiny_model()
    input_ids, attention, loss_mask = echo_batch(tokenizer, SENTENCES, random.Random(0), 4)
    newline = tokenizer.encode("\n", add_special_tokens=False)
    for row, mask in zip(_rows(input_ids, attention), loss_mask, strict=True):
        half = (len(row) - len(newline) - 1) // 2
        first, repeat = row[:half], row[half + len(newline):-1]
        assert first == repeat and tokenizer.decode(first) in SENTENCES
        assert row[-1] == tokenizer.eos_token_id
        assert mask[:len(row)].tolist() == [0.0] * (half + len(newline)) + [1.0] * (half + 1)


def test_substitution_swaps_tokens_in_both_copies_for_ordinary_tokens():
    _, tokenizer = load_or_build_tiny_model()
    ordinary = set(ordinary_token_ids(tokenizer))
    assert tokenizer.eos_token_id not in ordinary and tokenizer.pad_token_id not in ordinary
    original = {tuple(tokenizer.encode(sentence, add_special_tokens=False)) for sentence in SENTENCES}
    newline = tokenizer.encode("\n", add_special_tokens=False)
    input_ids, attention, _ = echo_batch(tokenizer, SENTENCES, random.Random(0), 16, substitution=1.0)
    for row in _rows(input_ids, attention):
        half = (len(row) - len(newline) - 1) // 2
        assert row[:half] == row[half + len(newline):-1]
        assert tuple(row[:half]) not in original and set(row[:half]) <= ordinary


def test_a_number_echo_text_is_random_numbers_twice_with_the_loss_on_the_repeat_only():
    _, tokenizer = load_or_build_tiny_model()
    newline = tokenizer.encode("\n", add_special_tokens=False)
    input_ids, attention, loss_mask = number_echo_batch(tokenizer, random.Random(0), 16)
    repeated_tokens = 0
    for row, mask in zip(_rows(input_ids, attention), loss_mask, strict=True):
        half = (len(row) - len(newline) - 1) // 2
        first, repeat = row[:half], row[half + len(newline):-1]
        assert first == repeat and row[-1] == tokenizer.eos_token_id
        assert mask[:len(row)].tolist() == [0.0] * (half + len(newline)) + [1.0] * (half + 1)
        numbers = re.split(r"[ ,\n]+", tokenizer.decode(first))
        assert 2 <= len(numbers) <= 8 and all(number.isdigit() and len(number) <= 16 for number in numbers)
        repeated_tokens += len(first) - len(set(first))
    assert repeated_tokens > 16  # the point of the phase: tokens recur within a text


class _Copier:
    """A stand-in model that predicts every next token right, except the tokens in ``blind``."""

    def __init__(self, vocab_size: int, blind: set[int]) -> None:
        self.vocab_size, self.blind = vocab_size, blind

    def eval(self) -> None:
        pass

    def __call__(self, input_ids, attention_mask):
        following = torch.roll(input_ids, -1, dims=1)
        logits = torch.nn.functional.one_hot(following, self.vocab_size).float()
        logits[torch.isin(following, torch.tensor(sorted(self.blind)))] = 0.0  # argmax: token 0
        return type("Output", (), {"logits": logits})()


def test_copy_accuracy_counts_tokens_the_echo_text_never_holds_apart():
    _, tokenizer = load_or_build_tiny_model()
    echoed = {token for sentence in echo_sentences() for token in tokenizer.encode(sentence, add_special_tokens=False)}
    unseen = sorted(set(ordinary_token_ids(tokenizer)) - echoed)
    assert unseen  # the bundled world's names, among others
    sentence = tokenizer.decode([*tokenizer.encode(echo_sentences()[0], add_special_tokens=False), *unseen[:3]])
    every, never_echoed = copy_accuracy(_Copier(len(tokenizer), set()), tokenizer, [sentence], batches=1)
    assert every == 1.0 and never_echoed == 1.0
    every, never_echoed = copy_accuracy(_Copier(len(tokenizer), set(unseen)), tokenizer, [sentence], batches=1)
    assert never_echoed == 0.0 and 0.5 < every < 1.0


TINY = TinyModelConfig(hidden_size=32, intermediate_size=64, num_layers=1, num_heads=2, seed=1)
QUICK = EchoPretraining(random_target=0.0, random_max_steps=3, sentence_steps=2, number_steps=2, report_target=0.0,
                        report_max_steps=10, batch_size=4, window=2)
"""Targets of 0: each phase with a target ends after ``window`` steps, whatever the (untrained) model copies."""


def test_every_phase_runs_and_trains_the_model():
    model, tokenizer = load_or_build_tiny_model(TINY)
    before = {name: parameter.detach().clone() for name, parameter in model.named_parameters()}
    lines = []
    phases = pretrain_echo(model, tokenizer, QUICK, lines.append)
    assert [(phase.name, phase.steps, phase.target) for phase in phases] == [
        ("random strings", 2, 0.0), ("sentences", 2, None), ("numbers", 2, None), ("report drills", 2, 0.0)]
    assert all(not torch.equal(before[name], parameter) for name, parameter in model.named_parameters())
    assert lines[0] == "echo pretraining, random strings: until copy accuracy 0, at most 3 steps"
    assert lines[-1].startswith("echo pretraining, report drills: 2 steps, copy accuracy")
    assert QUICK.key != EchoPretraining().key


def test_a_phase_that_spends_its_budget_below_its_target_stops_the_build_naming_phase_accuracy_and_remedy():
    model, tokenizer = load_or_build_tiny_model(TINY)
    settings = EchoPretraining(random_target=0.9, random_max_steps=3, batch_size=4, window=2, seed=5)
    with pytest.raises(PretrainingError) as failure:
        pretrain_echo(model, tokenizer, settings)  # an untrained model copies nothing in 3 steps
    message = str(failure.value)
    assert failure.value.phase.name == "random strings" and failure.value.phase.steps == 3
    assert failure.value.phases == [failure.value.phase]
    assert f"reached copy accuracy {failure.value.phase.accuracy:.3f}" in message and "expected 0.9" in message
    assert "--seed 6" in message and "*_max_steps" in message and "*_target" in message


def test_the_first_attempt_draws_from_the_seed_and_each_later_attempt_anew():
    first, again = draws(5), random.Random(5)
    assert [first.random() for _ in range(5)] == [again.random() for _ in range(5)]  # the builds measured before
    later = [[draws(5, attempt).random() for _ in range(5)] for attempt in (0, 1, 1, 2)]
    assert later[1] == later[2] and len({tuple(values) for values in later}) == 3


STALLING = EchoPretraining(random_target=0.0, random_max_steps=3, sentence_steps=2, number_steps=2, report_target=0.9,
                           report_max_steps=10, batch_size=4, window=2, report_stall_steps=3,
                           report_stall_accuracy=1.0, attempts=2)
"""The drills of an untrained model stand below an accuracy of 1 at their third step: every attempt stalls."""


def test_a_stalled_attempt_starts_again_from_the_untrained_model_with_the_next_draws(monkeypatch):
    shipped = pretrain.echo_phases

    def only_the_first_attempt_stalls(tokenizer, settings, attempt=0):  # later ones end after `window` steps
        phases = shipped(tokenizer, settings, attempt)
        return phases if attempt == 0 else [
            dataclasses.replace(phase, stall_step=None, target=None if phase.target is None else 0.0)
            for phase in phases]

    monkeypatch.setattr(pretrain, "echo_phases", only_the_first_attempt_stalls)
    model, tokenizer = load_or_build_tiny_model(TINY)
    lines = []
    phases = pretrain_echo(model, tokenizer, STALLING, lines.append)
    assert [(phase.name, phase.attempt, phase.stalled) for phase in phases] == [
        ("random strings", 0, False), ("sentences", 0, False), ("numbers", 0, False), ("report drills", 0, True),
        ("random strings", 1, False), ("sentences", 1, False), ("numbers", 1, False), ("report drills", 1, False)]
    assert phases[3].steps == 3 and lines[7] == "echo pretraining, report drills: 3 steps, copy accuracy " \
        f"{phases[3].accuracy:.3f} (target 0.9), 0 s: stalled"
    assert lines[8] == ("echo pretraining: the drills stood below 1 at step 3; attempt 2 of 2 starts again from "
                        "the untrained model with new draws")
    assert phases_summary(phases).count("attempt 2: random strings") == 1

    expected, _ = load_or_build_tiny_model(TINY)  # the second attempt alone, from the untrained model
    expected.train()
    for phase in only_the_first_attempt_stalls(tokenizer, STALLING, attempt=1):
        train_phase(expected, phase, STALLING.window, lambda line: None)
    built, alone = model.state_dict(), expected.state_dict()
    assert all(torch.equal(built[name], alone[name]) for name in built)


def test_a_build_whose_every_attempt_stalls_stops_naming_the_stall_and_the_attempts():
    model, tokenizer = load_or_build_tiny_model(TINY)
    with pytest.raises(PretrainingError) as failure:
        pretrain_echo(model, tokenizer, STALLING)
    assert [(phase.attempt, phase.stalled) for phase in failure.value.phases if phase.name == "report drills"] == [
        (0, True), (1, True)]
    assert "phase 'report drills' stood below copy accuracy 1 after 3 steps in each of 2 attempts" in str(failure.value)


def _scripted_accuracies(monkeypatch, accuracies):
    """Make each optimizer step report the next of ``accuracies`` (the level logic, not the model, is tested)."""
    scripted = iter(accuracies)
    monkeypatch.setattr(pretrain, "_echo_step", lambda *batch: next(scripted))


def test_a_phase_ends_when_its_windowed_accuracy_first_reaches_the_target(monkeypatch):
    _scripted_accuracies(monkeypatch, [0.1, 0.7, 0.8, 0.8, 0.9, 0.95])
    result = train_phase(torch.nn.Linear(1, 1), Phase("drills", 1e-3, lambda: (None, None, None), 20, 0.8), 2,
                         lambda line: None)
    assert (result.name, result.steps, result.accuracy) == ("drills", 4, 0.8)  # the mean of 0.8 and 0.8


def test_a_step_that_measured_nothing_is_left_out_of_the_window(monkeypatch):
    _scripted_accuracies(monkeypatch, [0.9, float("nan"), 0.9, 0.1])
    result = train_phase(torch.nn.Linear(1, 1), Phase("drills", 1e-3, lambda: (None, None, None), 20, 0.9), 2,
                         lambda line: None)
    assert (result.steps, result.accuracy) == (3, 0.9)  # a nan in the window would have kept it from ending


def test_a_phase_out_of_budget_reports_where_it_stood(monkeypatch):
    _scripted_accuracies(monkeypatch, [0.2, 0.3, 0.4, 0.5])
    result = train_phase(torch.nn.Linear(1, 1), Phase("drills", 1e-3, lambda: (None, None, None), 4, 0.9), 2,
                         lambda line: None)
    assert (result.name, result.steps, result.accuracy, result.target) == ("drills", 4, pytest.approx(0.45), 0.9)


@pytest.mark.parametrize(("accuracies", "stalled", "steps"), [
    ([0.1, 0.2, 0.2, 0.5], True, 3),    # below 0.3 at the stall step: it stops there
    ([0.1, 0.3, 0.3, 0.95], False, 4),  # at 0.3 it goes on, to its target
])
def test_a_phase_stops_stalled_when_it_stands_below_its_stall_accuracy_at_its_stall_step(monkeypatch, accuracies,
                                                                                           stalled, steps):
    _scripted_accuracies(monkeypatch, accuracies)
    phase = Phase("drills", 1e-3, lambda: (None, None, None), 20, 0.6, stall_step=3, stall_accuracy=0.3)
    result = train_phase(torch.nn.Linear(1, 1), phase, 2, lambda line: None)
    assert (result.stalled, result.steps, result.missed) == (stalled, steps, stalled)


def test_progress_lines_come_about_every_minute_within_a_phase(monkeypatch):
    clock = [0.0]

    def step(*batch):  # each step takes 25 s
        clock[0] += 25.0
        return 0.0

    monkeypatch.setattr(pretrain, "_echo_step", step)
    lines = []
    train_phase(torch.nn.Linear(1, 1), Phase("random strings", 1e-3, lambda: (None, None, None), budget=6,
                                             target=0.9), 2, lines.append, clock=lambda: clock[0])
    assert [line.split(": ")[1].split(",")[0] for line in lines] == [
        "until copy accuracy 0.9", "step 3", "step 6", "6 steps"]
    assert lines[-1].endswith("(target 0.9), 150 s")


def test_a_build_runs_on_one_thread_and_gives_the_same_model_whatever_the_callers_thread_count(tmp_path, monkeypatch):
    threads_in_build = []

    def recording(*args, **kwargs):
        threads_in_build.append(torch.get_num_threads())
        return pretrain_echo(*args, **kwargs)

    monkeypatch.setattr(pretrain, "pretrain_echo", recording)
    weights = []
    for threads in (2, 1):
        monkeypatch.setenv("AGENTRL_CACHE", str(tmp_path / f"{threads}-threads"))
        torch.set_num_threads(threads)
        model, _ = load_or_build_pretrained(TINY, QUICK)
        assert torch.get_num_threads() == threads  # the caller's setting is back
        assert [phase.name for phase in built_phases(TINY, QUICK)] == [
            "random strings", "sentences", "numbers", "report drills"]
        weights.append(model.state_dict())
    assert threads_in_build == [1, 1]
    assert all(torch.equal(weights[0][name], weights[1][name]) for name in weights[0])


def test_a_failed_build_saves_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("AGENTRL_CACHE", str(tmp_path))
    settings = EchoPretraining(random_target=1.0, random_max_steps=2, batch_size=4, window=2)
    with pytest.raises(PretrainingError):
        load_or_build_pretrained(TINY, settings)
    assert not pretrained_dir(TINY, settings).exists() and built_phases(TINY, settings) == []


def test_the_loss_on_scored_positions_only_equals_the_full_vocabulary_loss():
    model, tokenizer = load_or_build_tiny_model(
        TinyModelConfig(hidden_size=32, intermediate_size=64, num_layers=1, num_heads=2, seed=1))
    input_ids, attention, loss_mask, measured = report_batch(tokenizer, random.Random(0), 8,
                                                             ordinary_token_ids(tokenizer))
    targets, mask, counted = input_ids[:, 1:], loss_mask[:, 1:], measured[:, 1:]
    assert 0 < counted.sum() < mask.sum()  # these draws hold number answers and others
    with torch.no_grad():
        logits = model(input_ids=input_ids, attention_mask=attention).logits[:, :-1]
        full_loss = -(logits.log_softmax(-1).gather(-1, targets.unsqueeze(-1)).squeeze(-1) * mask).sum() / mask.sum()
        hits = (logits.argmax(-1) == targets).float()
        loss, accuracy = masked_copy_loss(model, input_ids, attention, loss_mask)
        _, measured_accuracy = masked_copy_loss(model, input_ids, attention, loss_mask, measured)
    assert float(loss) == pytest.approx(float(full_loss), rel=1e-5)
    assert accuracy == pytest.approx(float((hits * mask).sum() / mask.sum()))
    assert measured_accuracy == pytest.approx(float((hits * counted).sum() / counted.sum()))


def test_a_report_drill_answers_with_the_last_line_of_the_tool_result_and_only_that_is_learned():
    _, tokenizer = load_or_build_tiny_model()
    input_ids, attention, loss_mask, measured = report_batch(tokenizer, random.Random(0), 16,
                                                             ordinary_token_ids(tokenizer))
    distractors, line_counts, kinds = 0, set(), set()
    for row, mask, counted in zip(_rows(input_ids, attention), loss_mask, measured, strict=True):
        learned = [token for token, weight in zip(row, mask.tolist(), strict=False) if weight]
        is_number = tokenizer.decode(learned).removesuffix("</answer>").isdigit()
        assert counted.tolist() == (mask.tolist() if is_number else [0.0] * len(mask))  # accuracy counts numbers
        kinds.add(is_number)
        context = tokenizer.decode(row[:len(row) - len(learned)])
        result = context.split("<tool_response>\n")[1].split("\n</tool_response>")[0]
        assert context.endswith("<|im_start|>assistant\n<answer>")
        assert tokenizer.decode(learned) == result.splitlines()[-1] + "</answer>"
        assert row[-len(learned):] == learned  # the learned tokens are the whole end of the drill
        distractors += any(character.isdigit() for character in context.split("<tool_response>")[0])
        line_counts.add(len(result.splitlines()))
    assert distractors >= 12  # numbers stand elsewhere in the context too
    assert line_counts == {2, 3, 4}  # a header, up to two more lines, the answer's line
    assert kinds == {True, False}  # answers of random tokens are learned too, though not counted


def test_the_command_line_help_builds_nothing(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("AGENTRL_CACHE", str(tmp_path))
    with pytest.raises(SystemExit) as exit_info:
        main(["--help"])
    assert exit_info.value.code == 0
    assert "python -m trainers.pretrain" in capsys.readouterr().out
    assert not any(tmp_path.iterdir())
