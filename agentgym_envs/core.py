"""The base class of every agentrl environment: Gymnasium's contract for multi-turn text.

An episode is a conversation. ``reset`` returns the prompt (instructions, tools, task);
each ``step`` takes the model's action text and returns the observation for the next turn:
tool results, a description of a format error, or the verdict on the final answer.
``terminated`` means the agent answered; turn limits come as ``truncated`` from the
``TimeLimit`` wrapper that ``gym.make`` adds, and an infrastructure fault also truncates the
episode (with ``info["infra_error"]``) so that it is never scored as a wrong answer. An env whose
unfinished work can be judged as it stands (a patch) sets :attr:`TextEnv.scores_at_turn_limit`:
its last allowed step is then scored too, and still returned as ``truncated``.

:class:`TextEnv` does everything that is the same in every environment, once: loading a bundled
split, keeping the chosen task families, one reward function per family (the env's default, or the
caller's), calling it on the evidence the env gathered, turning an
:class:`~tasks.errors.InfrastructureError` into an infra episode, and publishing the env's
:class:`~agentgym_envs.card.EnvCard`. A subclass says what is particular to it: its tools, how an
episode starts, what evidence a finished trajectory gets, and its default reward.
"""

from __future__ import annotations

import dataclasses
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar, TypedDict

import gymnasium as gym
from gymnasium.error import ResetNeeded

from agentgym_envs.actions import (
    ParsedAction,
    ParsedToolCall,
    StructuredAction,
    action_text,
    format_error_observation,
    parse_action,
)
from agentgym_envs.card import EnvCard, FamilyCard, LimitsCard, reward_terms, task_source
from agentgym_envs.errors import EnvConfigError
from agentgym_envs.spaces import UnicodeText
from agentgym_envs.tools import Tool, ToolResult, call_tool, render_tools
from rewards import RewardFn, RewardResult
from tasks import InfrastructureError, Task, ToolCall, Trajectory, Turn, load_split
from tasks.errors import did_you_mean

RESET_OPTIONS = frozenset({"task", "difficulty"})
PROMPT_STYLES = ("full", "task")
MAX_ACTION_SPACE_CHARS = 1 << 20
StepResult = tuple[str, float, bool, bool, dict[str, Any]]
"""``(observation, reward, terminated, truncated, info)``."""
RewardSpec = RewardFn | Mapping[str, RewardFn]
"""One reward function for every family, or one per family."""
DEFAULT_SPLIT = "train"
"""The bundled split an env draws from when given neither ``split`` nor ``tasks``."""


class TextEnvOptions(TypedDict, total=False):
    """The keyword options every agentrl environment takes: those of :class:`TextEnv`, which documents them.

    They are declared once, by ``TextEnv.__init__``. A subclass declares only its own options and takes these as
    ``**options: Unpack[TextEnvOptions]``, passed on unchanged to ``super().__init__``: a type checker then checks
    them at every call, and a misspelt keyword is still a ``TypeError`` (``TextEnv.__init__`` takes no other).

    Example:
        >>> class CalculatorEnv(TextEnv):                                                  # doctest: +SKIP
        ...     def __init__(self, *, precision: int = 6, **options: Unpack[TextEnvOptions]) -> None:
        ...         super().__init__(**options)
        ...         self.precision = precision
    """

    split: str | None
    splits_dir: str | Path | None
    families: Sequence[str] | None
    tasks: Sequence[Task] | None
    reward: RewardSpec | None
    max_action_chars: int
    max_tool_calls_per_turn: int
    max_observation_chars: int
    render_mode: str | None
    prompt_style: str


