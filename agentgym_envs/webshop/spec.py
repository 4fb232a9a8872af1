"""WebShop-v0's spec: a real shop website, its tools-only oracle, one shared shop server per run."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agentgym_envs.spec import EnvSpec, ProbeSettings, Relabeling, StressProfile


def oracle(seed: int):
    """The tools-only shopping oracle (search, item and Features pages, the options, Buy Now)."""
    from agentgym_envs.policies.webshop_oracle import WebShopOraclePolicy

    return WebShopOraclePolicy()


def random(seed: int):
    """Random clicks and searches on the shop's pages."""
    from agentgym_envs.policies.webshop_oracle import WebShopRandomPolicy

    return WebShopRandomPolicy(seed=seed)


def shared_shop(split: str):
    """One shop server for every env of a run."""
    from agentgym_envs.webshop.shared import SharedShop

    return SharedShop(split)


def probes(settings: ProbeSettings) -> Sequence[Any]:
    """WebShop's reward-hacking probes (:mod:`agentgym_envs.webshop.probes`)."""
    from agentgym_envs.webshop.probes import run_probes

    return run_probes(settings)


def probe_catalogue() -> Sequence[Any]:
    """WebShop's reward-hacking probes, unplayed (:func:`agentgym_envs.webshop.probes.catalogue`)."""
    from agentgym_envs.webshop.probes import catalogue

    return catalogue()


def speed(argv: Sequence[str]) -> int:
    """Its speed benchmark, :mod:`agentgym_envs.webshop.speed`."""
    from agentgym_envs.webshop.speed import main

    return main(argv)


SPEC = EnvSpec(
    id="agentrl/WebShop-v0",
    entry_point="agentgym_envs.webshop:WebShopEnv",
    max_episode_steps=15,  # WebShop's agents (ReAct, the RL papers) get 15 turns
    speed=speed,
    aliases=("webshop",),
    oracle=oracle,
    random=random,
    service=shared_shop,
    stress=StressProfile(faults=("service-stall", "service-restart")),
    probes=probes,
    probe_catalogue=probe_catalogue,
    relabeling=Relabeling(True, "yes in principle: the purchased item satisfies a goal built from its own attributes, "
                          "options and price; no proposer is implemented yet."),
)
"""WebShop-v0's spec."""
