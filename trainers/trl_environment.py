"""Any registered env as TRL's ``environment_factory``: one public method per tool, ``reset`` gives the prompt.

TRL's ``GRPOTrainer(environment_factory=...)`` makes one instance per rollout, exposes its public methods to the
model as tools (their type hints and Google-style docstrings become the tool schemas), calls ``reset(**row)`` with
the dataset row and appends what it returns to the prompt, and runs the tool calls the model makes.
:func:`environment_factory` builds that class for any registered id: a typed method per tool of the env, with the
tool's description from the env card and its arguments from the tool's JSON schema, plus ``answer`` (the final
answer, which ends and scores the episode); each call steps the env with that one tool call and returns the
observation. :func:`environment_reward` is the reward function that reads each rollout's verifier reward, and
finishes an episode whose last turn gave its answer as text (``<answer>...</answer>``) rather than as a tool call.
TRL never closes its environments: :func:`close_environments` gives a trainer callback that closes them when training
ends, and each env is also closed when its instance is garbage-collected or the process exits.

:func:`tool_calling_tokenizer` gives a tokenizer without tool support (the CPU default model's) a chat template that
renders tools and assistant ``tool_calls`` in the Hermes convention the envs parse, and TRL's Qwen3 response
template, so that TRL's own loop runs on it.

Example:
    >>> from trl import GRPOConfig, GRPOTrainer                                        # doctest: +SKIP
    >>> from trainers.trl_environment import (close_environments, environment_factory,   # doctest: +SKIP
    ...                                       environment_reward, task_dataset, tool_calling_tokenizer)
    >>> factory = environment_factory("agentrl/Search-v0")                             # doctest: +SKIP
    >>> trainer = GRPOTrainer(model=model, processing_class=tool_calling_tokenizer(tokenizer),  # doctest: +SKIP
    ...                       train_dataset=task_dataset("agentrl/Search-v0", count=64),
    ...                       environment_factory=factory, reward_funcs=environment_reward,
    ...                       callbacks=[close_environments(factory)], args=GRPOConfig(...))
"""

from __future__ import annotations

import copy
import keyword
import re
import weakref
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from agentgym_envs.actions import ANSWER_TOOL, ANSWER_TOOL_SCHEMA, parse_action
from agentgym_envs.errors import EnvConfigError
from agentgym_envs.registration import make
from trainers.tiny_model import chat_template

JSON_TYPES: dict[str, type] = {"string": str, "integer": int, "number": float, "boolean": bool, "array": list,
                               "object": dict}
"""Python types of JSON schema types, for the methods' type hints."""
IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
EPISODE_OVER = "The episode is over; no further tool calls are run."

TOOL_CALL_TURN = ("{{- '<|im_start|>' + message.role + '\\n' + (message.content or '') }}"
                  "{%- for call in message.tool_calls or [] %}"
                  "{{- '<tool_call>' + {'name': call.function.name, 'arguments': call.function.arguments} | tojson"
                  " + '</tool_call>' }}"
                  "{%- endfor %}"
                  "{{- '<|im_end|>\\n' }}")
"""A message whose ``tool_calls`` are rendered as Hermes ``<tool_call>`` JSON: the text the envs parse."""
TOOL_CALLING_TEMPLATE = chat_template(TOOL_CALL_TURN)
"""The tiny tokenizer's ChatML with assistant ``tool_calls`` rendered (:data:`TOOL_CALL_TURN`)."""
NO_TOOL_LIST_TEMPLATE = chat_template(TOOL_CALL_TURN, list_tools=False)
""":data:`TOOL_CALLING_TEMPLATE` without the tools' system turn (for a model trained on prompts that list none)."""


def tool_calling_tokenizer(tokenizer: Any, *, list_tools: bool = True) -> Any:
    """A copy of ``tokenizer`` that TRL's tool loop accepts: a template rendering ``tool_calls`` (and, with
    ``list_tools``, the tools' schemas in a system turn) and TRL's Qwen3 ``response_template``."""
    from trl.chat_template_utils import qwen3_template

    copied = copy.deepcopy(tokenizer)
    copied.chat_template = TOOL_CALLING_TEMPLATE if list_tools else NO_TOOL_LIST_TEMPLATE
    copied.response_template = qwen3_template
    return copied


