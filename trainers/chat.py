"""The token pieces of a multi-turn episode, cut once from the model's own chat template.

The rollout engine never re-tokenizes decoded text: the prompt is tokenized once, each generated
turn keeps the ids the model sampled, and each observation is tokenized once, wrapped in the
template's tool-response turn. :class:`ChatFormat` finds those wrappers by rendering a conversation
with marker strings through ``tokenizer.apply_chat_template`` and cutting at the markers, so any
ChatML-like template (the tiny model's, Qwen's) gives the same pieces it would render itself.
"""

from __future__ import annotations

from dataclasses import dataclass

PROMPT_MARK, ACTION_MARK, OBSERVATION_MARK = "\x00PROMPT\x00", "\x00ACTION\x00", "\x00OBSERVATION\x00"


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

    def action_ids(self, action: str) -> list[int]:
        """How a demonstration's action text is tokenized for supervised learning."""
        return self._encode(action)
