"""SWE-v0's tools on a repository in a sandbox: ``bash`` (one command, head and tail of its output, its exit code)
and ``editor`` (SWE-agent's ``str_replace_editor``: ``view``, ``create``, ``str_replace``, ``insert``).

:func:`run_bash` runs a command as a child of the sandbox's kernel: ``bash -c`` in the repository folder, in its
own process group, with the output read through a pipe as it comes (the first and the last bytes kept, the rest
counted), killed with its whole group at the time limit and when it ends, so that no background process outlives
the command. The editor's text operations are pure functions (:func:`numbered`, :func:`replace_once`,
:func:`insert_after`) over files read and written through the sandbox's file protocol; only a folder listing
runs a kernel cell. Every mistake of the agent (a string not found or not unique, a path outside the
repository, a line out of range) is an :class:`EditorError` whose message says what was expected.

Example:
    >>> numbered("a\\nb\\n", start=2)
    '     2\\tb'
    >>> replace_once("x = 1\\n", "x = 1", "x = 2", path="m.py")
    ('x = 2\\n', 1)
"""

from __future__ import annotations

import json
import posixpath
import secrets
from collections.abc import Sequence
from dataclasses import dataclass

from agentgym_envs.errors import EnvConfigError
from agentgym_envs.sandbox.base import Sandbox
from agentgym_envs.swe.limits import CELL_GRACE_S
from agentgym_envs.swe.testing import ENV_SITE, MALLOC_ARENA_MAX, PTH_FILE, TESTBED

SETUP_CELL = r'''
def _agentrl_setup(nonce, python, roots):
    import json, os, sys
    python = python or sys.executable
    if not os.access(python, os.X_OK):
        print(nonce + ":" + json.dumps({"workdir": os.getcwd(), "missing": python}))
        return
    shims = os.path.join(os.getcwd(), ".agentrl-bin")
    os.makedirs(shims, exist_ok=True)
    for name in ("python", "python3"):
        shim = os.path.join(shims, name)
        if os.path.lexists(shim):
            continue
        if python == sys.executable:
            os.symlink(python, shim)
        else:  # a script, not a link: a venv's interpreter finds its pyvenv.cfg only when run by its own path
            with open(shim, "w") as script:
                script.write('#!/bin/sh\nexec "%s" "$@"\n' % python)
            os.chmod(shim, 0o755)
    with open(os.path.join(shims, "pytest"), "w") as script:
        script.write('#!/bin/sh\nexec "%s" -m pytest "$@"\n' % python)
    os.chmod(os.path.join(shims, "pytest"), 0o755)
    with open(os.path.join(shims, "env.json"), "w") as settings:
        json.dump({"python": python, "roots": [os.path.join(os.getcwd(), root) for root in roots]}, settings)
    print(nonce + ":" + json.dumps({"workdir": os.getcwd()}))
'''
"""Shims on the commands' PATH (``python``, ``python3`` and ``pytest`` run the environment's interpreter: the
kernel's, which has pytest, unless the environment names another), the package roots the commands get on
``PYTHONPATH``, and the work directory's absolute path."""

