"""benchmarks.policy_endpoint measures what it says: the endpoint's overhead per client, and every row (programs in
worker processes and in threads) playing the in-process rollout's tokens."""

from __future__ import annotations

import json

from benchmarks import policy_endpoint


def test_a_small_run_measures_every_row_and_plays_the_same_tokens_both_ways(tmp_path, capsys):
    figures = tmp_path / "endpoint.json"
    status = policy_endpoint.main(["--turns", "8", "--programs", "4", "--repeats", "1", "--json", str(figures)])

    written = json.loads(figures.read_text())
    assert set(written["overhead_ms"]) == set(policy_endpoint.CLIENTS)
    assert all(0 < row["p50"] <= row["p90"] for row in written["overhead_ms"].values())
    assert written["same_tokens"] and written["in_process_eps"] > 0
    assert set(written["episodes_per_s"]) == set(policy_endpoint.THROUGHPUT_ROWS)
    assert all(rate > 0 for rate in written["episodes_per_s"].values())
    assert status == (0 if written["targets_met"] else 1)
    printed = capsys.readouterr().out
    assert "target p50 <= 2.0 ms" in printed and "4 agent programs in processes:" in printed
