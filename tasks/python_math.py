"""Tool-integrated math problems for the PythonSandbox environment (the ToRL setting).

Each problem is one where running Python pays: long sums, huge powers, brute-force counts,
symbolic integrals. Every answer is computed at generation time (sympy or plain Python), never
written by hand, and stored as a canonical LaTeX-ish string in ``Task.answer``. Each task also
carries a short ``reference_solution`` program that prints that same string, so an oracle agent
(or a test) can reproduce it independently.

Templates and the difficulties they serve:

=========================  =====  ==========================================================
template                   level  problem
=========================  =====  ==========================================================
arithmetic_series          1-3    sum of a long arithmetic progression
arithmetic_geometric_sum   2-4    :math:`\\sum (a + dk) r^k`, integer or rational ratio
modular_power              1-5    :math:`a^b \\bmod m`, up to power towers
divisibility_count         1-3    integers up to N divisible by some numbers but not another
digit_constraint_count     3-5    k-digit numbers with a digit sum, no equal neighbours, ...
quadratic_roots            1-3    real roots, integer then with radicals
quadratic_inequality       2-4    solution set in interval notation, up to rational functions
definite_integral          2-5    polynomials, then trigonometric, arctangent, exponential
linear_system              2-5    2 to 4 unknowns, integer then rational solutions
divisor_sum                2-5    sigma(N), tau(N), partial sums of phi and sigma
dice_probability           1-4    probability of a dice event as a reduced fraction
digit_sum_power            1-5    digit sum of a large power
=========================  =====  ==========================================================

Example:
    >>> task = generate_math_task(7, 3, split="train", index=0)
    >>> task.family, task.env
    ('math', 'PythonSandbox')
"""

from __future__ import annotations

import math
import operator
import random
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from itertools import combinations

import sympy as sp
from sympy.ntheory import digits as sympy_digits

from tasks._generation import (
    Code,
    Template,
    check_difficulty,
    derive_seed,
    difficulty_schedule,
    pick_template,
    render_program,
)
from tasks.records import Task

GENERATOR_VERSION = 1
"""Bump whenever a change alters any generated math task (the bundled splits record it)."""

ENV = "PythonSandbox"
FAMILY = "math"

_X = sp.Symbol("x")
_K = sp.Symbol("k")
_UNKNOWNS = {2: sp.symbols("x y"), 3: sp.symbols("x y z"), 4: sp.symbols("w x y z")}

_INSTRUCTIONS = (
    "You can run Python to compute or check your work. "
    "Put only the final answer, {form}, inside <answer></answer>."
)


@dataclass(frozen=True)
class _AnswerKind:
    """How an answer is written: a name for verifiers and the phrase the prompt uses."""

    name: str
    form: str


_INTEGER = _AnswerKind("integer", "as an integer")
_FRACTION = _AnswerKind("fraction", "as a reduced fraction \\frac{p}{q} (or an integer if it is whole)")
_EXACT = _AnswerKind("expression", "in exact form (fractions, radicals, \\pi and e allowed; no decimals)")
_ROOTS = _AnswerKind("roots", "as exact values (radicals allowed) separated by a comma, smaller first")
_INTERVALS = _AnswerKind(
    "intervals", "in interval notation, with \\cup between intervals and \\infty for infinity"
)
_TUPLE = _AnswerKind("tuple", "as an ordered tuple of exact values, e.g. (x, y)")


@dataclass(frozen=True)
class _Problem:
    """One drawn problem before it becomes a :class:`Task`.

    Attributes:
        question: The problem statement (LaTeX between ``$`` signs).
        answer: Canonical answer string.
        kind: How the answer is written.
        solution: Python source that prints ``answer``.
    """

    question: str
    answer: str
    kind: _AnswerKind
    solution: str


def _tex(value: object) -> str:
    """Canonical LaTeX of a number or sympy expression."""
    return sp.latex(sp.sympify(value))


def _enumerate(items: list[str], conjunction: str) -> str:
    """``a, b and c`` style enumeration."""
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + f" {conjunction} {items[-1]}"


# --- arithmetic_series -------------------------------------------------------------------