BASH_CELL = r'''
def _agentrl_bash(command, folder, timeout_s, head_bytes, tail_bytes, nonce):
    import json, os, select, signal, subprocess, sys, time
    shims = os.path.join(os.getcwd(), ".agentrl-bin")
    try:
        with open(os.path.join(shims, "env.json")) as settings:
            settings = json.load(settings)
    except (OSError, ValueError):  # the agent removed or broke it: the kernel's interpreter
        settings = {"python": sys.executable, "roots": []}
    env = {"PATH": shims + ":" + os.path.dirname(settings["python"]) + ":/usr/local/bin:/usr/bin:/bin",
           "HOME": os.getcwd(), "LANG": "C.UTF-8", "TERM": "dumb", "PAGER": "cat", "GIT_PAGER": "cat",
           "MALLOC_ARENA_MAX": "@MALLOC_ARENA_MAX@"}
    if settings["roots"]:  # an image's environment: the agent's tree ahead of the image's install of /testbed
        env["PYTHONPATH"] = ":".join(settings["roots"])
    site = "@ENV_SITE@"
    if os.path.isdir(site):  # the repository's environment and its editable install, for the agent's python
        with open(os.path.join(site, "@PTH_FILE@")) as pth:
            env["PYTHONPATH"] = ":".join([site, *pth.read().split()])
    started = time.monotonic()
    deadline = started + timeout_s
    child = subprocess.Popen(["bash", "-c", command], cwd=folder, env=env, stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    head, tail, total, timed_out = bytearray(), bytearray(), 0, False
    stream = child.stdout.fileno()
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            timed_out = True
            break
        if not select.select([stream], [], [], min(left, 1.0))[0]:
            continue
        chunk = os.read(stream, 65536)
        if not chunk:
            break
        total += len(chunk)
        room = max(0, head_bytes - len(head))
        head += chunk[:room]
        tail += chunk[room:]
        del tail[:max(0, len(tail) - tail_bytes)]
    if not timed_out:
        try:
            child.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            timed_out = True
    try:  # the whole group: what the command left running in the background too
        os.killpg(child.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    child.wait()
    child.stdout.close()
    status = {"exit_code": None if timed_out else child.returncode, "total": total, "head": len(head),
              "tail": len(tail), "duration_s": round(time.monotonic() - started, 3)}
    sys.stdout.write(nonce + ":" + json.dumps(status) + "\n" + head.decode("utf-8", "replace") + nonce + "\n"
                     + tail.decode("utf-8", "replace"))
'''.replace("@ENV_SITE@", ENV_SITE).replace("@PTH_FILE@", PTH_FILE).replace(
    "@MALLOC_ARENA_MAX@", MALLOC_ARENA_MAX)

LIST_CELL = r'''
def _agentrl_list(folder, depth, nonce):
    import json, os
    if not os.path.isdir(folder):
        print(nonce + ":" + json.dumps({"folder": False}))
        return
    entries = []
    for root, dirs, names in os.walk(folder):
        level = 0 if root == folder else os.path.relpath(root, folder).count(os.sep) + 1
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d != "__pycache__") if level < depth else []
        relative = "" if root == folder else os.path.relpath(root, folder) + "/"
        entries += [relative + d + "/" for d in dirs]
        entries += [relative + n for n in names if not n.startswith(".") and not n.endswith(".pyc")]
    print(nonce + ":" + json.dumps({"folder": True, "entries": sorted(entries)}))
'''

MAX_FILE_BYTES = 1 << 20
"""Largest file the editor opens."""
MAX_VIEW_CHARS = 16_000
"""A ``view`` of a whole file longer than this is cut at a line boundary, saying how to see the rest."""
SNIPPET_CONTEXT = 4
"""Lines shown around an edit."""
LIST_DEPTH = 2
"""Folder levels a folder ``view`` lists (SWE-agent's two)."""


class EditorError(Exception):
    """An editor call the agent got wrong; the message is shown to it as the tool's failed result."""


class CellError(Exception):
    """A harness cell printed no status line: code in the sandbox broke the kernel (shown to the agent)."""


@dataclass(frozen=True)
class BashRun:
    """One ``bash`` command's outcome.

    Attributes:
        output: The command's head and tail, with a line saying how many bytes were cut between them.
        exit_code: Its exit status; None when it was killed at the time limit.
        duration_s: Its wall-clock time in the sandbox.
    """

    output: str
    exit_code: int | None
    duration_s: float


def _status(output: str, nonce: str) -> tuple[dict, str]:
    """The JSON status a harness cell printed first, and the text that followed it.

    Raises:
        CellError: No status line with ``nonce`` came back.
    """
    marker = f"{nonce}:"
    start = output.find(marker)
    end = output.find("\n", start)
    if start < 0 or end < 0:
        raise CellError(output[-500:])
    return json.loads(output[start + len(marker):end]), output[end + 1:]


def setup_shell(sandbox: Sandbox, *, python: str = "", package_roots: Sequence[str] = ()) -> str:
    """Put the command shims in place; the sandbox's work directory as an absolute path.

    Args:
        sandbox: The episode's sandbox.
        python: The interpreter the commands' ``python``, ``python3`` and ``pytest`` run (``""``: the kernel's).
        package_roots: Folders relative to the work directory put on the commands' ``PYTHONPATH`` (an image
            environment's repository roots; a built environment's come from its site folder).

    Raises:
        CellError: The cell failed (in a fresh sandbox, an infrastructure fault).
        EnvConfigError: ``python`` is not an executable in the sandbox (an image without it: set the
            environment's ``python``).
    """
    nonce = secrets.token_hex(8)
    call = f"_agentrl_setup({nonce!r}, {python!r}, {list(package_roots)!r}); del _agentrl_setup"
    result = sandbox.run_code(SETUP_CELL + "\n" + call)
    status = _status(result.output, nonce)[0]
    if "missing" in status:
        raise EnvConfigError(f"expected the environment's interpreter {status['missing']} in the sandbox, found none "
                             "there: set 'python' of the instance or repository in an override file (--overrides) to "
                             "the image's interpreter")
    return status["workdir"]


