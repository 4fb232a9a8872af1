"""The policy endpoint driven by the official ``openai`` client: the trained ids are the generated ids, an edited
history is split and counted, tool calls come back in OpenAI's format, and every bad request or broken program
gets an OpenAI error or a counted stop while the server stays up."""

from __future__ import annotations

import concurrent.futures
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from types import SimpleNamespace

import httpx
import openai
import pytest
import torch

import agentgym_envs  # noqa: F401
from agentgym_envs.actions import answer_action, tool_call_action
from agentgym_envs.runner import EpisodeRequest
from tasks import load_split
from trainers.agent_program import AgentProgramRollout, AgentSession
from trainers.agents.openai_sdk import text_loop
from trainers.endpoint import PolicyEndpoint
from trainers.generation import GeneratedTurn, TransformersGenerator
from trainers.rollout import RolloutConfig, RolloutEngine, group_requests

pytestmark = pytest.mark.usefixtures("one_torch_thread")

ENV_ID = "agentrl/Search-v0"
TASKS = load_split("Search", "train")[:3]
CONFIG = RolloutConfig(max_turns=3, max_tokens_per_turn=12)
ROUNDS = RolloutConfig(max_turns=3, max_tokens_per_turn=12, schedule="rounds", batch_window_s=2.0)
"""Round-synchronous, and the endpoint waits for every program's request however loaded the machine: both rollouts
then generate the same batches, so even the logprobs are bit for bit equal (a batch of other rows gives the same
tokens, but may round logprobs differently in the last bits)."""


class RecordingGenerator:
    """Wraps a generator and keeps every turn it returned."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.turns: list[GeneratedTurn] = []

    def generate(self, contexts, max_new_tokens, **kwargs) -> list[GeneratedTurn]:
        turns = self.inner.generate(contexts, max_new_tokens, **kwargs)
        self.turns += turns
        return turns

    def release(self, keys) -> None:
        self.inner.release(keys)


class ScriptedGenerator:
    """Emits fixed action texts in order, one per call (a unit-test double for the model: these tests are about
    what the endpoint does with a turn, not about which turn a model samples)."""

    def __init__(self, tokenizer, actions: Sequence[str]) -> None:
        self.ids = [[*tokenizer.encode(action, add_special_tokens=False), tokenizer.eos_token_id]
                    for action in actions]
        self.calls = 0

    def generate(self, contexts, max_new_tokens, **_) -> list[GeneratedTurn]:
        ids = self.ids[min(self.calls, len(self.ids) - 1)]
        self.calls += 1
        return [GeneratedTurn(ids=list(ids), logprobs=[-0.5] * len(ids)) for _ in contexts]

    def release(self, keys) -> None:
        pass


def client_of(session: AgentSession) -> openai.OpenAI:
    return openai.OpenAI(base_url=session.base_url, api_key=session.api_key, max_retries=0)


def tool_program(*, stream: bool = False, keep_last: int | None = None) -> Callable[[AgentSession], None]:
    """The plain openai-SDK tool loop; ``keep_last`` keeps only the prompt and the last messages (a truncating
    program)."""

    def program(session: AgentSession) -> None:
        client = client_of(session)
        messages: list = [{"role": "user", "content": session.prompt}]
        while not session.done:
            sent = messages if keep_last is None else messages[:1] + messages[1:][-keep_last:]
            message = complete(client, session, sent, stream)
            messages.append(message)
            for call in message.get("tool_calls") or []:
                result = session.call(call["function"]["name"], call["function"]["arguments"])
                messages.append({"role": "tool", "tool_call_id": call["id"], "content": result})
            if not message.get("tool_calls"):
                session.answer(message.get("content") or "")

    return program


def complete(client: openai.OpenAI, session: AgentSession, messages: list, stream: bool) -> dict:
    """One chat completion as an assistant message dict, streamed and reassembled from its deltas or not."""
    if not stream:
        return client.chat.completions.create(model=session.model, messages=messages, tools=session.tools
                                              ).choices[0].message.model_dump(exclude_none=True)
    content, calls = "", {}
    for chunk in client.chat.completions.create(model=session.model, messages=messages, tools=session.tools,
                                                stream=True, stream_options={"include_usage": True}):
        for choice in chunk.choices:
            content += choice.delta.content or ""
            for call in choice.delta.tool_calls or []:
                entry = calls.setdefault(call.index, {"id": call.id, "type": "function",
                                                      "function": {"name": "", "arguments": ""}})
                entry["function"]["name"] += call.function.name or ""
                entry["function"]["arguments"] += call.function.arguments or ""
    message = {"role": "assistant", "content": content or None}
    if calls:
        message["tool_calls"] = [calls[i] for i in sorted(calls)]
    return message


def generated_spans(episode) -> list[list[int]]:
    """The runs of ids masked 1 in an episode's completion."""
    spans, current = [], []
    for token, mask in zip(episode.completion_ids, episode.env_mask, strict=True):
        if mask:
            current.append(token)
        elif current:
            spans, current = [*spans, current], []
    return spans + ([current] if current else [])


