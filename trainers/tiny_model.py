"""The tiny default model: built from a config, with a tokenizer trained here, no hub access.

On a CPU-only machine with no model hub the whole pipeline still has to run, so the default model is
a small Llama-architecture causal LM initialised from a seed, and its tokenizer is a byte-level BPE
trained on the project's own generated text (the prompts, tool results and answers of the bundled
environments). Byte-level means every string can be encoded, whatever a tool returns.

The chat template is ChatML with Hermes-style tool calls, the convention the environments' actions
follow: assistant turns hold ``<tool_call>...</tool_call>`` or ``<answer>...</answer>``, tool results
come back as a ``tool`` message rendered as ``<tool_response>...</tool_response>`` inside a user turn
(as Qwen2.5 does). The tags are single tokens, so generation can stop on ``</tool_call>`` and
``</answer>`` exactly.

Example:
    >>> from trainers.tiny_model import load_or_build_tiny_model   # doctest: +SKIP
    >>> model, tokenizer = load_or_build_tiny_model()               # doctest: +SKIP
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

from tasks import Task, available_splits, load_split
from tasks.locks import file_lock, lock_path
from trainers.model_path import TINY_MODEL, check_model_path

IM_START, IM_END, PAD, EOS = "<|im_start|>", "<|im_end|>", "<|pad|>", "<|endoftext|>"
ACTION_TAGS = ("<think>", "</think>", "<tool_call>", "</tool_call>", "<answer>", "</answer>",
               "<tool_response>", "</tool_response>")
STOP_TAGS = ("</tool_call>", "</answer>")
"""Generation of one turn stops after either of these (or after ``<|im_end|>``)."""
TOKENIZER_RECIPE_VERSION = 3
TOKENIZER_ENVS = ("PythonSandbox", "Search")
"""The bundled envs whose tasks the tokenizer learns from: those of the main job. Adding one changes the
tokenizer, so it comes with a new :data:`TOKENIZER_RECIPE_VERSION` (other envs' text is still encoded, in
byte-level pieces)."""
DIGIT_RUN = r"\p{N}+"
"""Digit runs are split off before byte-level BPE (part of the saved folder's key with the recipe version)."""

TOOLS_TURN = ("{%- if tools %}"
              "{{- '<|im_start|>system\\nYou may call these tools:\\n<tools>\\n' }}"
              "{%- for tool in tools %}{{- tool | tojson }}{{- '\\n' }}{%- endfor %}"
              "{{- '</tools><|im_end|>\\n' }}"
              "{%- endif %}")
"""The tools, when a template is given them, in a system turn of their JSON schemas."""


def chat_template(message_turn: str, *, list_tools: bool = True) -> str:
    """ChatML of the tiny tokenizer: the tools in a system turn (when given, and ``list_tools``), a tool result as
    a user turn in ``<tool_response>``, every other message as ``message_turn`` renders it (a Jinja fragment)."""
    return ((TOOLS_TURN if list_tools else "")
            + "{%- for message in messages %}"
            "{%- if message.role == 'tool' %}"
            "{{- '<|im_start|>user\\n<tool_response>\\n' + message.content + '\\n</tool_response><|im_end|>\\n' }}"
            "{%- else %}" + message_turn + "{%- endif %}"
            "{%- endfor %}"
            "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}")


CHAT_TEMPLATE = chat_template("{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}")


@dataclass(frozen=True)
class TinyModelConfig:
    """Shape of the tiny model and its tokenizer.

    Attributes:
        vocab_size: BPE vocabulary size (special tokens and the action tags included).
        hidden_size: Width of the residual stream.
        intermediate_size: Width of the MLP.
        num_layers: Transformer blocks.
        num_heads: Attention heads.
        max_positions: Longest sequence (prompt and all turns) the model accepts.
        seed: Seed of the weight initialisation.
    """

    vocab_size: int = 8192
    hidden_size: int = 128
    intermediate_size: int = 384
    num_layers: int = 3
    num_heads: int = 4
    max_positions: int = 2048
    seed: int = 0

    def key(self) -> str:
        """Short hash naming the saved folder (changes with any field or the tokenizer recipe)."""
        text = json.dumps({**asdict(self), "recipe": TOKENIZER_RECIPE_VERSION, "digit_run": DIGIT_RUN}, sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:10]


def default_model_dir(config: TinyModelConfig | None = None) -> Path:
    """Where the tiny model is saved: ``$AGENTRL_CACHE`` or ``~/.cache/agentrl``, under ``models/``."""
    config = config or TinyModelConfig()
    root = Path(os.environ.get("AGENTRL_CACHE", Path.home() / ".cache" / "agentrl"))
    return root / "models" / f"tiny-{config.key()}"


def training_texts() -> Iterator[str]:
    """Text the tokenizer is trained on: the Search corpus, and every bundled task of :data:`TOKENIZER_ENVS` as
    an episode would show it (instructions and tool schemas, the question, a tool call, the answer)."""
    from agentgym_envs.actions import EXPECTED_FORMAT
    from agentgym_envs.search.env import INSTRUCTIONS, SearchEnv
    from agentgym_envs.tools import render_tools
    from tasks.search import load_corpus

    search_header = f"{INSTRUCTIONS}\n\n{render_tools(SearchEnv(split='dev').tools)}"
    yield EXPECTED_FORMAT
    for env_name in TOKENIZER_ENVS:
        for split in available_splits()[env_name]:
            for task in load_split(env_name, split):
                yield f"{search_header}\n\n{task.prompt}" if env_name == "Search" else task.prompt
                yield _example_action(task)
                yield f"<answer>{task.answer[0] if isinstance(task.answer, list) else task.answer}</answer>"
    for document in load_corpus():
        yield f"{document.id} | {document.title}\n{document.text}"


def _example_action(task: Task) -> str:
    """A plausible tool call for ``task``, so that tool-call JSON gets tokens of its own."""
    if task.env == "Search":
        call = {"name": "search", "arguments": {"query": task.prompt}}
    else:
        call = {"name": "python", "arguments": {"code": str(task.metadata.get("reference_solution", ""))}}
    return f"<tool_call>{json.dumps(call)}</tool_call>"


def build_tokenizer(texts: Iterable[str], vocab_size: int = 8192):
    """Train a byte-level BPE tokenizer with the ChatML specials, the action tags and the chat template.

    Digit runs are split off before the byte-level step, so a number is the same tokens whatever precedes
    it (``$170$``, ``pow(17, 170, 7)``, a line of tool output): without that, a leading space was merged
    into the number and the agent had to copy numbers between two different spellings.

    Args:
        texts: Training text.
        vocab_size: Target vocabulary size.

    Returns:
        A ``transformers.PreTrainedTokenizerFast`` whose ``eos_token`` is ``<|im_end|>``.
    """
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    specials = [EOS, IM_START, IM_END, PAD, *ACTION_TAGS]
    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(DIGIT_RUN), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False)])
    core.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=specials, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    core.train_from_iterator(texts, trainer=trainer)
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=core, bos_token=None, eos_token=IM_END,
                                        pad_token=PAD, unk_token=None, additional_special_tokens=[IM_START, EOS])
    tokenizer.chat_template = CHAT_TEMPLATE
    tokenizer.model_max_length = 1 << 20
    return tokenizer