def run_bash(sandbox: Sandbox, command: str, *, timeout_s: float, head_bytes: int, tail_bytes: int,
             folder: str = TESTBED) -> BashRun:
    """Run ``command`` with ``bash -c`` in the sandbox's ``folder`` (its process group killed when it ends).

    Args:
        sandbox: The episode's sandbox (:func:`setup_shell` done).
        command: Shell text.
        timeout_s: Past this the command's process group is killed.
        head_bytes: Bytes kept from the start of the output.
        tail_bytes: Bytes kept from the end of the output.
        folder: The repository folder, relative to the work directory.

    Raises:
        CellError: The kernel died or was broken by the command (the caller restores the repository).
        SandboxError: The sandbox itself failed.
    """
    nonce = secrets.token_hex(8)
    call = (f"_agentrl_bash({command!r}, {folder!r}, {timeout_s!r}, {head_bytes!r}, {tail_bytes!r}, {nonce!r}); "
            "del _agentrl_bash")
    result = sandbox.run_code(BASH_CELL + "\n" + call, timeout_s=timeout_s + CELL_GRACE_S)
    if result.state_lost:
        raise CellError(result.output[-500:])
    status, text = _status(result.output, nonce)
    head, _, tail = text.partition(nonce + "\n")
    return BashRun(output=bash_output(head, tail, status, timeout_s), exit_code=status["exit_code"],
                   duration_s=status["duration_s"])


def bash_output(head: str, tail: str, status: dict, timeout_s: float) -> str:
    """The observation of a command: its head, a line for the bytes cut, its tail, then how it ended."""
    cut = status["total"] - status["head"] - status["tail"]
    note = f"\n[... {cut} bytes of output cut here; {status['total']} bytes in all ...]\n" if cut else ""
    body = head + note + tail
    if status["exit_code"] is None:
        ending = f"[timed out after {timeout_s:g} s: the command and its processes were killed]"
    else:
        ending = f"[exit code {status['exit_code']}]"
    return (body.rstrip("\n") + "\n" + ending) if body.strip() else f"(no output)\n{ending}"


# -- the editor -----------------------------------------------------------------------------------------------
def repo_path(path: str, root: str) -> str:
    """``path`` (relative to the repository, or absolute under ``root``) as a repository-relative POSIX path;
    ``"."`` for the root itself.

    Raises:
        EditorError: An empty path, or one outside the repository.
    """
    if not path.strip():
        raise EditorError("expected a path (relative to the repository, or absolute under it), got an empty one")
    absolute = posixpath.normpath(path if path.startswith("/") else posixpath.join(root, path))
    if absolute != root and not absolute.startswith(root.rstrip("/") + "/"):
        raise EditorError(f"expected a path inside the repository {root}, got {path!r}")
    return posixpath.relpath(absolute, root)


def line_count(text: str) -> int:
    """Lines of ``text``, counting a last line without a newline."""
    return text.count("\n") + (0 if not text or text.endswith("\n") else 1)


def numbered(text: str, *, start: int = 1, end: int | None = None) -> str:
    """Lines ``start``..``end`` (1-based, inclusive; None: to the end) of ``text``, numbered as ``cat -n`` does."""
    lines = text.split("\n")[:line_count(text)]
    last = len(lines) if end is None else end
    return "\n".join(f"{number:6}\t{lines[number - 1]}" for number in range(start, last + 1))


def view_range_problem(view_range: list[int], lines: int) -> str | None:
    """Why ``[start, end]`` is not a range of a file of ``lines`` lines (``end`` -1: to the end), or None."""
    if len(view_range) != 2:
        return f"expected view_range as [start, end], got {view_range}"
    start, end = view_range
    if not 1 <= start <= max(lines, 1):
        return f"expected view_range's start within [1, {lines}], got {start}"
    if end != -1 and not start <= end <= lines:
        return f"expected view_range's end within [{start}, {lines}] or -1 (to the end), got {end}"
    return None


