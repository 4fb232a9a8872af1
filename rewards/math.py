r"""Math answer verifier: math-verify first, a bounded sympy fallback second.

:func:`math_equivalent` decides whether a predicted final answer means the same as the gold one:
``1/2`` and ``0.5``, ``\frac{1}{2}`` and ``2/4``, ``2\sqrt{3}`` and ``sqrt(12)``, ``x = 5`` and
``5``, ``(-\infty, 2]`` and ``x \le 2``, ``\{1, 2\}`` and ``\{2, 1\}``. It is written for
untrusted model output:

- It never raises on garbage input; anything it cannot read is "not equivalent".
- Several answers at once do not pass: ``3 or 4`` is the set ``{3, 4}``, not ``3``; two distinct
  ``\boxed{}`` answers fail, and so do several ``$...$`` spans; ``3 4`` fails (math-verify would
  read it as ``7``); so do equations with a value on the left, ``3 = 4`` or ``2x = 10`` (math-verify
  would read their right-hand side alone), while ``x = 5`` passes as ``5``.
- Inputs over :data:`MAX_ANSWER_CHARS`, and inputs whose exact value explodes (power towers such
  as ``9^{9^{9}}``, huge exponents or factorials), are rejected before any parsing.
- Whatever the guards miss (``(10^{99})!``, ``\Gamma(10^{30})``, ``(x+1)^{9999}``) is cut by a
  real wall-clock limit of ``timeout_s`` seconds that works from any thread: the comparison runs
  in a persistent worker process (:mod:`rewards.timelimit`), which is killed and replaced when it
  runs past the limit. An answer cut that way is wrong (the agent wrote it), and
  :func:`math_verdict` and :func:`math_equivalence_reward` say that it was cut. math-verify's own
  ``SIGALRM`` timeouts are off (they work only on a main thread), and so is its notice that they
  are off. The workers are started on first use, at most :data:`MAX_WORKERS` of them, one per
  concurrent caller; each call costs a round trip through two pipes on top of the comparison.

The fallback never calls ``eval`` on raw text: after LaTeX rewriting, only digits, operators,
brackets, single-letter variables and a few function names (``sqrt``, ``log``, ``sin``, ...) reach
sympy's ``parse_expr``, with empty builtins.
"""

from __future__ import annotations

import cmath
import logging
import math
import os
import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from numbers import Real
from typing import Any

import sympy
from math_verify import LatexExtractionConfig, parse, verify
from sympy.parsing.sympy_parser import implicit_multiplication, parse_expr, standard_transformations

from rewards.base import RewardResult
from rewards.errors import RewardComputationError, RewardConfigError
from rewards.timelimit import TimeLimitedWorkers, WorkerDied, WorkerTimedOut
from tasks.records import Task, Trajectory

MAX_ANSWER_CHARS = 2000
"""Longer predictions or gold answers are rejected unparsed (they are never a single answer)."""

REL_TOL = 1e-9
"""Relative tolerance of the numeric comparison (decimals against exact values)."""

TIMEOUT_S = 5.0
"""Wall-clock limit of one comparison, in seconds (the default of :func:`math_verdict`; read at call time by
:func:`math_equivalence_reward`)."""

MAX_WORKERS = min(8, os.cpu_count() or 1)
"""Most verifier worker processes alive at once (calls beyond that wait for a free one)."""

_MV_FLOAT_ROUNDING = 12  # math-verify rounds floats to this many decimals; the fallback adds REL_TOL
_MV_CONFIG = (LatexExtractionConfig(),)