def test_a_text_loop_gives_the_in_process_rollouts_episodes_token_for_token(tiny, envs):
    model, tokenizer = tiny
    requests = group_requests([(ENV_ID, task) for task in TASKS], 2, seed=0)
    torch.manual_seed(0)
    in_process = RolloutEngine(TransformersGenerator(model, tokenizer.pad_token_id), tokenizer, envs, ROUNDS
                               ).run(requests)
    recorder = RecordingGenerator(TransformersGenerator(model, tokenizer.pad_token_id))
    with AgentProgramRollout(recorder, tokenizer, envs, text_loop, ROUNDS) as rollout:
        torch.manual_seed(0)
        served = rollout.run(requests)
        assert max(rollout.endpoint.batch_sizes) == len(requests)  # the programs' turns were batched together

    for expected, got in zip(in_process, served, strict=True):
        assert got.prompt_ids == expected.prompt_ids
        assert got.completion_ids == expected.completion_ids
        assert got.env_mask == expected.env_mask
        assert got.logprobs == expected.logprobs
        assert [t.action for t in got.turns] == [t.action for t in expected.turns]
        assert [(t.start, t.length) for t in got.turns] == [(t.start, t.length) for t in expected.turns]
        assert (got.stop_reason, got.reward, got.reward_components) == (
            expected.stop_reason, expected.reward, expected.reward_components)
    generated = [span for episode in served for span in generated_spans(episode)]
    assert sorted(map(tuple, generated)) == sorted(tuple(turn.ids) for turn in recorder.turns)
    assert sum(len(turn.ids) for turn in recorder.turns) == sum(sum(e.env_mask) for e in served)


def test_a_context_budget_refusal_ends_the_episode_as_the_in_process_rollout_does(tiny, envs):
    model, tokenizer = tiny
    config = replace(ROUNDS, max_turns=4, max_tokens_per_turn=24, max_context_tokens=700)
    requests = group_requests([(ENV_ID, TASKS[0])], 2, seed=3)
    torch.manual_seed(1)
    in_process = RolloutEngine(TransformersGenerator(model, tokenizer.pad_token_id), tokenizer, envs, config
                               ).run(requests)
    with AgentProgramRollout(TransformersGenerator(model, tokenizer.pad_token_id), tokenizer, envs, text_loop,
                             config) as rollout:
        torch.manual_seed(1)
        served = rollout.run(requests)
        assert rollout.endpoint.errors["context_length_exceeded"] == sum(e.stop_reason == "context" for e in served)

    assert [e.stop_reason for e in served] == [e.stop_reason for e in in_process]
    assert "context" in {e.stop_reason for e in served}
    for expected, got in zip(in_process, served, strict=True):
        assert (got.completion_ids, got.env_mask, got.logprobs) == (
            expected.completion_ids, expected.env_mask, expected.logprobs)
        assert got.scored


SEARCH_THEN_ANSWER = [tool_call_action("search", query="birth year"), answer_action("1970")]


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
def test_tool_calls_reach_the_program_in_openais_format_and_the_env_scores_its_answer(tiny, envs, stream):
    _, tokenizer = tiny
    generator = ScriptedGenerator(tokenizer, SEARCH_THEN_ANSWER)
    with AgentProgramRollout(generator, tokenizer, envs, tool_program(stream=stream), CONFIG) as rollout:
        [episode] = rollout.run([EpisodeRequest(ENV_ID, TASKS[0], 0, 0)])

    assert episode.stop_reason == "answered" and episode.success
    assert [call["name"] for call in episode.tool_calls] == ["search"]
    assert [turn.action for turn in episode.turns] == SEARCH_THEN_ANSWER
    assert generated_spans(episode) == generator.ids
    assert [lp for lp, mask in zip(episode.logprobs, episode.env_mask, strict=True) if mask] == [-0.5] * sum(
        map(len, generator.ids))
    search_result = episode.turns[0].observation
    tool_ids = [t for t, mask in zip(episode.completion_ids, episode.env_mask, strict=True) if not mask]
    assert search_result.strip().splitlines()[0] in tokenizer.decode(tool_ids)  # the tool result, masked 0