class EnvironmentTools:
    """One rollout's env, as TRL's ``environment_factory`` wants it (subclassed per env by
    :func:`environment_factory`, which adds one method per tool).

    Attributes:
        reward: The verifier's reward once the episode was scored; None before, and for an episode an
            infrastructure fault ended (unscored).
        reward_components: The reward's components once scored.
        finished: The episode is over (terminated or truncated).
        infra_error: An infrastructure fault ended the episode.
        tool_calls: Tool calls run in this episode.
    """

    env_id: ClassVar[str]
    env_kwargs: ClassVar[Mapping[str, Any]]
    instances: ClassVar[weakref.WeakSet[EnvironmentTools]]

    def __init__(self) -> None:
        self._env: Any = None
        self._closer: weakref.finalize | None = None
        self.reward: float | None = None
        self.reward_components: dict[str, float] = {}
        self.finished = False
        self.infra_error = False
        self.tool_calls = 0
        type(self).instances.add(self)

    def reset(self, task_id: str | None = None, seed: int | None = None, **_: Any) -> str:
        """Start an episode on the row's ``task_id`` (or one drawn with ``seed``); return its prompt."""
        if self._env is None:
            self._env = make(self.env_id, **self.env_kwargs)
            self._closer = weakref.finalize(self, self._env.close)  # at garbage collection or exit, once
        observation, _ = self._env.reset(seed=seed, options={"task": task_id} if task_id is not None else None)
        self.reward, self.reward_components, self.finished, self.infra_error, self.tool_calls = None, {}, False, \
            False, 0
        return observation

    def _step(self, action: str | dict[str, Any]) -> str:
        """Step the env (a tool call, or a text answer) and record how the episode stands."""
        if self.finished:
            return EPISODE_OVER
        if self._env is None:
            raise EnvConfigError("call reset() before a tool: TRL resets every environment before its rollout")
        observation, reward, terminated, truncated, info = self._env.step(action)
        self.finished = terminated or truncated
        self.infra_error = bool(info.get("infra_error"))
        if "reward_components" in info:
            self.reward, self.reward_components = float(reward), dict(info["reward_components"])
        return observation

    def _call(self, name: str, arguments: dict[str, Any]) -> str:
        """Run one tool call (arguments left at None are not sent: the tool's own default applies)."""
        self.tool_calls += 1
        return self._step({"name": name, "arguments": {key: value for key, value in arguments.items()
                                                       if value is not None}})

    def _finish_with_text(self, content: str) -> None:
        """Score an unfinished episode whose last turn holds an answer as text (``<answer>...</answer>``)."""
        if not self.finished and self._env is not None and parse_action(content).answer is not None:
            self._step(content)

    def _close(self) -> None:
        """Close the env (its containers, processes, browsers)."""
        if self._closer is not None:
            self._closer()
            self._env, self._closer = None, None

    @classmethod
    def close_all(cls) -> None:
        """Close the env of every instance made so far."""
        for instance in list(cls.instances):
            instance._close()


def environment_factory(env_id: str, **env_kwargs: Any) -> type[EnvironmentTools]:
    """The ``environment_factory`` of ``env_id``: a class (called with no argument, as TRL does) whose public
    methods are the env's tools and ``answer``, each typed and documented from the env's tool schemas.

    Args:
        env_id: A registered id.
        **env_kwargs: Keyword arguments of ``gym.make`` (``sandbox="bwrap"``, ``split="train"``, ...).

    Raises:
        UnknownEnvError: ``env_id`` is not registered.
        EnvConfigError: A tool whose name or argument names are not Python identifiers.
    """
    env = make(env_id, **env_kwargs)
    try:
        schemas = [tool.schema() for tool in env.unwrapped.tools]
    finally:
        env.close()
    if ANSWER_TOOL not in {schema["function"]["name"] for schema in schemas}:
        schemas.append(ANSWER_TOOL_SCHEMA)
    methods = {schema["function"]["name"]: tool_method(schema) for schema in schemas}
    name = re.sub(r"\W", "", env_id.split("/")[-1].split("-v")[0]) + "Tools"
    return type(name, (EnvironmentTools,), {"env_id": env_id, "env_kwargs": dict(env_kwargs),
                                            "instances": weakref.WeakSet(), "__module__": __name__, **methods})


