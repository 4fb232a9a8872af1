"""benchmarks.dabench: DABench's questions played in DataAnalysis-v0 become DABench responses and DABench's
metrics."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.dabench import main
from benchmarks.evaluate import main as evaluate_main
from tasks.data_analysis.__main__ import main as tasks_main
from tests.conftest import require_backend

FIXTURES = Path(__file__).parents[1] / "tasks" / "fixtures" / "dabench"


def _dabench_tasks(tmp_path: Path) -> Path:
    """The fixture's 10 questions as tasks, over placeholder CSV files."""
    tables = tmp_path / "tables"
    tables.mkdir()
    for line in (FIXTURES / "da-dev-questions.jsonl").read_text(encoding="utf-8").splitlines():
        (tables / json.loads(line)["file_name"]).write_text("x,y\n1,2\n3,4\n", encoding="utf-8")
    out = tmp_path / "tasks.jsonl"
    assert tasks_main(["dabench", "--questions", str(FIXTURES / "da-dev-questions.jsonl"), "--labels",
                       str(FIXTURES / "da-dev-labels.jsonl"), "--data-dir", str(tables), "--out", str(out)]) == 0
    return out


@pytest.mark.bwrap
def test_random_answers_become_responses_and_dabench_metrics(tmp_path: Path, backend_problems,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    require_backend("bwrap", backend_problems)
    tasks = _dabench_tasks(tmp_path)
    out = tmp_path / "run"
    assert main(["--tasks", str(tasks), "--questions", str(FIXTURES / "da-dev-questions.jsonl"), "--labels",
                 str(FIXTURES / "da-dev-labels.jsonl"), "--model", "random", "--sandbox", "bwrap", "--limit", "3",
                 "--out", str(out)]) == 0
    responses = [json.loads(line) for line in (out / "responses.jsonl").read_text().splitlines()]
    assert [response["id"] for response in responses] == [0, 6, 11]  # DABench's own ids, in task order
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["answered"] + metrics["unanswered"] == 3
    assert "Accuracy by Question (ABQ): " in capsys.readouterr().out


def test_tasks_not_made_from_dabench_files_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tasks = _dabench_tasks(tmp_path)
    records = [json.loads(line) for line in tasks.read_text().splitlines()]
    del records[0]["metadata"]["dabench_id"]
    tasks.write_text("".join(json.dumps(record) + "\n" for record in records))
    assert main(["--tasks", str(tasks), "--questions", "q", "--labels", "l", "--model", "random",
                 "--out", str(tmp_path / "run")]) == 2
    assert "got 1 without, e.g. 'dabench/0'" in capsys.readouterr().err


@pytest.mark.bwrap
def test_evaluate_reports_the_metrics_benchmarks_dabench_computes_from_dabenchs_files(
        tmp_path: Path, backend_problems) -> None:
    # benchmarks.evaluate reads labels and concepts from the tasks; benchmarks.dabench from DABench's own files
    require_backend("bwrap", backend_problems)
    tasks = _dabench_tasks(tmp_path)
    assert main(["--tasks", str(tasks), "--questions", str(FIXTURES / "da-dev-questions.jsonl"), "--labels",
                 str(FIXTURES / "da-dev-labels.jsonl"), "--model", "random", "--sandbox", "bwrap", "--limit", "4",
                 "--out", str(tmp_path / "dabench")]) == 0
    assert evaluate_main(["--model", "random", "--suite", "data", "--tasks", str(tasks), "--sandbox", "bwrap",
                          "--limit", "4", "--out", str(tmp_path / "evaluate")]) == 0
    report = json.loads((tmp_path / "evaluate" / "report.json").read_text())
    (result,) = report["results"]
    assert result["benchmark"]["benchmark"] == "DABench" and result["tasks"] == 4
    expected = json.loads((tmp_path / "dabench" / "metrics.json").read_text())
    assert json.loads(json.dumps(result["benchmark"]["values"])) == expected
    markdown = (tmp_path / "evaluate" / "report.md").read_text()
    assert "## DABench's metrics · random · data" in markdown and "ABQ by concept:" in markdown
    assert f"tasks from `{tasks}`" in markdown


def test_evaluate_plays_a_tasks_file_on_one_suite_only(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match="tasks_file: expected one suite"):
        evaluate_main(["--model", "random", "--suite", "data,search", "--tasks", str(tmp_path / "t.jsonl")])


def test_evaluate_refuses_a_tasks_file_for_a_suite_whose_service_serves_the_split(tmp_path: Path) -> None:
    # WebShop's shared shop server serves the split's catalogue: tasks of another would search the wrong shop
    with pytest.raises(SystemExit, match="would not serve these tasks"):
        evaluate_main(["--model", "random", "--suite", "webshop", "--tasks", str(tmp_path / "t.jsonl")])
