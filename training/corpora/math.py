"""Math corpus: sympy-generated worked problems (one problem with its solution = one document).

Problem kinds: solve, diff, integrate, factor, expand, gcd/lcm, series. Sympy computes the
ground truth, so the text is correct by construction; each problem shows a short worked step.
Generation costs ~10 ms a problem on one core, which is why ``n_docs`` is modest.
"""
from __future__ import annotations

import random
from collections.abc import Callable

import sympy as sp

X = sp.Symbol("x")


def _poly(rng: random.Random, degree: int) -> sp.Expr:
    coeffs = [rng.randint(-9, 9) for _ in range(degree)] + [rng.choice([1, 2, 3, -1, -2])]
    return sp.Add(*[c * X**i for i, c in enumerate(coeffs)])


def _expr(rng: random.Random) -> sp.Expr:
    a, b = rng.randint(1, 6), rng.randint(1, 5)
    return rng.choice([
        a * X**b + rng.randint(-9, 9) * X,
        a * sp.sin(b * X),
        a * sp.exp(b * X) + X**2,
        sp.cos(a * X) * X,
        X**b * sp.log(X),
        (a * X + 1) ** b,
        a / (X + b),
    ])


def _solve(rng: random.Random) -> str:
    r1, r2 = rng.randint(-9, 9), rng.randint(-9, 9)
    a = rng.choice([1, 1, 2, 3])
    eq = sp.expand(a * (X - r1) * (X - r2))
    roots = sorted(set(sp.solve(eq, X)))
    return (f"Problem: Solve {sp.sstr(eq)} = 0 for x.\n"
            f"Solution: Factor the left side: {sp.sstr(sp.factor(eq))} = 0.\n"
            f"Answer: x = {' or x = '.join(sp.sstr(r) for r in roots)}\n")


def _diff(rng: random.Random) -> str:
    f = _expr(rng)
    return (f"Problem: Differentiate f(x) = {sp.sstr(f)} with respect to x.\n"
            f"Solution: Apply the differentiation rules term by term.\n"
            f"Answer: f'(x) = {sp.sstr(sp.simplify(sp.diff(f, X)))}\n")


def _integrate(rng: random.Random) -> str:
    f = rng.choice([_poly(rng, rng.randint(1, 3)), _expr(rng)])
    res = sp.integrate(f, X)
    return (f"Problem: Compute the integral of {sp.sstr(f)} dx.\n"
            f"Solution: Integrate each term; check by differentiating the result.\n"
            f"Answer: {sp.sstr(res)} + C\n")


def _factor(rng: random.Random) -> str:
    p = sp.expand(sp.Mul(*[(X + rng.randint(-7, 7)) for _ in range(rng.randint(2, 3))]))
    return (f"Problem: Factor {sp.sstr(p)}.\n"
            f"Solution: Look for integer roots of the polynomial and divide them out.\n"
            f"Answer: {sp.sstr(sp.factor(p))}\n")


def _expand(rng: random.Random) -> str:
    e = (X + rng.randint(-6, 6)) ** rng.randint(2, 4) * rng.randint(1, 4)
    return (f"Problem: Expand {sp.sstr(e)}.\n"
            f"Solution: Use the binomial theorem and collect powers of x.\n"
            f"Answer: {sp.sstr(sp.expand(e))}\n")


def _gcd_lcm(rng: random.Random) -> str:
    a, b = rng.randint(6, 600), rng.randint(6, 600)
    return (f"Problem: Find the gcd and lcm of {a} and {b}.\n"
            f"Solution: {a} = {sp.factorint(a)} and {b} = {sp.factorint(b)} as prime powers.\n"
            f"Answer: gcd = {sp.gcd(a, b)}, lcm = {sp.lcm(a, b)}\n")


def _series(rng: random.Random) -> str:
    f = rng.choice([sp.sin(X), sp.cos(X), sp.exp(X), sp.log(1 + X), 1 / (1 - X),
                    sp.exp(2 * X), sp.sin(X) * sp.exp(X), sp.atan(X)])
    n = rng.randint(3, 6)
    s = sp.series(f, X, 0, n).removeO()
    return (f"Problem: Find the Taylor series of {sp.sstr(f)} about x = 0 up to order {n}.\n"
            f"Solution: Compute derivatives at 0 and divide by factorials.\n"
            f"Answer: {sp.sstr(s)} + O(x**{n})\n")


KINDS: list[Callable[[random.Random], str]] = [
    _solve, _diff, _integrate, _factor, _expand, _gcd_lcm, _series,
]


def build_documents(seed: int = 0, n_docs: int = 12000) -> list[str]:
    """Return ``n_docs`` worked problems, kinds drawn uniformly with a fixed seed."""
    rng = random.Random(seed)
    return [rng.choice(KINDS)(rng) for _ in range(n_docs)]
