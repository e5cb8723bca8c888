"""Halo exchange under MPI: halo contents, the adjoint's dot-product test, split begin/end."""
import numpy as np
import pytest

from adjoint.verification import dot_product_test
from meshops.parallel.halo import HaloExchange
from meshops.parallel.comm import allreduce_sum

from .conftest import decomposition, global_field, scatter

LOCATIONS = ["cell", "edge", "vertex"]


@pytest.mark.parametrize("halo_depth", [1, 2])
@pytest.mark.parametrize("method", ["metis", "sfc"])
@pytest.mark.parametrize("location", LOCATIONS)
def test_halo_contents_equal_global_field(comm, mesh, rng, location, method, halo_depth):
    d = decomposition(comm, mesh, method, halo_depth)
    halo = HaloExchange(d, comm)
    for nlev, dtype in [(None, np.float64), (4, np.float32)]:
        g = global_field(mesh, location, rng, nlev, dtype)
        x = scatter(d, location, g)
        halo.exchange(x, location)
        assert np.array_equal(x, g[d.local.l2g[location]]), (location, nlev, dtype)


@pytest.mark.parametrize("location", LOCATIONS)
def test_owned_sets_partition_the_mesh(comm, mesh, location):
    d = decomposition(comm, mesh)
    owned = np.asarray(d.local.l2g[location][: d.n_owned(location)])
    counts = np.zeros(getattr(mesh, {"cell": "nCells", "edge": "nEdges",
                                     "vertex": "nVertices"}[location]), np.int64)
    np.add.at(counts, owned, 1)
    counts = comm.allreduce(counts) if comm.Get_size() > 1 else counts
    assert (counts == 1).all(), np.flatnonzero(counts != 1)[:5]


@pytest.mark.parametrize("nlev", [None, 3])
@pytest.mark.parametrize("location", LOCATIONS)
def test_adjoint_exchange_dot_product(comm, mesh, rng, location, nlev):
    """<E x, y> over all local rows = <x, E^T y> over owned rows, both summed over ranks."""
    d = decomposition(comm, mesh)
    halo = HaloExchange(d, comm)
    n_owned, n_local = d.n_owned(location), d.n_local(location)
    tail = () if nlev is None else (nlev,)
    x = rng.standard_normal((n_local,) + tail) * (1 + comm.Get_rank())
    y = rng.standard_normal((n_local,) + tail) * (2 + comm.Get_rank())

    def forward(x):
        x = x.copy()
        x[n_owned:] = rng.standard_normal(x[n_owned:].shape)   # halo input rows are not read
        return halo.exchange(x, location)

    def adjoint(y):
        out = halo.exchange_adjoint(y.copy(), location)
        assert not out[n_owned:].any()
        return out

    def restrict(arrays, side):
        return arrays if side == "range" else tuple(a[:n_owned] for a in arrays)

    result = dot_product_test(forward, adjoint, x, y, restrict=restrict,
                              allreduce=allreduce_sum(comm))
    assert result.relative_error <= 1e-12, result


def test_adjoint_exchange_adds_halo_copies_into_owners(comm, mesh, rng):
    """Each owned value gains every halo copy of it held on other ranks (counted here by ones)."""
    d = decomposition(comm, mesh)
    halo = HaloExchange(d, comm)
    for location in LOCATIONS:
        ones = np.ones(d.n_local(location))
        halo.exchange_adjoint(ones, location)
        gids = d.local.l2g[location]
        copies = np.zeros(getattr(mesh, {"cell": "nCells", "edge": "nEdges",
                                         "vertex": "nVertices"}[location]))
        np.add.at(copies, gids, 1.0)
        copies = comm.allreduce(copies) if comm.Get_size() > 1 else copies
        assert np.array_equal(ones[: d.n_owned(location)], copies[gids[: d.n_owned(location)]])


def test_split_begin_end_with_several_fields_in_flight(comm, mesh, rng):
    d = decomposition(comm, mesh)
    halo = HaloExchange(d, comm)
    fields = [("cell", global_field(mesh, "cell", rng, 2)), ("edge", global_field(mesh, "edge", rng)),
              ("cell", global_field(mesh, "cell", rng, 2)), ("vertex", global_field(mesh, "vertex", rng))]
    local = [(loc, scatter(d, loc, g)) for loc, g in fields]
    pending = [halo.begin(x, loc) for loc, x in local]
    owned_sums = [x[: d.n_owned(loc)].sum() for loc, x in local]   # work on owned rows meanwhile
    for p in reversed(pending):
        halo.end(p)
    for (loc, g), (_, x), s in zip(fields, local, owned_sums):
        assert np.array_equal(x, g[d.local.l2g[loc]])
        assert s == g[d.local.l2g[loc][: d.n_owned(loc)]].sum()
    with pytest.raises(RuntimeError, match="end\\(\\) called twice"):
        halo.end(pending[0])


def test_bad_fields_are_rejected(comm, mesh):
    d = decomposition(comm, mesh)
    halo = HaloExchange(d, comm)
    n = d.n_local("edge")
    with pytest.raises(ValueError, match="edge field of shape"):
        halo.exchange(np.zeros(n + 1), "edge")
    with pytest.raises(TypeError, match="float32 or float64"):
        halo.exchange(np.zeros(n, dtype=np.int32), "edge")
    with pytest.raises(ValueError, match="location 'face'"):
        halo.exchange(np.zeros(n), "face")
    with pytest.raises(ValueError, match="C-contiguous"):
        halo.exchange(np.zeros((3, n)).T, "edge")
    with pytest.raises(ValueError, match="MESHOPS_HALO_TRANSPORT"):
        HaloExchange(d, comm, transport="carrier-pigeon")
