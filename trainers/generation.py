"""Generators: continue a batch of token contexts by one turn each, returning ids and their logprobs.

:class:`TransformersGenerator` runs ``model.generate`` (CPU or GPU). :class:`VLLMGenerator` goes
through TRL's own vLLM integration (``trainer.vllm_generation``, colocate or server mode) and is
only usable where vLLM is installed (the ``vllm`` extra, GPU machines).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol


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
                 stop_token_ids: Sequence[int], temperature: float, top_p: float) -> list[GeneratedTurn]:
        """One turn per context, each stopping at a stop id or after its ``max_new_tokens``."""


class TransformersGenerator:
    """Batched sampling with ``transformers``' ``generate`` (left-padded contexts).

    Args:
        model: A causal LM (its current weights are used on every call).
        pad_token_id: Padding id of the tokenizer.
        batch_size: Most contexts per ``generate`` call.
    """

    def __init__(self, model, pad_token_id: int, batch_size: int = 64) -> None:
        self.model = model
        self.pad_token_id = pad_token_id
        self.batch_size = batch_size

    def generate(self, contexts: Sequence[list[int]], max_new_tokens: Sequence[int], *,
                 stop_token_ids: Sequence[int], temperature: float, top_p: float) -> list[GeneratedTurn]:
        """Sample one turn per context; see :class:`Generator`."""
        turns: list[GeneratedTurn] = []
        for start in range(0, len(contexts), self.batch_size):
            chunk = slice(start, start + self.batch_size)
            turns += self._generate_chunk(contexts[chunk], max_new_tokens[chunk], stop_token_ids, temperature, top_p)
        return turns

    def _generate_chunk(self, contexts: Sequence[list[int]], limits: Sequence[int], stop_token_ids: Sequence[int],
                        temperature: float, top_p: float) -> list[GeneratedTurn]:
        import torch

        device = next(self.model.parameters()).device
        width = max(len(ids) for ids in contexts)
        input_ids = torch.full((len(contexts), width), self.pad_token_id, dtype=torch.long)
        attention = torch.zeros((len(contexts), width), dtype=torch.long)
        for row, ids in enumerate(contexts):
            input_ids[row, width - len(ids):] = torch.tensor(ids)
            attention[row, width - len(ids):] = 1
        was_training = self.model.training
        self.model.eval()
        with torch.no_grad():
            output = self.model.generate(
                input_ids=input_ids.to(device), attention_mask=attention.to(device), max_new_tokens=max(limits),
                **_sampling(temperature, top_p),
                eos_token_id=list(stop_token_ids), pad_token_id=self.pad_token_id,
                return_dict_in_generate=True, output_logits=True)
        self.model.train(was_training)
        sampled = output.sequences[:, width:]
        logprobs = torch.stack(output.logits, dim=1).float().div(temperature or 1.0).log_softmax(-1)
        chosen = logprobs.gather(-1, sampled.unsqueeze(-1)).squeeze(-1)
        return [_cut(sampled[row].tolist(), chosen[row].tolist(), limits[row], stop_token_ids)
                for row in range(len(contexts))]


def _sampling(temperature: float, top_p: float) -> dict[str, object]:
    """``generate`` settings: greedy at temperature 0, else plain (or nucleus) sampling."""
    if temperature == 0:
        return {"do_sample": False, "temperature": None, "top_p": None, "top_k": None}
    return {"do_sample": True, "temperature": temperature, "top_p": top_p, "top_k": 0}


def _cut(ids: list[int], logprobs: list[float], limit: int, stop_token_ids: Sequence[int]) -> GeneratedTurn:
    """The ids up to and including the first stop id, at most ``limit`` of them."""
    end = min(limit, len(ids))
    for position, token in enumerate(ids[:end]):
        if token in stop_token_ids:
            end = position + 1
            break
    return GeneratedTurn(ids=ids[:end], logprobs=logprobs[:end])


class VLLMGenerator:
    """Generation through TRL's vLLM integration (``GRPOTrainer.vllm_generation``), for GPU runs.

    TRL keeps the vLLM weights in sync with the policy before calling ``rollout_func``; this class asks it
    for one completion per context, with the turn's token limit and stop ids.

    Args:
        vllm_generation: ``trainer.vllm_generation`` of a ``GRPOTrainer`` built with ``use_vllm=True``.
    """

    def __init__(self, vllm_generation) -> None:
        self.vllm = vllm_generation

    def generate(self, contexts: Sequence[list[int]], max_new_tokens: Sequence[int], *,
                 stop_token_ids: Sequence[int], temperature: float, top_p: float) -> list[GeneratedTurn]:
        """Sample one turn per context; see :class:`Generator`. Uses the largest of ``max_new_tokens`` for all."""
        self.vllm.max_completion_length = max(max_new_tokens)
        self.vllm.temperature, self.vllm.top_p = temperature, top_p
        self.vllm.generation_kwargs = {**(self.vllm.generation_kwargs or {}), "stop_token_ids": list(stop_token_ids)}
        _, completion_ids, logprobs, _ = self.vllm.generate(prompts=list(contexts), images=None, num_generations=1)
        return [_cut(ids, [float(top[0]) for top in token_logprobs], limit, stop_token_ids)
                for ids, token_logprobs, limit in zip(completion_ids, logprobs, max_new_tokens, strict=True)]
