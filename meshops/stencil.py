"""NumPy building blocks shared by the operator references: padded-stencil gather and scatter.

A stencil is an index array `idx` of shape (n_out, K) (-1 for a missing neighbour), an optional
count per row (entries j >= count are ignored) and coefficients `coef` of the same shape:

    gather_sum:  out[i]      = sum_{j < count[i], idx[i,j] >= 0} coef[i,j] * x[idx[i,j]]
    scatter_sum: out[idx[i,j]] += coef[i,j] * y[i]      (its exact transpose)

Loops run over the K stencil slots only; every slot is a vectorised NumPy operation.
"""
from __future__ import annotations

import numpy as np


def nlev_of(x) -> int:
    return 1 if x.ndim == 1 else int(x.shape[1])


def _slot(idx, count, coef, j):
    """Valid rows, safe indices and coefficients of stencil slot j."""
    e = idx[:, j]
    valid = e >= 0
    if count is not None:
        valid &= j < count
    return valid, np.where(valid, e, 0), np.where(valid, coef[:, j], 0)


def gather_sum(idx, count, coef, x):
    out = np.zeros((idx.shape[0],) + x.shape[1:], x.dtype)
    for j in range(idx.shape[1]):
        _, e, w = _slot(idx, count, coef, j)
        out += (w[:, None] * x[e]) if x.ndim == 2 else w * x[e]
    return out


def scatter_sum(idx, count, coef, y, n_in):
    out = np.zeros((n_in,) + y.shape[1:], y.dtype)
    for j in range(idx.shape[1]):
        valid, e, w = _slot(idx, count, coef, j)
        contrib = (w[:, None] * y) if y.ndim == 2 else w * y
        np.add.at(out, e[valid], contrib[valid])
    return out
