"""Logprobs of chosen tokens with the output head run only where they are needed.

Over a vocabulary of thousands of tokens the output head is most of a small model's work, and in an agent
episode most positions are prompt, padding or tool output, which the loss never reads. The trainers run
the backbone over the whole batch and the head only at the positions that predict scored tokens.
"""

from __future__ import annotations

from dataclasses import dataclass

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
                        temperature: float) -> tuple[Tensor, Tensor, Tensor]:
    """:func:`token_logprobs` of ``head(hidden)``, and whether each target is the top token, in chunks of rows,
    each recomputed in the backward pass, so that at most one chunk's logits (:data:`HEAD_CHUNK_ELEMENTS`)
    are held at a time.

    Args:
        head: The output embedding, ``H -> V``.
        hidden: ``(N, H)`` hidden states.
        targets: ``(N,)`` token ids they predict.
        temperature: Sampling temperature.

    Returns:
        ``(logprobs, entropy, is_top1)``, each ``(N,)``.
    """
    def chunk(rows: Tensor, chosen: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        logits = head(rows)
        return *token_logprobs(logits, chosen, temperature), logits.argmax(-1) == chosen

    size = max(1, HEAD_CHUNK_ELEMENTS // head.weight.size(0))
    # no rows still makes one (empty) chunk, so the result stays connected to the graph
    pieces = [checkpoint(chunk, rows, chosen, use_reentrant=False)
              for rows, chosen in zip(hidden.split(size), targets.split(size), strict=True)]
    return tuple(torch.cat(parts) for parts in zip(*pieces, strict=True))


@dataclass
class LabelScores:
    """Per position of a causal LM batch (``(B, L - 1)``, column ``t`` for token ``t + 1``, as in the shifted
    labels of its loss): the label's logprob, the entropy and whether the label is the top token, each 0
    where the label is ignored (``label_mask`` False). The fields TRL's trainers read from its fused head."""

    log_probs: Tensor
    entropy: Tensor
    is_top1: Tensor
    label_mask: Tensor
    aux_loss: None = None


def label_scores(model: nn.Module, input_ids: Tensor, attention_mask: Tensor, labels: Tensor,
                 temperature: float = 1.0) -> LabelScores:
    """Score ``labels`` (``-100``: ignored) under a causal LM, with the output head run only at the positions
    that predict a label.

    Args:
        model: A causal LM with a plain output head (:func:`has_plain_output_head`).
        input_ids: ``(B, L)``.
        attention_mask: ``(B, L)``.
        labels: ``(B, L)``, aligned with ``input_ids`` as in transformers' causal LM loss (shifted here).
        temperature: Sampling temperature.
    """
    hidden = model.get_decoder()(input_ids=input_ids, attention_mask=attention_mask,
                                 use_cache=False).last_hidden_state[:, :-1]
    shifted = labels[:, 1:]
    where = shifted != -100
    logprobs, entropy, is_top1 = head_token_logprobs(model.get_output_embeddings(), hidden[where], shifted[where],
                                                     temperature)

    def spread(values: Tensor) -> Tensor:
        return torch.zeros(where.shape, dtype=values.dtype, device=values.device).masked_scatter(where, values)

    return LabelScores(spread(logprobs), spread(entropy), spread(is_top1), where)
