"""DataAnalysis-v0: questions about data files, answered with a notebook kernel and SQL in a real sandbox.

The task's files lie read-only in ``data/`` of the sandbox's work directory (only the files the task names;
never an answer or a reference program). Two tools:

- ``python``: code in the sandbox's persistent kernel (pandas, numpy, pyarrow, duckdb, scipy, scikit-learn,
  statsmodels, matplotlib drawing with Agg, and openpyxl are there), as in PythonSandbox-v0; the files it makes
  go to the writable ``outputs/`` beside ``data/`` (the work directory's ``disk_mb`` holds both);
- ``sql``: one read-only query (DuckDB dialect) over the task's tables, loaded at the episode's start by the
  task loader that computed the reference answers; at most ``sql_max_rows`` rows shown, cells cut, the total
  row count given, stopped after ``sql_timeout_s`` (:mod:`agentgym_envs.data_analysis.workspace`).

Task families follow DABench's concepts. Every family but ``sql`` is answered with the format line's
``@name[value]`` fields and graded by :func:`~rewards.data_analysis.data_analysis_reward` (ABQ), or with
``grader="dabench"`` by DABench's own closed-form rules (:func:`~rewards.data_analysis.dabench_reward`). A ``sql``
question is answered with a query: after the episode the sandbox is reset, the files written again and the
query run through the same loader in a fresh kernel, and its result table is graded by
:func:`~rewards.data_analysis.sql_result_reward` (Spider's execution accuracy).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Unpack

from agentgym_envs.core import TextEnvOptions
from agentgym_envs.data_analysis.workspace import Schema, SqlSettings, load_task_data, result_table, run_sql
from agentgym_envs.errors import EnvConfigError
from agentgym_envs.python_sandbox.env import PYTHON_TOOL_SCHEMA
from agentgym_envs.sandbox import SandboxLimits
from agentgym_envs.sandboxed import SandboxEnv
from agentgym_envs.tools import Tool, ToolResult
from rewards import (
    CompositeReward,
    RewardFn,
    Term,
    dabench_reward,
    data_analysis_reward,
    format_reward,
    make_tool_shaping_reward,
    sql_result_reward,
)
from tasks import Task, Trajectory
from tasks.data_analysis import FAMILIES
from tasks.data_analysis.files import table_sources, task_files

if TYPE_CHECKING:  # the docker SDK is imported only when the docker backend is used
    from agentgym_envs.sandbox.docker import DockerSandboxPool

REQUIRED_TOOLS = {family: ("sql",) if family == "sql" else ("python",) for family in FAMILIES}
SQL_TOOL_SCHEMA = {
    "type": "object",
    "properties": {"query": {"type": "string", "description": "One read-only SQL statement (DuckDB dialect)."}},
    "required": ["query"],
    "additionalProperties": False,
}
GRADERS = {"forgiving": data_analysis_reward, "dabench": dabench_reward}
"""How answer fields are graded: this project's forgiving rules (the default) or DABench's exact ones."""
DATA_SANDBOX_LIMITS = SandboxLimits(timeout_s=30.0, memory_mb=2048, disk_mb=256)
"""The default limits: room for pandas, pyarrow and duckdb with the data loaded twice (a frame and a table), and
30 s a cell, since a first import of scikit-learn or statsmodels alone takes 3-7 s on a busy machine."""

INSTRUCTIONS = (
    "You are answering a question about data files. The files are read-only in the folder data/ of the "
    "working directory; save any file you make (a plot, a table) in the folder outputs/, which together with "
    "the rest of the working directory holds at most {disk_mb} MB. `python` runs code in a persistent interpreter "
    "(pandas, numpy, scipy, scikit-learn, statsmodels, matplotlib with the Agg backend, openpyxl, pyarrow and "
    "duckdb are installed; variables, imports and files survive between calls, like a notebook; the value of a "
    "final expression is printed). `sql` runs one read-only SQL query (DuckDB dialect) over the tables listed "
    "below and shows at most {max_rows} rows. The sandbox has no network. Use the tools as often as you need, "
    "then give your final answer once."
)
ANSWER_FIELDS = ("Answer with every field of the format line, each once, e.g. "
                 "<answer>@name[value], @other_name[value]</answer>.")
ANSWER_SQL = ("Answer with one SQL query inside <answer>...</answer>. It is run on the tables listed below and its "
              "result is compared with the expected table: the rows and their values must match (row order only "
              "when the question asks for one; column names and order are free).")
SQL_FENCE = re.compile(r"```(?:sql|duckdb)?[ \t]*\n(.*?)```", re.DOTALL | re.IGNORECASE)


def default_reward(family: str, grader: str = "forgiving") -> CompositeReward:
    """The verifier of ``family`` with format and tool-use terms logged at weight 0.

    ``sql``: :func:`~rewards.data_analysis.sql_result_reward`; every other family: the ``grader``'s
    (:data:`GRADERS`: :func:`~rewards.data_analysis.data_analysis_reward` or
    :func:`~rewards.data_analysis.dabench_reward`). Raise the weights of ``format`` and ``tool_use`` (kept small
    against the outcome) to shape.
    """
    outcome = sql_result_reward if family == "sql" else GRADERS[grader]
    return CompositeReward([
        Term("outcome", outcome, weight=1.0),
        Term("format", format_reward, weight=0.0),
        Term("tool_use", make_tool_shaping_reward(required_tools=REQUIRED_TOOLS[family]), weight=0.0),
    ])


def extract_query(answer: str) -> str:
    """The SQL of an answer: the first fenced block when there is one, else the whole text; stripped."""
    match = SQL_FENCE.search(answer)
    return (match.group(1) if match else answer).strip()


class DataAnalysisEnv(SandboxEnv):
    """Data-analysis questions over a task's files, with ``python`` and ``sql`` tools in a sandbox.

    Args:
        grader: ``"forgiving"`` (:func:`~rewards.data_analysis.data_analysis_reward`) or ``"dabench"``
            (:func:`~rewards.data_analysis.dabench_reward`, DABench's own closed-form rules); ``sql`` questions are
            graded by their result table either way. Ignored for a family whose ``reward`` is given.
        sql_max_rows: Most rows a ``sql`` call shows (the total is always given).
        sql_max_cell_chars: Longer cells are cut in what ``sql`` shows.
        sql_timeout_s: A query is stopped after this long.
        sandbox, sandbox_limits, sandbox_pool: See :class:`~agentgym_envs.sandboxed.SandboxEnv` (limits default to
            :data:`DATA_SANDBOX_LIMITS`; a docker pool must run the data image,
            :func:`~agentgym_envs.sandbox.data_image.ensure_data_image`).
        **options: Every env's options (:class:`~agentgym_envs.core.TextEnvOptions`: ``split``, ``splits_dir``,
            ``families``, ``tasks``, ``reward``, the limits, ``render_mode``, ``prompt_style``); see
            :class:`~agentgym_envs.core.TextEnv`. Families: :data:`FAMILIES`.

    Example:
        >>> import gymnasium as gym, agentgym_envs                          # doctest: +SKIP
        >>> env = gym.make("agentrl/DataAnalysis-v0", sandbox="bwrap")      # doctest: +SKIP
        >>> obs, info = env.reset(seed=0)                                  # doctest: +SKIP
    """

    env_name: ClassVar[str] = "DataAnalysis"
    task_families: ClassVar[tuple[str, ...]] = FAMILIES
    required_tools: ClassVar[dict[str, tuple[str, ...]]] = REQUIRED_TOOLS

    def __init__(self, *, sandbox: str = "docker", sandbox_limits: SandboxLimits | None = None,
                 sandbox_pool: DockerSandboxPool | None = None, sql_max_rows: int = 50, sql_max_cell_chars: int = 80,
                 sql_timeout_s: float = 10.0, grader: str = "forgiving", **options: Unpack[TextEnvOptions]) -> None:
        if grader not in GRADERS:
            raise EnvConfigError(f"grader: expected one of {sorted(GRADERS)}, got {grader!r}")
        self.grader = grader
        super().__init__(sandbox=sandbox, sandbox_limits=sandbox_limits or DATA_SANDBOX_LIMITS,
                         sandbox_pool=sandbox_pool, **options)
        self.sql_settings = SqlSettings(max_rows=sql_max_rows, max_cell_chars=sql_max_cell_chars,
                                        max_chars=max(1_000, self.sandbox_limits.output_bytes - 1_000),
                                        timeout_s=sql_timeout_s)
        self._tools = (
            Tool("python", "Run Python code in a persistent, sandboxed interpreter and return its output.",
                 PYTHON_TOOL_SCHEMA, self._python),
            Tool("sql", f"Run one read-only SQL query (DuckDB dialect) over the task's tables and return at most "
                        f"{sql_max_rows} rows of its result.", SQL_TOOL_SCHEMA, self._sql),
        )
        self._files: dict[str, bytes] = {}
        self._tables: dict[str, str] = {}
        self._schema = Schema(columns=None, error=None)

    @property
    def tools(self) -> Sequence[Tool]:
        """The ``python`` and ``sql`` tools."""
        return self._tools

    def default_reward(self, family: str) -> RewardFn:
        """:func:`default_reward` of ``family`` with this env's ``grader``."""
        return default_reward(family, self.grader)

    def _settings(self) -> dict[str, Any]:
        return {"grader": self.grader, "sql_max_rows": self.sql_settings.max_rows,
                "sql_max_cell_chars": self.sql_settings.max_cell_chars, "sql_timeout_s": self.sql_settings.timeout_s}

    def _docker_image(self) -> str | None:
        """The data image (the base image plus the pinned analysis stack), built when missing."""
        from agentgym_envs.sandbox.data_image import ensure_data_image

        return ensure_data_image()

    # -- the episode's data --------------------------------------------------------------------------------
    def _prepare_sandbox(self, task: Task) -> None:
        """Write the task's files to ``data/`` (read-only), load its tables and install the ``sql`` tool."""
        self._files, self._tables = task_files(task), table_sources(task)
        self._schema = load_task_data(self.sandbox, self._files, self._tables)

    def _restore_data(self) -> str:
        """Put the data back after the kernel was restarted (which empties the work directory); a note to show."""
        load_task_data(self.sandbox, self._files, self._tables)
        return "[the kernel was restarted: the files in data/ and the sql tables were loaded again]"

    # -- tools ---------------------------------------------------------------------------------------------
    def _python(self, code: str) -> ToolResult:
        result = self.sandbox.run_code(code)
        output = result.output if result.output.strip() else "(no output)"
        if result.state_lost:
            output = f"{output.rstrip()}\n{self._restore_data()}"
        return ToolResult(output, ok=result.ok)

    def _sql(self, query: str) -> ToolResult:
        run = run_sql(self.sandbox, query, self._tables, self.sql_settings)
        output = f"{run.output}\n{self._restore_data()}" if run.state_lost else run.output
        return ToolResult(output, ok=run.ok)

    # -- prompt --------------------------------------------------------------------------------------------
    def _instructions(self, task: Task) -> str:
        answer = ANSWER_SQL if task.family == "sql" else ANSWER_FIELDS
        limits = {"max_rows": self.sql_settings.max_rows, "disk_mb": self.sandbox_limits.disk_mb}
        return INSTRUCTIONS.format(**limits) + " " + answer

    def _task_text(self, task: Task) -> str:
        metadata = task.metadata
        parts = [str(metadata.get("question") or task.prompt), self._data_block()]
        constraints = metadata.get("constraints") or []
        if constraints:
            parts.append("Constraints:\n" + "\n".join(f"- {constraint}" for constraint in constraints))
        if metadata.get("format"):
            parts.append(f"Format: {metadata['format']}")
        return "\n\n".join(parts)

    def _data_block(self) -> str:
        """The files (``data/<name>``) and, under each, its tables with their columns."""
        lines = ["Data files (read-only, in data/):"]
        for name in self._files:
            lines.append(f"- data/{name}")
            for table in (table for table, file_name in self._tables.items() if file_name == name):
                lines.append(f"  table {table}: {self._columns_text(table)}")
        if self._schema.error is not None:
            lines.append(f"The sql tool cannot load these tables ({self._schema.error}); use python.")
        return "\n".join(lines)

    def _columns_text(self, table: str) -> str:
        columns = (self._schema.columns or {}).get(table)
        if columns is None:
            return "(columns unknown)"
        return ", ".join(f"{name} {kind}" for name, kind in columns)

    # -- grading -------------------------------------------------------------------------------------------
    def _evidence(self, task: Task, trajectory: Trajectory) -> dict[str, Any]:
        """For ``sql`` questions, the final query's result table, run in the reset sandbox with the files
        written again (nothing the agent did in the episode reaches it); nothing for the other families."""
        if task.family != "sql":
            return {}
        query = extract_query(trajectory.final_answer or "")
        if not query:
            return {"answer_table": None, "sql_error": "the answer holds no query"}
        self.sandbox.reset()
        load_task_data(self.sandbox, self._files, self._tables)
        return result_table(self.sandbox, query, self._tables, self.sql_settings)
