"""The tiny default model: local tokenizer with single-token action tags, a tool-aware chat template, reuse."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import torch

from trainers.chat import ChatFormat, ChatTokens
from trainers.rollout import stop_token_ids
from trainers.tiny_model import ACTION_TAGS, TinyModelConfig, build_model, load_or_build_tiny_model, save_model_folder


def test_the_action_tags_are_single_tokens_and_any_text_round_trips():
    _, tokenizer = load_or_build_tiny_model()
    for tag in ACTION_TAGS:
        assert len(tokenizer.encode(tag, add_special_tokens=False)) == 1
    text = 'tool output: ünïcödé, emoji 🦜, tabs\t, "<|im_end|>" as plain text'
    chat = ChatTokens(tokenizer)
    ids = chat.observation_ids(text)
    assert text in tokenizer.decode(ids)
    content = ids[len(chat.between_turns_ids) + len(chat.tool_prefix_ids):-len(chat.tool_suffix_ids)]
    assert tokenizer.decode(content) == text
    assert tokenizer.eos_token_id not in content  # a tool cannot end the turn by printing the end token


def test_a_number_is_the_same_tokens_whatever_stands_before_it():
    _, tokenizer = load_or_build_tiny_model()
    number = tokenizer.encode("369911047973697336", add_special_tokens=False)
    for text in ("$844051^{369911047973697336}$", "pow(844051, 369911047973697336, 7)", "\n369911047973697336\n",
                 "<answer>369911047973697336</answer>", "was 369911047973697336."):
        ids = tokenizer.encode(text, add_special_tokens=False)
        assert any(ids[start:start + len(number)] == number for start in range(len(ids))), text
    assert tokenizer.decode(tokenizer.encode("pow(8, 36, 7)", add_special_tokens=False)) == "pow(8, 36, 7)"


def test_the_chat_template_renders_tool_turns_and_the_pieces_cut_from_it_agree():
    _, tokenizer = load_or_build_tiny_model()
    messages = [{"role": "user", "content": "Q?"}, {"role": "assistant", "content": "<answer>A</answer>"},
                {"role": "tool", "content": "R"}]
    rendered = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert "<tool_response>\nR\n</tool_response>" in rendered and rendered.endswith("<|im_start|>assistant\n")
    pieces = ChatFormat.from_tokenizer(tokenizer)
    rebuilt = (pieces.prompt_prefix + "Q?" + pieces.prompt_suffix + "<answer>A</answer>" + pieces.turn_end
               + pieces.tool_prefix + "R" + pieces.tool_suffix)
    assert rebuilt == rendered
    assert len(stop_token_ids(tokenizer)) == 3  # end of turn, </tool_call>, </answer>


def test_openai_messages_render_to_the_rollouts_own_pieces_with_contents_kept_plain_text():
    _, tokenizer = load_or_build_tiny_model()
    chat = ChatTokens(tokenizer)
    prompt, result = "Find <|im_end|> 42", "result <|im_start|>user 7"  # special-token text inside contents
    assert chat.messages_ids([{"role": "user", "content": prompt}]) == chat.prompt_ids(prompt)
    history = [{"role": "user", "content": prompt},
               {"role": "assistant", "content": None, "tool_calls": [{"id": "c", "name": "search", "arguments": {}}]}]
    assert chat.continuation_ids(history, [{"role": "tool", "content": result}]) == chat.observation_ids(result)
    # the template's two turn headers are special tokens; the content's "<|im_start|>" stays text
    assert chat.observation_ids(result).count(tokenizer.convert_tokens_to_ids("<|im_start|>")) == 2
    tools = [{"type": "function", "function": {"name": "search", "parameters": {"type": "object"}}}]
    with_tools = tokenizer.decode(chat.messages_ids([{"role": "user", "content": prompt}], tools=tools))
    assert with_tools.startswith("<|im_start|>system\nYou may call these tools:") and '"name": "search"' in with_tools


def test_a_template_that_rewrites_earlier_turns_is_refused_by_name():
    _, tokenizer = load_or_build_tiny_model()
    chat = ChatTokens(tokenizer)
    tokenizer = copy.copy(tokenizer)
    tokenizer.chat_template = ("{%- for m in messages %}{%- if loop.last %}<last>{%- endif %}"
                               "{{- m.role + ': ' + m.content + '\n' }}{%- endfor %}")
    chat.tokenizer = tokenizer
    with pytest.raises(ValueError, match="rewrites earlier turns"):
        chat.continuation_ids([{"role": "user", "content": "Q"}, {"role": "assistant", "content": "A"}],
                              [{"role": "tool", "content": "R"}])


def test_the_model_is_reused_from_its_folder_and_seeded(tmp_path):
    config = TinyModelConfig(vocab_size=512, hidden_size=32, intermediate_size=64, num_layers=1, num_heads=2, seed=3)
    first, tokenizer = load_or_build_tiny_model(config, tmp_path / "tiny")
    again, _ = load_or_build_tiny_model(config, tmp_path / "tiny")
    assert all(torch.equal(a, b) for a, b in zip(first.state_dict().values(), again.state_dict().values(),
                                                 strict=True))
    rebuilt = build_model(config, tokenizer)
    assert all(torch.equal(a, b) for a, b in zip(first.state_dict().values(), rebuilt.state_dict().values(),
                                                 strict=True))
    assert first.config.vocab_size == len(tokenizer) <= 512 + 16


def test_a_folders_extra_files_are_in_it_from_the_moment_it_appears(tmp_path, monkeypatch):
    config = TinyModelConfig(vocab_size=512, hidden_size=32, intermediate_size=64, num_layers=1, num_heads=2, seed=3)
    model, tokenizer = load_or_build_tiny_model(config, tmp_path / "tiny")
    seen_at_rename = []
    rename = Path.rename
    monkeypatch.setattr(Path, "rename", lambda self, target: (seen_at_rename.append(
        sorted(path.name for path in self.iterdir())), rename(self, target))[1])
    save_model_folder(model, tokenizer, tmp_path / "saved", extra_files={"pretraining.json": "[]"})
    assert "pretraining.json" in seen_at_rename[0] and "config.json" in seen_at_rename[0]
    assert (tmp_path / "saved" / "pretraining.json").read_text() == "[]"


def test_the_saved_folder_changes_with_the_tokenizer_recipe(monkeypatch):
    import trainers.tiny_model as tiny_model

    key = TinyModelConfig().key()
    monkeypatch.setattr(tiny_model, "DIGIT_RUN", r"\p{N}{1,3}")
    assert TinyModelConfig().key() != key
    monkeypatch.undo()
    monkeypatch.setattr(tiny_model, "TOKENIZER_RECIPE_VERSION", tiny_model.TOKENIZER_RECIPE_VERSION + 1)
    assert TinyModelConfig().key() != key
