"""The token pieces of a multi-turn episode, cut once from the model's own chat template.

The rollout engine never re-tokenizes decoded text: the prompt is tokenized once, each generated
turn keeps the ids the model sampled, and each observation is tokenized once, wrapped in the
template's tool-response turn. :class:`ChatFormat` finds those wrappers by rendering a conversation
with marker strings through ``tokenizer.apply_chat_template`` and cutting at the markers, so any
ChatML-like template (the tiny model's, Qwen's) gives the same pieces it would render itself.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

PROMPT_MARK, ACTION_MARK, OBSERVATION_MARK = "\x00PROMPT\x00", "\x00ACTION\x00", "\x00OBSERVATION\x00"
CONTENT_MARK = re.compile("\x00CONTENT(\\d+)\x00")
"""Marks message ``i``'s content in a rendering (:meth:`ChatTokens.messages_ids`): cut out, encoded as content."""


@dataclass(frozen=True)
class ChatFormat:
    """Token pieces of the chat template around the parts an episode fills in.

    Attributes:
        prompt_prefix: Text before the user prompt.
        prompt_suffix: Text after the prompt, through the assistant header.
        turn_end: Text that closes an assistant turn (``"<|im_end|>\\n"``).
        tool_prefix: Text that opens the tool-response turn, after ``turn_end``.
        tool_suffix: Text after the observation, through the next assistant header.
    """

    prompt_prefix: str
    prompt_suffix: str
    turn_end: str
    tool_prefix: str
    tool_suffix: str

    @classmethod
    def from_tokenizer(cls, tokenizer) -> ChatFormat:
        """Cut the pieces out of ``tokenizer``'s chat template.

        Raises:
            ValueError: The template does not render user, assistant and tool turns in order.
        """
        user = [{"role": "user", "content": PROMPT_MARK}]
        assistant = [*user, {"role": "assistant", "content": ACTION_MARK}]
        tool = [*assistant, {"role": "tool", "content": OBSERVATION_MARK}]
        first = tokenizer.apply_chat_template(user, tokenize=False, add_generation_prompt=True)
        second = tokenizer.apply_chat_template(assistant, tokenize=False)
        third = tokenizer.apply_chat_template(tool, tokenize=False, add_generation_prompt=True)
        if not (second.startswith(first) and third.startswith(second)):
            raise ValueError("chat template: expected each rendered turn to extend the previous rendering "
                             "(ChatML-like); this template rewrites earlier turns")
        prefix, suffix = first.split(PROMPT_MARK)
        turn_end = second[len(first):].split(ACTION_MARK)[1]
        tool_prefix, tool_suffix = third[len(second):].split(OBSERVATION_MARK)
        return cls(prefix, suffix, turn_end, tool_prefix, tool_suffix)


