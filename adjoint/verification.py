"""Verification of adjoints and gradients, as functions users can call on their own operators.

- `dot_product_test`: |<A x, y> - <x, A^T y>| / max(|<A x, y>|, tiny) for a linear map A given as
  forward and adjoint callables on (tuples of) arrays. By default y takes the signs of A x entry by
  entry (`align_signs`), so every term of <A x, y> is >= 0 and the sum cannot cancel: with y as
  drawn, a cancelled <A x, y> inflates the relative mismatch by orders of magnitude in a small
  fraction of draws (then even a float64 adjoint exact to round-off exceeds 1e-12). The mismatch
  relative to sum_i |(A x)_i y_i| is returned as well. x and y are checked against the shapes the
  operator needs before any arithmetic: with `operator=` (a name of `meshops.registry.OPERATORS`)
  and `mesh=`, against the operator's domain and range locations; always, y against the shape of
  A x and A^T y against the shape of x. A mismatch raises `VerificationInputError` naming the
  argument, what was expected and what was given.
- `taylor_test`: the first-order remainder |J(m + eps dm) - J(m) - eps dJ.dm| over eps = eps0 / 2^i,
  which falls at rate 2 when the gradient (or tangent) is right; the rates are returned, not just a verdict.
  Remainders at the round-off level of J are flagged (`at_roundoff`): a linear J has a Taylor
  remainder of exactly zero, so what is measured is round-off and its "rates" are noise. Rates
  involving such a remainder are NaN and `min_rate` ignores them; when every remainder is at
  round-off the derivative is exact to working precision (`exact`, `min_rate` = inf).

Inner products are plain Euclidean sums over every entry given; a caller on a local (per-rank) mesh
passes owned entries only and an `allreduce` to sum across ranks.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np

from meshops.device.tables import SIZE_OF



class VerificationInputError(ValueError):
    """An input of a verification test has the wrong number of arrays or the wrong shape."""


def _as_tuple(x):
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)


def _shape(a) -> tuple:
    return tuple(getattr(a, "shape", ()))


def _describe(shape: tuple, mesh=None) -> str:
    """A shape, with the mesh location(s) whose size its first axis has."""
    text = f"shape {shape}"
    if mesh is not None and shape:
        locs = [f"{loc} ({SIZE_OF[loc]}={getattr(mesh, SIZE_OF[loc])})" for loc in SIZE_OF
                if getattr(mesh, SIZE_OF[loc], None) == shape[0]]
        if locs:
            text += ": a field at " + " or ".join(locs)
    return text


def _label(argument: str, i: int, n: int) -> str:
    return argument if n == 1 else f"{argument}[{i}]"


def _resolve_operator(operator):
    if operator is None or not isinstance(operator, str):
        return operator
    from meshops.registry import OPERATORS

    if operator not in OPERATORS:
        raise VerificationInputError(
            f"operator {operator!r} is not registered in meshops.registry.OPERATORS "
            f"(registered: {', '.join(sorted(OPERATORS))})")
    return OPERATORS[operator]


def check_locations(arrays, locations, mesh, *, argument: str, what: str) -> None:
    """Raise `VerificationInputError` unless `arrays` are fields at `locations` on `mesh`
    (one array per location, of shape (n,) or (n, nlev) with n the location's size)."""
    arrays = _as_tuple(arrays)
    if len(arrays) != len(locations):
        raise VerificationInputError(
            f"{argument}: {what} takes {len(locations)} field(s) at {', '.join(locations)}; "
            f"{len(arrays)} array(s) were given")
    for i, (a, loc) in enumerate(zip(arrays, locations)):
        n = getattr(mesh, SIZE_OF[loc])
        shape = _shape(a)
        if len(shape) not in (1, 2) or shape[0] != n:
            raise VerificationInputError(
                f"{_label(argument, i, len(arrays))}: {what} needs a {loc} field of shape ({n},) or "
                f"({n}, nlev) ({SIZE_OF[loc]}={n}); given {_describe(shape, mesh)}")


def _check_like(given, reference, *, argument: str, reference_name: str, mesh=None) -> None:
    """Raise `VerificationInputError` unless `given` has the structure and shapes of `reference`."""
    given, reference = _as_tuple(given), _as_tuple(reference)
    if len(given) != len(reference):
        raise VerificationInputError(
            f"{argument}: {len(given)} array(s) given, but {reference_name} has {len(reference)}")
    for i, (a, r) in enumerate(zip(given, reference)):
        if _shape(a) != _shape(r):
            raise VerificationInputError(
                f"{_label(argument, i, len(given))}: expected the shape of "
                f"{_label(reference_name, i, len(reference))}, {_describe(_shape(r), mesh)}; "
                f"given {_describe(_shape(a), mesh)}")


def inner(xs, ys, allreduce: Callable[[float], float] | None = None, *, absolute: bool = False) -> float:
    """Euclidean inner product of two (tuples of) arrays, summed over all entries in float64.

    With `absolute=True`, the sum of |x_i y_i| instead: the scale of the inner product.
    """
    total = 0.0
    for a, b in zip(_as_tuple(xs), _as_tuple(ys), strict=True):
        products = a.astype("float64") * b.astype("float64")
        total += float(abs(products).sum() if absolute else products.sum())
    return allreduce(total) if allreduce else total


@dataclass
class DotProductResult:
    forward_inner: float      # <A x, y>
    adjoint_inner: float      # <x, A^T y>
    relative_error: float     # |<A x, y> - <x, A^T y>| / |<A x, y>|
    scaled_error: float       # |<A x, y> - <x, A^T y>| / sum_i |(A x)_i y_i|

    def passed(self, tol: float) -> bool:
        return self.relative_error <= tol


def align_signs(ys, axs):
    """|y| with the signs of A x entry by entry (+ where (A x)_i = 0), as a tuple: every term
    (A x)_i y_i of <A x, y> is then >= 0."""
    return tuple(abs(b) * ((a >= 0).astype(b.dtype) * 2 - 1)
                 for a, b in zip(_as_tuple(axs), _as_tuple(ys), strict=True))


def dot_product_test(forward: Callable, adjoint: Callable, x, y, *,
                     restrict: Callable | None = None,
                     allreduce: Callable[[float], float] | None = None,
                     align: bool = True, operator=None, mesh=None) -> DotProductResult:
    """Compare <forward(x), y> with <x, adjoint(y)>.

    `x` and `y` are arrays or tuples of arrays (fresh random inputs); with `align` (default) the
    adjoint is applied to `align_signs(y, forward(x))` instead of y, so <A x, y> cannot cancel.
    `restrict(arrays, side)` may select the owned entries before the inner products (side is
    "domain" or "range"); `allreduce` sums a float over ranks.

    `operator` (a name in `meshops.registry.OPERATORS`, or its `OperatorSpec`) with `mesh` checks
    x against the operator's domain locations and y against its range locations before anything
    runs (for a nonlinear operator, x is the tangent-linear model's direction). In every case y
    must have the shape of forward(x), and adjoint(y) that of x. A mismatch raises
    `VerificationInputError` (a ValueError) naming the argument, the expected location and shape,
    and what was given.
    """
    spec = _resolve_operator(operator)
    xs, ys = _as_tuple(x), _as_tuple(y)
    if spec is not None:
        if mesh is None:
            raise VerificationInputError(
                f"operator={spec.name!r} needs mesh= to check the locations of x and y")
        check_locations(xs, spec.domain, mesh, argument="x", what=f"{spec.name}'s domain")
        check_locations(ys, spec.range, mesh, argument="y", what=f"{spec.name}'s range")
    ax = _as_tuple(forward(*xs))
    _check_like(ys, ax, argument="y", reference_name="forward(x)", mesh=mesh)
    if align:
        ys = align_signs(ys, ax)
    aty = _as_tuple(adjoint(*ys))
    _check_like(aty, xs, argument="adjoint(y)", reference_name="x", mesh=mesh)
    if restrict is not None:
        ax, ys = restrict(ax, "range"), restrict(ys, "range")
        aty, xs = restrict(aty, "domain"), restrict(xs, "domain")
    lhs = inner(ax, ys, allreduce)
    rhs = inner(xs, aty, allreduce)
    scale = inner(ax, ys, allreduce, absolute=True)
    tiny = np.finfo(float).tiny
    return DotProductResult(lhs, rhs, abs(lhs - rhs) / max(abs(lhs), tiny),
                            abs(lhs - rhs) / max(scale, tiny))


@dataclass
class TaylorResult:
    """Taylor remainders r_i = |J(m + eps_i dm) - J(m) - eps_i dJ.dm| and their rates.

    `rates[i]` = log2(r_i / r_{i+1}), NaN where r_i or r_{i+1} is at round-off (`at_roundoff`):
    there the remainder measures floating-point error, not the Taylor expansion, and no order can
    be read from it. `observed_rates` keeps the raw log2 ratios. `min_rate` is the least rate over
    remainders above round-off, or inf when no two consecutive remainders are (the remainder is
    zero to working precision: for a linear J it is exactly zero, and the derivative is exact).
    """
    epsilons: list[float]
    remainders: list[float]
    rates: list[float]
    roundoff: list[float] = field(default_factory=list)      # the round-off level of each r_i
    at_roundoff: list[bool] = field(default_factory=list)    # r_i <= roundoff[i]
    observed_rates: list[float] = field(default_factory=list)
    note: str = ""

    @property
    def exact(self) -> bool:
        """Every remainder is at round-off: J is linear along dm (or the test cannot resolve its
        curvature) and the derivative agrees with J to working precision."""
        return bool(self.at_roundoff) and all(self.at_roundoff)

    @property
    def min_rate(self) -> float:
        return self.min_rate_from(math.inf)

    def min_rate_from(self, eps: float) -> float:
        """The least rate log2(r_i / r_{i+1}) above round-off with eps_i <= `eps` (inf if none):
        the asymptotic rate, leaving out the larger steps where a strongly curved J is not yet
        quadratic in eps."""
        measured = [r for e, r in zip(self.epsilons, self.rates) if e <= eps and not math.isnan(r)]
        return min(measured) if measured else math.inf

    def passed(self, min_rate: float = 1.9) -> bool:
        return self.min_rate >= min_rate

    def __str__(self) -> str:
        rates = ", ".join("round-off" if math.isnan(r) else f"{r:.2f}" for r in self.rates)
        return (f"Taylor test: remainders {', '.join(f'{r:.3g}' for r in self.remainders)}; "
                f"rates [{rates}]" + (f"; {self.note}" if self.note else ""))


def _machine_epsilon(arrays) -> float:
    """The unit round-off of the least precise floating dtype among `arrays` (float64 if none)."""
    eps = [float(np.finfo(a.dtype).eps) for a in arrays
           if getattr(a, "dtype", None) is not None and np.issubdtype(a.dtype, np.floating)]
    return max(eps, default=float(np.finfo(np.float64).eps))


def taylor_test(functional: Callable, m, dm, derivative: float, *, eps0: float = 1e-2,
                steps: int = 5, scale: float | None = None,
                roundoff_factor: float = 16.0) -> TaylorResult:
    """Taylor remainders of a scalar functional J about m in direction dm.

    `functional(m) -> float`, `m` and `dm` arrays or tuples of arrays of the same structure,
    `derivative` = dJ(m).dm computed by the tangent-linear or adjoint model. Returns the remainders
    |J(m + eps dm) - J(m) - eps derivative| for eps = eps0 / 2^i and the observed rates
    log2(r_i / r_{i+1}); rate 2 means the derivative is right.

    A remainder is at round-off when it is at most `roundoff_factor` * u * max(|J(m)|,
    |J(m + eps dm)|, |eps derivative|, `scale`), u the unit round-off of the least precise dtype
    of m and dm. A linear J (e.g. <A x, y> for a linear operator A) has a remainder of exactly
    zero, so every remainder is at round-off, the rates are reported as NaN and `result.exact` is
    True. When J sums terms that cancel, pass their magnitude as `scale` (e.g. sum_i |a_i b_i|
    for J = <a, b>; `tangent_taylor_test` does), else round-off may be taken for a remainder.
    """
    ms, dms = _as_tuple(m), _as_tuple(dm)
    unit = _machine_epsilon(ms + dms)
    j0 = functional(*ms)
    epsilons, remainders, roundoff = [], [], []
    for i in range(steps):
        eps = eps0 / 2**i
        jm = functional(*(a + eps * d for a, d in zip(ms, dms)))
        epsilons.append(eps)
        remainders.append(float(abs(jm - j0 - eps * derivative)))
        size = max(abs(float(j0)), abs(float(jm)), abs(eps * float(derivative)), scale or 0.0)
        roundoff.append(roundoff_factor * unit * size)
    at_roundoff = [r <= level for r, level in zip(remainders, roundoff)]
    with np.errstate(divide="ignore", invalid="ignore"):
        observed = [float(np.log2(np.float64(remainders[i]) / remainders[i + 1]))
                    for i in range(steps - 1)]
    rates = [math.nan if at_roundoff[i] or at_roundoff[i + 1] else observed[i]
             for i in range(steps - 1)]
    if at_roundoff and all(at_roundoff):
        note = ("every remainder is at round-off (<= " + f"{max(roundoff):.1e}" + "): J is linear "
                "along dm, whose Taylor remainder is zero, and the derivative is exact to working "
                "precision; the observed rates are round-off noise, not convergence orders")
    elif any(at_roundoff):
        note = (f"{sum(at_roundoff)} of {steps} remainders are at round-off; rates involving them "
                "are NaN and not counted in min_rate")
    else:
        note = ""
    return TaylorResult(epsilons, remainders, rates, roundoff, at_roundoff, observed, note)


def tangent_taylor_test(forward: Callable, tangent: Callable, x: Sequence, dx: Sequence, y,
                        **kwargs) -> TaylorResult:
    """Taylor test of a tangent-linear model through the functional J(x) = <forward(x), y>.

    The round-off level of the remainders is taken from sum_i |forward(x)_i y_i| (the size of the
    terms of J before they cancel); a linear `forward` gives `result.exact`."""
    x, dx, y = _as_tuple(x), _as_tuple(dx), _as_tuple(y)
    derivative = inner(_as_tuple(tangent(*x, *dx)), y)
    kwargs.setdefault("scale", inner(_as_tuple(forward(*x)), y, absolute=True))
    return taylor_test(lambda *xs: inner(_as_tuple(forward(*xs)), y), x, dx, derivative, **kwargs)