_BOXED = re.compile(r"\\(?:boxed|fbox)\s*\{")
_DELIMITERS = (("$$", "$$"), ("$", "$"), ("\\(", "\\)"), ("\\[", "\\]"))
_ANSWER_PREFIX = re.compile(r"^(?:the\s+)?(?:final\s+)?answer\b\s*(?:is\b|:)?\s*", re.IGNORECASE)
_SEPARATE_NUMBERS = re.compile(r"\d\s+\d")
_INNER_DELIMITER = re.compile(r"(?<!\\)\$|\\[()\[\]]")  # math-verify would read one span of several
_EXPLOSIVE = (
    re.compile(r"(?:\^|\*\*)\s*[({]?\s*[-+]?\d{5,}"),  # a huge literal exponent
    re.compile(r"\^\s*\{[^{}]*\^|(?:\^|\*\*)\s*\([^()]*(?:\^|\*\*)"),  # a power inside an exponent
    re.compile(r"(?:\^|\*\*)\s*[\w.]+\s*(?:\^|\*\*)"),  # a chained power a^b^c
    re.compile(r"\d{3,}\s*!|!\s*!"),  # a big or iterated factorial
)
_GROUP_POWER = re.compile(r"[)}]\s*(?:\^|\*\*)")  # ((a^b)^c)^d multiplies the exponents
_MULTIDIGIT_EXPONENT = re.compile(r"(?:\^|\*\*)\s*[({]?\s*[-+]?\d{2,}")
_MAX_GROUP_POWERS = 3
_EQUALS = re.compile(r"(?<![<>!])==?|\\(?:equiv|approx)(?![A-Za-z])")  # math-verify keeps only the right side
_NAME = r"(?:[A-Za-z]|\\(?:alpha|beta|gamma|delta|epsilon|theta|lambda|mu|phi|psi|omega)|\\text\{[A-Za-z]\})" \
        r"(?:_\{?[A-Za-z0-9]+\}?)?"
_NAMED = re.compile(  # "x", "x_1", "(x, y)" at the start or after a separator: "x = -2 \text{ or } x = 6"
    rf"(?:^|[,;]|\bor\b|\band\b|\\text\{{[^{{}}]*\}}|\\quad|\\\\)\s*"
    rf"(?:{_NAME}|\(\s*{_NAME}(?:\s*,\s*{_NAME})*\s*\))\s*$"
)


@dataclass(frozen=True)
class MathVerdict:
    """The outcome of one math comparison.

    Attributes:
        equivalent: Whether the prediction means the same as the gold answer; False whenever the
            comparison did not finish.
        timed_out: The comparison ran past its limit and was killed (the answer counts as wrong).
        crashed: The worker process died during the comparison, e.g. out of memory (wrong, too).
    """

    equivalent: bool
    timed_out: bool = False
    crashed: bool = False


def math_verdict(prediction: str, gold: str, *, timeout_s: float = TIMEOUT_S) -> MathVerdict:
    r"""Compare a predicted answer with the gold one, under a wall-clock limit, from any thread.

    Like :func:`math_equivalent`, and says whether the comparison was cut short.

    Args:
        prediction: The model's final answer (untrusted).
        gold: The reference answer.
        timeout_s: Wall-clock limit of the comparison in its worker process, in seconds (starting
            a worker and waiting for a free one do not count).

    Returns:
        The verdict; ``timed_out`` or ``crashed`` is set when the comparison did not finish.

    Raises:
        RewardConfigError: When ``timeout_s`` is not a positive, finite number.
        VerifierUnavailableError: When no worker process can be started (an InfrastructureError).

    Example:
        >>> math_verdict("(10^{99})!", "1", timeout_s=0.5)
        MathVerdict(equivalent=False, timed_out=True, crashed=False)
    """
    if isinstance(timeout_s, bool) or not isinstance(timeout_s, Real) or not 0 < timeout_s < math.inf:
        raise RewardConfigError(f"expected a positive, finite timeout_s, got {timeout_s!r}")
    if not _small_text(prediction) or not _small_text(gold):
        return MathVerdict(equivalent=False)  # not worth a round trip
    try:
        equal = _workers().call(f"{__name__}:_compare_in_worker", [prediction, gold], timeout_s=timeout_s)
    except WorkerTimedOut:
        return MathVerdict(equivalent=False, timed_out=True)
    except WorkerDied:
        return MathVerdict(equivalent=False, crashed=True)
    return MathVerdict(equivalent=equal is True)