def tool_method(schema: Mapping[str, Any]) -> Any:
    """A typed method with a Google-style docstring for one OpenAI function ``schema`` (what TRL turns into the
    tool's schema); it calls the tool, or gives the answer for :data:`ANSWER_TOOL`."""
    function = schema["function"]
    name, parameters = function["name"], function["parameters"]
    properties: Mapping[str, Any] = parameters.get("properties", {})
    required = set(parameters.get("required", []))
    for identifier in (name, *properties):
        if not IDENTIFIER.match(identifier) or keyword.iskeyword(identifier):
            raise EnvConfigError(f"tool {name!r}: expected Python identifiers for its name and arguments, got "
                                 f"{identifier!r}")
    ordered = sorted(properties, key=lambda argument: argument not in required)  # required ones first
    signature = ", ".join(argument if argument in required else f"{argument}=None" for argument in ordered)
    source = (f"def {name}(self, {signature}):\n"
              f"    return self._call({name!r}, {{{', '.join(f'{a!r}: {a}' for a in ordered)}}})\n")
    namespace: dict[str, Any] = {}
    exec(source, namespace)  # names checked above; descriptions never enter the source
    method = namespace[name]
    method.__doc__ = method_docstring(function.get("description", ""), properties)
    method.__annotations__ = {argument: argument_type(properties[argument], argument in required)
                              for argument in ordered} | {"return": str}
    method.__qualname__ = f"EnvironmentTools.{name}"
    return method


def argument_type(schema: Mapping[str, Any], required: bool) -> Any:
    """The type hint of one argument: its JSON type's Python type (``str`` when unknown), optional unless required."""
    json_type = schema.get("type")
    python_type = JSON_TYPES.get(json_type, str) if isinstance(json_type, str) else str
    return python_type if required else python_type | None


def method_docstring(description: str, properties: Mapping[str, Any]) -> str:
    """A Google-style docstring: the description, then ``Args:`` with each argument's description."""
    lines = [description.strip() or "Call this tool."]
    if properties:
        lines += ["", "Args:"]
        lines += [f"    {argument}: {' '.join(str(schema.get('description') or argument).split())}"
                  for argument, schema in properties.items()]
    return "\n".join(lines)


def environment_reward(completions: Sequence[Sequence[Mapping[str, Any]]],
                       environments: Sequence[EnvironmentTools], **_: Any) -> list[float | None]:
    """TRL reward function: each rollout's verifier reward (0 for an episode that ended unanswered, None for one an
    infrastructure fault ended, which TRL leaves out). A rollout whose last turn gave the answer as text is scored
    on it first."""
    rewards: list[float | None] = []
    for messages, environment in zip(completions, environments, strict=True):
        last = next((message for message in reversed(messages) if message.get("role") == "assistant"), None)
        if last is not None:
            environment._finish_with_text(last.get("content") or "")
        rewards.append(None if environment.infra_error else (environment.reward or 0.0))
    return rewards


def task_dataset(env_id: str, *, count: int | None = None, **env_kwargs: Any) -> Any:
    """A ``datasets.Dataset`` of the env's tasks for TRL: an empty user message (``reset`` fills it) and the
    ``task_id`` per row, the first ``count`` tasks (all by default) of the env made with ``env_kwargs``."""
    from datasets import Dataset

    env = make(env_id, **env_kwargs)
    try:
        ids = [task.id for task in env.unwrapped.tasks][:count]
    finally:
        env.close()
    return Dataset.from_list([{"prompt": [{"role": "user", "content": ""}], "task_id": task_id} for task_id in ids])


def close_environments(factory: type[EnvironmentTools]) -> Any:
    """A ``transformers.TrainerCallback`` that closes every env of ``factory`` when training ends."""
    from transformers import TrainerCallback

    class CloseEnvironments(TrainerCallback):
        """Closes the envs of ``factory`` at the end of training (TRL never closes its environments)."""

        def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            factory.close_all()

    return CloseEnvironments()

