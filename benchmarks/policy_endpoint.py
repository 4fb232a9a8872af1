"""What the policy endpoint costs: per-turn overhead over in-process generation, and episodes/s of agent programs.

Both rows use the same model (the tiny one by default) and the official ``openai`` client:

- **Per-turn overhead** (0 ms tools): one conversation at a time, each turn a chat completion whose history grows
  by the model's reply and a fixed tool result. Each turn's generation is timed (the generator's own call, as the
  in-process rollout makes it); the overhead of a turn is the client's latency minus that time. Three clients: a
  bare HTTP client posting the JSON (the endpoint's own cost: HTTP, JSON, history matching, rendering the new
  messages, parsing the reply; the target, at most 2 ms p50, is judged on it), and the ``openai`` SDK plain and
  streamed (adding the SDK's own request building and response parsing, which any program using it pays).
- **Throughput**: ``--programs`` agent programs at once on Search-v0 (:func:`trainers.agents.openai_sdk.text_loop`:
  the model's text to the env as it is, each episode's ``openai`` client derived from the process's one) against the
  in-process rollout engine on the same requests, alternating, ``--repeats`` times; episodes/s of each (median), their
  ratio, and whether every row played the same tokens. The judged row (the target: at least 0.8) runs the programs in
  ``--programs`` processes (:class:`~trainers.agent_program.WorkerPrograms`, each playing episode after episode).
  Beside it: the same processes making a client per episode, and the programs in threads of this process (the SDK, and
  a bare HTTP client), where their work shares this process's interpreter lock with the generator.

Example:
    python -m benchmarks.policy_endpoint
    python -m benchmarks.policy_endpoint --turns 100 --programs 16 --repeats 3 --json endpoint.json
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

OVERHEAD_TARGET_MS = 2.0
THROUGHPUT_TARGET = 0.8
ENV_ID = "agentrl/Search-v0"
TOOL_RESULT = "1. doc-000017 Orlan Vesk: Orlan Vesk was born in 1931 in the river town of Maemton."
"""The fixed tool result of the overhead row (a 0 ms tool)."""


@dataclass
class Report:
    """The benchmark's figures (milliseconds and episodes per second)."""

    overhead_ms: dict[str, dict[str, float]] = field(default_factory=dict)
    generation_ms_p50: float = 0.0
    in_process_eps: float = 0.0
    episodes_per_s: dict[str, float] = field(default_factory=dict)
    same_tokens: bool = False
    programs: int = 0

    def ratio_of(self, row: str) -> float:
        """A row's episodes/s over the in-process engine's."""
        return self.episodes_per_s[row] / self.in_process_eps if self.in_process_eps else float("nan")

    @property
    def ratio(self) -> float:
        """The judged row's (programs in processes, a client per episode) episodes/s over in-process episodes/s."""
        return self.ratio_of(JUDGED_ROW)

    @property
    def targets_met(self) -> bool:
        """The endpoint's own overhead (the bare HTTP row) within target, the throughput ratio within target, the
        same tokens both ways."""
        return (self.overhead_ms["http"]["p50"] <= OVERHEAD_TARGET_MS and self.ratio >= THROUGHPUT_TARGET
                and self.same_tokens)


