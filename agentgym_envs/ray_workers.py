"""Environments in Ray actors: one training process drives envs (and their sandboxes) on other machines.

:func:`ray_env_factory` makes :class:`RemoteEnv` proxies for :class:`~agentgym_envs.runner.EnvPool` and
``trainers.grpo.build_trainer(env_factory=...)``. Each proxy is a ``gym.Env`` whose environment lives in a
Ray actor: the actor runs ``gym.make(env_id, **env_kwargs)`` on the node Ray places it on, and
``reset``, ``step``, ``close``, the card, the trajectory and the task list go to it and back. The runner
sees an env like any other, so scripted policies, evaluation and the trainers use remote envs unchanged.

Placement: an actor asks for ``actor_options`` (Ray's ``.options()``), by default a quarter of a CPU, so a
node offering 32 CPUs to Ray holds 128 envs (an env mostly waits on its sandbox or on the model). To keep
envs off the GPU node, start the CPU nodes with a custom resource and ask for a sliver of it::

    # GPU node (runs the trainer):  ray start --head --disable-usage-stats --num-cpus=0 --port=6379
    # each CPU node:                ray start --address=HEAD_IP:6379 --resources='{"env_worker": 1000}'
    connect_ray("auto")
    factory = ray_env_factory({"agentrl/SWE-v0": {"sandbox": "docker"}},
                              actor_options={"num_cpus": 0.25, "resources": {"env_worker": 1}})

(``"scheduling_strategy": "SPREAD"`` spreads the actors over the nodes instead of packing them.) Every
node needs this package installed, as on the trainer's node; sandboxes start on the actor's node.

Faults: an actor that dies (its process killed, its node lost, or a call past ``timeout_s``) is an
infrastructure fault, never the agent's: a ``step`` on it returns a truncated step with
``info["infra_error"]`` (the runner ends the episode as an infra episode, left out of every loss and
rate), a ``reset`` raises :class:`EnvWorkerLostError` (a :class:`~tasks.InfrastructureError`), and the
next ``reset`` starts a fresh actor (one that died while idle is replaced within that reset). An
exception raised by the env itself in its actor reaches the caller as the same exception, so an
:class:`~tasks.InfrastructureError` of a sandbox stays one and a programming error stays a crash.

Example:
    >>> connect_ray()                                                    # doctest: +SKIP
    >>> runner = EpisodeRunner(EnvPool(ray_env_factory({"agentrl/Search-v0": {"split": "test"}})))  # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import gymnasium as gym
from gymnasium.envs.registration import EnvSpec

from agentgym_envs.card import EnvCard
from agentgym_envs.errors import AgentgymError
from tasks import InfrastructureError, Task, Trajectory, Turn

if TYPE_CHECKING:
    from ray.actor import ActorHandle

StepResult = tuple[str, float, bool, bool, dict[str, Any]]
DEFAULT_ACTOR_OPTIONS: Mapping[str, Any] = {"num_cpus": 0.25}
"""Ray options of an env actor unless the factory is given others: four envs per CPU a node offers."""
LOCAL_OBJECT_STORE_BYTES = 200 * 2**20
"""Object store of a local cluster: envs exchange text, not tensors."""


class EnvWorkerLostError(AgentgymError, InfrastructureError):
    """The Ray actor that held an environment died (process killed, node lost, no answer in time)."""


def connect_ray(address: str | None = None, *, num_cpus: int = 2,
                object_store_memory: int = LOCAL_OBJECT_STORE_BYTES) -> None:
    """Join a Ray cluster, or start a single-machine one that listens on the loopback interface only.

    Ray's usage statistics are switched off in both cases (``RAY_USAGE_STATS_ENABLED=0``); a cluster
    started with ``ray start`` should be started with ``--disable-usage-stats`` as well. Nothing happens
    when Ray is already initialised.

    Args:
        address: ``"auto"`` or ``"HEAD_IP:6379"`` to join a cluster started with ``ray start``; None for a
            local cluster on this machine (no dashboard, all its services on 127.0.0.1).
        num_cpus: CPUs a local cluster offers to actors (ignored when joining).
        object_store_memory: Bytes of a local cluster's object store (ignored when joining).
    """
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    import ray

    if ray.is_initialized():
        return
    if address is not None:
        ray.init(address=address, logging_level="WARNING")
        return
    _loopback_only()
    ray.init(num_cpus=num_cpus, object_store_memory=object_store_memory, include_dashboard=False,
             _node_ip_address="127.0.0.1", logging_level="WARNING")


def _loopback_only() -> None:
    """Ray's single-machine mode, in which a local cluster's services bind and connect on 127.0.0.1 instead of the
    host's address: the processes it starts read the variable, this one the constant (it stays in that mode)."""
    from ray._private import ray_constants

    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    ray_constants.ENABLE_RAY_CLUSTER = False


