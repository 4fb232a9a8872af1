"""Episode lengths in tokens, as the trainer's rollouts count them: the numbers behind each recipe's context budget."""

from __future__ import annotations

import pytest

from agentgym_envs.runner import Episode
from benchmarks.episode_tokens import _runs, main, measure, summarize


@pytest.mark.parametrize(("mask", "value", "expected"), [
    ([1, 1, 0, 0, 0, 1], 1, [2, 1]),  # two actions of 2 and 1 tokens
    ([1, 1, 0, 0, 0, 1], 0, [3]),  # one observation of 3 tokens between them
    ([], 1, []),  # no completion
    ([0, 0], 1, []),  # only an observation
])
def test_runs_of_the_env_mask_are_the_actions_and_observations(mask, value, expected):
    assert _runs(mask, value) == expected


def test_the_summary_takes_medians_maxima_and_the_solved_share():
    episodes = [Episode(env_id="e", task_id="a", group=0, prompt_ids=[1] * 10, completion_ids=[2] * 6,
                        env_mask=[1, 1, 0, 0, 0, 1], terminated=True, reward=1.0,
                        reward_components={"outcome": 1.0}),
                Episode(env_id="e", task_id="b", group=0, prompt_ids=[1] * 20, completion_ids=[2] * 2,
                        env_mask=[1, 1])]
    row = summarize("e", "oracle", episodes)
    assert (row.episodes, row.solved, row.prompt_p50, row.prompt_max) == (2, 0.5, 15, 20)
    lengths = (row.action_max, row.observation_max, row.context_p50, row.context_p90, row.context_max)
    assert lengths == (2, 3, 19, 22, 22)
    with pytest.raises(ValueError, match="expected scored episodes"):
        summarize("e", "oracle", [Episode(env_id="e", task_id="c", group=0, infra_error=True)])


def test_the_search_oracle_is_measured_through_the_tiny_tokenizer(capsys):
    row = measure("search", tasks=2, prompt_style="task")
    assert (row.env_id, row.episodes, row.solved) == ("agentrl/Search-v0", 2, 1.0)
    assert 0 < row.prompt_max < row.context_max and row.action_max > 0 and row.turns_max >= 2
    assert main(["--envs", "search", "--tasks", "1", "--prompt-style", "task"]) == 0
    assert "agentrl/Search-v0" in capsys.readouterr().out