class TimedGenerator:
    """Times each ``generate`` call of the generator it wraps (instrumentation, the model runs as always)."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.seconds: list[float] = []

    def generate(self, contexts, max_new_tokens, **kwargs):
        started = time.perf_counter()
        turns = self.inner.generate(contexts, max_new_tokens, **kwargs)
        self.seconds.append(time.perf_counter() - started)
        return turns

    def release(self, keys) -> None:
        self.inner.release(keys)


CLIENTS = ("http", "openai", "openai-streamed")
"""The overhead rows: a bare HTTP client, the openai SDK, the openai SDK streaming."""


def measure_overhead(model, tokenizer, turns: int, *, client_kind: str) -> tuple[dict[str, float], list[float]]:
    """p50 and p90 of (client latency - generation time) over ``turns`` sequential turns; and the generation
    times."""
    from trainers.endpoint import PolicyEndpoint
    from trainers.generation import TransformersGenerator
    from trainers.rollout import RolloutConfig

    config = RolloutConfig(max_tokens_per_turn=16, max_context_tokens=2048)
    generator = TimedGenerator(TransformersGenerator(model, tokenizer.pad_token_id))
    overheads = []
    with PolicyEndpoint(generator, tokenizer, config, batch_window_s=0.0) as endpoint:
        episode, messages = None, []
        for turn in range(turns + 1):  # the first turn warms the server and the client up
            if episode is None or sum(len(s.completion_ids) for s in episode.segments) > 1500:
                episode = endpoint.open_episode(seed_of=lambda n: n)
                complete = _client(client_kind, endpoint.base_url(episode.id))
                messages = [{"role": "user", "content": "Who was born in Maemton? Use the search tool."}]
            started = time.perf_counter()
            text = complete(messages)
            latency = time.perf_counter() - started
            if turn:
                overheads.append((latency - generator.seconds[-1]) * 1000)
            messages += [{"role": "assistant", "content": text}, {"role": "tool", "content": TOOL_RESULT}]
    return _percentiles(overheads), generator.seconds[1:]


def _client(kind: str, base_url: str):
    """A function of the messages that returns the reply's text, sent by a client of ``kind``."""
    import httpx
    import openai

    if kind == "http":
        http = httpx.Client()
        return lambda messages: http.post(f"{base_url}/chat/completions", json={
            "model": "policy", "messages": messages}).json()["choices"][0]["message"]["content"]
    client = openai.OpenAI(base_url=base_url, api_key="-", max_retries=0)
    if kind == "openai":
        return lambda messages: client.chat.completions.create(
            model="policy", messages=messages).choices[0].message.content
    return lambda messages: "".join(chunk.choices[0].delta.content or "" for chunk in client.chat.completions.create(
        model="policy", messages=messages, stream=True) if chunk.choices)