def ray_env_factory(env_kwargs: Mapping[str, Mapping[str, Any]] | None = None, *,
                    actor_options: Mapping[str, Any] | None = None,
                    timeout_s: float | None = None) -> Callable[[str], RemoteEnv]:
    """A factory of :class:`RemoteEnv` for :class:`~agentgym_envs.runner.EnvPool` or ``build_trainer``.

    Args:
        env_kwargs: Per env id, the keyword arguments of its ``gym.make`` in the actor.
        actor_options: Ray's options of each env actor (default :data:`DEFAULT_ACTOR_OPTIONS`), e.g.
            ``{"num_cpus": 0.25, "resources": {"env_worker": 1}}`` to place envs on the CPU nodes only.
        timeout_s: Longest wait for one call (reset, step, ...); past it the actor counts as lost. None: no limit.

    Example:
        >>> factory = ray_env_factory({"agentrl/Search-v0": {"split": "train"}})  # doctest: +SKIP
        >>> trainer = build_trainer(config, model, tokenizer, env_factory=factory)  # doctest: +SKIP
    """
    kwargs = {env_id: dict(values) for env_id, values in (env_kwargs or {}).items()}
    options = dict(DEFAULT_ACTOR_OPTIONS if actor_options is None else actor_options)
    return lambda env_id: RemoteEnv(env_id, kwargs.get(env_id, {}), actor_options=options, timeout_s=timeout_s)


class EnvActor:
    """The env on the actor's side (made remote by :class:`RemoteEnv`; importing the package registers the ids)."""

    def __init__(self, env_id: str, env_kwargs: Mapping[str, Any]) -> None:
        import agentgym_envs  # noqa: F401  (registers the agentrl/... ids in this worker)

        self.env = gym.make(env_id, **env_kwargs)

    def describe(self) -> tuple[EnvSpec | None, EnvCard, gym.Space, gym.Space]:
        """The env's spec, card and spaces."""
        return self.env.spec, self.env.unwrapped.card, self.env.observation_space, self.env.action_space

    def pid(self) -> int:
        """The actor's process id."""
        return os.getpid()

    def reset(self, seed: int | None, options: Mapping[str, Any] | None) -> tuple[str, dict[str, Any]]:
        """``env.reset``."""
        return self.env.reset(seed=seed, options=options)

    def step(self, action: str) -> StepResult:
        """``env.step``."""
        return self.env.step(action)

    def trajectory(self) -> Trajectory:
        """The env's record of the current episode."""
        return self.env.unwrapped.trajectory

    def tasks(self) -> list[Task]:
        """The tasks the env draws from."""
        return list(self.env.unwrapped.tasks)

    def close(self) -> None:
        """``env.close`` (containers, processes, retrievers)."""
        self.env.close()


@functools.cache
def _actor_class() -> Any:
    """:class:`EnvActor` as a Ray actor class (made once: Ray exports a class's definition each time it is made)."""
    import ray

    return ray.remote(EnvActor)


