"""DABench's public files (questions + labels JSONL, a CSV folder) loaded as tasks, and the command line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rewards.data_analysis import data_analysis_reward
from tasks import read_tasks
from tasks.data_analysis import duckdb_connection, load_dabench, table_sources, task_files
from tasks.data_analysis.__main__ import main
from tasks.errors import TaskError
from tasks.records import Trajectory, Turn

QUESTIONS = [
    {"id": 0, "question": "Calculate the mean fare paid by the passengers.", "concepts": ["Summary Statistics"],
     "constraints": "Calculate the mean fare using Python's built-in statistics module or appropriate statistical "
                    "method in pandas. Rounding off the answer to two decimal places.",
     "format": "@mean_fare[mean_fare_value] where \"mean_fare_value\" is a floating-point number rounded to two "
               "decimal places.", "file_name": "titanic.csv", "level": "easy"},
    {"id": 5, "question": "Is there a correlation between age and fare?", "concepts": ["Correlation Analysis",
                                                                                     "Outlier Detection"],
     "constraints": "Use the Pearson correlation coefficient.", "format": "@r[value] @relation[type]",
     "file_name": "titanic.csv", "level": "hard"},
    {"id": 7, "question": "Engineer a feature.", "concepts": ["Machine Learning"], "constraints": "None.",
     "format": "@rows[value]", "file_name": "housing.csv", "level": "medium"},
]
LABELS = [{"id": 0, "common_answers": [["mean_fare", "34.65"]]},
          {"id": 5, "common_answers": [["r", "0.1"], ["relation", "weak positive"]]},
          {"id": 7, "common_answers": [["rows", "3"]]}]


def write_jsonl(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(record) + "\n" for record in records), encoding="utf-8")
    return path


@pytest.fixture
def dabench(tmp_path: Path) -> dict[str, Path]:
    tables = tmp_path / "da-dev-tables"
    tables.mkdir()
    (tables / "titanic.csv").write_text("PassengerId,Age,Fare\n1,22,7.25\n2,38,71.28\n3,26,25.42\n", encoding="utf-8")
    (tables / "housing.csv").write_text("rooms\n3\n4\n5\n", encoding="utf-8")
    return {"questions": write_jsonl(tmp_path / "da-dev-questions.jsonl", QUESTIONS),
            "labels": write_jsonl(tmp_path / "da-dev-labels.jsonl", LABELS), "data_dir": tables}


def test_questions_become_tasks_with_fields_files_and_families(dabench: dict[str, Path]) -> None:
    tasks = load_dabench(dabench["questions"], dabench["labels"], dabench["data_dir"])
    assert [task.id for task in tasks] == ["dabench/0", "dabench/5", "dabench/7"]
    assert [task.family for task in tasks] == ["summary_statistics", "correlation", "summary_statistics"]
    assert [task.difficulty for task in tasks] == [1, 5, 3]
    first, second = tasks[0], tasks[1]
    assert first.answer == "@mean_fare[34.65]"
    assert first.metadata["answer_fields"] == {"mean_fare": "34.65"}
    assert first.metadata["constraints"] == [QUESTIONS[0]["constraints"]]
    assert first.metadata["data_dir"] == str(dabench["data_dir"].resolve())
    assert second.metadata["concepts"] == ["correlation", "outliers"]
    assert second.metadata["concepts_original"] == ["Correlation Analysis", "Outlier Detection"]
    assert task_files(first) == {"titanic.csv": (dabench["data_dir"] / "titanic.csv").read_bytes()}


def test_a_loaded_task_is_graded_and_its_table_queried(dabench: dict[str, Path]) -> None:
    task = load_dabench(dabench["questions"], dabench["labels"], dabench["data_dir"])[0]
    answer = "@mean_fare[34.650]"
    assert data_analysis_reward(task, Trajectory((Turn(answer, "", answer=answer),)), {}).value == 1.0
    connection = duckdb_connection(dabench["data_dir"], table_sources(task))
    assert connection.execute("SELECT count(*) FROM titanic").fetchall() == [(3,)]


def test_a_missing_file_is_named_or_skipped(dabench: dict[str, Path]) -> None:
    (dabench["data_dir"] / "housing.csv").unlink()
    with pytest.raises(TaskError, match=r"'housing\.csv'.*da-dev-tables/housing\.csv"):
        load_dabench(dabench["questions"], dabench["labels"], dabench["data_dir"])
    kept = load_dabench(dabench["questions"], dabench["labels"], dabench["data_dir"], skip_missing=True)
    assert [task.id for task in kept] == ["dabench/0", "dabench/5"]


def test_the_command_line_names_what_skip_missing_dropped(dabench: dict[str, Path], tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    (dabench["data_dir"] / "housing.csv").unlink()
    assert main(["dabench", "--questions", str(dabench["questions"]), "--labels", str(dabench["labels"]),
                 "--data-dir", str(dabench["data_dir"]), "--skip-missing", "--out", str(tmp_path / "t.jsonl")]) == 0
    printed = capsys.readouterr().out
    assert "dropped (1):\n  question 7: expected file 'housing.csv'" in printed
    assert "wrote 2 tasks" in printed


def test_the_command_line_flags_broken_labels_and_scores_responses_as_dabench(
        dabench: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    labels = write_jsonl(dabench["labels"], [*LABELS[:2], {"id": 7, "common_answers": [["rows", "nan"]]}])
    assert main(["dabench", "--questions", str(dabench["questions"]), "--labels", str(labels),
                 "--data-dir", str(dabench["data_dir"]), "--out", str(tmp_path / "t.jsonl")]) == 0
    assert "broken (--skip-broken drops them) (1):\n  question 7: field 'rows' is labelled 'nan'" in (
        capsys.readouterr().out)
    responses = write_jsonl(tmp_path / "responses.jsonl", [
        {"id": 0, "response": "@mean_fare[34.65]"}, {"id": 5, "response": "@r[0.1] @relation[Weak positive]"},
        {"id": 7, "response": ""}])
    metrics = tmp_path / "metrics.json"
    assert main(["score", "--questions", str(dabench["questions"]), "--labels", str(labels),
                 "--responses", str(responses), "--json", str(metrics)]) == 0
    printed = capsys.readouterr().out
    assert "Accuracy by Question (ABQ): 50.00%" in printed and "(PSAQ): 75.00%" in printed
    assert "(UASQ): 66.67%" in printed and "left out as DABench does: 1" in printed
    assert json.loads(metrics.read_text())["by_concept"] == {"Summary Statistics": 1.0, "Correlation Analysis": 0.0,
                                                             "Outlier Detection": 0.0}


def test_a_question_without_a_label_or_a_plain_file_name_is_refused(dabench: dict[str, Path],
                                                                   tmp_path: Path) -> None:
    labels = write_jsonl(tmp_path / "labels.jsonl", LABELS[:2])
    with pytest.raises(TaskError, match="label for DABench question 7"):
        load_dabench(dabench["questions"], labels, dabench["data_dir"])
    questions = write_jsonl(tmp_path / "questions.jsonl", [{**QUESTIONS[0], "file_name": "../titanic.csv"}])
    with pytest.raises(TaskError, match="plain file name"):
        load_dabench(questions, dabench["labels"], dabench["data_dir"])


def test_a_malformed_line_names_its_file_and_number(dabench: dict[str, Path]) -> None:
    dabench["labels"].write_text(dabench["labels"].read_text(encoding="utf-8") + "{not json\n", encoding="utf-8")
    with pytest.raises(TaskError, match=r"da-dev-labels.jsonl:4: expected a JSON object"):
        load_dabench(dabench["questions"], dabench["labels"], dabench["data_dir"])


def test_the_command_line_writes_tasks_that_read_tasks_reads(dabench: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "out" / "tasks.jsonl"
    assert main(["dabench", "--questions", str(dabench["questions"]), "--labels", str(dabench["labels"]),
                 "--data-dir", str(dabench["data_dir"]), "--out", str(out)]) == 0
    assert [task.id for task in read_tasks(out)] == ["dabench/0", "dabench/5", "dabench/7"]


def test_the_command_line_generates_audited_tasks_with_their_files(tmp_path: Path) -> None:
    assert main(["generate", "--seed", "3", "--theme", "flights", "--dirtiness", "2", "--count", "9",
                 "--out", str(tmp_path)]) == 0
    tasks = read_tasks(tmp_path / "tasks.jsonl")
    assert sorted(task.family for task in tasks) == sorted(["summary_statistics", "filtering", "grouping", "joins",
                                                            "correlation", "time_series", "outliers", "cleaning",
                                                            "sql"])
    assert all(task.metadata["data_dir"] == str(tmp_path.resolve() / "data") for task in tasks)
    assert all(set(task_files(task)) == set(task.metadata["files"]) for task in tasks)


def test_the_command_line_reports_a_task_error(dabench: dict[str, Path], tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["dabench", "--questions", str(dabench["questions"]), "--labels", str(dabench["labels"]),
                 "--data-dir", str(tmp_path / "nowhere"), "--out", str(tmp_path / "t.jsonl")]) == 2
    assert "expected file 'titanic.csv'" in capsys.readouterr().err
