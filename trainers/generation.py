"""Generators: continue a batch of token contexts by one turn each, returning ids and their logprobs.

:class:`TransformersGenerator` runs its own decode loop on a ``transformers`` causal LM (CPU or GPU): it keeps
each episode's KV cache between turns (prefix reuse) and samples every row from its own seeded stream.
:class:`VLLMGenerator` samples with vLLM through TRL's integration (``trainer.vllm_generation``): in server mode
each trainer process posts its own requests to the server, in colocate mode each runs its own engine. It is only
usable where vLLM is installed (the ``vllm`` extra, GPU machines).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

import torch
from transformers.cache_utils import Cache, DynamicLayer


@dataclass(frozen=True)
class GeneratedTurn:
    """One turn as sampled: its ids (through the stop token, if one was hit) and their logprobs."""

    ids: list[int]
    logprobs: list[float]


class Generator(Protocol):
    """Continues token contexts; the logprob of each sampled id is under the tempered distribution.

    Temperature 0 is greedy decoding (logprobs under the untempered distribution).
    """

    def generate(self, contexts: Sequence[list[int]], max_new_tokens: Sequence[int], *,
                 stop_token_ids: Sequence[int], temperature: float, top_p: float,
                 keys: Sequence[Hashable] | None = None, seeds: Sequence[int] | None = None) -> list[GeneratedTurn]:
        """One turn per context, each stopping at a stop id or after its ``max_new_tokens``.

        Args:
            contexts: Token ids to continue.
            max_new_tokens: Most ids of each turn.
            stop_token_ids: A turn ends after the first of these.
            temperature: Sampling temperature (0: greedy).
            top_p: Nucleus sampling mass (1: the whole vocabulary).
            keys: Identity of the episode each context belongs to. A generator that caches prefixes continues
                the cache it kept for that key when the cached ids are a prefix of the context. None: no caching.
            seeds: Each turn's sampling seed: the same context and seed give the same turn, whatever else is in
                the batch. None: each row's seed is drawn from torch's global RNG.
        """

    def release(self, keys: Iterable[Hashable]) -> None:
        """Forget the cached prefixes of ``keys`` (their episodes are over)."""


@dataclass
class _PrefixCache:
    """The KV cache of one key: the ids it covers and, per layer, keys and values ``[1, heads, len(ids), dim]``."""

    ids: list[int]
    layers: list[tuple[torch.Tensor, torch.Tensor]]


@dataclass
class _Chunk:
    """The rows of one batched forward pass: left-padded cached parts, then left-padded new suffixes.

    Row ``i`` is ``[pad][cached_i][pad][new_i]``; ``mask`` marks its real tokens (it grows by one column per
    decode step), ``positions`` are each real token's position in its own sequence.
    """

    input_ids: torch.Tensor
    mask: torch.Tensor
    positions: torch.Tensor
    cache: Cache

    def extend(self) -> None:
        """Make room for one more token per row (the one each row sampled last)."""
        self.mask = torch.cat([self.mask, torch.ones_like(self.mask[:, :1])], dim=1)
        self.positions = self.positions[:, -1:] + 1

    def select(self, keep: torch.Tensor) -> None:
        """Keep only the rows where ``keep`` is true."""
        self.mask, self.positions = self.mask[keep], self.positions[keep]
        for layer in self.cache.layers:
            layer.select(keep)


class TransformersGenerator:
    """Batched sampling with an own decode loop on a ``transformers`` causal LM, with prefix reuse.

    Each call runs the contexts in chunks of ``batch_size``: one forward pass over the tokens each row's cache
    does not cover, then one token per step for every row until each row has hit a stop id or its limit. The
    chunk's keys and values go into buffers allocated once (a step writes one column, it does not copy the cache),
    and rows that are done leave the batch once a quarter of it is done.

    Prefix reuse: with ``keys``, the KV cache of each key is kept after its turn; it covers the context and the
    turn's ids but the last (whose KV was never computed). The next call with that key whose context starts with
    those ids feeds only the rest (the template's end of turn, the observation, the new generation prompt); a
    context that does not start with them is computed from scratch and replaces the cache (keys are expected to be
    unique within a call; of two rows with one key, the later one's cache is kept). Caches are dropped by
    :meth:`release`, and all at once when the model's weights changed since they were computed (an optimizer step
    or a weight load bumps the parameters' version counters), so a turn is always computed under the current
    weights. Memory: ``2 * layers * kv_heads * head_dim * bytes per element`` per cached token (3 KiB for the tiny
    model in float32, 12 KiB for Qwen2.5-0.5B in bfloat16), held until the key is released.

    Sampling: each row draws its uniforms from its own ``torch.Generator`` seeded with the row's seed, and picks
    its token by inverse CDF over the tempered (nucleus-filtered, renormalised) distribution, so a row's turn does
    not depend on the other rows of the batch. The logprob of a sampled id is its ``log_softmax(logits /
    temperature)`` over the whole vocabulary (the nucleus filter is not applied to it), as TRL computes it.

    Not thread-safe: call :meth:`generate` and :meth:`release` from one thread at a time.

    Args:
        model: A causal LM whose layers all use full attention (its current weights are used on every call).
        pad_token_id: Padding id of the tokenizer.
        batch_size: Most contexts per forward pass.
        cache_prefixes: Keep each key's KV cache between turns. False: the same decode loop, every context
            computed from scratch (the "no prefix reuse" baseline).

    Attributes:
        fed_tokens: Real (not padding) tokens fed to the model so far, prefill and decode steps.
        reused_tokens: Context tokens that were taken from a cache instead of being fed.

    Example:
        >>> generator = TransformersGenerator(model, tokenizer.pad_token_id)           # doctest: +SKIP
        >>> turn, = generator.generate([prompt_ids], [64], stop_token_ids=[eos], temperature=1.0, top_p=1.0,
        ...                            keys=["episode-0"], seeds=[7])                 # doctest: +SKIP
        >>> generator.release(["episode-0"])                                         # doctest: +SKIP
    """

    def __init__(self, model, pad_token_id: int, batch_size: int = 64, cache_prefixes: bool = True) -> None:
        _check_full_attention(model)
        self.model = model
        self.pad_token_id = pad_token_id
        self.batch_size = batch_size
        self.cache_prefixes = cache_prefixes
        self.fed_tokens = 0
        self.reused_tokens = 0
        self._caches: dict[Hashable, _PrefixCache] = {}
        self._weights_version: tuple[int, ...] | None = None

    @property
    def cached_tokens(self) -> int:
        """Tokens whose KV are held across all keys."""
        return sum(len(cache.ids) for cache in self._caches.values())

    def cached_keys(self) -> set[Hashable]:
        """The keys whose prefixes are cached."""
        return set(self._caches)

    def release(self, keys: Iterable[Hashable]) -> None:
        """Forget the cached prefixes of ``keys``; unknown keys are ignored."""
        for key in keys:
            self._caches.pop(key, None)

    def generate(self, contexts: Sequence[list[int]], max_new_tokens: Sequence[int], *,
                 stop_token_ids: Sequence[int], temperature: float, top_p: float,
                 keys: Sequence[Hashable] | None = None, seeds: Sequence[int] | None = None) -> list[GeneratedTurn]:
        """Sample one turn per context; see :class:`Generator`."""
        n = len(contexts)
        _check_lengths(n, max_new_tokens=max_new_tokens, keys=keys, seeds=seeds)
        if any(len(context) == 0 for context in contexts):
            raise ValueError("expected every context to hold at least one token, got an empty one")
        row_keys = list(keys) if keys is not None and self.cache_prefixes else [None] * n
        if seeds is None and temperature > 0:
            seeds = torch.randint(0, 2**63 - 1, (n,)).tolist()
        self._drop_stale_caches()
        was_training = self.model.training
        self.model.eval()
        try:
            with torch.inference_mode():
                turns: list[GeneratedTurn] = []
                for start in range(0, n, self.batch_size):
                    rows = slice(start, start + self.batch_size)
                    turns += self._generate_chunk(contexts[rows], max_new_tokens[rows], row_keys[rows],
                                                  None if seeds is None else seeds[rows],
                                                  stop_token_ids, temperature, top_p)
        finally:
            self.model.train(was_training)
        return turns

    def _drop_stale_caches(self) -> None:
        """Forget every cache when the weights changed (in place or replaced) since the last call."""
        version = tuple(value for p in self.model.parameters() for value in (p._version, p.data_ptr()))
        if version != self._weights_version:
            self._caches.clear()
            self._weights_version = version

    def _generate_chunk(self, contexts: Sequence[list[int]], limits: Sequence[int], keys: Sequence[Hashable | None],
                        seeds: Sequence[int] | None, stop_token_ids: Sequence[int], temperature: float,
                        top_p: float) -> list[GeneratedTurn]:
        device = next(self.model.parameters()).device
        chunk = self._prepare(contexts, limits, keys, device)
        uniforms = None if temperature == 0 else _uniforms(seeds, limits).to(device)
        stops = torch.tensor(list(stop_token_ids), dtype=torch.long, device=device)
        row_limits = torch.tensor(list(limits), device=device)
        rows = torch.arange(len(contexts), device=device)  # the row of ``contexts`` of each row still decoding
        ids = torch.zeros((len(contexts), max(limits)), dtype=torch.long, device=device)
        logprobs = torch.zeros((len(contexts), max(limits)), device=device)

        def turn(row: int) -> GeneratedTurn:
            return _cut(ids[row].tolist(), logprobs[row].tolist(), limits[row], stop_token_ids)

        logits = self._forward(chunk, chunk.input_ids, logits_to_keep=1)
        for step in range(max(limits)):
            token, logprob = _pick(logits, temperature, top_p, None if uniforms is None else uniforms[rows, step])
            ids[rows, step], logprobs[rows, step] = token, logprob
            finished = torch.isin(token, stops) | (row_limits[rows] <= step + 1)
            done = int(finished.sum())
            if done == len(rows):
                break
            if done * 4 >= len(rows):  # a quarter of the rows is done: store their caches, decode without them
                self._store(chunk, [(local, contexts[row], turn(row), keys[row]) for local, row in
                                    zip(finished.nonzero()[:, 0].tolist(), rows[finished].tolist(), strict=True)])
                chunk.select(~finished)
                rows, token = rows[~finished], token[~finished]
            chunk.extend()
            logits = self._forward(chunk, token[:, None])
        self._store(chunk, [(local, contexts[row], turn(row), keys[row]) for local, row in enumerate(rows.tolist())])
        return [turn(row) for row in range(len(contexts))]

    def _forward(self, chunk: _Chunk, input_ids: torch.Tensor, logits_to_keep: int = 0) -> torch.Tensor:
        """Feed ``input_ids`` (the chunk's newest columns) through the model; the last column's float logits."""
        self.fed_tokens += int(chunk.mask[:, -input_ids.shape[1]:].sum())
        output = self.model(input_ids=input_ids, attention_mask=chunk.mask, position_ids=chunk.positions,
                            past_key_values=chunk.cache, use_cache=True, logits_to_keep=logits_to_keep)
        return output.logits[:, -1].float()

    def _reusable(self, key: Hashable | None, context: list[int]) -> tuple[_PrefixCache | None, int]:
        """The cache of ``key`` and how many of its ids to reuse: all of them when they are a prefix of
        ``context`` (but the context's last id, whose logits are needed); none, and the cache is dropped, if not."""
        cache = self._caches.get(key) if key is not None else None
        if cache is None:
            return None, 0
        if context[:len(cache.ids)] != cache.ids:
            del self._caches[key]
            return None, 0
        return cache, min(len(cache.ids), len(context) - 1)

    def _prepare(self, contexts: Sequence[list[int]], limits: Sequence[int], keys: Sequence[Hashable | None],
                 device) -> _Chunk:
        """The chunk's batched cache (cached parts left-padded to a common length) and its new suffixes."""
        reusable = [self._reusable(key, context) for key, context in zip(keys, contexts, strict=True)]
        reused = [length for _, length in reusable]
        self.reused_tokens += sum(reused)
        cached_width = max(reused)
        suffixes = [context[length:] for context, (_, length) in zip(contexts, reusable, strict=True)]
        width = max(len(suffix) for suffix in suffixes)
        input_ids = torch.full((len(contexts), width), self.pad_token_id, dtype=torch.long)
        mask = torch.zeros((len(contexts), cached_width + width), dtype=torch.long)
        for row, (suffix, length) in enumerate(zip(suffixes, reused, strict=True)):
            input_ids[row, width - len(suffix):] = torch.tensor(suffix)
            mask[row, cached_width - length:cached_width] = 1
            mask[row, cached_width + width - len(suffix):] = 1
        positions = (mask.cumsum(-1) - 1).clamp(min=0)[:, cached_width:]
        capacity = cached_width + width + max(max(limits) - 1, 0)
        cache = _batched_cache([cache for cache, _ in reusable], reused, cached_width, capacity,
                               _text_config(self.model).num_hidden_layers)
        return _Chunk(input_ids=input_ids.to(device), mask=mask.to(device), positions=positions.to(device),
                      cache=cache)

    def _store(self, chunk: _Chunk, entries: Iterable[tuple[int, list[int], GeneratedTurn, Hashable | None]]) -> None:
        """Keep the KV of each keyed entry ``(row of the chunk, context, turn, key)``: its context and its turn
        but the turn's last id, as a copy of its own."""
        layers = [(layer.keys, layer.values) for layer in chunk.cache.layers]
        for row, context, turn, key in entries:
            if key is None:
                continue
            covered = context + turn.ids[:-1]
            columns = torch.nonzero(chunk.mask[row], as_tuple=True)[0][:len(covered)]
            self._caches[key] = _PrefixCache(
                ids=covered, layers=[(k[row:row + 1, :, columns], v[row:row + 1, :, columns]) for k, v in layers])


def _batched_cache(caches: Sequence[_PrefixCache | None], lengths: Sequence[int], width: int, capacity: int,
                   num_layers: int) -> Cache:
    """A cache of the rows' reused parts, each right-aligned in the first ``width`` of ``capacity`` columns."""
    layers = [_BufferLayer(capacity) for _ in range(num_layers)]
    template = next((cache for cache, length in zip(caches, lengths, strict=True) if length), None)
    if template is None:
        return Cache(layers=layers)
    for index, layer in enumerate(layers):
        layer.allocate(len(caches), template.layers[index][0])
        for row, (cache, length) in enumerate(zip(caches, lengths, strict=True)):
            if length:
                for buffer, source in zip(layer.buffers, cache.layers[index], strict=True):
                    buffer[row, :, width - length:width] = source[0, :, :length]
        layer.advance(width)
    return Cache(layers=layers)


class _BufferLayer(DynamicLayer):
    """A ``DynamicLayer`` whose keys and values live in buffers allocated once per chunk: a decode step writes one
    column instead of copying the whole cache, as ``DynamicLayer``'s concatenation does."""

    def __init__(self, capacity: int) -> None:
        super().__init__()
        self.capacity = capacity
        self.buffers: tuple[torch.Tensor, torch.Tensor] | None = None
        self.length = 0

    def allocate(self, batch_size: int, like: torch.Tensor) -> None:
        """Zeroed buffers ``[batch_size, heads, capacity, head_dim]`` of ``like``'s dtype and device."""
        shape = (batch_size, *like.shape[1:-2], self.capacity, like.shape[-1])
        self.buffers = (like.new_zeros(shape), like.new_zeros(shape))
        self.dtype, self.device = like.dtype, like.device
        self.is_initialized = True

    def advance(self, end: int) -> None:
        """The first ``end`` columns of the buffers hold the cache."""
        self.length = end
        self.keys, self.values = (buffer[..., :end, :] for buffer in self.buffers)

    def select(self, keep: torch.Tensor) -> None:
        """Keep only the batch rows where ``keep`` is true."""
        self.buffers = (self.buffers[0][keep], self.buffers[1][keep])
        self.advance(self.length)

    def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        self.allocate(key_states.shape[0], key_states)

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args,
               **kwargs) -> tuple[torch.Tensor, torch.Tensor]:
        """Write the new columns after the cached ones; the cache so far (views of the buffers)."""
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        end = self.length + key_states.shape[-2]
        self.buffers[0][..., self.length:end, :] = key_states
        self.buffers[1][..., self.length:end, :] = value_states
        self.advance(end)
        return self.keys, self.values


def _uniforms(seeds: Sequence[int], limits: Sequence[int]) -> torch.Tensor:
    """Each row's uniforms for its turn, ``limits[row]`` of them from a generator seeded with ``seeds[row]``."""
    uniforms = torch.zeros((len(limits), max(limits)))
    for row, (seed, limit) in enumerate(zip(seeds, limits, strict=True)):
        uniforms[row, :limit] = torch.rand(limit, generator=torch.Generator().manual_seed(int(seed)))
    return uniforms


def _pick(logits: torch.Tensor, temperature: float, top_p: float,
          uniforms: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
    """One id per row and its logprob: argmax at temperature 0, else the inverse CDF of the row's uniform."""
    if temperature == 0:
        token = logits.argmax(-1)
        return token, logits.log_softmax(-1).gather(-1, token[:, None])[:, 0]
    logprobs = (logits / temperature).log_softmax(-1)
    probs = logprobs.exp()
    order = None
    if top_p < 1:
        probs, order = probs.sort(dim=-1, descending=True, stable=True)
        probs = probs * ((probs.cumsum(-1) - probs) < top_p)
    cdf = probs.cumsum(-1)
    index = torch.searchsorted(cdf, uniforms[:, None] * cdf[:, -1:], right=True).clamp(max=cdf.shape[-1] - 1)
    token = (index if order is None else order.gather(-1, index))[:, 0]
    return token, logprobs.gather(-1, token[:, None])[:, 0]


def _check_full_attention(model) -> None:
    """Refuse models with sliding-window or linear-attention layers (the cache layout assumes full attention)."""
    layer_types = set(getattr(_text_config(model), "layer_types", None) or ["full_attention"])
    if layer_types != {"full_attention"}:
        raise ValueError(f"TransformersGenerator expected a model whose layers all use full attention, got layer "
                         f"types {sorted(layer_types)}; use VLLMGenerator for this model")


def _text_config(model):
    """The configuration of ``model``'s decoder (the model's own for a text-only LM)."""
    config = model.config
    return config.get_text_config(decoder=True) if hasattr(config, "get_text_config") else config


def _check_lengths(n: int, **per_row: Sequence | None) -> None:
    """Every per-row argument given has one entry per context."""
    for name, values in per_row.items():
        if values is not None and len(values) != n:
            raise ValueError(f"expected one entry of {name} per context ({n}), got {len(values)}")


def _cut(ids: list[int], logprobs: list[float], limit: int, stop_token_ids: Sequence[int]) -> GeneratedTurn:
    """The ids up to and including the first stop id, at most ``limit`` of them."""
    end = min(limit, len(ids))
    for position, token in enumerate(ids[:end]):
        if token in stop_token_ids:
            end = position + 1
            break
    return GeneratedTurn(ids=ids[:end], logprobs=logprobs[:end])


class VLLMGenerator:
    """Generation with vLLM through TRL's integration (``GRPOTrainer.vllm_generation``), for GPU runs.

    The rollout engine calls :meth:`generate` once per batch of episodes waiting for a turn: a different number of
    times, with different batch sizes, on each trainer process. So no call may be a collective:

    - Server mode: each process posts its own contexts to the vLLM server (``/v1/completions``) and gets its own
      completions back. The main process uses TRL's client (``vllm_generation.vllm_client``, which also holds the
      NCCL communicator TRL pushes the weights through before each ``rollout_func`` call); every other process opens
      one client of its own on the first call, without a communicator. TRL's ``vllm_generation.generate`` is not
      used there: it gathers every process's prompts to the main process and hands each process a slice at its
      index times its own batch size.
    - Colocate mode: each process runs its own vLLM engine through ``vllm_generation.generate``, which with
      ``tensor_parallel_size`` 1 gathers nothing. With a larger tensor-parallel size it gathers the prompts of the
      tensor-parallel group on every call, which is refused (see Raises). With ``vllm_enable_sleep_mode`` each call
      re-syncs the weights into the woken engine: correct, but slow, and a collective under ZeRO-3 or FSDP.

    Sampling follows the engine's temperature, top-p, stop ids and the largest of the rows' token limits (each turn
    is then cut at its first stop id and its own limit), with TRL's ``top_k``, ``min_p``, ``repetition_penalty`` and
    ``generation_kwargs``. ``keys`` and ``seeds`` are accepted and ignored: vLLM's automatic prefix caching reuses
    the KV blocks of every context it has seen (whatever the episode), and its sampling follows its own seed.

    Args:
        vllm_generation: ``trainer.vllm_generation`` of a ``GRPOTrainer`` built with ``use_vllm=True``.

    Raises:
        ValueError: In colocate mode with ``tensor_parallel_size`` above 1 on several processes.
    """

    def __init__(self, vllm_generation) -> None:
        _check_no_collective_generation(vllm_generation)
        self.vllm = vllm_generation
        self._own_client = None

    def generate(self, contexts: Sequence[list[int]], max_new_tokens: Sequence[int], *,
                 stop_token_ids: Sequence[int], temperature: float, top_p: float,
                 keys: Sequence[Hashable] | None = None, seeds: Sequence[int] | None = None) -> list[GeneratedTurn]:
        """Sample one turn per context; see :class:`Generator`."""
        _check_lengths(len(contexts), max_new_tokens=max_new_tokens, keys=keys, seeds=seeds)
        sample = self._sample_on_server if self.vllm.mode == "server" else self._sample_colocated
        completion_ids, logprobs, logprob_token_ids = sample(
            list(contexts), max(max_new_tokens), list(stop_token_ids), temperature, top_p)
        return [_cut(ids, _sampled_logprobs(ids, row_logprobs, row_token_ids), limit, stop_token_ids)
                for ids, row_logprobs, row_token_ids, limit in
                zip(completion_ids, logprobs, logprob_token_ids, max_new_tokens, strict=True)]

    def release(self, keys: Iterable[Hashable]) -> None:
        """Nothing to forget: vLLM's prefix cache evicts blocks by itself."""

    def _generation_kwargs(self, stop_token_ids: list[int]) -> dict:
        return {**(self.vllm.generation_kwargs or {}), "stop_token_ids": stop_token_ids}

    def _sample_on_server(self, contexts: list[list[int]], limit: int, stop_token_ids: list[int],
                          temperature: float, top_p: float) -> tuple[list, list, list]:
        """This process's contexts posted to the server by this process's client (the sampling TRL's server mode
        asks for, with the turn's settings); completion ids, logprobs and their token ids."""
        output = self._client().generate(
            prompts=contexts, n=1, repetition_penalty=self.vllm.repetition_penalty, temperature=temperature,
            top_p=top_p, top_k=self.vllm.top_k, min_p=0.0 if self.vllm.min_p is None else self.vllm.min_p,
            max_tokens=limit, logprobs=0, structured_outputs_regex=self.vllm.structured_outputs_regex,
            generation_kwargs=self._generation_kwargs(stop_token_ids))
        return output["completion_ids"], output["logprobs"], output["logprob_token_ids"]

    def _sample_colocated(self, contexts: list[list[int]], limit: int, stop_token_ids: list[int],
                          temperature: float, top_p: float) -> tuple[list, list, list]:
        """The contexts sampled by this process's own vLLM engine, through ``vllm_generation.generate``."""
        self.vllm.max_completion_length = limit
        self.vllm.temperature, self.vllm.top_p = temperature, top_p
        self.vllm.generation_kwargs = self._generation_kwargs(stop_token_ids)
        _, completion_ids, logprobs, logprob_token_ids = self.vllm.generate(prompts=contexts, images=None,
                                                                            num_generations=1)
        return completion_ids, logprobs, logprob_token_ids

    def _client(self):
        """TRL's client on the main process; on the others, this generator's own one, opened on first use."""
        main_client = getattr(self.vllm, "vllm_client", None)  # TRL sets it on the main process only
        if main_client is not None:
            return main_client
        if self._own_client is None:
            from trl.generation.vllm_client import VLLMClient

            base_url = self.vllm.server_base_url
            if base_url is None:
                base_url = f"http://{self.vllm.server_host}:{self.vllm.server_port}"
            self._own_client = VLLMClient(base_url=base_url, connection_timeout=self.vllm.server_timeout)
        return self._own_client


def _check_no_collective_generation(vllm_generation) -> None:
    """Refuse colocated tensor parallelism on several processes: its generation gathers prompts on every call."""
    tensor_parallel_size = vllm_generation.tensor_parallel_size
    if (vllm_generation.mode == "colocate" and tensor_parallel_size > 1
            and vllm_generation.accelerator.num_processes > 1):
        raise ValueError(
            f"VLLMGenerator expected vllm_tensor_parallel_size 1 in colocate mode, got {tensor_parallel_size} on "
            f"{vllm_generation.accelerator.num_processes} processes: TRL's colocated generation then gathers the "
            "prompts of the tensor-parallel group on every call, while the rollout engine makes a different number "
            "of calls on each process; set vllm_tensor_parallel_size: 1, or use vllm_mode: server (the server's own "
            "--tensor-parallel-size)")


def _sampled_logprobs(ids: list[int], logprobs: list[list[float]], token_ids: list[list[int]]) -> list[float]:
    """The logprob of each sampled id, found among the logprobs vLLM returned at its position."""
    return [float(position_logprobs[position_ids.index(token)])
            for token, position_logprobs, position_ids in zip(ids, logprobs, token_ids, strict=True)]