def _percentiles(values: Sequence[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {"p50": statistics.median(ordered), "p90": ordered[int(0.9 * (len(ordered) - 1))]}


@functools.cache
def _http_client():
    """This process's one bare HTTP client (making one loads the CA bundle, as an ``openai`` client's does)."""
    import httpx

    return httpx.Client(timeout=None)


def http_text_loop(session) -> None:
    """:func:`trainers.agents.openai_sdk.text_loop` with a bare HTTP client (one per process) instead of the ``openai``
    SDK."""
    from trainers.agents.openai_sdk import play_text

    play_text(session, lambda messages: _http_client().post(f"{session.base_url}/chat/completions", json={
        "model": session.model, "messages": messages}).json()["choices"][0]["message"]["content"])


def new_client_text_loop(session) -> None:
    """:func:`trainers.agents.openai_sdk.text_loop` making its ``openai`` client for the episode, as a program that
    does not keep one per process does (a client costs 20-40 ms to make: httpx loads the CA bundle)."""
    import openai

    from trainers.agents.openai_sdk import play_text

    with openai.OpenAI(base_url=session.base_url, api_key=session.api_key, max_retries=0) as client:
        play_text(session, lambda messages: client.chat.completions.create(
            model=session.model, messages=messages).choices[0].message.content)


THROUGHPUT_ROWS = {
    "processes": "trainers.agents.openai_sdk:text_loop",
    "processes, a client made per episode": "benchmarks.policy_endpoint:new_client_text_loop",
    "threads": "trainers.agents.openai_sdk:text_loop",
    "threads, bare HTTP": "benchmarks.policy_endpoint:http_text_loop",
}
"""The agent-program rows: where the programs run (worker processes or threads of this process) and the program."""
JUDGED_ROW = "processes"


def _program(row: str, programs: int):
    """The agent program of a throughput row."""
    from trainers.agent_client import load_agent_program
    from trainers.agent_program import WorkerPrograms

    reference = THROUGHPUT_ROWS[row]
    return WorkerPrograms(reference, programs) if row.startswith("processes") else load_agent_program(reference)


def measure_throughput(model, tokenizer, programs: int, repeats: int) -> tuple[dict[str, float], bool]:
    """Median episodes/s of the in-process engine and of every row of ``programs`` concurrent agent programs on the
    same requests, alternating; whether every repeat played the same tokens each way."""
    import gymnasium as gym
    import torch

    import agentgym_envs  # noqa: F401
    from tasks import load_split
    from trainers.agent_program import AgentProgramRollout
    from trainers.generation import TransformersGenerator
    from trainers.rollout import EnvPool, RolloutConfig, RolloutEngine, group_requests

    tasks = load_split("Search", "train")[:max(1, programs // 4)]
    requests = group_requests([(ENV_ID, task) for task in tasks], max(1, programs // len(tasks)), seed=0)
    config = RolloutConfig(max_turns=3, max_tokens_per_turn=16)
    pool = EnvPool(lambda env_id: gym.make(env_id, split="train"))
    generator = TransformersGenerator(model, tokenizer.pad_token_id)
    engine = RolloutEngine(generator, tokenizer, pool, config)
    rates: dict[str, list[float]] = {"in_process": [], **{row: [] for row in THROUGHPUT_ROWS}}
    same = True
    try:
        with contextlib.ExitStack() as stack:
            rollouts = {"in_process": engine, **{
                row: stack.enter_context(AgentProgramRollout(generator, tokenizer, pool, _program(row, programs),
                                                             config)) for row in THROUGHPUT_ROWS}}
            for rollout in rollouts.values():  # warm-up: envs, caches, threads
                rollout.run(requests)
            for repeat in range(repeats):
                played = {}
                for name, rollout in rollouts.items():
                    torch.manual_seed(repeat)
                    started = time.perf_counter()
                    played[name] = rollout.run(requests)
                    rates[name].append(len(requests) / (time.perf_counter() - started))
                same &= all(a.completion_ids == b.completion_ids and a.env_mask == b.env_mask
                            for row in THROUGHPUT_ROWS for a, b in zip(played["in_process"], played[row], strict=True))
    finally:
        pool.close()
    return {name: statistics.median(values) for name, values in rates.items()}, same


def run_benchmark(turns: int, programs: int, repeats: int) -> Report:
    """Measure both rows on the tiny model (one torch thread: the agent programs' CPU work is the row's cost)."""
    from trainers.pretrain import one_torch_thread
    from trainers.tiny_model import load_or_build_tiny_model

    model, tokenizer = load_or_build_tiny_model()
    report = Report(programs=programs)
    with one_torch_thread():
        generation: list[float] = []
        for kind in CLIENTS:
            report.overhead_ms[kind], seconds = measure_overhead(model, tokenizer, turns, client_kind=kind)
            generation += seconds
        report.generation_ms_p50 = statistics.median(generation) * 1000
        rates, report.same_tokens = measure_throughput(model, tokenizer, programs, repeats)
        report.in_process_eps = rates.pop("in_process")
        report.episodes_per_s = rates
    return report


def render(report: Report) -> None:
    """Print the figures, each against its target."""
    print(f"per-turn generation (in process), p50: {report.generation_ms_p50:.2f} ms")
    for kind, row in report.overhead_ms.items():
        judged = "ok" if row["p50"] <= OVERHEAD_TARGET_MS else "MISSED"
        verdict = f"target p50 <= {OVERHEAD_TARGET_MS} ms: {judged}" if kind == "http" else "with the SDK's own work"
        print(f"overhead per turn over in-process generation, {kind:15s} client: p50 {row['p50']:.2f} ms, "
              f"p90 {row['p90']:.2f} ms ({verdict})")
    print(f"in-process rollout engine: {report.in_process_eps:.2f} episodes/s")
    for row, rate in report.episodes_per_s.items():
        verdict = "ok" if report.ratio_of(row) >= THROUGHPUT_TARGET else "MISSED"
        judged = f" (target >= {THROUGHPUT_TARGET}: {verdict})" if row == JUDGED_ROW else ""
        print(f"{report.programs} agent programs in {row}: {rate:.2f} episodes/s, ratio {report.ratio_of(row):.2f}"
              f"{judged}")
    print(f"same tokens in every row: {'yes' if report.same_tokens else 'NO'}")


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark; status 1 when a target is missed."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.policy_endpoint", description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=100, help="timed turns per overhead row")
    parser.add_argument("--programs", type=int, default=16, help="concurrent agent programs in the throughput row")
    parser.add_argument("--repeats", type=int, default=3, help="alternating repeats of the throughput row")
    parser.add_argument("--json", type=Path, metavar="PATH", help="also write the figures to PATH")
    args = parser.parse_args(argv)
    if min(args.turns, args.programs, args.repeats) < 1:
        raise SystemExit("--turns, --programs and --repeats: expected >= 1")
    report = run_benchmark(args.turns, args.programs, args.repeats)
    render(report)
    if args.json is not None:
        figures: dict[str, Any] = asdict(report) | {"ratio": report.ratio, "targets_met": report.targets_met}
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    return 0 if report.targets_met else 1


if __name__ == "__main__":
    sys.exit(main())