def _arithmetic_series(rng: random.Random, difficulty: int) -> _Problem:
    """Sum of an arithmetic progression; more terms and larger steps with difficulty, descending from 2."""
    step = rng.randint(2, 3 + 4 * difficulty) * (1 if difficulty == 1 else rng.choice((1, -1)))
    first = rng.randint(-20 * difficulty, 20 * difficulty)
    count = rng.randint(10 * difficulty, 60 * difficulty**2)
    last = first + (count - 1) * step
    terms = ", ".join(str(first + i * step) for i in range(3))
    return _Problem(
        question=f"Find the sum of the arithmetic progression ${terms}, \\ldots, {last}$.",
        answer=str(count * (first + last) // 2),
        kind=_INTEGER,
        solution=render_program(
            """
            first, step, last = $first, $step, $last
            print(sum(range(first, last + step, step)))
            """,
            first=first,
            step=step,
            last=last,
        ),
    )


# --- arithmetic_geometric_sum ------------------------------------------------------------


def _arithmetic_geometric_sum(rng: random.Random, difficulty: int) -> _Problem:
    """Sum of ``(a + dk) r^k``: ratio 2-3, then negative ratios, then rational ratios."""
    offset, slope = rng.randint(-9, 9) or 1, rng.randint(1, 5) * rng.choice((1, -1))
    if difficulty == 2:
        ratio, terms = sp.Integer(rng.randint(2, 3)), rng.randint(5, 10)
    elif difficulty == 3:
        ratio, terms = sp.Integer(rng.randint(2, 5) * rng.choice((1, -1))), rng.randint(8, 15)
    else:
        denominator = rng.randint(2, 5)
        numerator = rng.choice([p for p in range(1, 2 * denominator) if math.gcd(p, denominator) == 1])
        ratio, terms = sp.Rational(numerator, denominator) * rng.choice((1, -1)), rng.randint(6, 12)
    general_term = (offset + slope * _K) * ratio**_K
    total = sp.summation(general_term, (_K, 0, terms - 1))
    return _Problem(
        question=f"Compute ${sp.latex(sp.Sum(general_term, (_K, 0, terms - 1)))}$.",
        answer=_tex(total),
        kind=_INTEGER if ratio.is_integer else _FRACTION,
        solution=render_program(
            """
            from fractions import Fraction

            import sympy as sp

            offset, slope, ratio, terms = $offset, $slope, Fraction($p, $q), $terms
            total = sum((offset + slope * k) * ratio**k for k in range(terms))
            print(sp.latex(sp.Rational(total.numerator, total.denominator)))
            """,
            offset=offset,
            slope=slope,
            p=int(ratio.p),
            q=int(ratio.q),
            terms=terms,
        ),
    )


# --- modular_power -----------------------------------------------------------------------

_POWER_BOUNDS = {  # difficulty: (max base, exponent range, modulus range)
    1: (20, (20, 200), (7, 99)),
    2: (99, (10**3, 10**4), (100, 999)),
    3: (10**3, (10**6, 10**9), (10**3, 10**5)),
    4: (10**6, (10**15, 10**18), (10**6, 10**9)),
}


def _modular_power(rng: random.Random, difficulty: int) -> _Problem:
    """``a^b mod m`` with growing exponent and modulus; a power tower ``a^(b^c)`` at level 5."""
    if difficulty == 5:
        base, inner, height = rng.randint(2, 99), rng.randint(2, 20), rng.randint(10, 99)
        modulus = rng.randint(10**4, 10**6)
        exponent, exponent_tex, exponent_code = inner**height, f"{inner}^{{{height}}}", f"{inner} ** {height}"
    else:
        max_base, exponent_range, modulus_range = _POWER_BOUNDS[difficulty]
        base, exponent = rng.randint(2, max_base), rng.randint(*exponent_range)
        modulus = rng.randint(*modulus_range)
        exponent_tex = exponent_code = str(exponent)
    return _Problem(
        question=f"Find the remainder when ${base}^{{{exponent_tex}}}$ is divided by ${modulus}$.",
        answer=str(pow(base, exponent, modulus)),
        kind=_INTEGER,
        solution=render_program(
            "print(pow($base, $exponent, $modulus))",
            base=base,
            exponent=Code(exponent_code),
            modulus=modulus,
        ),
    )


# --- divisibility_count ------------------------------------------------------------------


def _count_divisible_by_any(limit: int, divisors: list[int]) -> int:
    """Integers in ``1..limit`` divisible by at least one of ``divisors`` (inclusion-exclusion)."""
    total = 0
    for size in range(1, len(divisors) + 1):
        for subset in combinations(divisors, size):
            total += (-1) ** (size + 1) * (limit // math.lcm(*subset))
    return total


def _divisibility_count(rng: random.Random, difficulty: int) -> _Problem:
    """Count integers up to N divisible by some numbers (but not by another from level 2)."""
    limit = rng.randint(10 ** (difficulty + 1), 2 * 10 ** (difficulty + 2))
    pool = list(range(2, 7 + 4 * difficulty))
    chosen = rng.sample(pool, 2 if difficulty < 3 else 3)
    divisors = sorted(chosen)
    excluded = rng.choice([p for p in pool if p not in chosen]) if difficulty > 1 else 0
    count = _count_divisible_by_any(limit, divisors)
    if excluded:
        count -= _count_divisible_by_any(limit, [math.lcm(d, excluded) for d in divisors])
    condition = f"divisible by {'at least one of ' if len(divisors) > 2 else ''}"
    condition += _enumerate([f"${d}$" for d in divisors], "and" if len(divisors) > 2 else "or")
    condition += f" but not by ${excluded}$" if excluded else ""
    return _Problem(
        question=f"How many integers $n$ with $1 \\le n \\le {limit}$ are {condition}?",
        answer=str(count),
        kind=_INTEGER,
        solution=render_program(
            """
            limit, divisors, excluded = $limit, $divisors, $excluded
            hits = [n for n in range(1, limit + 1) if any(n % d == 0 for d in divisors)]
            print(sum(1 for n in hits if not excluded or n % excluded != 0))
            """,
            limit=limit,
            divisors=divisors,
            excluded=excluded,
        ),
    )


# --- digit_constraint_count --------------------------------------------------------------


def _count_digit_strings(length: int, digit_sum: int, modulus: int, no_repeat: bool) -> int:
    """Count ``length``-digit positive integers with a given digit sum, divisible by ``modulus``.

    With ``no_repeat``, no two neighbouring digits may be equal. Dynamic programming over the
    digits, keyed by (last digit, digit sum so far, remainder so far).
    """
    states: dict[tuple[int, int, int], int] = {(d, d, d % modulus): 1 for d in range(1, 10)}
    for _ in range(length - 1):
        following: dict[tuple[int, int, int], int] = defaultdict(int)
        for (last, total, remainder), ways in states.items():
            for digit in range(10):
                if (no_repeat and digit == last) or total + digit > digit_sum:
                    continue
                following[(digit, total + digit, (10 * remainder + digit) % modulus)] += ways
        states = following
    return sum(ways for (_, total, rem), ways in states.items() if total == digit_sum and rem == 0)


def _digit_constraint_count(rng: random.Random, difficulty: int) -> _Problem:
    """Count k-digit numbers with a digit sum; no equal neighbours from 4; a divisor at 5."""
    length = {3: rng.randint(4, 5), 4: rng.randint(5, 6), 5: 6}[difficulty]
    digit_sum = rng.randint(2 * length, 6 * length)
    no_repeat, modulus = difficulty >= 4, (rng.choice((3, 7, 11, 13)) if difficulty == 5 else 1)
    conditions = [f"have digit sum ${digit_sum}$"]
    if no_repeat:
        conditions.append("have no two equal adjacent digits")
    if modulus > 1:
        conditions.append(f"are divisible by ${modulus}$")
    return _Problem(
        question=f"How many {length}-digit positive integers {_enumerate(conditions, 'and')}?",
        answer=str(_count_digit_strings(length, digit_sum, modulus, no_repeat)),
        kind=_INTEGER,
        solution=render_program(
            """
            length, digit_sum, modulus, no_repeat = $length, $digit_sum, $modulus, $no_repeat


            def ok(n):
                text = str(n)
                if sum(map(int, text)) != digit_sum or n % modulus:
                    return False
                return not no_repeat or all(a != b for a, b in zip(text, text[1:]))


            print(sum(1 for n in range(10 ** (length - 1), 10**length) if ok(n)))
            """,
            length=length,
            digit_sum=digit_sum,
            modulus=modulus,
            no_repeat=no_repeat,
        ),
    )


# --- quadratic_roots ---------------------------------------------------------------------

_NON_SQUARES = tuple(n for n in range(2, 51) if math.isqrt(n) ** 2 != n)


def _quadratic_coefficients(rng: random.Random, difficulty: int) -> tuple[int, int, int]:
    """Integer ``(a, b, c)`` with two distinct real roots: integers, then ``h ± √n``, then ``(h ± √n)/s``."""
    if difficulty == 1:
        low, high = rng.sample(range(-12, 13), 2)
        return 1, -(low + high), low * high
    centre, radicand = rng.randint(-9, 9), rng.choice(_NON_SQUARES)
    scale = 1 if difficulty == 2 else rng.randint(2, 5)
    a, b, c = scale**2, -2 * centre * scale, centre**2 - radicand
    divisor = math.gcd(a, b, c) * (1 if difficulty == 2 else rng.choice((1, -1)))
    return a // divisor, b // divisor, c // divisor


def _quadratic_roots(rng: random.Random, difficulty: int) -> _Problem:
    """Real roots of a quadratic, smaller first."""
    a, b, c = _quadratic_coefficients(rng, difficulty)
    root_of_discriminant = sp.sqrt(b * b - 4 * a * c)
    roots = sorted(((-b - root_of_discriminant) / (2 * a), (-b + root_of_discriminant) / (2 * a)), key=float)
    return _Problem(
        question=f"Find all real solutions of ${sp.latex(sp.Eq(a * _X**2 + b * _X + c, 0))}$.",
        answer=", ".join(_tex(root) for root in roots),
        kind=_ROOTS,
        solution=render_program(
            """
            import sympy as sp

            x = sp.Symbol("x")
            roots = sorted(sp.solve(sp.Poly($coefficients, x).as_expr(), x), key=float)
            print(", ".join(sp.latex(root) for root in roots))
            """,
            coefficients=[a, b, c],
        ),
    )


# --- quadratic_inequality ----------------------------------------------------------------


@dataclass(frozen=True)
class _Relation:
    """An inequality sign: its ``operator`` name, LaTeX, and which sign of the left side it wants."""

    name: str
    tex: str
    positive: bool
    strict: bool


_RELATIONS = (
    _Relation("gt", ">", positive=True, strict=True),
    _Relation("ge", "\\ge", positive=True, strict=False),
    _Relation("lt", "<", positive=False, strict=True),
    _Relation("le", "\\le", positive=False, strict=False),
)


def _sign_chart(rng: random.Random, difficulty: int) -> tuple[list[sp.Expr], list[sp.Expr], int]:
    """Zeros, poles and leading coefficient of ``lead * prod(x - zero) / prod(x - pole)``."""
    if difficulty == 2:
        return [sp.Integer(z) for z in rng.sample(range(-9, 10), 2)], [], 1
    if difficulty == 3 and rng.random() < 0.5:
        centre, radicand = rng.randint(-6, 6), rng.choice(_NON_SQUARES)
        return [centre - sp.sqrt(radicand), centre + sp.sqrt(radicand)], [], rng.choice((1, -1))
    if difficulty == 3:
        lead = rng.choice((1, 2, 3)) * rng.choice((1, -1))
        return [sp.Integer(z) for z in rng.sample(range(-9, 10), 2)], [], lead
    points = [sp.Integer(p) for p in rng.sample(range(-9, 10), 3)]
    zero_count = rng.choice((1, 2))
    return points[:zero_count], points[zero_count:], rng.choice((1, -1))


def _interval_notation(zeros: list[sp.Expr], poles: list[sp.Expr], lead: int, relation: _Relation) -> str:
    """Where ``lead * prod(x - zero) / prod(x - pole)`` satisfies ``relation`` against 0.

    All zeros and poles are simple, so the sign flips at each of them: on the gap left of the
    ``i``-th smallest point it is ``sign(lead) * (-1) ** (number of points to the right)``.
    """
    points = sorted([(z, True) for z in zeros] + [(p, False) for p in poles], key=lambda item: float(item[0]))
    bounds = [(-sp.oo, False), *points, (sp.oo, False)]
    parts = []
    for gap in range(len(points) + 1):
        positive = (lead > 0) == ((len(points) - gap) % 2 == 0)
        if positive != relation.positive:
            continue
        (low, low_is_zero), (high, high_is_zero) = bounds[gap], bounds[gap + 1]
        left = "[" if low_is_zero and not relation.strict else "("
        right = "]" if high_is_zero and not relation.strict else ")"
        parts.append(f"{left}{_tex(low)}, {_tex(high)}{right}")
    return " \\cup ".join(parts)


def _quadratic_inequality(rng: random.Random, difficulty: int) -> _Problem:
    """Solution set of a quadratic (level 2-3) or rational (level 4) inequality."""
    zeros, poles, lead = _sign_chart(rng, difficulty)
    relation = rng.choice(_RELATIONS)
    numerator = sp.expand(lead * sp.prod([_X - z for z in zeros]))
    expression = numerator / sp.expand(sp.prod([_X - p for p in poles]))
    return _Problem(
        question=f"Solve the inequality ${sp.latex(expression)} {relation.tex} 0$ over the real numbers.",
        answer=_interval_notation(zeros, poles, lead, relation),
        kind=_INTERVALS,
        solution=render_program(
            r"""
            import operator

            import sympy as sp

            x = sp.Symbol("x")
            expression = sp.sympify($expression)
            inequality = getattr(operator, $relation)(expression, 0)
            solution = sp.solve_univariate_inequality(inequality, x, relational=False)
            parts = solution.args if isinstance(solution, sp.Union) else (solution,)


            def bracket(interval):
                left = "(" if interval.left_open else "["
                right = ")" if interval.right_open else "]"
                return f"{left}{sp.latex(interval.start)}, {sp.latex(interval.end)}{right}"


            print(" \\cup ".join(bracket(part) for part in sorted(parts, key=lambda part: float(part.start))))
            """,
            expression=str(expression),
            relation=relation.name,
        ),
    )


# --- definite_integral -------------------------------------------------------------------


def _polynomial(rng: random.Random, degree: int, bound: int) -> sp.Expr:
    """A random integer polynomial in x of exactly ``degree`` with coefficients in ``[-bound, bound]``."""
    coefficients = [rng.randint(-bound, bound) for _ in range(degree)]
    leading = rng.randint(1, bound) * rng.choice((1, -1))
    return sp.Add(*(c * _X**i for i, c in enumerate(coefficients)), leading * _X**degree)


def _nonzero(rng: random.Random, bound: int) -> int:
    """A random integer in ``[-bound, bound]`` other than 0."""
    return rng.randint(1, bound) * rng.choice((1, -1))


def _integration_problem(rng: random.Random, difficulty: int) -> tuple[sp.Expr, sp.Expr, sp.Expr]:
    """Integrand and limits: polynomial, + trig, x·trig or arctangent, x^m·exp or x²·trig."""
    trig = rng.choice((sp.sin, sp.cos))
    if difficulty == 2:
        low = rng.randint(-3, 2)
        return _polynomial(rng, rng.randint(2, 3), 5), sp.Integer(low), sp.Integer(rng.randint(low + 1, 4))
    if difficulty == 3:
        integrand = _polynomial(rng, rng.randint(1, 2), 4) + _nonzero(rng, 5) * trig(_X)
        return integrand, sp.Integer(0), rng.choice((sp.pi, sp.pi / 2))
    frequency = rng.randint(1, 4)
    if difficulty == 4 and rng.random() < 0.5:
        low = rng.choice((0, -frequency))
        return _nonzero(rng, 9) / (_X**2 + frequency**2), sp.Integer(low), sp.Integer(frequency)
    if difficulty == 4:
        high = sp.pi / (rng.choice((1, 2)) * frequency)
        return _nonzero(rng, 6) * _X * trig(frequency * _X), sp.Integer(0), high
    if rng.random() < 0.5:
        integrand = _nonzero(rng, 5) * _X ** rng.randint(1, 3) * sp.exp(_nonzero(rng, 3) * _X)
        return integrand, sp.Integer(0), sp.Integer(1)
    return _nonzero(rng, 5) * _X**2 * trig(frequency * _X), sp.Integer(0), sp.pi / frequency


def _definite_integral(rng: random.Random, difficulty: int) -> _Problem:
    """A definite integral evaluated exactly."""
    integrand, low, high = _integration_problem(rng, difficulty)
    value = sp.expand(sp.integrate(integrand, (_X, low, high)))
    return _Problem(
        question=f"Evaluate ${sp.latex(sp.Integral(integrand, (_X, low, high)))}$.",
        answer=_tex(value),
        kind=_EXACT,
        solution=render_program(
            """
            import sympy as sp

            x = sp.Symbol("x")
            integrand, low, high = sp.sympify($integrand), sp.sympify($low), sp.sympify($high)
            print(sp.latex(sp.expand(sp.integrate(integrand, (x, low, high)))))
            """,
            integrand=str(integrand),
            low=str(low),
            high=str(high),
        ),
    )


# --- linear_system -----------------------------------------------------------------------


def _invertible_matrix(rng: random.Random, size: int, bound: int) -> sp.Matrix:
    """A random ``size`` x ``size`` integer matrix with entries in ``[-bound, bound]`` and det != 0."""
    while True:
        matrix = sp.Matrix(size, size, lambda *_: rng.randint(-bound, bound))
        if matrix.det() != 0:
            return matrix


def _linear_system(rng: random.Random, difficulty: int) -> _Problem:
    """A square linear system: 2, 3, 3, 4 unknowns; rational solutions from level 4."""
    size = {2: 2, 3: 3, 4: 3, 5: 4}[difficulty]
    matrix = _invertible_matrix(rng, size, 2 + difficulty)
    if difficulty <= 3:  # integer solution
        rhs = matrix * sp.Matrix([rng.randint(-9, 9) for _ in range(size)])
    else:  # rational solution
        rhs = sp.Matrix([rng.randint(-20, 20) for _ in range(size)])
    unknowns = _UNKNOWNS[size]
    equations = [
        f"${sp.latex(sp.Eq(sum(a * u for a, u in zip(matrix.row(i), unknowns, strict=True)), rhs[i]))}$"
        for i in range(size)
    ]
    names = ", ".join(str(u) for u in unknowns)
    return _Problem(
        question="Solve the system of equations\n" + "\n".join(equations) + f"\nfor $({names})$.",
        answer="(" + ", ".join(_tex(v) for v in matrix.LUsolve(rhs)) + ")",
        kind=_TUPLE,
        solution=render_program(
            """
            import sympy as sp

            unknowns = sp.symbols($names)
            matrix, rhs = sp.Matrix($matrix), sp.Matrix($rhs)
            (solution,) = sp.linsolve((matrix, rhs), unknowns)
            print("(" + ", ".join(sp.latex(value) for value in solution) + ")")
            """,
            names=" ".join(str(u) for u in unknowns),
            matrix=[[int(a) for a in matrix.row(i)] for i in range(size)],
            rhs=[int(b) for b in rhs],
        ),
    )


# --- divisor_sum -------------------------------------------------------------------------


def _totient_sum(limit: int) -> int:
    """``phi(1) + ... + phi(limit)`` by a totient sieve."""
    phi = list(range(limit + 1))
    for p in range(2, limit + 1):
        if phi[p] == p:  # p is prime
            for multiple in range(p, limit + 1, p):
                phi[multiple] -= phi[multiple] // p
    return sum(phi[1:])


def _smooth_number(rng: random.Random, ceiling: int) -> int:
    """A product of small prime powers not above ``ceiling``, with at least three prime factors."""
    while True:
        primes = rng.sample((2, 3, 5, 7, 11, 13, 17, 19, 23, 29), rng.randint(3, 5))
        number = math.prod(p ** rng.randint(1, 4) for p in primes)
        if number <= ceiling:
            return number


_DIVISOR_COUNT_SOURCE = """
    import math

    n = $n
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    print(2 * len(small) - (math.isqrt(n) ** 2 == n))
"""

_SIGMA_SIEVE_SOURCE = """
    n = $n
    sigma = [0] * (n + 1)
    for d in range(1, n + 1):
        for multiple in range(d, n + 1, d):
            sigma[multiple] += d
    print(sum(sigma))
"""


def _divisor_sum(rng: random.Random, difficulty: int) -> _Problem:
    """sigma(N) at 2, tau(N) at 3, partial sums of phi at 4 and of sigma at 5."""
    if difficulty == 2:
        number = rng.randint(100, 10**4)
        question = f"Find the sum of all positive divisors of ${number}$."
        answer, source = sp.divisor_sigma(number), "print(sum(d for d in range(1, $n + 1) if $n % d == 0))"
    elif difficulty == 3:
        number = _smooth_number(rng, 10**12)
        question = f"How many positive divisors does ${number}$ have?"
        answer, source = sp.divisor_count(number), _DIVISOR_COUNT_SOURCE
    elif difficulty == 4:
        number = rng.randint(500, 5000)
        question = (
            f"Compute $\\sum_{{n=1}}^{{{number}}} \\varphi(n)$, where $\\varphi$ is Euler's totient function."
        )
        answer = _totient_sum(number)
        source = "import sympy as sp\n\nprint(sum(sp.totient(n) for n in range(1, $n + 1)))"
    else:
        number = rng.randint(10**4, 10**5)
        question = (
            f"Compute $\\sum_{{n=1}}^{{{number}}} \\sigma(n)$, where $\\sigma(n)$ is the sum of the positive "
            "divisors of $n$."
        )
        answer, source = sum(d * (number // d) for d in range(1, number + 1)), _SIGMA_SIEVE_SOURCE
    return _Problem(
        question=question, answer=str(answer), kind=_INTEGER, solution=render_program(source, n=number)
    )


# --- dice_probability --------------------------------------------------------------------


@dataclass(frozen=True)
class _DiceEvent:
    """An event on the sum of the dice: its wording, its Python condition on ``roll``, its test."""

    text: str
    condition: str
    holds: Callable[[int], bool]


def _dice_event(rng: random.Random, difficulty: int, low: int, high: int) -> _DiceEvent:
    target = rng.randint(low + 1, high - 1)
    if difficulty == 1 and rng.random() < 0.5:
        return _DiceEvent(f"equal to ${target}$", f"sum(roll) == {target}", lambda total: total == target)
    if difficulty <= 2 and rng.random() < 0.5:
        return _DiceEvent(f"at most ${target}$", f"sum(roll) <= {target}", lambda total: total <= target)
    if difficulty <= 2:
        return _DiceEvent(f"at least ${target}$", f"sum(roll) >= {target}", lambda total: total >= target)
    if difficulty == 3:
        modulus = rng.randint(3, 7)
        return _DiceEvent(
            f"divisible by ${modulus}$", f"sum(roll) % {modulus} == 0", lambda total: total % modulus == 0
        )
    return _DiceEvent("a prime number", "sp.isprime(sum(roll))", lambda total: bool(sp.isprime(total)))


def _sum_distribution(count: int, faces: int) -> dict[int, int]:
    """Number of ways each total arises when rolling ``count`` fair ``faces``-sided dice."""
    ways = {0: 1}
    for _ in range(count):
        following: dict[int, int] = defaultdict(int)
        for total, n in ways.items():
            for face in range(1, faces + 1):
                following[total + face] += n
        ways = following
    return ways


_DICE = {  # difficulty: (dice counts, face counts)
    1: ((2,), (4, 6, 8, 10, 12, 20)),
    2: ((3,), (4, 6, 8, 10)),
    3: ((3, 4), (4, 6, 8)),
    4: ((4, 5), (6, 8, 10)),
}


def _dice_probability(rng: random.Random, difficulty: int) -> _Problem:
    """Probability of an event on the sum of fair dice, as a reduced fraction."""
    counts, face_counts = _DICE[difficulty]
    count, faces = rng.choice(counts), rng.choice(face_counts)
    event = _dice_event(rng, difficulty, count, count * faces)
    favourable = sum(n for total, n in _sum_distribution(count, faces).items() if event.holds(total))
    return _Problem(
        question=f"{count} fair {faces}-sided dice (faces $1$ to ${faces}$) are rolled. "
        f"What is the probability that the sum of the results is {event.text}?",
        answer=_tex(sp.Rational(favourable, faces**count)),
        kind=_FRACTION,
        solution=render_program(
            """
            from itertools import product

            import sympy as sp

            count, faces = $count, $faces
            rolls = list(product(range(1, faces + 1), repeat=count))
            favourable = sum(1 for roll in rolls if $condition)
            print(sp.latex(sp.Rational(favourable, len(rolls))))
            """,
            count=count,
            faces=faces,
            condition=Code(event.condition),
        ),
    )


# --- digit_sum_power ---------------------------------------------------------------------

_DIGIT_POWER_BOUNDS = {  # difficulty: (base range, exponent range); at most ~4000 digits
    1: ((2, 9), (10, 40)),
    2: ((2, 30), (40, 150)),
    3: ((2, 99), (150, 600)),
    4: ((11, 99), (600, 1500)),
    5: ((100, 999), (900, 1300)),
}


def _digit_sum_power(rng: random.Random, difficulty: int) -> _Problem:
    """Digit sum of ``a^b`` with up to about 4000 digits."""
    base_range, exponent_range = _DIGIT_POWER_BOUNDS[difficulty]
    base, exponent = rng.randint(*base_range), rng.randint(*exponent_range)
    return _Problem(
        question=f"Find the sum of the decimal digits of ${base}^{{{exponent}}}$.",
        answer=str(sum(sympy_digits(base**exponent)[1:])),
        kind=_INTEGER,
        solution=render_program(
            "print(sum(int(c) for c in str($base**$exponent)))", base=base, exponent=exponent
        ),
    )


# --- public API --------------------------------------------------------------------------

_TEMPLATES: tuple[Template[_Problem], ...] = (
    Template("arithmetic_series", 1, 3, _arithmetic_series),
    Template("arithmetic_geometric_sum", 2, 4, _arithmetic_geometric_sum),
    Template("modular_power", 1, 5, _modular_power),
    Template("divisibility_count", 1, 3, _divisibility_count),
    Template("digit_constraint_count", 3, 5, _digit_constraint_count),
    Template("quadratic_roots", 1, 3, _quadratic_roots),
    Template("quadratic_inequality", 2, 4, _quadratic_inequality),
    Template("definite_integral", 2, 5, _definite_integral),
    Template("linear_system", 2, 5, _linear_system),
    Template("divisor_sum", 2, 5, _divisor_sum),
    Template("dice_probability", 1, 4, _dice_probability),
    Template("digit_sum_power", 1, 5, _digit_sum_power),
)

MATH_TEMPLATES: tuple[str, ...] = tuple(template.name for template in _TEMPLATES)
"""Names of the math templates, in a stable order."""
MATH_TEMPLATE_LEVELS: dict[str, tuple[int, int]] = {
    template.name: (template.min_difficulty, template.max_difficulty) for template in _TEMPLATES}
"""The band of difficulty levels each math template serves, inclusive."""


def generate_math_task(
    seed: int, difficulty: int, *, split: str, index: int, template: str | None = None
) -> Task:
    """Generate one tool-integrated math task.

    The task is a pure function of ``(seed, difficulty, template)``; ``split`` and ``index`` only
    name it.

    Args:
        seed: Seed of the task's private ``random.Random``.
        difficulty: Level 1 (easiest) to 5; it picks the templates in play and scales numbers and steps.
        split: Split name used in the id, e.g. ``"train"``.
        index: Position used in the id.
        template: Force one template (see :data:`MATH_TEMPLATES`); by default one serving
            ``difficulty`` is drawn from the seed.

    Returns:
        A task with ``family="math"``, the canonical answer string in ``answer``, and metadata keys
        ``template``, ``answer_kind``, ``reference_solution`` (a program printing the answer),
        ``seed`` and ``generator_version``.

    Raises:
        ValueError: ``difficulty`` is out of range or not served by ``template``.
        UnknownTaskError: ``template`` is not a math template.

    Example:
        >>> task = generate_math_task(3, 1, split="train", index=4, template="modular_power")
        >>> task.id
        'python-math/train/00004'
    """
    seed = operator.index(seed)
    rng = random.Random(seed)
    chosen = pick_template(rng, _TEMPLATES, check_difficulty(difficulty), template)
    problem = chosen.build(rng, difficulty)
    return Task(
        id=f"python-math/{split}/{index:05d}",
        env=ENV,
        family=FAMILY,
        prompt=f"{problem.question}\n\n{_INSTRUCTIONS.format(form=problem.kind.form)}",
        answer=problem.answer,
        difficulty=difficulty,
        metadata={
            "template": chosen.name,
            "answer_kind": problem.kind.name,
            "reference_solution": problem.solution,
            "seed": seed,
            "generator_version": GENERATOR_VERSION,
        },
    )


def generate_math_tasks(
    n: int,
    *,
    seed: int,
    difficulty: int | tuple[int, int] | None = None,
    split: str,
    template: str | None = None,
) -> list[Task]:
    """Generate ``n`` math tasks with ids ``python-math/{split}/00000`` onwards.

    Args:
        n: Number of tasks.
        seed: Batch seed; task ``i`` uses a seed derived from ``(seed, i)``.
        difficulty: One level, an inclusive ``(low, high)`` band cycled evenly, or None for 1..5.
        split: Split name used in the ids.
        template: Force one template for every task.

    Returns:
        The tasks, in index order.

    Example:
        >>> [t.difficulty for t in generate_math_tasks(4, seed=0, difficulty=(2, 3), split="dev")]
        [2, 3, 2, 3]
    """
    levels = difficulty_schedule(n, difficulty)
    return [
        generate_math_task(derive_seed(seed, i), level, split=split, index=i, template=template)
        for i, level in enumerate(levels)
    ]