def test_a_program_that_truncates_its_history_gets_a_new_counted_segment_never_a_silent_retokenization(tiny, envs):
    _, tokenizer = tiny
    actions = [tool_call_action("search", query="a"), tool_call_action("search", query="b"), answer_action("1970")]
    generator = ScriptedGenerator(tokenizer, actions)
    with AgentProgramRollout(generator, tokenizer, envs, tool_program(keep_last=2), CONFIG) as rollout:
        [episode] = rollout.run([EpisodeRequest(ENV_ID, TASKS[0], 0, 0)])
        stats = dict(rollout.agent.stats)

    assert episode.stop_reason == "answered", episode.error
    # turn 2 continues turn 1's history (prompt + 2 messages); turn 3's dropped turn 1: a new segment
    assert stats["history_edits"] == 1 and stats["segments_dropped"] == 1
    assert generated_spans(episode) == [generator.ids[2]]  # the record trained on is the last segment
    assert [turn.length for turn in episode.turns] == [0, 0, len(generator.ids[2])]
    prompt = tokenizer.decode(episode.prompt_ids)  # the kept messages, the model's turn as it generated it
    assert prompt.count("<tool_response>") == 1 and actions[1] in prompt and actions[0] not in prompt


@pytest.fixture
def endpoint(tiny):
    model, tokenizer = tiny
    with PolicyEndpoint(TransformersGenerator(model, tokenizer.pad_token_id), tokenizer, CONFIG) as server:
        yield server


def test_bad_requests_get_openai_errors_and_the_server_keeps_serving(endpoint):
    episode = endpoint.open_episode(seed_of=lambda turn: turn)
    client = openai.OpenAI(base_url=endpoint.base_url(episode.id), api_key="-", max_retries=0)
    hello = [{"role": "user", "content": "hello"}]

    with pytest.raises(openai.NotFoundError, match="unknown episode 'nope'"):
        openai.OpenAI(base_url=endpoint.base_url("nope"), api_key="-", max_retries=0).chat.completions.create(
            model="m", messages=hello)
    with pytest.raises(openai.BadRequestError, match="'n' to be 1"):
        client.chat.completions.create(model="m", messages=hello, n=2)
    with pytest.raises(openai.BadRequestError, match="images, audio and files are not supported"):
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": [
            {"type": "image_url", "image_url": {"url": "data:,"}}]}])
    with pytest.raises(openai.BadRequestError, match="does not fit the context budget") as refused:
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "word " * 3000}])
    assert refused.value.code == "context_length_exceeded"
    malformed = httpx.post(endpoint.base_url(episode.id) + "/chat/completions", content=b"{not json")
    assert malformed.status_code == 400 and "not JSON" in malformed.json()["error"]["message"]

    reply = client.chat.completions.create(model="m", messages=hello)  # still serving, the episode untouched
    assert reply.choices[0].message.role == "assistant" and reply.usage.completion_tokens >= 1
    assert [m.id for m in client.models.list()] == [endpoint.model_name]
    by_key = openai.OpenAI(base_url=endpoint.shared_base_url, api_key=episode.id, max_retries=0)
    assert by_key.chat.completions.create(model="m", messages=hello).usage.completion_tokens >= 1
    assert episode.generations == 2 and len(episode.segments) == 2  # the by-key request did not extend the first

    endpoint.finish_episode(episode.id)
    with pytest.raises(openai.ConflictError, match="has finished"):
        client.chat.completions.create(model="m", messages=hello)
    assert endpoint.errors == {"episode_not_found": 1, "400": 3, "context_length_exceeded": 1,
                               "episode_finished": 1}


def test_workers_are_handed_open_episodes_in_order_and_told_when_the_server_closes(tiny):
    model, tokenizer = tiny
    server = PolicyEndpoint(TransformersGenerator(model, tokenizer.pad_token_id), tokenizer, CONFIG)
    with server:
        next_url = server.url + "/agents/next"
        assert httpx.get(next_url, params={"wait_s": 0.05}).status_code == 204  # none offered
        assert httpx.get(next_url, params={"wait_s": "soon"}).status_code == 400
        for name in ("gone", "open"):  # (the sessions are only described here)
            server.sessions[name] = SimpleNamespace(prompt=f"task {name}", tools=[], model="m", done=False)
            server.offer_episode(name)
        server.sessions.pop("gone")  # it ended before a worker asked: skipped
        claimed = httpx.get(next_url, params={"wait_s": 5}).json()
        described = {"prompt": "task open", "tools": [], "model": "m", "done": False}
        assert claimed == {"episode": "open", "session_url": server.session_url("open"),
                           "base_url": server.base_url("open"), "api_key": "open", "session": described}
        assert httpx.get(server.session_url("open")).json() == described  # what a worker is spared asking
        ended = httpx.post(server.session_url("nope") + "/end", json={"error": None})
        assert ended.status_code == 404
        with httpx.Client(timeout=30) as waiting, concurrent.futures.ThreadPoolExecutor(1) as pool:
            asked = pool.submit(waiting.get, next_url, params={"wait_s": 25})
            time.sleep(0.3)  # the worker's request is waiting on the server
            started = time.monotonic()
            server.close()
            assert asked.result().status_code == 410 and time.monotonic() - started < 10
    # (closing again, on leaving the block, does nothing)


