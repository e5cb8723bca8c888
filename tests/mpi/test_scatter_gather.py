"""Global <-> local fields under MPI: scatter a global field from the root to every rank's local
array (every local row equal to the global row), gather owned rows back to global order on the
root (None elsewhere); every location, level count and dtype; bad inputs name what is wrong."""
import numpy as np
import pytest

from meshops.parallel.scatter_gather import gather_field, scatter_field

from .conftest import SIZES, decomposition

LOCATIONS = ["cell", "edge", "vertex"]


def _global(mesh, location, rng, nlev, dtype):
    shape = (getattr(mesh, SIZES[location]),) + (() if nlev is None else (nlev,))
    if np.dtype(dtype).kind == "f":
        return rng.standard_normal(shape).astype(dtype)
    return rng.integers(-1000, 1000, shape).astype(dtype)


@pytest.mark.parametrize("nlev, dtype", [(None, np.float64), (3, np.float32), (2, np.int64)])
@pytest.mark.parametrize("location", LOCATIONS)
def test_scatter_then_gather_round_trip(comm, mesh, rng, location, nlev, dtype):
    d = decomposition(comm, mesh)
    g = _global(mesh, location, rng, nlev, dtype)
    root = comm.Get_size() - 1                       # any root
    x = scatter_field(d, comm, g if comm.Get_rank() == root else None, location, root=root)
    assert x.dtype == g.dtype and x.flags.c_contiguous
    assert np.array_equal(x, g[d.local.l2g[location]]), location      # halo rows too
    x[d.n_owned(location):] = 0 if np.dtype(dtype).kind != "f" else np.nan   # not read
    back = gather_field(d, comm, x, location, root=root)
    if comm.Get_rank() == root:
        assert back.dtype == g.dtype
        assert np.array_equal(back, g), location
    else:
        assert back is None


def test_gather_of_a_local_result_equals_the_global_result(comm, mesh, rng):
    from meshops import div_e2c

    d = decomposition(comm, mesh)
    F = rng.standard_normal((mesh.nEdges, 2))
    local = scatter_field(d, comm, F if comm.Get_rank() == 0 else None, "edge")
    out = gather_field(d, comm, div_e2c(d.mesh, local), "cell")
    if comm.Get_rank() == 0:
        assert np.array_equal(out, div_e2c(mesh, F))


def test_bad_fields_are_rejected_on_every_rank(comm, mesh):
    d = decomposition(comm, mesh)
    root_field = np.zeros(mesh.nCells + 1) if comm.Get_rank() == 0 else None
    with pytest.raises(ValueError, match="expected a global cell field of shape"):
        scatter_field(d, comm, root_field, "cell")
    with pytest.raises(ValueError, match="location 'face'"):
        scatter_field(d, comm, None, "face")
    with pytest.raises(ValueError, match="expected a local edge field of shape"):
        gather_field(d, comm, np.zeros(d.n_local("cell")), "edge")
    if comm.Get_size() > 1:
        dtype = np.float32 if comm.Get_rank() == 1 else np.float64
        with pytest.raises(ValueError, match="same level count and dtype on every rank"):
            gather_field(d, comm, np.zeros(d.n_local("edge"), dtype), "edge")