class RemoteEnv(gym.Env[str, str]):
    """A ``gym.Env`` whose environment lives in a Ray actor (see the module docstring).

    The actor starts on first use (a reset, the card, the tasks), so making a proxy costs nothing. Its
    ``unwrapped`` is the proxy itself, which offers what agentrl code reads of an env: ``card``,
    ``trajectory``, ``tasks`` and ``spec`` (so :func:`~agentgym_envs.card.describe` works on it).

    Args:
        env_id: The registry id, e.g. ``"agentrl/Search-v0"``.
        env_kwargs: Keyword arguments of ``gym.make`` in the actor.
        actor_options: Ray's options of the actor (default :data:`DEFAULT_ACTOR_OPTIONS`).
        timeout_s: Longest wait for one call; past it the actor counts as lost. None: no limit.
    """

    def __init__(self, env_id: str, env_kwargs: Mapping[str, Any] | None = None, *,
                 actor_options: Mapping[str, Any] | None = None, timeout_s: float | None = None) -> None:
        self.env_id = env_id
        self.env_kwargs = dict(env_kwargs or {})
        self.actor_options = dict(DEFAULT_ACTOR_OPTIONS if actor_options is None else actor_options)
        self.timeout_s = timeout_s
        self._actor: ActorHandle | None = None
        self._description: tuple[EnvSpec | None, EnvCard, gym.Space, gym.Space] | None = None
        self._turns: list[Turn] = []  # the driver's record of the episode, for when its actor is lost
        self._lost = False  # the current episode's actor died

    @property
    def actor(self) -> ActorHandle | None:
        """The Ray actor holding the env now (None before first use and after it was lost)."""
        return self._actor

    @property
    def actor_id(self) -> str | None:
        """Hex id of :attr:`actor` (a replaced actor has a new one)."""
        return self._actor._actor_id.hex() if self._actor is not None else None

    @property
    def spec(self) -> EnvSpec | None:  # type: ignore[override]
        """The spec of the env in the actor (id, kwargs, turn limit)."""
        return self._describe()[0]

    @property
    def card(self) -> EnvCard:
        """The env's card (fetched once)."""
        return self._describe()[1]

    @property
    def observation_space(self) -> gym.Space:  # type: ignore[override]
        """The env's observation space."""
        return self._describe()[2]

    @property
    def action_space(self) -> gym.Space:  # type: ignore[override]
        """The env's action space."""
        return self._describe()[3]

    @property
    def tasks(self) -> list[Task]:
        """The tasks the env draws from."""
        return self._call("tasks")

    @property
    def trajectory(self) -> Trajectory:
        """The env's record of the current episode; the proxy's own (actions and observations) if its actor died."""
        if self._actor is None or self._lost:
            return Trajectory(turns=tuple(self._turns))
        try:
            return self._call("trajectory")
        except EnvWorkerLostError:
            return Trajectory(turns=tuple(self._turns))

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        """Reset the env in its actor; an actor that died since the last episode is replaced first.

        Raises:
            EnvWorkerLostError: The actor died during this reset (the next reset starts a fresh one).
        """
        super().reset(seed=seed)
        self._turns, self._lost = [], False
        started = self._actor is not None
        try:
            return self._call("reset", seed, options)
        except EnvWorkerLostError:
            if not started:
                raise
            return self._call("reset", seed, options)  # it died while idle: no episode was lost yet

    def step(self, action: str) -> StepResult:
        """Step the env in its actor; a lost actor ends the episode as an infrastructure fault (truncated)."""
        try:
            step = self._call("step", action)
        except EnvWorkerLostError as exc:
            self._lost = True
            step = self._lost_step(exc)
        self._turns.append(Turn(action=action, observation=step[0]))
        return step

    def _lost_step(self, error: EnvWorkerLostError) -> StepResult:
        """The step of an episode whose actor died: no reward, truncated, ``infra_error``, as an env reports it."""
        observation = f"Infrastructure error (not your fault): the environment's worker was lost: {error}"
        info = {"turn": len(self._turns) + 1, "tool": None, "tool_calls": [], "ok": False, "latency_s": 0.0,
                "infra_error": True, "format_errors": [], "error": str(error)}
        return observation, 0.0, False, True, info

    def close(self) -> None:
        """Close the env and end its actor (a dead actor has nothing left to close)."""
        actor, self._actor = self._actor, None
        if actor is None:
            return
        import ray

        gone = (ray.exceptions.RayActorError, ray.exceptions.WorkerCrashedError, ray.exceptions.GetTimeoutError)
        try:
            with contextlib.suppress(*gone):  # a dead or hung actor: killing it is all that is left to do
                ray.get(actor.close.remote(), timeout=self.timeout_s)
        finally:
            ray.kill(actor, no_restart=True)

    def _describe(self) -> tuple[EnvSpec | None, EnvCard, gym.Space, gym.Space]:
        if self._description is None:
            self._description = self._call("describe")
        return self._description

    def _call(self, method: str, *args: Any) -> Any:
        """Call ``method`` of the env's actor (started if there is none) and wait for its result.

        Raises:
            EnvWorkerLostError: The actor died or did not answer within ``timeout_s`` (it is then dropped).
            RuntimeError: The env could not be made in the actor (``gym.make`` failed there).
            Exception: Whatever the env itself raised, as it raised it.
        """
        import ray

        actor = self._start()
        try:
            return ray.get(getattr(actor, method).remote(*args), timeout=self.timeout_s)
        except ray.exceptions.RayTaskError as exc:
            raise exc.cause from None  # the env's own exception: keeps its type and meaning
        except ray.exceptions.RayActorError as exc:
            self._drop(actor)
            if exc.actor_init_failed:
                raise RuntimeError(f"gym.make({self.env_id!r}, **{self.env_kwargs}) failed in its Ray actor: "
                                   f"{exc}") from exc
            raise EnvWorkerLostError(f"{self.env_id}: its Ray actor died during {method}(): {exc}") from exc
        except (ray.exceptions.WorkerCrashedError, ray.exceptions.NodeDiedError) as exc:
            self._drop(actor)
            raise EnvWorkerLostError(f"{self.env_id}: the Ray worker of its actor crashed during {method}(): "
                                     f"{exc}") from exc
        except ray.exceptions.GetTimeoutError as exc:
            self._drop(actor)
            raise EnvWorkerLostError(f"{self.env_id}: its Ray actor did not answer {method}() within "
                                     f"{self.timeout_s} s") from exc

    def _start(self) -> ActorHandle:
        """The actor, started on first use (and after a loss)."""
        if self._actor is None:
            import ray

            if not ray.is_initialized():
                raise RuntimeError("RemoteEnv: Ray is not initialised; call agentgym_envs.ray_workers.connect_ray() "
                                   "(a local cluster) or connect_ray('auto') (join a cluster) first")
            self._actor = _actor_class().options(**self.actor_options).remote(self.env_id, self.env_kwargs)
        return self._actor

    def _drop(self, actor: ActorHandle) -> None:
        """Forget a lost actor (and end it, e.g. one that timed out): the next use starts a fresh one."""
        import ray

        if self._actor is actor:
            self._actor = None
        ray.kill(actor, no_restart=True)