def test_the_endpoint_listens_on_loopback_only_unless_told(tiny):
    model, tokenizer = tiny
    with pytest.raises(ValueError, match="expected a loopback address"):
        PolicyEndpoint(TransformersGenerator(model, tokenizer.pad_token_id), tokenizer, CONFIG, host="0.0.0.0")


def crashing_program(session: AgentSession) -> None:
    client_of(session).chat.completions.create(model=session.model, messages=[{"role": "user", "content": "hi"}])
    json.loads("this program assumed the model answers JSON")


def hanging_program(session: AgentSession) -> None:
    time.sleep(5)
    session.answer("too late")


def test_a_crashing_or_hanging_program_ends_its_episode_unscored_and_counted(tiny, envs):
    model, tokenizer = tiny
    requests = [EpisodeRequest(ENV_ID, TASKS[0], 0, 0), EpisodeRequest(ENV_ID, TASKS[1], 1, 1)]
    generator = TransformersGenerator(model, tokenizer.pad_token_id)
    with AgentProgramRollout(generator, tokenizer, envs, crashing_program, CONFIG) as rollout:
        crashed = rollout.run(requests)
        assert rollout.agent.stats["agent_error"] == 2
    assert all(e.stop_reason == "agent_error" and not e.scored for e in crashed)
    assert "JSONDecodeError" in crashed[0].error and "the agent program raised" in crashed[0].error
    assert sum(crashed[0].env_mask) >= 1  # what it generated before crashing is recorded

    with AgentProgramRollout(generator, tokenizer, envs, hanging_program, CONFIG, timeout_s=0.5) as rollout:
        started = time.monotonic()
        hung = rollout.run(requests)
        assert time.monotonic() - started < 4
        assert rollout.agent.stats["agent_timeout"] == 2
    assert all(e.stop_reason == "agent_timeout" and not e.scored for e in hung)
    assert "within 0.5 s" in hung[0].error


def model_free_program(session: AgentSession) -> None:
    session.answer("1970")  # never asks the policy: whatever it plays, there is nothing to train on


def test_a_program_that_never_asks_the_policy_is_unscored_never_a_silent_empty_sample(tiny, envs):
    model, tokenizer = tiny
    generator = TransformersGenerator(model, tokenizer.pad_token_id)
    with AgentProgramRollout(generator, tokenizer, envs, model_free_program, CONFIG) as rollout:
        [episode] = rollout.run([EpisodeRequest(ENV_ID, TASKS[0], 0, 0)])
        assert rollout.agent.stats["no_generation"] == 1
    assert episode.stop_reason == "agent_error" and not episode.scored
    assert "never asked the policy endpoint for a turn" in episode.error and not episode.completion_ids


def test_64_concurrent_programs_each_finish_with_their_own_record(tiny, envs):
    model, tokenizer = tiny
    tasks = load_split("Search", "train")[:16]
    requests = group_requests([(ENV_ID, task) for task in tasks], 4, seed=0)
    config = RolloutConfig(max_turns=2, max_tokens_per_turn=8)
    with AgentProgramRollout(TransformersGenerator(model, tokenizer.pad_token_id), tokenizer, envs, text_loop,
                             config) as rollout:
        episodes = rollout.run(requests)
        assert rollout.endpoint.errors == {}
        assert max(rollout.endpoint.batch_sizes) > 16  # their turns were generated in shared batches
        assert not rollout.endpoint.episodes  # every route was closed and dropped
    assert len(episodes) == 64 and all(e.scored and e.done for e in episodes)
    assert all(len(e.turns) == 2 and sum(e.env_mask) >= 2 for e in episodes)
    assert len({tuple(e.prompt_ids) for e in episodes}) == 16  # one prompt per task, each episode its own record
