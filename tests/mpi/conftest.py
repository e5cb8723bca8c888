"""Tests run by `mpiexec -n N python -m pytest tests/mpi` (see tests/test_mpi_ranks.py).

They are collected only when MESHOPS_MPI_TESTS=1 (the launcher sets it), so the plain pytest run
skips this directory. Every rank runs every test; a test failing on any rank prints the rank and
traceback and aborts the whole job (no rank is left waiting in a collective).
"""
import os
import pathlib

import numpy as np
import pytest

ENABLED = os.environ.get("MESHOPS_MPI_TESTS") == "1"
HERE = pathlib.Path(__file__).parent
SIZES = {"cell": "nCells", "edge": "nEdges", "vertex": "nVertices"}


def pytest_ignore_collect(collection_path, config):
    path = pathlib.Path(collection_path)
    if not ENABLED and path != HERE / "conftest.py" and HERE in (path, *path.parents):
        return True
    return None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    outcome = yield
    if outcome.excinfo is None or not ENABLED:
        return
    from meshops.parallel.comm import abort, report_exception, world

    comm = world()
    if comm.Get_size() > 1 and not isinstance(outcome.excinfo[1], pytest.skip.Exception):
        exc_type, exc, tb = outcome.excinfo
        report_exception(comm, exc_type, exc, tb)
        import sys

        sys.stderr.write(f"[rank {comm.Get_rank()}] test {item.nodeid} failed\n")
        abort(comm)


@pytest.fixture(scope="session")
def comm():
    from meshops.parallel.comm import world

    return world()


@pytest.fixture
def rng(comm, request):
    """A generator with the same fresh seed on every rank (broadcast from rank 0)."""
    seed = comm.bcast(int(np.random.SeedSequence().entropy % 2**32) if comm.Get_rank() == 0 else None)
    print(f"random seed: {seed}")
    return np.random.default_rng(seed)


@pytest.fixture(scope="session")
def mpas_mesh(x1_162_path):
    from grids.mesh import EARTH_RADIUS
    from grids.mpas_io import read_mesh

    return read_mesh(x1_162_path, sphere_radius=EARTH_RADIUS)


@pytest.fixture(scope="session")
def ico_mesh():
    icosahedral = pytest.importorskip("grids.icosahedral")
    return icosahedral.generate_icosahedral(3)


@pytest.fixture(params=["mpas_mesh", "ico_mesh"])
def mesh(request):
    return request.getfixturevalue(request.param)


_DECOMPOSITIONS = {}


def decomposition(comm, mesh, method="metis", halo_depth=2):
    """This rank's Decomposition of `mesh` (partition computed on rank 0, mesh distributed)."""
    from grids.decompose import distribute_mesh

    # The entry holds the mesh, so that its id is not reused by another mesh on one rank and not
    # on another (a rank that took the other mesh's decomposition would skip this collective).
    key = (id(mesh), method, halo_depth)
    if key not in _DECOMPOSITIONS:
        root_mesh = mesh if comm.Get_rank() == 0 else None
        _DECOMPOSITIONS[key] = (mesh, distribute_mesh(comm, root_mesh, halo_depth=halo_depth,
                                                      method=method))
    return _DECOMPOSITIONS[key][1]


def global_field(mesh, location, rng, nlev=None, dtype=np.float64):
    n = getattr(mesh, SIZES[location])
    shape = (n,) if nlev is None else (n, nlev)
    return rng.standard_normal(shape).astype(dtype)


def global_columns(mesh, locations, rng, columns, nlev, spec=None, dtype=np.float64):
    """Fresh global fields at vertical `locations`, the columns at horizontal location `columns`
    with nlev layers: (n, nlev) on layers, (n, nlev + 1) on interfaces, (n,) on columns; the first
    len(spec.domain) made a base state of nonlinear operator `spec` where it is defined
    (`OperatorSpec.sample`: positive pressures)."""
    n = getattr(mesh, SIZES[columns])
    x = [rng.standard_normal({"layer": (n, nlev), "interface": (n, nlev + 1), "column": (n,)}[loc])
         for loc in locations]
    if spec is not None and not spec.linear and spec.sample is not None:
        k = len(spec.domain)
        x[:k] = spec.sample(*x[:k])
    return [a.astype(dtype) for a in x]


def scatter(d, location, field, fill=np.nan):
    """Local copy of a global field: owned rows from it, halo rows `fill` (to be exchanged)."""
    x = np.ascontiguousarray(field[d.local.l2g[location]])
    x[d.n_owned(location):] = fill
    return x


def local_fields(dist, fields, locations) -> tuple:
    """This rank's copies of global `fields` at `locations` on distribution `dist`: owned rows
    from them, NaN in the halo rows (`scatter`)."""
    return tuple(scatter(dist.decomposition, loc, a) for a, loc in zip(fields, locations))


def owned_rows(dist, arrays, locations) -> tuple:
    """The owned rows of this rank's `arrays` at `locations`."""
    return tuple(a[:dist.owned[loc]] for a, loc in zip(arrays, locations))


def skip_nccl_on_shared_gpu(comm, transport):
    """Skip (on every rank alike: the device identities are allgathered) a test of the "nccl"
    transport where ranks share a GPU (more ranks than GPUs): NCCL refuses that."""
    from meshops.parallel.comm import gather_device_identities, shared_devices

    if transport == "nccl" and comm.Get_size() > 1 and shared_devices(gather_device_identities(comm)):
        pytest.skip("ranks share a GPU: NCCL needs one GPU per rank")