def view_file(path: str, text: str, view_range: list[int] | None) -> str:
    """A file's lines, numbered; a whole file longer than :data:`MAX_VIEW_CHARS` is cut, saying how to see more.

    Raises:
        EditorError: ``view_range`` is not a range of the file.
    """
    lines = line_count(text)
    if view_range is not None:
        problem = view_range_problem(view_range, lines)
        if problem is not None:
            raise EditorError(problem)
        start, end = view_range
        return f"{path}, lines {start}-{lines if end == -1 else end} of {lines}:\n" + numbered(
            text, start=start, end=None if end == -1 else end)
    shown = numbered(text)
    if len(shown) <= MAX_VIEW_CHARS:
        return f"{path} ({lines} lines):\n{shown}"
    kept = shown[:MAX_VIEW_CHARS].rsplit("\n", 1)[0]
    last = kept.count("\n") + 1
    return (f"{path} ({lines} lines):\n{kept}\n[file cut after line {last} of {lines}: view it with "
            f"view_range=[{last + 1}, -1], or search it with bash (grep -n)]")


def replace_once(text: str, old: str, new: str, *, path: str) -> tuple[str, int]:
    """``text`` with its one occurrence of ``old`` replaced by ``new``, and the line where the change starts.

    Raises:
        EditorError: ``old`` is empty, absent, or found more than once (the lines are named).
    """
    if not old:
        raise EditorError("expected old_str: the exact text to replace (non-empty), got an empty string")
    count = text.count(old)
    if count == 0:
        raise EditorError(f"no replacement made: old_str was not found verbatim in {path} (check whitespace and "
                          "indentation; view the file first)")
    if count > 1:
        lines, index = [], text.find(old)
        while index >= 0:
            lines.append(text.count("\n", 0, index) + 1)
            index = text.find(old, index + 1)
        raise EditorError(f"no replacement made: old_str occurs {count} times in {path} (at lines {lines}); "
                          "include more context to make it unique")
    index = text.find(old)
    return text[:index] + new + text[index + len(old):], text.count("\n", 0, index) + 1


def insert_after(text: str, line: int, new: str) -> str:
    """``text`` with ``new`` inserted as whole lines after line ``line`` (0: at the top).

    Raises:
        EditorError: ``line`` is not within ``[0, lines]``.
    """
    lines = line_count(text)
    if not 0 <= line <= lines:
        raise EditorError(f"expected insert_line within [0, {lines}] (0 inserts at the top), got {line}")
    block = new if new.endswith("\n") else new + "\n"
    if line == lines:
        return text + ("" if not text or text.endswith("\n") else "\n") + block
    offset = 0
    for _ in range(line):
        offset = text.index("\n", offset) + 1
    return text[:offset] + block + text[offset:]


def snippet(path: str, text: str, first: int, last: int) -> str:
    """Lines ``first``..``last`` of the edited file with :data:`SNIPPET_CONTEXT` lines around, numbered."""
    lines = line_count(text)
    start, end = max(1, first - SNIPPET_CONTEXT), min(lines, last + SNIPPET_CONTEXT)
    return f"Edited {path}. Lines {start}-{end} now read:\n{numbered(text, start=start, end=end)}"


def read_text(sandbox: Sandbox, path: str, *, folder: str = TESTBED) -> str:
    """A repository file's text.

    Raises:
        FileNotFoundError: No such file (a folder, or nothing).
        EditorError: The file is larger than :data:`MAX_FILE_BYTES` or not UTF-8 text.
    """
    data = sandbox.read_file(f"{folder}/{path}", max_bytes=MAX_FILE_BYTES + 1)
    if len(data) > MAX_FILE_BYTES:
        raise EditorError(f"{path} is larger than {MAX_FILE_BYTES} bytes; look at it with bash (head, grep -n)")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise EditorError(f"{path} is not UTF-8 text ({error}); look at it with bash") from error


def list_folder(sandbox: Sandbox, path: str, *, folder: str = TESTBED) -> list[str] | None:
    """The files and folders (``name/``) under a repository folder, :data:`LIST_DEPTH` levels deep, hidden ones
    left out; None when ``path`` is not a folder.

    Raises:
        CellError: Code in the sandbox broke the kernel.
    """
    nonce = secrets.token_hex(8)
    target = folder if path == "." else f"{folder}/{path}"
    result = sandbox.run_code(LIST_CELL + f"\n_agentrl_list({target!r}, {LIST_DEPTH}, {nonce!r}); del _agentrl_list")
    status = _status(result.output, nonce)[0]
    return status["entries"] if status["folder"] else None
