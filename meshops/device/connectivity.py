"""Padded connectivity for the linear stencil operators: masking, transposition and slot maps.

A stencil `idx` of shape (n_out, K) lists, for each output entity, the input entities it reads
(-1 for a missing neighbour or a pad). The gather adjoints read the transposed stencil: for each
input entity t, the (row, slot) pairs with idx[row, slot] == t, in increasing (row, slot) order,
so their summation order is fixed. Everything here is vectorised and runs once per mesh (the
tables of `meshops.device.tables`); the tables are int32 (`INDEX`, what the backends hold), so
no int64 copy of a mesh-sized table is made.
"""
from __future__ import annotations

import numpy as np
import scipy.sparse

#: The dtype of connectivity tables (entity indices, -1 pads), as the backends hold them.
INDEX = np.dtype(np.int32)
_INDEX_MAX = np.iinfo(INDEX).max


def as_index(idx, name: str = "idx") -> np.ndarray:
    """`idx` as an INDEX array (no copy when it is one); ValueError naming `name` for a value
    that does not fit."""
    idx = np.asarray(idx)
    if idx.dtype == INDEX:
        return idx
    lo, hi = np.iinfo(INDEX).min, _INDEX_MAX
    if idx.size and (idx.max() > hi or idx.min() < lo):
        i = tuple(int(b) for b in np.argwhere((idx > hi) | (idx < lo))[0])
        raise ValueError(f"mesh field {name}{list(i)} = {idx[i]}, expected an index in [-1, {hi}]")
    return idx.astype(INDEX)


def masked(idx, count=None, name: str = "idx") -> np.ndarray:
    """Copy of `idx` (int32) with -1 in every slot j >= count[row] (MPAS pads may repeat entries)."""
    idx = np.asarray(idx)
    if count is None:
        out = as_index(idx, name)
        return out.copy() if out is idx else out
    inside = np.arange(idx.shape[1])[None, :] < np.asarray(count)[:, None]
    return as_index(np.where(inside, idx, idx.dtype.type(-1)), name)


def _check_range(idx, n_in: int, name: str) -> None:
    if not idx.size or idx.max() < n_in:
        return
    bad = np.argwhere(idx >= n_in)
    i = tuple(int(b) for b in bad[0])
    raise ValueError(f"mesh field {name}{list(i)} = {idx[i]}, expected an index in [0, {n_in}) "
                     "or -1 for a missing neighbour")


def transpose(idx, n_in: int, name: str, row_keys=None) -> tuple[np.ndarray, np.ndarray]:
    """Transposed stencil of a masked `idx` (n_out, K) over `n_in` input entities.

    Returns (rows, slots), both int32 (n_in, W) with W the largest number of entries naming one
    input: rows[t, m], slots[t, m] is the m-th pair with idx[rows, slots] == t in increasing
    (row, slot) order, or in increasing (row_keys[row], slot) order when `row_keys` (n_out,
    distinct) is given; -1 pads. With the rows' global ids as keys, the order (and so every
    gather's summation order) is the same on a rank's local mesh as on the whole mesh; keys
    already increasing (the whole mesh) leave the rows in place. `name` (the MPAS field) is used
    in the error for an index >= n_in.
    The entries form a CSR matrix (row-major, so in (row, slot) order) whose values are their
    slots, pads going to a dummy input n_in; SciPy's CSR -> CSC conversion is a stable counting
    sort (O(entries), int32 indices), which lists each input's rows and slots in that order.
    """
    idx = as_index(idx, name)
    _check_range(idx, n_in, name)
    n_out, K = idx.shape
    if K == 0:
        return np.full((n_in, 0), -1, INDEX), np.full((n_in, 0), -1, INDEX)
    order = None
    if row_keys is not None:
        keys = np.asarray(row_keys)
        if not (keys[1:] > keys[:-1]).all():
            order = np.argsort(keys, kind="stable").astype(INDEX)
    ordered = (idx if order is None else idx[order]).ravel()
    if ordered.size and ordered.min() < 0:
        ordered = np.where(ordered < 0, INDEX.type(n_in), ordered)
    flat = INDEX if n_out * K <= _INDEX_MAX else np.dtype(np.int64)
    indptr = np.arange(0, n_out * K + 1, K, dtype=flat)
    slot = np.tile(np.arange(K, dtype=np.int8 if K <= np.iinfo(np.int8).max else INDEX), n_out)
    by_input = scipy.sparse.csr_array((slot, ordered, indptr), shape=(n_out, n_in + 1)).tocsc()
    counts = np.diff(by_input.indptr[:n_in + 1])
    n = int(by_input.indptr[n_in])
    inside = np.arange(int(counts.max(initial=0)))[None, :] < counts[:, None]
    rows = np.full(inside.shape, -1, dtype=INDEX)
    slots = np.full(inside.shape, -1, dtype=INDEX)
    rows[inside] = by_input.indices[:n] if order is None else order[by_input.indices[:n]]
    slots[inside] = by_input.data[:n]
    return rows, slots


def take(table, rows, slots) -> np.ndarray:
    """table[rows, slots] where rows >= 0, else 0 (coefficients of a transposed stencil)."""
    valid = rows >= 0
    return np.where(valid, np.asarray(table)[np.where(valid, rows, 0), np.where(valid, slots, 0)], 0)


def slot_map(outer, inner, name_outer: str, name_inner: str, block: int = 1 << 17) -> np.ndarray:
    """For each (r, j) with t = outer[r, j] >= 0, the slot i with inner[t, i] == r; -1 elsewhere.

    E.g. outer = verticesOnCell (masked), inner = cellsOnVertex: the slot of cell c in the list of
    its vertex verticesOnCell[c, j] (where the kite of c at that vertex is stored). Raises
    ValueError naming both fields when a neighbour does not list r back. Rows are compared in
    blocks of `block`, so the temporaries stay at block x K x K_inner booleans.
    """
    outer = np.asarray(outer)
    inner = np.asarray(inner)
    _check_range(outer, inner.shape[0], name_outer)
    out = np.empty(outer.shape, dtype=INDEX)
    for lo in range(0, outer.shape[0], block):
        part = outer[lo:lo + block]
        valid = part >= 0
        rows = np.arange(lo, lo + part.shape[0], dtype=inner.dtype)
        hit = inner[np.where(valid, part, 0)] == rows[:, None, None]      # (b, K, K_inner)
        slot = hit.argmax(axis=-1)
        found = np.take_along_axis(hit, slot[..., None], axis=-1)[..., 0]
        bad = np.argwhere(valid & ~found)
        if bad.size:
            r, j = (int(b) for b in bad[0])
            r += lo
            raise ValueError(f"mesh fields {name_outer}[{r}, {j}] = {outer[r, j]} but {r} is not in "
                             f"{name_inner}[{outer[r, j]}] = {inner[outer[r, j]].tolist()}; expected "
                             "mutually consistent connectivity")
        out[lo:lo + block] = np.where(valid, slot, -1)
    return out
