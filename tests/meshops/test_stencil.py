"""meshops.device.stencil: the sparse-matrix gather sums each row in slot order (bitwise equal to a loop
over the slots), scatter_sum is its transpose, and matrices are cached per table while it lives."""
import gc

import numpy as np
import pytest

from meshops.device import stencil


def _slot_loop(idx, count, coef, x):
    out = np.zeros((idx.shape[0],) + x.shape[1:], x.dtype)
    for j in range(idx.shape[1]):
        valid = (idx[:, j] >= 0) & (j < count)
        w = np.where(valid, coef[:, j], 0).astype(x.dtype)
        out += (w[:, None] if x.ndim == 2 else w) * x[np.where(valid, idx[:, j], 0)]
    return out


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("nlev", [None, 5])
def test_gather_is_the_slot_loop_and_scatter_its_transpose(ico_mesh, rng, dtype, nlev):
    m = ico_mesh
    idx, count = m.edgesOnCell, m.nEdgesOnCell
    coef = rng.standard_normal(idx.shape).astype(dtype)
    shape = (lambda n: (n,)) if nlev is None else (lambda n: (n, nlev))
    x = rng.standard_normal(shape(m.nEdges)).astype(dtype)
    y = rng.standard_normal(shape(m.nCells)).astype(dtype)
    gathered = stencil.gather_sum(idx, count, coef, x)
    assert gathered.dtype == dtype and np.array_equal(gathered, _slot_loop(idx, count, coef, x))
    scattered = stencil.scatter_sum(idx, count, coef, y, m.nEdges)
    assert scattered.dtype == dtype
    lhs, rhs = float(np.vdot(gathered, y)), float(np.vdot(x, scattered))
    assert abs(lhs - rhs) <= 1e-5 * float(np.vdot(abs(gathered), abs(y)))


def test_matrices_are_cached_per_table_and_view_and_freed_with_them(ico_mesh, rng):
    m = ico_mesh
    coef = rng.standard_normal(m.edgesOnCell.shape + (3,))
    first = stencil.stencil_matrix(m.edgesOnCell, None, coef[:, :, 1], m.nEdges)
    assert stencil.stencil_matrix(m.edgesOnCell, None, coef[:, :, 1], m.nEdges) is first
    other = stencil.stencil_matrix(m.edgesOnCell, None, coef[:, :, 2], m.nEdges)
    assert other is not first
    valid = m.edgesOnCell >= 0
    assert np.array_equal(other.toarray()[np.nonzero(valid)[0], m.edgesOnCell[valid]], coef[:, :, 2][valid])
    cached = len(stencil._MATRICES)
    del coef
    gc.collect()
    assert len(stencil._MATRICES) == cached - 2