class ChatTokens:
    """Tokenizes the pieces of an episode: the prompt, the close of a turn, a wrapped observation.

    Args:
        tokenizer: A ``transformers`` tokenizer with a chat template.
    """

    def __init__(self, tokenizer) -> None:
        self.tokenizer = tokenizer
        self.format = ChatFormat.from_tokenizer(tokenizer)
        self._template_ids: dict[str, tuple[int, ...]] = {}
        eos, turn_end = tokenizer.eos_token or "", self.format.turn_end
        closes_with_eos = bool(eos) and turn_end.startswith(eos)
        self.turn_close_ids = self._encode(eos if closes_with_eos else turn_end)
        self.between_turns_ids = self._encode(turn_end[len(eos):]) if closes_with_eos else []
        self.tool_prefix_ids = self._encode(self.format.tool_prefix)
        self.tool_suffix_ids = self._encode(self.format.tool_suffix)

    def _encode(self, template_text: str) -> list[int]:
        return self.tokenizer.encode(template_text, add_special_tokens=False)

    def _encode_content(self, content: str) -> list[int]:
        """Content from the task or a tool: special-token text in it stays plain text."""
        return self.tokenizer.encode(content, add_special_tokens=False, split_special_tokens=True)

    def prompt_ids(self, prompt: str) -> list[int]:
        """The ids of the first user turn through the assistant header."""
        return (self._encode(self.format.prompt_prefix) + self._encode_content(prompt)
                + self._encode(self.format.prompt_suffix))

    def close_turn_ids(self, generated: list[int]) -> list[int]:
        """Template ids that close a generated turn through the end-of-turn token, less what the model emitted."""
        end = self.turn_close_ids
        for overlap in range(min(len(end), len(generated)), 0, -1):
            if generated[-overlap:] == end[:overlap]:
                return end[overlap:]
        return list(end)

    def observation_ids(self, observation: str) -> list[int]:
        """From after the end-of-turn token: the tool-response turn holding ``observation``, through the next
        assistant header."""
        return self.between_turns_ids + self.tool_prefix_ids + self._encode_content(observation) + self.tool_suffix_ids

    def messages_ids(self, messages: Sequence[Mapping[str, Any]], *,
                     tools: Sequence[Mapping[str, Any]] | None = None) -> list[int]:
        """The ids of a whole conversation (OpenAI-style messages with string contents) as the template renders it,
        through the next assistant header; each content is encoded as :meth:`prompt_ids` encodes the prompt (a
        single user message gives exactly its ids).

        Raises:
            ValueError: A content holds the marker text this uses (a NUL byte followed by ``CONTENT``).
        """
        marked, contents = _marked(messages)
        text = self.tokenizer.apply_chat_template(marked, tools=list(tools) if tools else None, tokenize=False,
                                                  add_generation_prompt=True)
        return self._encode_marked(text, contents)

    def continuation_ids(self, history: Sequence[Mapping[str, Any]], new: Sequence[Mapping[str, Any]], *,
                         tools: Sequence[Mapping[str, Any]] | None = None) -> list[int]:
        """From after the end-of-turn token of the assistant turn that ends ``history``: the ``new`` messages (tool
        results, user turns) through the next assistant header, as the template renders them after ``history``.

        With one tool message this is :meth:`observation_ids` of its content. Only the new messages are encoded:
        the turns of ``history`` keep the ids they were given.

        Raises:
            ValueError: The template renders ``history`` differently once ``new`` follows it (it rewrites earlier
                turns), or a content holds the marker text.
        """
        tools = list(tools) if tools else None
        history = [_renderable(message) for message in history]
        marked, contents = _marked(new)
        before = self.tokenizer.apply_chat_template(history, tools=tools, tokenize=False)
        after = self.tokenizer.apply_chat_template([*history, *marked], tools=tools, tokenize=False,
                                                   add_generation_prompt=True)
        if not after.startswith(before):
            raise ValueError("chat template: expected the rendering of a conversation to extend the rendering of its "
                             "earlier turns (ChatML-like); this template rewrites earlier turns")
        return self.between_turns_ids + self._encode_marked(after[len(before):], contents)

    def _encode_marked(self, text: str, contents: Sequence[str]) -> list[int]:
        """Template text encoded as such, marked contents encoded as content."""
        ids: list[int] = []
        pieces = CONTENT_MARK.split(text)
        for position, piece in enumerate(pieces):
            ids += self._encode_content(contents[int(piece)]) if position % 2 else self._encode_template(piece)
        return ids

    def _encode_template(self, piece: str) -> tuple[int, ...]:
        """A piece of template text, encoded once (a conversation repeats the same few pieces every turn)."""
        if piece not in self._template_ids:
            self._template_ids[piece] = tuple(self._encode(piece))
        return self._template_ids[piece]

    def action_ids(self, action: str) -> list[int]:
        """How a demonstration's action text is tokenized for supervised learning."""
        return self._encode(action)


def _marked(messages: Sequence[Mapping[str, Any]]) -> tuple[list[dict[str, Any]], list[str]]:
    """The messages with each string content replaced by its marker, and the contents in marker order."""
    marked, contents = [], []
    for message in messages:
        content = message.get("content")
        if isinstance(content, str):
            if "\x00CONTENT" in content:
                raise ValueError("a message content holds the text NUL + 'CONTENT', which rendering reserves")
            message = {**message, "content": f"\x00CONTENT{len(contents)}\x00"}
            contents.append(content)
        marked.append(dict(message))
    return marked, contents


def _renderable(message: Mapping[str, Any]) -> dict[str, Any]:
    """A history message as any template renders it: an assistant turn as its text content only (its tool calls
    and ids were recorded as generated, so how a template would render them does not matter here)."""
    if message.get("role") == "assistant":
        return {"role": "assistant", "content": message.get("content") or ""}
    return dict(message)
