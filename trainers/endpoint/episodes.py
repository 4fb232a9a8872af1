"""Token-faithful episode records of the policy endpoint: what the model was fed and what it generated.

An agent program sends its whole conversation with every request. The endpoint never re-tokenizes what it has
already seen: when the request's messages begin with the conversation it recorded (its own replies included,
compared by content and tool calls), only the messages after them are encoded (wrapped as the chat template
renders them, with ``env_mask`` 0) and appended to the recorded ids, and the model continues that context. The
generated ids and their logprobs are appended as sampled (``env_mask`` 1), then the template's end of turn.

When the history does not continue the record (the program dropped, summarised or rewrote turns, or put words
in the model's mouth), the record so far is closed as a segment and a new one starts from the request's
rendering; the event is counted in :attr:`EndpointEpisode.history_edits`, never re-tokenized silently. The last
segment is the episode's token record (the one GRPO trains on); earlier ones stay in :attr:`segments`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from trainers.chat import ChatTokens
from trainers.endpoint.openai_format import (
    ChatRequest,
    Reply,
    RequestError,
    message_key,
    same_history,
    template_message,
)


@dataclass
class Segment:
    """One continuous token record: a prompt, then everything after it with its mask and logprobs.

    Attributes:
        messages: The normalised conversation the record renders, the model's replies included.
        tools: The tool schemas its prompt rendered.
        prompt_ids: The rendered first request.
        completion_ids: Generated turns (mask 1), template and message tokens (mask 0).
        logprobs: Per completion id, the sampling logprob (0.0 at mask-0 tokens).
        env_mask: Per completion id, 1 for a generated token.
        turns: ``(start, length)`` of each generated turn in ``completion_ids``.
    """

    messages: list[dict[str, Any]]
    tools: tuple[dict[str, Any], ...]
    prompt_ids: list[int]
    completion_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    env_mask: list[int] = field(default_factory=list)
    turns: list[tuple[int, int]] = field(default_factory=list)

    @property
    def context_ids(self) -> list[int]:
        """Prompt and completion: what the model continues."""
        return self.prompt_ids + self.completion_ids

    def append(self, ids: Sequence[int], *, generated: bool, logprobs: Sequence[float] | None = None) -> None:
        """Append ids with their mask (and logprobs, for generated ids)."""
        self.completion_ids.extend(ids)
        self.env_mask.extend([int(generated)] * len(ids))
        self.logprobs.extend(logprobs if logprobs is not None else [0.0] * len(ids))


@dataclass(frozen=True)
class TurnContext:
    """The context of the next turn, worked out from a request but not recorded until the turn is generated.

    Attributes:
        segment: The segment the turn extends (a new one when the history was edited).
        new_ids: Ids to append to it before the turn (the request's new messages; all of a new segment's prompt).
        new_segment: The request did not continue the record.
        new_messages: The request's messages after the recorded ones.
    """

    segment: Segment
    new_ids: list[int]
    new_segment: bool
    new_messages: tuple[dict[str, Any], ...]

    @property
    def ids(self) -> list[int]:
        """The full context the model continues."""
        return self.segment.prompt_ids if self.new_segment else self.segment.context_ids + self.new_ids


class EndpointEpisode:
    """The record of one episode's requests, segment by segment.

    Args:
        episode_id: The route key (``/episodes/<episode_id>/v1``).
        chat: Token pieces of the model's chat template.
        seed_of: The sampling seed of the episode's turn ``n`` (counted over all its generations).
        position: Where its rows go in a generated batch (the episode's place in its rollout batch).
    """

    def __init__(self, episode_id: str, chat: ChatTokens, seed_of: Callable[[int], int], position: int = 0) -> None:
        self.id = episode_id
        self.chat = chat
        self.seed_of = seed_of
        self.position = position
        self.segments: list[Segment] = []
        self.history_edits = 0
        self.generations = 0
        self.context_exhausted = False
        self.finished = False
        self.busy = threading.Lock()
        self._texts: dict[tuple, str] = {}

    @property
    def record(self) -> Segment | None:
        """The segment the episode is trained on: the last one (None before the first request)."""
        return self.segments[-1] if self.segments else None

    @property
    def cache_key(self) -> tuple[str, int]:
        """The generator's prefix-cache key of the current segment."""
        return (self.id, len(self.segments))

    def context(self, request: ChatRequest) -> TurnContext:
        """The context of the turn ``request`` asks for.

        Raises:
            RequestError: (400) A message cannot be rendered by the chat template.
        """
        current = self.record
        messages = list(request.messages)
        if current is not None and request.tools == current.tools and same_history(messages, current.messages):
            new = tuple(messages[len(current.messages):])
            if not any(message["role"] == "assistant" for message in new):
                return TurnContext(current, self._render(lambda: self.chat.continuation_ids(
                    current.messages, new, tools=request.tools)), False, new)
        rendered = [self._as_generated(message) for message in messages]
        segment = Segment(messages=messages, tools=request.tools,
                          prompt_ids=self._render(lambda: self.chat.messages_ids(rendered, tools=request.tools)))
        return TurnContext(segment, segment.prompt_ids, True, tuple(messages))

    def _as_generated(self, message: dict[str, Any]) -> dict[str, Any]:
        """A message for a new segment's prompt: a reply this episode generated as the text the model generated
        (its tool calls in the model's own format), any other message as the template renders it."""
        text = self._texts.get(message_key(message)) if message["role"] == "assistant" else None
        return {"role": "assistant", "content": text} if text is not None else template_message(message)

    @staticmethod
    def _render(render: Callable[[], list[int]]) -> list[int]:
        try:
            return render()
        except (ValueError, TypeError) as exc:
            raise RequestError(400, f"the messages could not be rendered by the model's chat template: {exc}",
                               param="messages") from exc

    def commit_context(self, turn: TurnContext) -> None:
        """Record the request's new messages (a turn refused for the context budget records them alone when they
        continue the record, as the in-process rollout records the observation that filled the context)."""
        if turn.new_segment:
            if self.segments:
                self.history_edits += 1
            self.segments.append(turn.segment)
        else:
            turn.segment.append(turn.new_ids, generated=False)
            turn.segment.messages.extend(turn.new_messages)

    def commit(self, turn: TurnContext, reply: Reply) -> None:
        """Record a generated turn in the context it was generated in."""
        self.commit_context(turn)
        segment = turn.segment
        segment.turns.append((len(segment.completion_ids), len(reply.token_ids)))
        segment.append(reply.token_ids, generated=True, logprobs=reply.logprobs)
        segment.append(self.chat.close_turn_ids(list(reply.token_ids)), generated=False)
        segment.messages.append(reply.message())
        self._texts[message_key(reply.message())] = reply.text
        self.generations += 1
