"""Verification of adjoints and gradients, as functions users can call on their own operators.

- `dot_product_test`: |<A x, y> - <x, A^T y>| / max(|<A x, y>|, tiny) for a linear map A given as
  forward and adjoint callables on (tuples of) arrays. By default y takes the signs of A x entry by
  entry (`align_signs`), so every term of <A x, y> is >= 0 and the sum cannot cancel: with y as
  drawn, a cancelled <A x, y> inflates the relative mismatch by orders of magnitude in a small
  fraction of draws (then even a float64 adjoint exact to round-off exceeds 1e-12). The mismatch
  relative to sum_i |(A x)_i y_i| is returned as well.
- `taylor_test`: the first-order remainder |J(m + eps dm) - J(m) - eps dJ.dm| over eps = eps0 / 2^i,
  which falls at rate 2 when the gradient (or tangent) is right; the rates are returned, not just a verdict.

Inner products are plain Euclidean sums over every entry given; a caller on a local (per-rank) mesh
passes owned entries only and an `allreduce` to sum across ranks.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np


def _as_tuple(x):
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)


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
                     align: bool = True) -> DotProductResult:
    """Compare <forward(x), y> with <x, adjoint(y)>.

    `x` and `y` are arrays or tuples of arrays (fresh random inputs); with `align` (default) the
    adjoint is applied to `align_signs(y, forward(x))` instead of y, so <A x, y> cannot cancel.
    `restrict(arrays, side)` may select the owned entries before the inner products (side is
    "domain" or "range"); `allreduce` sums a float over ranks.
    """
    ax = _as_tuple(forward(*_as_tuple(x)))
    xs, ys = _as_tuple(x), _as_tuple(y)
    if align:
        ys = align_signs(ys, ax)
    aty = _as_tuple(adjoint(*ys))
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
    epsilons: list[float]
    remainders: list[float]
    rates: list[float]

    @property
    def min_rate(self) -> float:
        return min(self.rates)


def taylor_test(functional: Callable, m, dm, derivative: float, *, eps0: float = 1e-2,
                steps: int = 5) -> TaylorResult:
    """Taylor remainders of a scalar functional J about m in direction dm.

    `functional(m) -> float`, `m` and `dm` arrays or tuples of arrays of the same structure,
    `derivative` = dJ(m).dm computed by the tangent-linear or adjoint model. Returns the remainders
    |J(m + eps dm) - J(m) - eps derivative| for eps = eps0 / 2^i and the observed rates
    log2(r_i / r_{i+1}); rate 2 means the derivative is right.
    """
    ms, dms = _as_tuple(m), _as_tuple(dm)
    j0 = functional(*ms)
    epsilons, remainders = [], []
    for i in range(steps):
        eps = eps0 / 2**i
        jm = functional(*(a + eps * d for a, d in zip(ms, dms)))
        epsilons.append(eps)
        remainders.append(abs(jm - j0 - eps * derivative))
    rates = [float(np.log2(remainders[i] / remainders[i + 1])) for i in range(steps - 1)]
    return TaylorResult(epsilons, remainders, rates)


def tangent_taylor_test(forward: Callable, tangent: Callable, x: Sequence, dx: Sequence, y,
                        **kwargs) -> TaylorResult:
    """Taylor test of a tangent-linear model through the functional J(x) = <forward(x), y>."""
    x, dx = _as_tuple(x), _as_tuple(dx)
    derivative = inner(_as_tuple(tangent(*x, *dx)), _as_tuple(y))
    return taylor_test(lambda *xs: inner(_as_tuple(forward(*xs)), _as_tuple(y)), x, dx,
                       derivative, **kwargs)
