"""NumPy building blocks shared by the operator references: padded-stencil gather and scatter.

A stencil is an index array `idx` of shape (n_out, K) (-1 for a missing neighbour), an optional
count per row (entries j >= count are ignored) and coefficients `coef` of the same shape:

    gather_sum:  out[i]      = sum_{j < count[i], idx[i,j] >= 0} coef[i,j] * x[idx[i,j]]
    scatter_sum: out[idx[i,j]] += coef[i,j] * y[i]      (its exact transpose)

Both are products with the stencil's sparse matrix A (scipy.sparse CSR, n_out x n_in, the valid
entries of each row in slot order), built once per (idx, count, coef) arrays and cached while they
live: gather_sum = A @ x sums each row in slot order, as a loop over the slots would; scatter_sum =
A.T @ y.
"""
from __future__ import annotations

import weakref

import numpy as np
import scipy.sparse

from meshops.device.kernels import check_rows

_MATRICES: dict = {}


def nlev_of(x) -> int:
    return 1 if x.ndim == 1 else int(x.shape[1])


def _identity(a):
    """(owner, key) of an array: the array that owns its memory (kept as a weak reference) and its
    id with the view's offset, shape and strides (a view such as coef[:, :, d] of a cached table is
    made anew at each call)."""
    if a is None:
        return None, None
    owner = a
    while isinstance(owner.base, np.ndarray):
        owner = owner.base
    offset = a.__array_interface__["data"][0] - owner.__array_interface__["data"][0]
    return owner, (id(owner), offset, a.shape, a.strides, a.dtype.str)


def stencil_matrix(idx, count, coef, n_in: int):
    """The CSR matrix A (idx.shape[0] x n_in) with A[i, idx[i, j]] = coef[i, j] over the valid slots
    (idx >= 0, j < count[i]), entries of a row in slot order. Cached while the arrays live."""
    owners, keys = zip(*(_identity(a) for a in (idx, count, coef)))
    key = keys + (n_in,)
    hit = _MATRICES.get(key)
    if hit is not None and all(ref() is a for ref, a in zip(hit[0], owners)):
        return hit[1]
    valid = idx >= 0
    if count is not None:
        valid &= np.arange(idx.shape[1])[None, :] < np.asarray(count)[:, None]
    # int32 index arrays (those of the tables) when they fit: SciPy then keeps them as they are
    index = np.int32 if max(idx.size, n_in) <= np.iinfo(np.int32).max else np.int64
    indptr = np.zeros(idx.shape[0] + 1, dtype=index)
    np.cumsum(valid.sum(axis=1, dtype=index), out=indptr[1:])
    matrix = scipy.sparse.csr_array((coef[valid], idx[valid].astype(index, copy=False), indptr),
                                    shape=(idx.shape[0], n_in))
    _MATRICES[key] = (tuple(weakref.ref(a) if a is not None else (lambda: None) for a in owners),
                      matrix)
    for a in owners:
        if a is not None:
            weakref.finalize(a, _MATRICES.pop, key, None)
    return matrix


def gather_sum(idx, count, coef, x, rows=None):
    """A @ x; with `rows=(first, last)` only those output rows (A's rows sliced), in an output of
    every row whose other rows are zero."""
    matrix = stencil_matrix(idx, count, coef, x.shape[0])
    if rows is None:
        return np.asarray(matrix @ x, dtype=x.dtype)
    first, last = check_rows(rows, matrix.shape[0])
    out = np.zeros((matrix.shape[0],) + x.shape[1:], dtype=x.dtype)
    out[first:last] = matrix[first:last] @ x
    return out


def scatter_sum(idx, count, coef, y, n_in):
    return np.asarray(stencil_matrix(idx, count, coef, n_in).T @ y, dtype=y.dtype)