def math_equivalent(prediction: str, gold: str, *, timeout_s: float = TIMEOUT_S) -> bool:
    r"""Whether a predicted answer is mathematically equivalent to the gold answer.

    Both strings may be LaTeX or plain text, optionally in ``$...$`` or ``\boxed{...}``.
    math-verify decides first; when it says "different" or cannot parse, a strict sympy
    fallback gets a say (it reads ``1e9``, plain-text intervals and compares decimals with a
    relative tolerance of :data:`REL_TOL`).

    Args:
        prediction: The model's final answer (untrusted).
        gold: The reference answer.
        timeout_s: Wall-clock limit of the comparison, in seconds, enforced from any thread (see
            :func:`math_verdict`).

    Returns:
        True when equivalent; False when not, and for empty, garbage, ambiguous, oversized
        or timed-out input.

    Raises:
        RewardConfigError: When ``timeout_s`` is not a positive number.
        VerifierUnavailableError: When no worker process can be started (an InfrastructureError).

    Example:
        >>> math_equivalent("\\frac{1}{2}", "0.5")
        True
        >>> math_equivalent("[1, 3)", "[1, 3]")
        False
    """
    return math_verdict(prediction, gold, timeout_s=timeout_s).equivalent


def math_equivalence_reward(task: Task, trajectory: Trajectory, evidence: Mapping[str, Any]) -> RewardResult:
    """Reward term: 1.0 when the final answer is :func:`math_equivalent` to ``task.answer``.

    A trajectory without a final answer scores 0.0. ``evidence`` is not used. The comparison is
    cut after :data:`TIMEOUT_S` seconds.

    Returns:
        The value with components ``verifier_timeout`` and ``verifier_crash`` (1.0 when the
        comparison was cut short or its worker died; the answer then scores 0.0).

    Raises:
        RewardComputationError: When ``task.answer`` is neither a string nor a number.
        VerifierUnavailableError: When no worker process can be started (an InfrastructureError).
    """
    gold = task.answer
    if isinstance(gold, bool) or not isinstance(gold, str | Real):
        raise RewardComputationError(
            f"expected task.answer to be a string or a number in task {task.id!r}, got {gold!r}"
        )
    answer = trajectory.final_answer
    verdict = MathVerdict(equivalent=False) if answer is None else math_verdict(answer, str(gold), timeout_s=TIMEOUT_S)
    return RewardResult(
        value=float(verdict.equivalent),
        components={"verifier_timeout": float(verdict.timed_out), "verifier_crash": float(verdict.crashed)},
    )


# ------------------------------------------------------------------------------ worker processes

_pool: TimeLimitedWorkers | None = None
_pool_lock = threading.Lock()


def _workers() -> TimeLimitedWorkers:
    """This process's verifier workers, started on first use (a pool inherited through fork is left alone)."""
    global _pool
    with _pool_lock:
        if _pool is None or _pool.pid != os.getpid():
            _pool = TimeLimitedWorkers(max_workers=MAX_WORKERS, preload=[__name__])
        return _pool


def close_verifier_workers() -> None:
    """Stop this process's verifier worker processes; the next verification starts them again.

    For leak checks that compare a process's children before and after a piece of work.
    """
    global _pool
    with _pool_lock:
        pool, _pool = _pool, None
    if pool is not None and pool.pid == os.getpid():
        pool.close()


def _small_text(text: object) -> bool:
    return isinstance(text, str) and len(text) <= MAX_ANSWER_CHARS


