"""Demonstrations of an agent program: a scripted policy answers its requests, the endpoint records them.

To warm-start a model on an agent program, the demonstrations must be in the program's own conversation: its
prompts, its tool schemas, its way of sending tool results back. So the program itself is run, against the policy
endpoint, with a scripted demonstrator (an oracle) in the model's place: before each of the program's turns, the
demonstrator acts on the env's latest observation, and the endpoint's "generation" of that turn is the action's
ids, encoded as the model would produce them (:meth:`trainers.chat.ChatTokens.action_ids`, as in-process
demonstrations are). The endpoint records the episodes as it records the model's, so SFT learns exactly the
sequences GRPO will later sample through the same program.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import gymnasium as gym

from agentgym_envs.policies import Policy, ScriptedAgent
from agentgym_envs.runner import AgentStop, AgentTurn, EnvPool, Episode, EpisodeRequest, EpisodeRunner
from tasks import Task
from trainers.agent_program import AgentProgramFn, ProgramAgent
from trainers.chat import ChatTokens
from trainers.endpoint import PolicyEndpoint
from trainers.generation import GeneratedTurn
from trainers.rollout import RolloutConfig
from trainers.sft import stop_if_mostly_infra


class DemonstratorTurns:
    """A :class:`~trainers.generation.Generator` whose turn for an episode is the action queued for it.

    Args:
        tokenizer: The model's tokenizer (the actions are encoded as the model would generate them).
    """

    def __init__(self, tokenizer) -> None:
        self.chat = ChatTokens(tokenizer)
        self.end_of_turn = tokenizer.eos_token_id
        self._queued: dict[str, list[int]] = {}

    def queue(self, route_id: str, action: str) -> None:
        """The next turn of the episode on route ``route_id``."""
        self._queued[route_id] = self.chat.action_ids(action)

    def generate(self, contexts: Sequence[list[int]], max_new_tokens: Sequence[int], *,
                 keys: Sequence[tuple[str, int]] | None = None, **_: Any) -> list[GeneratedTurn]:
        """Each row's queued action (cut at its limit); a row with none queued ends its turn at once."""
        if keys is None:
            raise ValueError("DemonstratorTurns: expected the endpoint's keys (one per episode route)")
        turns = []
        for key, limit in zip(keys, max_new_tokens, strict=True):
            ids = self._queued.pop(key[0], None) or [self.end_of_turn]
            turns.append(GeneratedTurn(ids=ids[:limit], logprobs=[0.0] * len(ids[:limit])))
        return turns

    def release(self, keys: Any) -> None:
        """Nothing is cached."""


class DemonstratingAgent(ProgramAgent):
    """An agent program whose model is a scripted demonstrator.

    Args:
        endpoint: The policy endpoint, generating with ``turns``.
        program: The agent program.
        turns: The endpoint's generator.
        scripted: The demonstrator, one policy per episode.
        timeout_s: As :class:`~trainers.agent_program.ProgramAgent`'s.
    """

    def __init__(self, endpoint: PolicyEndpoint, program: AgentProgramFn, turns: DemonstratorTurns,
                 scripted: ScriptedAgent, *, timeout_s: float = 300.0) -> None:
        super().__init__(endpoint, program, timeout_s=timeout_s)
        self.turns = turns
        self.scripted = scripted

    def start(self, episode: Episode, task: Task, prompt: str, info: Mapping[str, Any]) -> None:
        """Open the episode's route and start its demonstrator."""
        super().start(episode, task, prompt, info)
        self.scripted.start(episode, task, prompt, info)

    def act(self, episodes: Sequence[Episode], observations: Sequence[str],
            infos: Sequence[Mapping[str, Any]]) -> list[AgentTurn | AgentStop]:
        """Queue each demonstrator's action for the latest observation, then let the programs ask for it."""
        for episode, turn in zip(episodes, self.scripted.act(episodes, observations, infos), strict=True):
            if turn is not None:
                self.turns.queue(self.route(episode).id, turn.action)
        return super().act(episodes, observations, infos)

    def finish(self, episode: Episode) -> None:
        """End the program's episode and drop its demonstrator."""
        super().finish(episode)
        self.scripted.finish(episode)


def collect_program_demonstrations(program: AgentProgramFn, env: gym.Env, env_id: str, policy: Policy,
                                   tasks: Sequence[Task], tokenizer, config: RolloutConfig, *,
                                   keep: Callable[[Episode], bool] | None = None,
                                   timeout_s: float = 300.0) -> list[Episode]:
    """Play ``program`` with ``policy`` in the model's place on each task in ``env``, one episode at a time; keep
    the recorded episodes ``keep`` accepts (default: solved).

    Raises:
        TooManyInfraErrors: As :func:`trainers.sft.collect_demonstrations` (most episodes ended by infrastructure
            faults, or by the program crashing or hanging: those are unscored too).
    """
    keep = keep or (lambda episode: episode.success)
    turns = DemonstratorTurns(tokenizer)
    runner = EpisodeRunner(EnvPool(lambda _: env), workers=1, max_turns=config.max_turns)
    demonstrations, faulted = [], []
    with PolicyEndpoint(turns, tokenizer, config) as endpoint:
        agent = DemonstratingAgent(endpoint, program, turns, ScriptedAgent(lambda _: policy), timeout_s=timeout_s)
        for played, task in enumerate(tasks, start=1):
            agent.begin_run()
            episode = runner.run(agent, [EpisodeRequest(env_id=env_id, task=task, group=0, seed=None)])[0]
            if not episode.scored:
                faulted.append(episode)
            elif keep(episode):
                demonstrations.append(episode)
            stop_if_mostly_infra(env_id, faulted, played, len(tasks))
    return demonstrations
