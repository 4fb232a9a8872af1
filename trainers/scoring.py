"""Logprobs of chosen tokens with the output head run only where they are needed.

Over a vocabulary of thousands of tokens the output head is most of a small model's work, and in an agent
episode most positions are prompt, padding or tool output, which the loss never reads. The trainers run
the backbone over the whole batch and the head only at the positions that predict scored tokens.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn
from torch.utils.checkpoint import checkpoint

HEAD_CHUNK_ELEMENTS = 2**25
"""Logits computed at once when heads run in chunks (128 MB in float32): ``2**25 // vocab`` rows per chunk."""

LOGIT_TRANSFORMS = ("final_logit_softcapping", "logit_scale", "output_multiplier", "lm_head_multiplier",
                    "logits_scaling")
"""Config fields of models whose forward transforms the head's logits (softcapping, scaling)."""


def token_logprobs(logits: Tensor, targets: Tensor, temperature: float) -> tuple[Tensor, Tensor]:
    """Logprob of each target and the entropy, under the tempered distribution.

    Args:
        logits: ``(N, V)``.
        targets: ``(N,)`` token ids.
        temperature: Sampling temperature.

    Returns:
        ``(logprobs, entropy)``, each ``(N,)``.
    """
    logprobs = torch.log_softmax(logits.float() / temperature, dim=-1)
    chosen = logprobs.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    return chosen, -(logprobs.exp() * logprobs).sum(-1)


def has_plain_output_head(model: nn.Module) -> bool:
    """Whether the model's logits are its output embedding's output as is (no softcapping or scaling in its
    forward), so that running the head alone gives the model's own distribution."""
    config = model.config.get_text_config()
    return all(getattr(config, name, None) is None for name in LOGIT_TRANSFORMS)


def head_token_logprobs(head: nn.Module, hidden: Tensor, targets: Tensor,
                        temperature: float) -> tuple[Tensor, Tensor]:
    """:func:`token_logprobs` of ``head(hidden)`` in chunks of rows, each recomputed in the backward pass, so
    that at most one chunk's logits (:data:`HEAD_CHUNK_ELEMENTS`) are held at a time.

    Args:
        head: The output embedding, ``H -> V``.
        hidden: ``(N, H)`` hidden states.
        targets: ``(N,)`` token ids they predict.
        temperature: Sampling temperature.
    """
    def chunk(rows: Tensor, chosen: Tensor) -> tuple[Tensor, Tensor]:
        return token_logprobs(head(rows), chosen, temperature)

    size = max(1, HEAD_CHUNK_ELEMENTS // head.weight.size(0))
    # no rows still makes one (empty) chunk, so the result stays connected to the graph
    pieces = [checkpoint(chunk, rows, chosen, use_reentrant=False)
              for rows, chosen in zip(hidden.split(size), targets.split(size), strict=True)]
    return torch.cat([logprobs for logprobs, _ in pieces]), torch.cat([entropy for _, entropy in pieces])


def scored_token_logprobs(model: nn.Module, input_ids: Tensor, attention_mask: Tensor, scored: Tensor,
                          temperature: float) -> tuple[Tensor, Tensor]:
    """Logprob and entropy of each scored token of a causal LM's batch, 0 at the other positions.

    Args:
        model: A causal LM with a plain output head (:func:`has_plain_output_head`).
        input_ids: ``(B, L)``.
        attention_mask: ``(B, L)``.
        scored: ``(B, L)``, 1 where a token's logprob is wanted; the first column is never scored (nothing
            predicts it).
        temperature: Sampling temperature.

    Returns:
        ``(logprobs, entropy)``, each ``(B, L - 1)``: column ``t`` holds token ``t + 1``, as in the
        shifted labels of a causal LM loss.
    """
    hidden = model.get_decoder()(input_ids=input_ids, attention_mask=attention_mask,
                                 use_cache=False).last_hidden_state[:, :-1]
    where = scored[:, 1:].bool()
    logprobs, entropy = head_token_logprobs(model.get_output_embeddings(), hidden[where], input_ids[:, 1:][where],
                                            temperature)
    zeros = torch.zeros(where.shape, dtype=logprobs.dtype, device=logprobs.device)
    return zeros.masked_scatter(where, logprobs), zeros.masked_scatter(where, entropy)