class _NoTimeoutNotice(logging.Filter):
    """Drops math-verify's "Timeout is disabled" notice: the worker process is the timeout."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith("Timeout is disabled")


_NO_TIMEOUT_NOTICE = _NoTimeoutNotice()


def _compare_in_worker(prediction: str, gold: str) -> bool:
    """:func:`_compare` as run in a worker process (see :mod:`rewards.timelimit`)."""
    for name in ("math_verify.grader", "math_verify.parser"):
        logging.getLogger(name).addFilter(_NO_TIMEOUT_NOTICE)  # idempotent: a filter is added once
    return _compare(prediction, gold)


def _compare(prediction: str, gold: str) -> bool:
    """The whole comparison, in this process and without a time limit: guards, math-verify, sympy."""
    predicted, reference = _answer_text(prediction), _answer_text(gold)
    if predicted is None or reference is None or _SEPARATE_NUMBERS.search(predicted):
        return False
    return _math_verify_equal(predicted, reference) or _sympy_equal(predicted, reference)


# ---------------------------------------------------------------------------- answer extraction


def _answer_text(text: object) -> str | None:
    r"""The bare answer inside delimiters, ``\boxed{}`` and an "answer is" prefix, or None."""
    if not isinstance(text, str) or len(text) > MAX_ANSWER_CHARS:
        return None
    boxed = set(_boxed_contents(text))
    if len(boxed) > 1:
        return None  # several different boxed answers
    core = _strip_wrappers(boxed.pop() if boxed else text)
    if not core or _INNER_DELIMITER.search(core) or _looks_explosive(core) or _equates_values(core):
        return None
    return core


def _equates_values(text: str) -> bool:
    """Whether an ``=`` has something other than a variable on its left: ``3 = 4``, ``2x = 10``, ``x = 3 = 4``.

    math-verify reads an equation as its right-hand side, so such an answer would pass on its last
    value alone; ``x = 5``, ``x_1 = -2, x_2 = 6`` and ``(x, y) = (1, 2)`` keep working.
    """
    left_sides = _EQUALS.split(text)[:-1]
    return any(not _NAMED.search(side) for side in left_sides)


def _looks_explosive(text: str) -> bool:
    """Whether exact evaluation may blow up; a timer cannot stop one long big-integer operation."""
    if any(pattern.search(text) for pattern in _EXPLOSIVE):
        return True
    group_powers = len(_GROUP_POWER.findall(text))
    return group_powers > _MAX_GROUP_POWERS or (
        group_powers > 0 and len(_MULTIDIGIT_EXPONENT.findall(text)) > 1
    )


def _boxed_contents(text: str) -> list[str]:
    contents = []
    for match in _BOXED.finditer(text):
        end = _closing_brace(text, match.end() - 1)
        contents.append(text[match.end() : end].strip() if end is not None else "")
    return contents


def _closing_brace(text: str, start: int) -> int | None:
    """Index of the brace closing the one at ``start``, or None when unbalanced."""
    depth = 0
    for index in range(start, len(text)):
        if text[index] == "{" and text[index - 1 : index] != "\\":
            depth += 1
        elif text[index] == "}" and text[index - 1 : index] != "\\":
            depth -= 1
            if depth == 0:
                return index
    return None


def _strip_wrappers(text: str) -> str:
    text = _ANSWER_PREFIX.sub("", text.strip())
    while (inner := _unwrap_once(text)) != text:
        text = inner
    return text


def _unwrap_once(text: str) -> str:
    """``text`` without surrounding space, one trailing full stop, or one pair of delimiters."""
    text = text.strip().removesuffix(".").strip()
    for opening, closing in _DELIMITERS:
        fits = len(text) >= len(opening) + len(closing)
        if fits and text.startswith(opening) and text.endswith(closing):
            return text[len(opening) : -len(closing)].strip()
    return text


# ---------------------------------------------------------------------------------- math-verify


def _math_verify_equal(predicted: str, reference: str) -> bool:
    gold, target = _math_verify_parse(reference), _math_verify_parse(predicted)
    if not gold or not target:
        return False
    return verify(
        gold,
        target,
        float_rounding=_MV_FLOAT_ROUNDING,
        strict=True,
        allow_set_relation_comp=True,
        timeout_seconds=None,  # bounded by the worker process; math-verify's SIGALRM works on main threads only
    )


def _math_verify_parse(text: str) -> list[Any]:
    # Wrapped in $...$ and LaTeX extraction only: math-verify then reads the whole answer
    # instead of fishing the first number out of a sentence.
    return parse(f"${text}$", extraction_config=_MV_CONFIG, fallback_mode="no_fallback", parsing_timeout=None)


# ------------------------------------------------------------------------------- sympy fallback

_NO_OPS = re.compile(r"\\(?:left|right)\.?(?![A-Za-z])|\\(?:displaystyle|q?quad)(?![A-Za-z])|\\[,;:! ]")
_SYMBOLS = (
    (re.compile(r"\\(?:cdot|times)(?![A-Za-z])"), "*"),
    (re.compile(r"\\div(?![A-Za-z])"), "/"),
    (re.compile(r"\\pi(?![A-Za-z])"), "pi"),
    (re.compile(r"\\infty(?![A-Za-z])|∞|\binfinity\b|\binf\b"), "oo"),
    (re.compile(r"\\(?:leq?|leqslant)(?![A-Za-z])|≤"), "<="),
    (re.compile(r"\\(?:geq?|geqslant)(?![A-Za-z])|≥"), ">="),
    (re.compile(r"\\lt(?![A-Za-z])"), "<"),
    (re.compile(r"\\gt(?![A-Za-z])"), ">"),
    (re.compile(r"\\cup(?![A-Za-z])"), "∪"),
    (re.compile(r"\\(sin|cos|tan|log|ln|exp)(?![A-Za-z])"), r"\1"),
    (re.compile(r"\\(?:text|mathrm|mathbf|textbf|operatorname)\s*(?=\{)"), ""),
)
_CALL = re.compile(r"\\(?P<name>[dt]?frac|sqrt)(?![A-Za-z])")
_SET_OPEN, _SET_CLOSE, _UNION = "⦃", "⦄", "∪"
_OPENERS, _CLOSERS = "([" + _SET_OPEN, ")]" + _SET_CLOSE
_RELATION = re.compile(r"(<=|>=|<|>)")
_ASSIGNMENT = re.compile(r"^\s*([A-Za-z])\s*=(?!=)(.*)$", re.DOTALL)
_SCALAR_CHARS = re.compile(r"[0-9A-Za-z+\-*/().\s]+")
_UNSAFE_SYNTAX = re.compile(r"[A-Za-z)]\s*\.|//|\b0[xXbBoO]")  # attribute access, floor division, 0x1F
_FUNCTIONS: dict[str, Any] = {
    "sqrt": sympy.sqrt,
    "pi": sympy.pi,
    "oo": sympy.oo,
    "sin": sympy.sin,
    "cos": sympy.cos,
    "tan": sympy.tan,
    "log": sympy.log,
    "ln": sympy.log,
    "exp": sympy.exp,
}
_PARSER_GLOBALS: dict[str, Any] = {
    "__builtins__": {},
    "Integer": sympy.Integer,
    "Float": sympy.Float,
    "Rational": sympy.Rational,
    "Symbol": sympy.Symbol,
    "Function": sympy.Function,
    **_FUNCTIONS,
}
_TRANSFORMATIONS = (*standard_transformations, implicit_multiplication)
_PROBE_VALUES = (0.5772156649, 1.3247179572, 2.2360679775, 0.6180339887, 1.6487212707, 3.1415926536)


@dataclass(frozen=True)
class _Answer:
    """A parsed answer: the variable it was assigned to (``x = 5``), if any, and its value."""

    variable: str | None
    value: sympy.Basic


def _sympy_equal(predicted: str, reference: str) -> bool:
    try:
        left, right = _read_answer(predicted), _read_answer(reference)
        if left is None or right is None:
            return False
        if left.variable and right.variable and left.variable != right.variable:
            return False
        return _values_equal(left.value, right.value)
    except Exception:  # sympy raises arbitrary types on malformed input; unreadable means "not equal"
        return False


def _read_answer(text: str) -> _Answer | None:
    plain = _latex_to_plain(text)
    if plain is None:
        return None
    assignment = _ASSIGNMENT.match(plain)
    variable, body = (assignment[1], assignment[2]) if assignment else (None, plain)
    value = _read_value(body.strip())
    return None if value is None else _Answer(variable, value)


def _latex_to_plain(text: str) -> str | None:
    """Rewrite the LaTeX the fallback understands into sympy syntax; None when some is left."""
    text = _NO_OPS.sub("", text).replace("\\{", _SET_OPEN).replace("\\}", _SET_CLOSE)
    text = _rewrite_calls(text)
    for pattern, replacement in _SYMBOLS:
        text = pattern.sub(replacement, text)
    text = text.replace("{", "(").replace("}", ")").replace("^", "**")
    return None if "\\" in text else text


def _rewrite_calls(text: str) -> str:
    r"""Rewrite ``\frac{a}{b}`` as ``((a)/(b))`` and ``\sqrt[n]{a}`` as ``((a)**(1/(n)))``."""
    pieces, position = [], 0
    while (match := _CALL.search(text, position)) is not None:
        pieces.append(text[position : match.start()])
        first, position = _argument(text, match.end())
        if match["name"].endswith("frac"):
            second, position = _argument(text, position)
            pieces.append(f"(({_rewrite_calls(first)})/({_rewrite_calls(second)}))")
        else:
            call, position = _sqrt_call(text, first, position)
            pieces.append(call)
    pieces.append(text[position:])
    return "".join(pieces)


def _sqrt_call(text: str, first: str, position: int) -> tuple[str, int]:
    r"""``\sqrt`` whose first argument was read up to ``position``; reads the radicand after an index."""
    if not first.startswith("["):
        return f"sqrt({_rewrite_calls(first)})", position
    radicand, position = _argument(text, position)
    return f"(({_rewrite_calls(radicand)})**(1/({_rewrite_calls(first[1:-1])})))", position


def _argument(text: str, start: int) -> tuple[str, int]:
    """One LaTeX argument at ``start``: ``{...}``, an ``[index]`` or a single character."""
    index = len(text) - len(text[start:].lstrip())
    if index >= len(text):
        raise ValueError(f"expected an argument at position {start}, got end of text")
    if text[index] == "{":
        end = _closing_brace(text, index)
        if end is None:
            raise ValueError(f"expected a closing brace for the one at position {index}, got none")
        return text[index + 1 : end], end + 1
    if text[index] == "[":
        end = text.index("]", index)
        return text[index : end + 1], end + 1
    return text[index], index + 1


def _read_value(text: str) -> sympy.Basic | None:
    """A scalar, tuple, finite set, interval, union or inequality (as the set it describes)."""
    pieces = _split_top(text, _UNION)
    if len(pieces) > 1:
        parts = [_read_item(piece) for piece in pieces]
        return None if any(part is None for part in parts) else sympy.Union(*map(_as_set, parts))
    items = _split_top(text, ",")
    if len(items) > 1:
        return _finite_set(items)
    return _read_item(text)


def _read_item(text: str) -> sympy.Basic | None:
    text = text.strip()
    if text.startswith(_SET_OPEN) and text.endswith(_SET_CLOSE):
        return _finite_set(_split_top(text[1:-1], ","))
    if _enclosed(text):
        items = _split_top(text[1:-1], ",")
        if len(items) > 1:
            return _bracketed(text[0], [_scalar(item) for item in items], text[-1])
    if _RELATION.search(text):
        return _inequality_set(text)
    return _scalar(text)


def _bracketed(opening: str, items: list[sympy.Expr | None], closing: str) -> sympy.Basic | None:
    if any(item is None for item in items):
        return None
    if opening == "(" and closing == ")":
        return sympy.Tuple(*items)  # may also be an open interval; see _values_equal
    if len(items) != 2 or not _ordered(items[0], items[1]):
        return None
    return sympy.Interval(items[0], items[1], left_open=opening == "(", right_open=closing == ")")


def _ordered(low: sympy.Expr, high: sympy.Expr) -> bool:
    return (low <= high) is sympy.true


def _finite_set(items: list[str]) -> sympy.FiniteSet | None:
    values = [_scalar(item) for item in items]
    return None if any(value is None for value in values) else sympy.FiniteSet(*values)


def _inequality_set(text: str) -> sympy.Set | None:
    tokens = _RELATION.split(text)
    sides = [_scalar(side) for side in tokens[0::2]]
    if len(sides) not in (2, 3) or any(side is None for side in sides):
        return None
    operators = tokens[1::2]
    condition = sympy.And(*map(sympy.Rel, sides, sides[1:], operators))
    return condition.as_set() if len(condition.free_symbols) == 1 else None


def _scalar(text: str) -> sympy.Expr | None:
    """A single expression, through ``parse_expr`` with a whitelist of names and characters."""
    text = text.strip()
    if not text or not _SCALAR_CHARS.fullmatch(text) or _UNSAFE_SYNTAX.search(text):
        return None
    names = re.findall(r"[A-Za-z]+", text)
    if any(len(name) > 1 and name not in _FUNCTIONS for name in names):
        return None
    value = parse_expr(
        text, local_dict={}, global_dict=dict(_PARSER_GLOBALS), transformations=_TRANSFORMATIONS
    )
    return value if isinstance(value, sympy.Expr) else None


def _split_top(text: str, separator: str) -> list[str]:
    """Split on ``separator`` outside of any brackets."""
    parts, depth, start = [], 0, 0
    for index, char in enumerate(text):
        if char in _OPENERS:
            depth += 1
        elif char in _CLOSERS:
            depth -= 1
        elif char == separator and depth == 0:
            parts.append(text[start:index])
            start = index + 1
    parts.append(text[start:])
    return parts


def _enclosed(text: str) -> bool:
    """Whether the first character opens a bracket that the last character closes."""
    if len(text) < 2 or text[0] not in "([" or text[-1] not in ")]":
        return False
    depth = 0
    for index, char in enumerate(text):
        depth += (char in "([") - (char in ")]")
        if depth == 0:
            return index == len(text) - 1
    return False


# ------------------------------------------------------------------------------------ comparison


def _values_equal(left: sympy.Basic, right: sympy.Basic) -> bool:
    left, right = _as_set_if_paired(left, right), _as_set_if_paired(right, left)
    if isinstance(left, sympy.Tuple) and isinstance(right, sympy.Tuple):
        return len(left) == len(right) and all(map(_scalars_equal, left, right))
    if isinstance(left, sympy.FiniteSet) and isinstance(right, sympy.FiniteSet):
        return _same_elements(left, right) and _same_elements(right, left)
    if isinstance(left, sympy.Set) and isinstance(right, sympy.Set):
        return _same_intervals(left, right)
    if isinstance(left, sympy.Expr) and isinstance(right, sympy.Expr):
        return _scalars_equal(left, right)
    return False


def _as_set_if_paired(value: sympy.Basic, other: sympy.Basic) -> sympy.Basic:
    """``(a, b)`` is an open interval when compared with a set, a tuple otherwise."""
    if isinstance(value, sympy.Tuple) and len(value) == 2 and isinstance(other, sympy.Set):
        return _as_set(value)
    return value


def _as_set(value: sympy.Basic) -> sympy.Set:
    if isinstance(value, sympy.Set):
        return value
    if isinstance(value, sympy.Tuple) and len(value) == 2:
        return sympy.Interval.open(*value)
    return sympy.FiniteSet(value)


def _same_elements(left: sympy.FiniteSet, right: sympy.FiniteSet) -> bool:
    return len(left) == len(right) and all(any(_scalars_equal(x, y) for y in right) for x in left)


def _same_intervals(left: sympy.Set, right: sympy.Set) -> bool:
    pieces = [_interval_pieces(left), _interval_pieces(right)]
    if pieces[0] is None or pieces[1] is None:
        return bool(left == right)
    return len(pieces[0]) == len(pieces[1]) and all(map(_same_interval, *pieces))


def _interval_pieces(value: sympy.Set) -> list[sympy.Interval] | None:
    parts = value.args if isinstance(value, sympy.Union) else (value,)
    if not all(isinstance(part, sympy.Interval) for part in parts):
        return None
    return sorted(parts, key=lambda part: float(part.start))


def _same_interval(left: sympy.Interval, right: sympy.Interval) -> bool:
    return (
        left.left_open == right.left_open
        and left.right_open == right.right_open
        and _scalars_equal(left.start, right.start)
        and _scalars_equal(left.end, right.end)
    )


def _scalars_equal(left: sympy.Expr, right: sympy.Expr) -> bool:
    if left == right:
        return True
    if left.free_symbols or right.free_symbols:
        return _probe_equal(left, right)
    return _close(_number(left), _number(right))


def _number(value: sympy.Expr, substitutions: Mapping[sympy.Symbol, float] | None = None) -> complex | None:
    """The numeric value, or None when it is not a finite number (``zoo``, ``nan``, symbolic)."""
    try:
        result = complex(value.evalf(30, subs=dict(substitutions or {})))
    except TypeError:
        return None
    return result if cmath.isfinite(result) else None


def _close(left: complex | None, right: complex | None) -> bool:
    if left is None or right is None:
        return False
    return abs(left - right) <= REL_TOL * max(abs(left), abs(right))


def _probe_equal(left: sympy.Expr, right: sympy.Expr) -> bool:
    """Compare two symbolic expressions numerically at a few fixed, generic points."""
    symbols = sorted(left.free_symbols | right.free_symbols, key=str)
    checked = 0
    for shift in range(3):
        point = {s: _PROBE_VALUES[(shift + i) % len(_PROBE_VALUES)] + shift for i, s in enumerate(symbols)}
        values = _number(left, point), _number(right, point)
        if None in values:
            continue
        if not _close(*values):
            return False
        checked += 1
    return checked >= 2