def build_model(config: TinyModelConfig, tokenizer):
    """A Llama-architecture causal LM of ``config``'s shape, initialised from ``config.seed``."""
    import torch
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

    model_config = LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=config.hidden_size, intermediate_size=config.intermediate_size,
        num_hidden_layers=config.num_layers, num_attention_heads=config.num_heads,
        num_key_value_heads=config.num_heads, max_position_embeddings=config.max_positions,
        tie_word_embeddings=True, pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id,
        bos_token_id=None,
    )
    with torch.random.fork_rng():
        torch.manual_seed(config.seed)
        model = LlamaForCausalLM(model_config)
    model.generation_config = GenerationConfig(eos_token_id=tokenizer.eos_token_id,
                                               pad_token_id=tokenizer.pad_token_id)
    return model


def load_or_build_tiny_model(config: TinyModelConfig | None = None, directory: str | Path | None = None):
    """Load the tiny model and tokenizer from ``directory``, building and saving them the first time (one process
    builds; another that needs it meanwhile waits for it).

    Args:
        config: Shape of the model (default :class:`TinyModelConfig`).
        directory: Folder to use (default :func:`default_model_dir`).

    Returns:
        ``(model, tokenizer)``.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    config = config or TinyModelConfig()
    directory = Path(directory) if directory is not None else default_model_dir(config)
    if not (directory / "config.json").exists():
        with file_lock(lock_path(directory), waiting=f"waiting for another process to build the tiny model in "
                                                     f"{directory}"):
            if not (directory / "config.json").exists():  # not built while this one waited
                save_tiny_model(config, directory)
    return AutoModelForCausalLM.from_pretrained(directory), AutoTokenizer.from_pretrained(directory)


def save_tiny_model(config: TinyModelConfig, directory: str | Path) -> Path:
    """Build the tokenizer and the model of ``config`` and save both to ``directory``."""
    directory = Path(directory)
    tokenizer = build_tokenizer(training_texts(), config.vocab_size)
    save_model_folder(build_model(config, tokenizer), tokenizer, directory)
    return directory


def save_model_folder(model, tokenizer, directory: str | Path, extra_files: Mapping[str, str] | None = None) -> None:
    """Save ``model`` and ``tokenizer`` (and ``extra_files``, name to text) to ``directory`` all at once: written to a
    staging folder, then renamed, so a reader never sees half a folder; when another process saved it first,
    theirs is kept."""
    directory = Path(directory)
    staging = directory.with_name(f"{directory.name}.tmp-{os.getpid()}")
    tokenizer.save_pretrained(staging)
    model.save_pretrained(staging)
    for name, text in (extra_files or {}).items():
        (staging / name).write_text(text)
    if directory.exists():
        shutil.rmtree(staging)
    else:
        staging.rename(directory)


def load_model(name_or_path: str = TINY_MODEL, dtype: str | None = None):
    """A policy and its tokenizer: ``"tiny"`` builds (or reuses) the local tiny model; anything else is a local
    checkpoint or a hub id loaded with ``transformers``.

    Returns:
        ``(model, tokenizer)``.

    Raises:
        ModelNotFoundError: ``name_or_path`` is a local path that does not exist (see
            :func:`trainers.model_path.check_model_path`).
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if name_or_path == TINY_MODEL:
        return load_or_build_tiny_model()
    check_model_path(name_or_path)
    model = AutoModelForCausalLM.from_pretrained(name_or_path, dtype=dtype or "auto")
    return model, AutoTokenizer.from_pretrained(name_or_path)