class TextEnv(gym.Env[str, str], ABC):
    """A multi-turn, text-in/text-out environment with tools and a verifier reward.

    Subclasses set :attr:`env_name`, :attr:`task_families` and :attr:`required_tools`, and provide
    :attr:`tools`, :meth:`default_reward` and :meth:`_begin_episode`; they may override
    :meth:`_evidence`, :meth:`_verdict`, :meth:`_instructions`, :meth:`_task_text`, :meth:`_task_over` (for a
    task that a tool call ends, such as a purchase) and :meth:`_settings`.

    The options below are every env's (:class:`TextEnvOptions`); an env's own options come on top of them.

    Args:
        split: Bundled split to draw tasks from (``"train"``, ``"dev"``, ``"test"``); default ``"train"``.
            Not with ``tasks``.
        splits_dir: The folder of the split bundle ``split`` is loaded from, with the layout and manifest of
            ``tasks/data/<env>/`` (:mod:`tasks.splits`); None for the bundle installed with the project. Unused
            when ``tasks`` are given.
        families: Task families to keep (default: all of :attr:`task_families`).
        tasks: Explicit tasks instead of a split (then filtered by ``families`` too).
        reward: One reward function for every family, or a mapping family -> reward function;
            defaults to :meth:`default_reward` of each family.
        max_action_chars: Longer actions are rejected as a format error.
        max_tool_calls_per_turn: Most tool calls in one action.
        max_observation_chars: Observations are cut to this length (and say so).
        render_mode: ``None`` or ``"ansi"`` (``render()`` returns the transcript).
        prompt_style: ``"full"``: instructions, the tools and the task; ``"task"``: the task text only, for a
            model trained on this env that needs no instructions, or a chat template that renders
            ``info["tools"]`` itself.

    Raises:
        EnvConfigError: ``split`` together with ``tasks``, an unknown family, no task left, a reward mapping that
            misses a family, a bad render mode or prompt style.
        UnknownTaskError: No such split (in ``splits_dir`` when given), or ``splits_dir`` holds no bundle of this
            env.
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["ansi"]}
    env_name: ClassVar[str] = "Text"
    task_families: ClassVar[tuple[str, ...]] = ()
    """Every task family the env knows."""
    required_tools: ClassVar[Mapping[str, tuple[str, ...]]] = {}
    """Per family, the tools its tasks cannot be solved without."""
    scores_at_turn_limit: ClassVar[bool] = False
    """True for an env that scores an episode reaching :attr:`turn_limit` unfinished, as it stands (SWE's patch):
    that step returns ``truncated=True`` (never ``terminated``) with the reward and ``info["reward_components"]``,
    and :attr:`at_turn_limit` is True while its evidence is gathered. An infrastructure fault still wins."""

    def __init__(self, *, split: str | None = None, splits_dir: str | Path | None = None,
                 families: Sequence[str] | None = None, tasks: Sequence[Task] | None = None,
                 reward: RewardSpec | None = None, max_action_chars: int = 32_768, max_tool_calls_per_turn: int = 4,
                 max_observation_chars: int = 32_768, render_mode: str | None = None,
                 prompt_style: str = "full") -> None:
        if render_mode not in (None, *self.metadata["render_modes"]):
            raise EnvConfigError(f"render_mode: expected None or 'ansi', got {render_mode!r}")
        if prompt_style not in PROMPT_STYLES:
            raise EnvConfigError(f"prompt_style: expected one of {PROMPT_STYLES}, got {prompt_style!r}")
        self.families = self._check_families(families)
        self.splits_dir = splits_dir
        self.split, selected = self._task_source(split, splits_dir, tasks)
        self.tasks = tuple(task for task in selected if task.family in self.families)
        if not self.tasks:
            raise EnvConfigError(f"{self.env_name}: expected at least one task of families {list(self.families)}, "
                                 f"got none (of {len(selected)} tasks)")
        self.rewards = self._rewards_per_family(reward)
        self.prompt_style = prompt_style
        self._task_index = {task.id: task for task in self.tasks}
        self.max_action_chars = max_action_chars
        self.max_tool_calls_per_turn = max_tool_calls_per_turn
        self.max_observation_chars = max_observation_chars
        self.render_mode = render_mode
        self.action_space = UnicodeText(max_length=MAX_ACTION_SPACE_CHARS)
        self.observation_space = UnicodeText(max_length=max_observation_chars + 200)
        self.task: Task | None = None
        self._turns: list[Turn] = []
        self._prompt = ""
        self._done = True
        self._at_turn_limit = False

    def _task_source(self, split: str | None, splits_dir: str | Path | None,
                     tasks: Sequence[Task] | None) -> tuple[str | None, list[Task]]:
        """The split drawn from (None for explicit tasks) and its tasks, before the family filter."""
        if tasks is None:
            chosen = DEFAULT_SPLIT if split is None else split
            return chosen, load_split(self.env_name, chosen, splits_dir=splits_dir)
        if split is not None:
            raise EnvConfigError(f"split: expected either a split or tasks, got split={split!r} and tasks; pass "
                                 "split= alone, or tasks= alone (e.g. a filtered load_split(...))")
        return None, list(tasks)

    def _check_families(self, families: Sequence[str] | None) -> tuple[str, ...]:
        if families is None:
            return self.task_families
        if isinstance(families, str):
            raise EnvConfigError(f"families: expected a sequence of family names, got the string {families!r}")
        for family in families:
            if family not in self.task_families:
                raise EnvConfigError(f"families: expected names among {list(self.task_families)}, got "
                                     f"{family!r}{did_you_mean(family, self.task_families)}")
        return tuple(families)

    def _rewards_per_family(self, reward: RewardSpec | None) -> dict[str, RewardFn]:
        if reward is None:
            return {family: self.default_reward(family) for family in self.families}
        if not isinstance(reward, Mapping):
            if not callable(reward):
                raise EnvConfigError(f"reward: expected a reward function or a mapping family -> reward "
                                     f"function, got {type(reward).__name__}")
            return dict.fromkeys(self.families, reward)
        missing = [family for family in self.families if family not in reward]
        if missing:
            raise EnvConfigError(f"reward: expected a reward function for every family in {list(self.families)}, "
                                 f"missing {missing}")
        return {family: reward[family] for family in self.families}

    # -- what a subclass provides ----------------------------------------------------------------
    @property
    @abstractmethod
    def tools(self) -> Sequence[Tool]:
        """The tools of this environment."""

    @abstractmethod
    def default_reward(self, family: str) -> RewardFn:
        """The reward of ``family`` when the caller passes none."""

    @abstractmethod
    def _begin_episode(self, task: Task) -> None:
        """Prepare a clean world for ``task`` (may raise an InfrastructureError)."""

    def _evidence(self, task: Task, trajectory: Trajectory) -> dict[str, Any]:
        """What the env gathers for the verifier once the agent answered (hidden test results, ...).

        May raise an :class:`~tasks.errors.InfrastructureError`; the episode then ends as an infra episode.
        """
        return {}

    def _instructions(self, task: Task) -> str:
        """Environment-specific instructions placed before the task."""
        return ""

    def _task_text(self, task: Task) -> str:
        """What the prompt shows of the task (after :meth:`_begin_episode`); the task's prompt by default."""
        return task.prompt

    def _verdict(self) -> tuple[str, dict[str, Any]]:
        """What the step that scored the episode adds, asked right after the reward: a note appended to its
        observation (``""`` for none) and keys added to its ``info`` (SWE's ``info["grading"]``); nothing by
        default. Not asked when an infrastructure fault ended the episode."""
        return "", {}

    def _task_over(self) -> bool:
        """True once a tool call of the current episode ended the task (an item bought, a patch submitted).

        The episode is then scored as if the agent had answered: :meth:`_evidence`, then the reward.
        """
        return False

    def _settings(self) -> dict[str, Any]:
        """Env-specific settings that change what the agent sees or how it is scored (scalars, for the card)."""
        return {}

    def _sandbox_limits(self) -> tuple[str | None, Mapping[str, Any] | None]:
        """The sandbox backend and its limits as a dict, for the card; ``(None, None)`` for an env that runs no code."""
        return None, None

    @property
    def turn_limit(self) -> int | None:
        """The registered turn limit of this env's id (made by ``gym.make``), None for an env made directly.

        Read from Gymnasium's registry, because ``gym.make`` leaves the limit to its ``TimeLimit`` wrapper,
        which the env cannot see: an env that :attr:`scores_at_turn_limit` and is made with another
        ``max_episode_steps`` than the registered one is still scored at the registered limit.
        """
        if self.spec is None or self.spec.id not in gym.registry:
            return None
        return gym.spec(self.spec.id).max_episode_steps

    @property
    def at_turn_limit(self) -> bool:
        """True while an episode that reached :attr:`turn_limit` unfinished is being scored (for :meth:`_evidence`)."""
        return self._at_turn_limit

    # -- the card --------------------------------------------------------------------------------
    @property
    def card(self) -> EnvCard:
        """The public description of this env (:func:`agentgym_envs.describe` adds the registry id and turn limit)."""
        backend, sandbox = self._sandbox_limits()
        families = {family: FamilyCard(name=family, required_tools=tuple(self.required_tools.get(family, ())),
                                       reward=reward_terms(self.rewards[family]),
                                       tasks=sum(task.family == family for task in self.tasks))
                    for family in self.families}
        limits = LimitsCard(max_episode_steps=None, max_action_chars=self.max_action_chars,
                            max_tool_calls_per_turn=self.max_tool_calls_per_turn,
                            max_observation_chars=self.max_observation_chars,
                            sandbox_backend=backend, sandbox=sandbox)
        return EnvCard(env_name=self.env_name, env_id=None, tools=tuple(tool.schema() for tool in self.tools),
                       families=families, limits=limits,
                       source=task_source(self.env_name, self.split, self.tasks, splits_dir=self.splits_dir),
                       settings=self._settings(), prompt_style=self.prompt_style)

    def unanswered_components(self) -> dict[str, float]:
        """The reward components of the current episode if it ends unanswered and unscored: 0.0 for every term of
        its family's reward (:meth:`FamilyCard.unanswered_components`), which its reward of 0 is the sum of.

        Raises:
            ResetNeeded: No episode was started.
        """
        if self.task is None:
            raise ResetNeeded("call reset() before asking for an episode's reward components")
        return self.card.families[self.task.family].unanswered_components()

    # -- the Gymnasium API ---------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        """Start an episode on a task drawn with ``self.np_random`` (or given in ``options``).

        Args:
            seed: Seeds ``self.np_random`` (and so the task drawn).
            options: ``{"task": Task | task id}`` to pick the task, or ``{"difficulty": int}`` to draw
                among tasks of that difficulty.
        """
        super().reset(seed=seed)
        task = self._select_task(options or {})
        self._begin_episode(task)
        self.task, self._turns, self._done = task, [], False
        self._prompt = self._clip(self._render_prompt(task))
        info = {"task_id": task.id, "family": task.family, "difficulty": task.difficulty,
                "tools": [tool.schema() for tool in self.tools]}
        return self._prompt, info

    def _render_prompt(self, task: Task) -> str:
        if self.prompt_style == "task":
            return self._task_text(task)
        return "\n\n".join(filter(None, [self._instructions(task), render_tools(self.tools), self._task_text(task)]))

    def step(self, action: str | StructuredAction) -> StepResult:
        """Act on one action: run its tool calls, or score its answer, or explain its format error.

        ``action`` is text, or a structured action (:data:`~agentgym_envs.actions.StructuredAction`: a tool call, a
        list of them, or an OpenAI assistant message), which is recorded in the trajectory as the text it stands for.
        ``info["tool_messages"]`` holds each tool result as an OpenAI ``role: tool`` message.
        """
        if self._done or self.task is None:
            raise ResetNeeded("call reset() before step(), and again after an episode ends")
        parsed = parse_action(action, max_chars=self.max_action_chars, max_tool_calls=self.max_tool_calls_per_turn)
        action = action_text(action, parsed)
        if not parsed.well_formed:
            observation = format_error_observation(parsed.errors)
            return self._score_at_turn_limit(self._record(action, parsed, observation, (), 0.0, terminated=False,
                                                          truncated=False))
        if parsed.answer is not None:
            return self._finish(action, parsed)
        return self._score_at_turn_limit(self._run_tools(action, parsed))

    def _run_tools(self, action: str, parsed: ParsedAction) -> StepResult:
        """Run the action's tool calls in order; a call that ends the task (:meth:`_task_over`) stops the rest."""
        tools = {tool.name: tool for tool in self.tools}
        results: list[tuple[ParsedToolCall, ToolResult]] = []
        for call in parsed.tool_calls:
            results.append((call, call_tool(tools, call)))
            if self._task_over() or results[-1][1].infra_error:
                break
        observation = "\n\n".join(self._tool_block(call.name, result) for call, result in results)
        skipped = len(parsed.tool_calls) - len(results)
        if skipped:
            observation += f"\n\n[{skipped} later tool call{'s' if skipped > 1 else ''} not run: the episode ended]"
        infra = any(result.infra_error for _, result in results)
        if self._task_over() and not infra:
            return self._conclude(action, parsed, observation, results)
        return self._record(action, parsed, observation, results, 0.0, terminated=False, truncated=infra)

    @staticmethod
    def _tool_block(name: str, result: ToolResult) -> str:
        status = "ok" if result.ok else "error"
        return f"[{name} result ({status})]\n{result.output.rstrip()}"

    def _finish(self, action: str, parsed: ParsedAction) -> StepResult:
        return self._conclude(action, parsed, "Answer received. The episode is over.", ())

    def _conclude(self, action: str, parsed: ParsedAction, observation: str,
                  results: Sequence[tuple[ParsedToolCall, ToolResult]]) -> StepResult:
        """Score the episode that this action ended (by an answer, or by a tool call that ended the task)."""
        assert self.task is not None
        provisional = Turn(action=action, observation=observation, tool_calls=self._tool_calls(results),
                           answer=parsed.answer)
        trajectory = Trajectory(turns=(*self._turns, provisional))
        try:
            result = self._score(self.task, trajectory)
        except InfrastructureError as exc:
            subject = "outcome" if results else "answer"
            verdict = f"Infrastructure error while checking the {subject} (not your fault): {exc}"
            observation = f"{observation}\n\n{verdict}" if results else verdict
            return self._record(action, parsed, observation, results, 0.0, terminated=False, truncated=True,
                                extra={"infra_error": True})
        note, verdict = self._verdict()
        observation = f"{observation}\n\n{note}" if note else observation
        extra: dict[str, Any] = {"reward_components": dict(result.components), **verdict}
        if parsed.answer is not None:
            extra["answer"] = parsed.answer
        return self._record(action, parsed, observation, results, result.value, terminated=True, truncated=False,
                            extra=extra)

    def _score_at_turn_limit(self, step: StepResult) -> StepResult:
        """``step`` scored and truncated when it is the last allowed turn of an unfinished episode in an env that
        :attr:`scores_at_turn_limit`; in any other env that turn's ``info`` carries :meth:`unanswered_components`
        (``TimeLimit`` truncates it); ``step`` itself otherwise."""
        observation, reward, terminated, truncated, info = step
        if terminated or truncated or self.task is None:
            return step
        limit = self.turn_limit
        if limit is None or len(self._turns) < limit:
            return step
        if not self.scores_at_turn_limit:
            return observation, reward, False, False, {**info, "reward_components": self.unanswered_components()}
        self._done, self._at_turn_limit = True, True
        try:
            result = self._score(self.task, self.trajectory)
        except InfrastructureError as exc:
            verdict = f"Infrastructure error while checking the outcome at the turn limit (not your fault): {exc}"
            return f"{observation}\n\n{verdict}", 0.0, False, True, {**info, "infra_error": True}
        finally:
            self._at_turn_limit = False
        note, verdict = self._verdict()
        if note:  # the turn was recorded before it was scored
            observation = self._clip(f"{observation}\n\n{note}")
            self._turns[-1] = dataclasses.replace(self._turns[-1], observation=observation)
        return observation, result.value, False, True, {**info, "reward_components": dict(result.components),
                                                        **verdict}

    def _score(self, task: Task, trajectory: Trajectory) -> RewardResult:
        """The evidence for a finished trajectory, then the family's reward function on it."""
        result = self.rewards[task.family](task, trajectory, self._evidence(task, trajectory))
        return result if isinstance(result, RewardResult) else RewardResult(value=float(result))

    def _record(self, action: str, parsed: ParsedAction, observation: str,
                results: Sequence[tuple[Any, ToolResult]], reward: float, *, terminated: bool,
                truncated: bool, extra: Mapping[str, Any] | None = None) -> StepResult:
        """Append the turn to the trajectory and build the step's return value."""
        calls = self._tool_calls(results)
        observation = self._clip(observation)
        self._turns.append(Turn(action=action, observation=observation, tool_calls=calls,
                                format_errors=parsed.errors, answer=parsed.answer))
        self._done = terminated or truncated
        info = {
            "turn": len(self._turns),
            "tool": calls[0].name if calls else None,
            "tool_calls": [{"name": call.name, "ok": result.ok, "latency_s": result.latency_s,
                            "infra_error": result.infra_error} for call, result in results],
            "ok": parsed.well_formed and all(result.ok for _, result in results),
            "latency_s": sum(result.latency_s for _, result in results),
            "infra_error": any(result.infra_error for _, result in results),
            "format_errors": list(parsed.errors),
            "task_id": self.task.id if self.task else None,
            "tool_messages": [self._tool_message(call, result, index) for index, (call, result) in enumerate(results)],
        }
        info.update(extra or {})
        return observation, float(reward), terminated, truncated, info

    def _tool_message(self, call: ParsedToolCall, result: ToolResult, index: int) -> dict[str, str]:
        """One tool result as an OpenAI ``role: tool`` message; a call given without an id gets
        ``call_<turn>_<index>`` (the turn being recorded, from 1)."""
        call_id = call.id or f"call_{len(self._turns)}_{index}"
        return {"role": "tool", "tool_call_id": call_id, "name": call.name,
                "content": self._clip(self._tool_block(call.name, result))}

    def _tool_calls(self, results: Sequence[tuple[Any, ToolResult]]) -> tuple[ToolCall, ...]:
        """The trajectory's record of the calls run in one turn."""
        known = {tool.name for tool in self.tools}
        return tuple(ToolCall(name=call.name, arguments=call.arguments, known=call.name in known,
                              ok=result.ok, infra_error=result.infra_error) for call, result in results)

    def _clip(self, text: str) -> str:
        limit = self.max_observation_chars
        if len(text) <= limit:
            return text
        return text[:limit] + f"\n[observation cut: {len(text) - limit} more characters]"

    def _select_task(self, options: Mapping[str, Any]) -> Task:
        unknown = set(options) - RESET_OPTIONS
        if unknown:
            raise EnvConfigError(f"reset options: expected keys among {sorted(RESET_OPTIONS)}, got {sorted(unknown)}")
        if "task" in options:
            return self._task_from_option(options["task"])
        candidates = self.tasks
        if options.get("difficulty") is not None:
            candidates = tuple(t for t in self.tasks if t.difficulty == options["difficulty"])
            if not candidates:
                levels = sorted({t.difficulty for t in self.tasks})
                raise EnvConfigError(f"difficulty: expected one of {levels}, got {options['difficulty']!r}")
        return candidates[int(self.np_random.integers(len(candidates)))]

    def _task_from_option(self, task: Task | str) -> Task:
        if isinstance(task, Task):
            if task.family not in self.rewards:
                raise EnvConfigError(f"task {task.id!r}: expected a task of families {list(self.families)}, "
                                     f"got family {task.family!r}")
            return task
        if task not in self._task_index:
            raise EnvConfigError(f"task: expected a Task or the id of one of this env's {len(self.tasks)} "
                                 f"tasks, got {task!r}")
        return self._task_index[task]

    @property
    def trajectory(self) -> Trajectory:
        """The turns of the current (or last) episode."""
        return Trajectory(turns=tuple(self._turns))

    def render(self) -> str | None:
        """The transcript so far, in ``"ansi"`` mode."""
        if self.render_mode != "ansi":
            return None
        parts = [f"=== prompt ===\n{self._prompt}"]
        for number, turn in enumerate(self._turns, 1):
            parts.append(f"=== action {number} ===\n{turn.action}\n=== observation {number} ===\n{turn.observation}")
        return "\n".join(parts)
