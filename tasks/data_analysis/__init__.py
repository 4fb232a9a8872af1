"""DataAnalysis tasks: generated datasets, their files and SQL tables, and DABench-style questions.

* :func:`task_files`, :func:`table_sources`, :func:`duckdb_connection` and :data:`SQL_LOADER_SOURCE`
  (:mod:`tasks.data_analysis.files`): a task's data files and the one loader of its SQL tables.
* :class:`Dataset`, :func:`generate_dataset`, :func:`materialize`, and the bundled datasets by name
  (:func:`load_dataset`, :func:`dataset_files`) (:mod:`tasks.data_analysis.datasets`): related tables stored
  canonically and written as CSV, Parquet and SQLite; the rules for file names and formats are
  :mod:`tasks.data_analysis.formats`.
* :data:`FAMILIES` and the drafters (:mod:`tasks.data_analysis.questions`), the two reference programs
  (:mod:`tasks.data_analysis.references`) and the readings audit (:mod:`tasks.data_analysis.audit`), which
  judges agreement by the grader's rules for "the same answer" (:mod:`tasks.data_analysis.answers`).
* The bundle's build (:mod:`tasks.data_analysis.bundled`; the splits through
  ``tasks.load_split("DataAnalysis", split)``), fresh tasks from a seed (:func:`generate_tasks`)
  and DABench's files (:func:`load_dabench`, :func:`read_dabench` with what it dropped or flagged);
  ``python -m tasks.data_analysis`` writes tasks JSONL and scores responses by DABench's own rules
  (:mod:`tasks.data_analysis.dabench_eval`).
"""

from tasks.data_analysis.dabench import DabenchLoad, QuestionNote, load_dabench, read_dabench
from tasks.data_analysis.datasets import (
    COLUMN_TYPES,
    THEMES,
    Column,
    Dataset,
    Table,
    available_datasets,
    dataset_files,
    generate_dataset,
    load_dataset,
    materialize,
)
from tasks.data_analysis.files import SQL_LOADER_SOURCE, duckdb_connection, table_sources, task_files
from tasks.data_analysis.generate import generate_tasks
from tasks.data_analysis.questions import FAMILIES

__all__ = [
    "COLUMN_TYPES",
    "FAMILIES",
    "SQL_LOADER_SOURCE",
    "THEMES",
    "Column",
    "DabenchLoad",
    "Dataset",
    "QuestionNote",
    "Table",
    "available_datasets",
    "dataset_files",
    "duckdb_connection",
    "generate_dataset",
    "generate_tasks",
    "load_dabench",
    "load_dataset",
    "materialize",
    "read_dabench",
    "table_sources",
    "task_files",
]
