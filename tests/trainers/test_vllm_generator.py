"""VLLMGenerator in server mode: each trainer process posts its own requests, nothing is gathered.

The vLLM server is a stub on loopback speaking vLLM's ``/v1/completions`` format (the part under test is our client
logic: which process sends what, and how the answer is cut into turns); TRL's ``VLLMClient`` is the real one.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import SimpleNamespace

import pytest
import trl.generation.vllm_client as vllm_client_module

from trainers.generation import VLLMGenerator

STOP = 7
"""The stop id of every test turn."""


def completion(prompt: list[int], max_tokens: int) -> list[int]:
    """The stub's completion of ``prompt``: the ids after its last one, as many as ``max_tokens`` (stop ids are
    left to the generator to cut at)."""
    return [prompt[-1] + step for step in range(1, max_tokens + 1)]


def logprob(token: int) -> float:
    return -token / 1000


def choice(prompt: list[int], max_tokens: int) -> dict:
    """One choice in vLLM's completions format, token ids returned as ``token_id:<id>``. Each position's top
    logprobs also hold a likelier id that was not sampled."""
    ids = completion(prompt, max_tokens)
    return {"prompt_token_ids": prompt, "token_ids": ids,
            "logprobs": {"tokens": [f"token_id:{token}" for token in ids],
                         "token_logprobs": [logprob(token) for token in ids],
                         "top_logprobs": [{f"token_id:{token}": logprob(token), "token_id:1": -1e-6}
                                          for token in ids]}}


class StubServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), StubHandler)
        self.requests: list[tuple[str, str, dict | None]] = []  # (method, path, body)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def completion_bodies(self) -> list[dict]:
        return [body for method, path, body in self.requests if (method, path) == ("POST", "/v1/completions")]


class StubHandler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.server.requests.append(("GET", self.path, None))
        if self.path == "/health":
            self.answer({})
        elif self.path == "/v1/models":
            self.answer({"data": [{"id": "stub"}]})
        else:
            self.send_error(404)

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.requests.append(("POST", self.path, body))
        if self.path != "/v1/completions":
            self.send_error(404)
            return
        self.answer({"choices": [choice(prompt, body["max_tokens"]) for prompt in body["prompt"]]})

    def answer(self, payload: dict) -> None:
        data = json.dumps(payload).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args) -> None:
        """Quiet."""


@pytest.fixture
def server(monkeypatch) -> Iterator[StubServer]:
    # VLLMClient refuses to start without vLLM installed; it needs none to talk to a server over HTTP.
    monkeypatch.setattr(vllm_client_module, "is_vllm_available", lambda *args, **kwargs: True)
    stub = StubServer()
    thread = threading.Thread(target=stub.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    yield stub
    stub.shutdown()
    stub.server_close()


def not_collective(*args, **kwargs):
    pytest.fail("VLLMGenerator called vllm_generation.generate, which gathers every process's prompts")


def vllm_generation(server: StubServer, vllm_client=None) -> SimpleNamespace:
    """The settings of TRL's ``VLLMGeneration`` in server mode; ``vllm_client`` None: a non-main process."""
    host, port = server.server_address
    return SimpleNamespace(mode="server", server_base_url=None, server_host=host, server_port=port,
                           server_timeout=1.0, tensor_parallel_size=1, top_k=5, min_p=None, repetition_penalty=1.1,
                           structured_outputs_regex=None, generation_kwargs={"seed": 3}, vllm_client=vllm_client,
                           generate=not_collective)


def generate(generator: VLLMGenerator, contexts: list[list[int]], limits: list[int]):
    return generator.generate(contexts, limits, stop_token_ids=[STOP], temperature=0.9, top_p=0.8,
                              keys=[f"episode-{index}" for index in range(len(contexts))], seeds=[1] * len(contexts))


def expected_ids(context: list[int], limit: int) -> list[int]:
    ids = completion(context, limit)
    return ids[:ids.index(STOP) + 1] if STOP in ids else ids


def test_two_processes_each_get_their_own_completions_from_uneven_calls(server):
    main = VLLMGenerator(vllm_generation(server, vllm_client_module.VLLMClient(base_url=server.base_url)))
    other = VLLMGenerator(vllm_generation(server))
    assert [path for _, path, _ in server.requests] == ["/health", "/v1/models"]  # the main client's; other: lazy
    calls = [(main, [[100]], [3]), (other, [[200], [300, 301], [400], [500]], [2, 4, 1, 3]),
             (main, [[600, 601], [700]], [3, 3]), (main, [[800], [900], [1000]], [1, 2, 3]),
             (other, [[1100]], [4])]

    for generator, contexts, limits in calls:
        turns = generate(generator, contexts, limits)
        assert [turn.ids for turn in turns] == [expected_ids(c, n) for c, n in zip(contexts, limits, strict=True)]
        assert [turn.logprobs for turn in turns] == [[logprob(t) for t in turn.ids] for turn in turns]

    bodies = server.completion_bodies()
    assert [body["prompt"] for body in bodies] == [contexts for _, contexts, _ in calls]  # one request per call
    assert [path for method, path, _ in server.requests if method == "GET"] == ["/health", "/v1/models"] * 2
    assert other._own_client.communicator is None and main._own_client is None


def test_a_stop_id_and_each_rows_limit_cut_the_turns(server):
    generator = VLLMGenerator(vllm_generation(server))

    turns = generate(generator, [[STOP - 3], [1], [STOP - 1]], [6, 2, 6])  # stop at the 3rd id; limit; stop at once

    assert [turn.ids for turn in turns] == [[STOP - 2, STOP - 1, STOP], [2, 3], [STOP]]
    assert [turn.logprobs for turn in turns] == [[logprob(t) for t in turn.ids] for turn in turns]
    assert all(isinstance(lp, float) for turn in turns for lp in turn.logprobs)


def test_the_request_carries_the_turns_sampling_settings_and_trls_own(server):
    generator = VLLMGenerator(vllm_generation(server))

    generate(generator, [[10], [20]], [4, 9])

    body, = server.completion_bodies()
    assert body["prompt"] == [[10], [20]]
    assert {key: body[key] for key in ("n", "temperature", "top_p", "max_tokens", "stop_token_ids", "logprobs")} == {
        "n": 1, "temperature": 0.9, "top_p": 0.8, "max_tokens": 9, "stop_token_ids": [STOP], "logprobs": 0}
    assert {key: body[key] for key in ("top_k", "min_p", "repetition_penalty", "seed")} == {
        "top_k": 5, "min_p": 0.0, "repetition_penalty": 1.1, "seed": 3}
    assert generator.vllm.generation_kwargs == {"seed": 3}  # TRL's settings are left as they were


def test_colocated_tensor_parallelism_on_several_processes_is_refused():
    settings = SimpleNamespace(mode="colocate", tensor_parallel_size=2, accelerator=SimpleNamespace(num_processes=2))

    with pytest.raises(ValueError, match="vllm_tensor_parallel_size 1 in colocate mode, got 2 on 2 processes"):
        VLLMGenerator(settings)
