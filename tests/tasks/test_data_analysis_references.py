"""run_sql with the tables kept loaded (LoadedTables): the rows of a fresh load, and no query sees another's work."""

from __future__ import annotations

import pytest

from tasks.data_analysis.references import LoadedTables, run_sql, write_files
from tasks.errors import TaskError

FILES = {"orders.csv": b"order_id,amount\n1,2.5\n2,4.0\n3,\n", "more.csv": b"order_id,note\n1,a\n"}
TABLES = {"orders": "orders.csv"}
QUERY = "SELECT order_id, amount FROM orders ORDER BY order_id"


def test_loaded_tables_give_the_rows_of_a_fresh_load(tmp_path):
    work_dir = write_files(FILES, tmp_path)
    with LoadedTables() as loaded:
        assert run_sql(QUERY, work_dir, TABLES, loaded) == run_sql(QUERY, work_dir, TABLES) == [
            [1, 2.5], [2, 4.0], [3, None]]
        assert run_sql(QUERY, work_dir, TABLES, loaded) == [[1, 2.5], [2, 4.0], [3, None]]  # loaded once, reused
        # another set of tables of the same folder is a database of its own
        assert run_sql("SELECT count(*) FROM more", work_dir, {"more": "more.csv"}, loaded) == [[1]]


def test_what_a_query_writes_is_rolled_back_before_the_next(tmp_path):
    work_dir = write_files(FILES, tmp_path)
    with LoadedTables() as loaded:
        assert run_sql("DELETE FROM orders RETURNING order_id", work_dir, TABLES, loaded) == [[1], [2], [3]]
        run_sql("CREATE TABLE planted AS SELECT 1 AS x", work_dir, TABLES, loaded)
        assert run_sql("SELECT count(*) FROM orders", work_dir, TABLES, loaded) == [[3]]
        with pytest.raises(TaskError, match="expected the SQL reference to run"):
            run_sql("SELECT * FROM planted", work_dir, TABLES, loaded)
        assert run_sql("SELECT count(*) FROM orders", work_dir, TABLES, loaded) == [[3]]  # a failed query too
