"""A DataAnalysis task's files (from a folder or a bundled dataset) and the SQL loader over them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import duckdb
import pytest

from tasks.data_analysis import (
    SQL_LOADER_SOURCE,
    Column,
    Dataset,
    Table,
    duckdb_connection,
    materialize,
    table_sources,
    task_files,
)
from tasks.errors import TaskError
from tasks.records import Task

ORDERS = Table("orders", "orders.csv", (Column("id", "int"), Column("price", "str"), Column("day", "date")),
               ((1, "$1,234.50", "2024-01-02"), (2, None, "2024-02-03")))
CUSTOMERS = Table("customers", "customers.parquet",
                  (Column("id", "int"), Column("score", "float"), Column("seen", "timestamp"), Column("vip", "bool")),
                  ((1, 1.5, "2024-01-02 10:00:00", True), (2, None, None, False)))
PRODUCTS = Table("products", "shop.sqlite", (Column("id", "int"), Column("name", "str")), ((1, " Widget "),))
EVENTS = Table("events", "shop.sqlite", (Column("id", "int"), Column("weight", "float")), ((1, 2.5), (2, None)))
DATASET = Dataset("demo-000", "demo", 0, 1, (ORDERS, CUSTOMERS, PRODUCTS, EVENTS))
TABLES = {"orders": "orders.csv", "customers": "customers.parquet", "products": "shop.sqlite", "events": "shop.sqlite"}


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    for name, data in materialize(DATASET).items():
        (tmp_path / name).write_bytes(data)
    return tmp_path


def folder_task(data_dir: Path, files: list[str], **metadata: object) -> Task:
    return Task("da/t", "DataAnalysis", "sql", "q", "SELECT 1",
                metadata={"files": files, "tables": TABLES, "data_dir": str(data_dir), **metadata})


def test_task_files_reads_the_named_files_of_a_folder(data_dir: Path) -> None:
    files = task_files(folder_task(data_dir, ["shop.sqlite", "orders.csv"]))
    assert list(files) == ["shop.sqlite", "orders.csv"]
    assert files["orders.csv"] == (data_dir / "orders.csv").read_bytes()


@pytest.mark.parametrize("name", ["../orders.csv", "sub/orders.csv", "..", ".", "", "a\\b.csv", 3])
def test_task_files_refuses_names_that_are_not_plain(data_dir: Path, name: object) -> None:
    with pytest.raises(TaskError, match="plain file name"):
        task_files(folder_task(data_dir, [name]))


def test_task_files_says_which_file_is_missing_and_where(data_dir: Path) -> None:
    with pytest.raises(TaskError, match=f"'flights.csv'.*{data_dir}/flights.csv"):
        task_files(folder_task(data_dir, ["orders.csv", "flights.csv"]))


def test_task_files_needs_exactly_one_source(data_dir: Path) -> None:
    with pytest.raises(TaskError, match="got both"):
        task_files(folder_task(data_dir, ["orders.csv"], dataset="retail-000"))
    with pytest.raises(TaskError, match="absolute"):
        task_files(folder_task(Path("relative"), ["orders.csv"]))


def test_table_sources_checks_files_and_stems(data_dir: Path) -> None:
    assert table_sources(folder_task(data_dir, ["orders.csv", "customers.parquet", "shop.sqlite"])) == TABLES
    with pytest.raises(TaskError, match="one of its files"):
        table_sources(folder_task(data_dir, ["orders.csv"]))
    with pytest.raises(TaskError, match="its stem"):
        table_sources(folder_task(data_dir, ["orders.csv"], tables={"sales": "orders.csv"}))


def test_duckdb_connection_loads_every_format_with_its_types(data_dir: Path) -> None:
    connection = duckdb_connection(data_dir, TABLES)
    assert connection.sql("SELECT * FROM orders ORDER BY id").fetchall()[0][1] == "$1,234.50"
    assert [row[1] for row in connection.sql("DESCRIBE customers").fetchall()] == [
        "BIGINT", "DOUBLE", "TIMESTAMP", "BOOLEAN"]
    assert connection.sql("SELECT name FROM products").fetchall() == [(" Widget ",)]
    assert connection.sql("SELECT count(weight), count(*) FROM events").fetchall() == [(1, 2)]


def test_duckdb_connection_is_cut_off_from_files_and_locked(data_dir: Path) -> None:
    connection = duckdb_connection(data_dir, {"orders": "orders.csv"})
    with pytest.raises(duckdb.PermissionException):
        connection.sql(f"SELECT * FROM read_csv('{data_dir / 'orders.csv'}')").fetchall()
    with pytest.raises(duckdb.Error):
        connection.execute("SET enable_external_access=true")


def test_duckdb_connection_runs_one_thread_so_results_repeat(data_dir: Path) -> None:
    connection = duckdb_connection(data_dir, {"orders": "orders.csv"})
    assert connection.execute("SELECT current_setting('threads')").fetchall() == [(1,)]


def test_duckdb_connection_names_a_missing_sqlite_table(data_dir: Path) -> None:
    with pytest.raises(TaskError, match="'refunds'"):
        duckdb_connection(data_dir, {"refunds": "shop.sqlite"})


def test_the_loader_source_runs_alone_in_a_fresh_interpreter(data_dir: Path) -> None:
    query = "load_tables('data', {'events': 'shop.sqlite'}).execute('SELECT sum(weight) FROM events').fetchone()[0]"
    work = data_dir / "work"
    work.mkdir()
    (work / "data").symlink_to(data_dir)
    result = subprocess.run([sys.executable, "-I", "-c", f"{SQL_LOADER_SOURCE}\nprint({query})"], cwd=work,
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "2.5\n"


# Every oddity of the CSV files bundled here and in DABench's public dev set, as bytes: each must reach DuckDB as
# the table pandas.read_csv(path) reads, so that the sql and python tools see one table (pandas's names for the
# header, its row count and its missing values).
CSV_ODDITIES = {
    "byte_order_mark.csv": b"\xef\xbb\xbfcountry,score\nPeru,5.1\nChad,4.2\n",  # gapminder_cleaned.csv
    "crlf.csv": b"id,name\r\n1,a\r\n2,b\r\n",  # titanic.csv, census.csv
    "unnamed_index.csv": b",price,rooms\n0,100.5,3\n1,99.0,2\n",  # housedata.csv: a saved index, no name
    "trailing_comma.csv": b"JDTDB,X,\n2451545.0,1.5,\n2451546.0,1.6,\n",  # DES=+2006261.csv: an empty last column
    "spaced_names.csv": b"STATION, WINDSPEED, DIR\nA1, 2.5, 180\n",  # baro_2015.csv
    "title_line.csv": b"JAMES LOGAN,,,\nWins,Name,Code,School\n5,Gatlin,AR,Archbishop\n",  # Current_Logan.csv
    "blank_lines.csv": b"\n\nid,v\n1,2\n\n3,4\n\n",  # blank lines before the header and among the rows
    "repeated_names.csv": b"a,b,a,a.1,,a\n1,2,3,4,5,6\n",  # pandas's mangling: a.2 (a.1 is taken), Unnamed: 4
    "quoted_newline.csv": b'id,text\n1,"two\nlines, one field"\n2,plain\n',  # Yelp_Reviews.csv
    "pandas_missing.csv": b"k,v\nNA,1\nnull,N/A\nNone,\n#N/A,nan\nok,2\n",  # vgsales.csv (N/A), hotel_data.csv
    "short_rows.csv": b"a,b,c\n1,2,3\n4,5\n",  # a row with a field missing
    "semicolons.csv": b"a;b\n1;2\n",  # not comma-separated: pandas reads one column, and so does the loader
}


@pytest.mark.parametrize("name", sorted(CSV_ODDITIES))
def test_duckdb_reads_the_table_pandas_reads(tmp_path: Path, name: str) -> None:
    import pandas as pd

    (tmp_path / name).write_bytes(CSV_ODDITIES[name])
    stem = Path(name).stem
    frame = pd.read_csv(tmp_path / name)
    table = duckdb_connection(tmp_path, {stem: name}).execute(f'SELECT * FROM "{stem}"').df()
    assert list(table.columns) == [str(column) for column in frame.columns]
    assert len(table) == len(frame)
    assert table.isna().values.tolist() == frame.isna().values.tolist()
    assert _cells(table) == _cells(frame)  # types are each reader's own guess (not compared); values agree


def _cells(frame: Any) -> list[list[str | None]]:
    import pandas as pd

    return [[None if pd.isna(value) else str(value).removesuffix(".0") for value in row]
            for row in frame.values.tolist()]


def test_the_loader_reads_pandas_missing_value_strings() -> None:
    from pandas._libs.parsers import STR_NA_VALUES

    namespace: dict = {}
    exec(compile(SQL_LOADER_SOURCE, "<loader>", "exec"), namespace)
    assert set(namespace["_PANDAS_NA_VALUES"]) == STR_NA_VALUES


def test_a_file_that_is_not_utf8_is_refused_by_both(tmp_path: Path) -> None:
    import pandas as pd

    (tmp_path / "latin.csv").write_bytes("city\nK\xf6ln\n".encode("latin-1"))
    with pytest.raises(UnicodeDecodeError):
        pd.read_csv(tmp_path / "latin.csv")
    with pytest.raises(TaskError, match=r"latin\.csv"):
        duckdb_connection(tmp_path, {"latin": "latin.csv"})
