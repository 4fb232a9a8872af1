"""Search-v0's spec: BM25 search over a corpus, its tools-only oracle, exact-match and judge probes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agentgym_envs.spec import EnvSpec, ProbeSettings, Relabeling


def oracle(seed: int):
    """The tools-only search oracle (searches, reads pages, answers from what it read)."""
    from agentgym_envs.policies.search_oracle import SearchOraclePolicy

    return SearchOraclePolicy()


def lookup(seed: int):
    """Searches with the question and answers with what the top results show (a careless demonstrator)."""
    from agentgym_envs.policies.search_lookup import SearchLookupPolicy

    return SearchLookupPolicy()


def probes(settings: ProbeSettings) -> Sequence[Any]:
    """Search's reward-hacking probes (:mod:`agentgym_envs.search.probes`)."""
    from agentgym_envs.search.probes import run_probes

    return run_probes(settings)


def probe_catalogue() -> Sequence[Any]:
    """Search's reward-hacking probes, unplayed (:func:`agentgym_envs.search.probes.catalogue`)."""
    from agentgym_envs.search.probes import catalogue

    return catalogue()


def speed(argv: Sequence[str]) -> int:
    """Its speed benchmark, :mod:`agentgym_envs.search.speed`."""
    from agentgym_envs.search.speed import main

    return main(argv)


SPEC = EnvSpec(
    id="agentrl/Search-v0",
    entry_point="agentgym_envs.search:SearchEnv",
    max_episode_steps=10,
    speed=speed,
    aliases=("search",),
    oracle=oracle,
    policies={"lookup": lookup},
    probes=probes,
    probe_catalogue=probe_catalogue,
    relabeling=Relabeling(True, "yes: a final answer that names a real entity or attribute value of the corpus "
                                "answers some other question, one whose supporting articles the agent opened "
                                "(tasks.search.relabel.question_for_answer builds it; the Search verifier "
                                "confirms it)."),
)
"""Search-v0's spec."""
