"""Per-repository test commands and their log parsers, as SWE-bench's harness has them for Django and sympy.

Some repositories are not tested with pytest: Django runs ``tests/runtests.py`` (unittest underneath, with its
own test labels and settings) and sympy runs ``bin/test`` (its own runner). SWE-bench's harness keeps, per
repository, the command (``test_cmd``), how test files become its arguments (``get_test_directives``) and a
parser of the command's log (``parse_log_django``, ``parse_log_sympy``). This module holds the same three for
each :class:`LogRunner`, written here from the formats; the test ids are the ones SWE-bench's instances store:

    ========  ============================================  =============================================
    runner    command (in the repository's root)            test ids (what the parser returns)
    ========  ============================================  =============================================
    django    ``python tests/runtests.py --verbosity 2      ``test_name (module.Class)``; a test with a
              --settings=test_sqlite --parallel 1           docstring: the docstring's first line
              <module labels>``
    sympy     ``python bin/test -C --verbose <files>``      ``test_name`` (the function's name)
    ========  ============================================  =============================================

The command's output is the only report, and the code under test writes to the same stream, so a run of these
runners is **not tamper-checked**: an agent's code could print ``test_x ... ok``. The env says so in
``info["grading"]["tamper_checked"]``.

Nothing here runs a process (the env layer runs the command in the sandbox, :mod:`agentgym_envs.swe.testing`).

Example:
    >>> LOG_RUNNERS["django"].parse("test_add (utils_tests.test_text.TestText) ... ok\\n")
    {'test_add (utils_tests.test_text.TestText)': 'passed'}
    >>> LOG_RUNNERS["django"].arguments(["test_add (utils_tests.test_text.TestText)"], ())
    ['tests/runtests.py', '--verbosity', '2', '--settings=test_sqlite', '--parallel', '1', 'utils_tests.test_text']
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from tasks.errors import TaskError
from tasks.swe.testrun import SEVERITY

__all__ = ["LOG_RUNNERS", "LogRunner", "django_labels", "parse_django_log", "parse_sympy_log", "sympy_files"]


def _record(outcomes: dict[str, str], test: str, outcome: str) -> None:
    """Keep the worse outcome of a test reported twice (``test ... ok`` then an error at teardown)."""
    test = test.strip()
    if test and (test not in outcomes or SEVERITY[outcome] > SEVERITY[outcomes[test]]):
        outcomes[test] = outcome


# ------------------------------------------------------------------------------------------------ Django

_DJANGO_RESULT = re.compile(r"^(?P<test>.+?) \.\.\. ?(?P<rest>.*)$")
_DJANGO_WORDS = {"ok": "passed", "FAIL": "failed", "ERROR": "error", "expected failure": "xfailed",
                 "unexpected success": "xpassed"}
_DJANGO_HEADER = re.compile(r"^(?P<word>FAIL|ERROR|UNEXPECTED SUCCESS): (?P<test>\S+ \([\w.]+\))")
_PY311_ID = re.compile(r"^(?P<name>\S+) \((?P<path>[\w.]+)\.(?P=name)\)$")


def django_test_id(described: str) -> str:
    """A test as unittest describes it, in SWE-bench's form ``test_f (module.Class)``.

    Python 3.11's unittest writes ``test_f (module.Class.test_f)``; SWE-bench's instances were recorded with
    older Pythons, which write ``test_f (module.Class)``. Both become the latter.

    Example:
        >>> django_test_id("test_f (pkg.tests.Case.test_f)")
        'test_f (pkg.tests.Case)'
    """
    match = _PY311_ID.match(described.strip())
    return f"{match['name']} ({match['path']})" if match else described.strip()


def parse_django_log(log: str) -> dict[str, str]:
    """The outcomes in the log of Django's ``runtests.py --verbosity 2``.

    Each test is a line ``<description> ... <result>``, where the description is ``test_f (module.Class)`` or,
    for a test with a docstring, the docstring's first line (on the line after the id); the result is ``ok``,
    ``FAIL``, ``ERROR``, ``skipped '<why>'``, ``expected failure`` or ``unexpected success``. A result may come
    on a later line when the test printed something after the ``...`` (then the line is the bare result). The
    ``FAIL: test_f (module.Class)`` / ``ERROR: ...`` headers of the failure report count too (a test that passed
    and then failed at teardown is reported twice: the worse outcome is kept).
    """
    outcomes: dict[str, str] = {}
    pending = ""  # a test whose result was pushed onto a later line by the test's own output
    for raw in log.split("\n"):
        line = raw.strip()
        header = _DJANGO_HEADER.match(line)
        if header:
            _record(outcomes, django_test_id(header["test"]), {"FAIL": "failed", "ERROR": "error",
                                                                 "UNEXPECTED SUCCESS": "xpassed"}[header["word"]])
            continue
        match = _DJANGO_RESULT.match(line)
        if match:
            test, rest = django_test_id(match["test"]), match["rest"].strip()
            outcome = _django_outcome(rest)
            if outcome:
                _record(outcomes, test, outcome)
                pending = ""
            else:
                pending = test
            continue
        if pending and _django_outcome(line):  # the result alone on a line, after the test's own output
            _record(outcomes, pending, _django_outcome(line))
            pending = ""
    return outcomes


def _django_outcome(rest: str) -> str:
    """The outcome a result text names (``""`` when it names none)."""
    if rest.startswith("skipped"):
        return "skipped"
    return _DJANGO_WORDS.get(rest, "")


def django_labels(test_ids: Sequence[str]) -> list[str]:
    """``runtests.py``'s labels for ``test_ids``: the test modules of the ids in the form ``test_f (module.Class)``.

    A test named by its docstring line carries no module; it runs with the others of its module, as in SWE-bench
    (whose labels are the test files of the instance's test patch).

    Raises:
        TaskError: No id names a module.
    """
    modules = sorted({match["path"].rsplit(".", 1)[0] for test_id in test_ids
                      if (match := re.fullmatch(r"\S+ \((?P<path>[\w.]+\.\w+)\)", django_test_id(test_id)))})
    if not modules:
        raise TaskError(f"expected Django test ids 'test_f (module.Class)', got {list(test_ids)[:3]}: none names "
                        "its module, so runtests.py would run nothing")
    return modules


# ------------------------------------------------------------------------------------------------ sympy

_SYMPY_LINE = re.compile(r"^(?P<test>test_\w+) (?P<rest>.*)$")
_SYMPY_MARKS = {"ok": "passed", "F": "failed", "E": "error", "T": "error", "f": "xfailed", "X": "xpassed"}
_SYMPY_SKIPS = {"s": "skipped", "w": "skipped", "K": "error"}
_SYMPY_FILE_VERDICT = re.compile(r"\s+\[(OK|FAIL)\]$")
"""The file's verdict that sympy writes, right-aligned, after the last test of each file."""
_SYMPY_HEADER = re.compile(r"^_+ (?P<path>\S+\.py)(?P<separator>::?)(?P<test>test_\w+) _+$")


def _sympy_outcome(rest: str) -> str:
    """The outcome a verbose line's text after the test's name names (``""`` when none)."""
    rest = rest.strip()
    if rest in _SYMPY_MARKS:
        return _SYMPY_MARKS[rest]
    reason, _, mark = rest.rpartition(" ")  # a skip: its message (or " - "), then s, w (slow) or K
    return _SYMPY_SKIPS.get(mark, "") if reason else ""


def parse_sympy_log(log: str) -> dict[str, str]:
    """The outcomes in the log of sympy's ``bin/test --verbose``.

    Verbose mode writes each test on its own line as ``test_name <mark>``: ``ok``, ``F`` (failed), ``E`` (an
    exception; ``T`` a timeout), ``f`` (an expected failure), ``X`` (an unexpected pass); a skip writes its
    message (or `` - ``) then ``s`` (``w`` for a slow test left out, ``K`` for an interrupt, taken as an error).
    The last test of a file has the file's verdict after it (``[OK]`` or ``[FAIL]``, right-aligned).
    The report at the end has a header per problem, ``____ path.py:test_name ____`` for an exception and
    ``____ path.py::test_name ____`` for a failure, which count too. Ids are the test functions' names, as in
    SWE-bench's sympy instances.
    """
    outcomes: dict[str, str] = {}
    for raw in log.split("\n"):
        line = raw.strip()
        header = _SYMPY_HEADER.match(line)
        if header:
            _record(outcomes, header["test"], "error" if header["separator"] == ":" else "failed")
            continue
        match = _SYMPY_LINE.match(_SYMPY_FILE_VERDICT.sub("", line))
        if match and _sympy_outcome(match["rest"]):
            _record(outcomes, match["test"], _sympy_outcome(match["rest"]))
    return outcomes


def sympy_files(test_ids: Sequence[str], test_files: Sequence[str]) -> list[str]:
    """``bin/test``'s arguments: the test files (sympy's ids name functions, not files; SWE-bench passes the
    files its test patch touches).

    Raises:
        TaskError: No test file is known.
    """
    files = sorted({path for path in test_files if path.endswith(".py")})
    if not files:
        raise TaskError(f"expected the test files that hold {list(test_ids)[:3]} (sympy's ids name no file), got "
                        "none: the instance's test_patch touches no .py file")
    return files


# ------------------------------------------------------------------------------------------------ the runners


@dataclass(frozen=True)
class LogRunner:
    """A repository's own test command and the parser of its log.

    Attributes:
        name: The runner's name (an environment's ``test_runner``).
        script: The command's script, relative to the repository's root; the environment's interpreter runs it.
        options: Its options before the test arguments.
        directives: ``(test_ids, test_files) -> arguments``: what to run (test files are those the instance's
            test patch touches).
        parse: ``log -> {test id: outcome}``.
    """

    name: str
    script: str
    options: tuple[str, ...]
    directives: Callable[[Sequence[str], Sequence[str]], list[str]]
    parse: Callable[[str], dict[str, str]]

    def arguments(self, test_ids: Sequence[str], test_files: Sequence[str]) -> list[str]:
        """The interpreter's arguments: the script, its options and the tests to run.

        Raises:
            TaskError: The ids and files give nothing to run.
        """
        return [self.script, *self.options, *self.directives(test_ids, test_files)]


LOG_RUNNERS = {
    "django": LogRunner("django", "tests/runtests.py", ("--verbosity", "2", "--settings=test_sqlite", "--parallel",
                                                        "1"), lambda ids, files: django_labels(ids), parse_django_log),
    "sympy": LogRunner("sympy", "bin/test", ("-C", "--verbose"), lambda ids, files: sympy_files(ids, files),
                       parse_sympy_log),
}
"""The per-repository runners by name (an environment's ``test_runner``)."""
