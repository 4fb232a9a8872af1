"""The WebShop speed benchmark measures what it says: warmed envs, every episode counted, the report rendered."""

from __future__ import annotations

import dataclasses

from agentgym_envs.webshop import ShopServer
from agentgym_envs.webshop.speed import render, render_scale, scale, step_latency, throughput
from tasks import load_split

TASKS = load_split("WebShop", "test")[:3]


def test_text_mode_numbers_and_report():
    with ShopServer("generated-v1") as server:
        latency = step_latency("text", TASKS, server, None)
        rate = throughput("text", 2, TASKS, 4, server, None)
        sessions = server_sessions(server)
    assert latency.steps >= len(TASKS) and 0 < latency.p50_ms <= latency.p99_ms
    assert (rate.episodes, rate.successes, rate.infra_errors) == (4, 4, 0) and rate.episodes_per_s > 0
    assert sessions == 0  # every env closed its session
    report = {"latency": [latency.__dict__], "throughput": [rate.__dict__],
              "memory_mb": {"1_context": 1.0, "32_contexts": 32.0, "per_context": 1.0}, "leftovers": {"x": 0}}
    text = render(report)
    assert "text" in text and f"{rate.episodes_per_s:.2f}" in text and "1.0 MB per context" in text


def server_sessions(server: ShopServer) -> int:
    from agentgym_envs.webshop import ShopClient

    with ShopClient(server.url) as shop:
        return int(shop.health()["sessions"])


def test_scale_converts_indexes_and_searches_a_catalogue_in_webshops_format(tmp_path):
    report = scale(300, searches=20, workdir=tmp_path)
    assert (report.products, report.tasks, report.searches) == (300, 3, 20)  # one item in 100 has an instruction
    assert 0 < report.search_p50_ms <= report.search_p95_ms <= report.search_p99_ms and report.index_mb > 0
    assert report.convert_peak_rss_mb > 10 and report.index_build_peak_rss_mb > 10 and report.server_rss_mb > 10
    assert list(tmp_path.iterdir()) == []  # the files are removed
    bigger = dataclasses.replace(report, products=600, convert_s=2 * report.convert_s)
    text = render_scale([report, bigger])
    assert "300" in text and "600" in text and "at WebShop's 1,181,436 products (linear through 300 and 600)" in text
