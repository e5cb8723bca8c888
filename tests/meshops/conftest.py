import numpy as np
import pytest

from grids.mesh import EARTH_RADIUS
from meshops.modes import ADJOINT_MODES
from meshops.registry import VERTICAL

SIZES = {"cell": "nCells", "edge": "nEdges", "vertex": "nVertices"}


@pytest.fixture(scope="session")
def mpas_mesh(x1_162_path):
    """The real MPAS x1.162 mesh scaled to the Earth's radius."""
    from grids.mpas_io import read_mesh

    return read_mesh(x1_162_path, sphere_radius=EARTH_RADIUS)


@pytest.fixture(scope="session")
def ico_mesh():
    """A Morton-ordered icosahedral level-3 mesh (642 cells) with a few Lloyd iterations."""
    from grids.icosahedral import generate_icosahedral

    return generate_icosahedral(3, lloyd_iterations=5)


@pytest.fixture(params=["mpas_mesh", "ico_mesh"])
def mesh(request):
    return request.getfixturevalue(request.param)


def random_field(mesh, location, rng, *, nlev=None, dtype=np.float64, xp=np, columns="cell"):
    """A fresh standard-normal field at `location` of shape (n,) or (n, nlev); at a vertical
    location a field of the columns at `columns` with nlev layers (one for nlev None): (n, nlev)
    on layers, (n, nlev + 1) on interfaces, (n,) on columns."""
    if location in VERTICAL:
        n, N = getattr(mesh, SIZES[columns]), 1 if nlev is None else nlev
        shape = {"layer": (n, N), "interface": (n, N + 1), "column": (n,)}[location]
    else:
        n = getattr(mesh, SIZES[location])
        shape = (n,) if nlev is None else (n, nlev)
    return xp.asarray(rng.standard_normal(shape).astype(dtype))


def base_state(spec, x):
    """Fields x of standard-normal entries made a base state where nonlinear operator `spec` is
    defined (`OperatorSpec.sample`: positive pressures); x itself when any state is."""
    return tuple(x) if spec.linear or spec.sample is None else tuple(spec.sample(*x))


def _as_tuple(r):
    return r if isinstance(r, tuple) else (r,)


def backend_pairs(spec, mesh, device, x, y, *, base=(), dx=(), modes=ADJOINT_MODES):
    """(NumPy array, device array) for each output of: the forward at x, the tangent about `base` in
    direction `dx` (nonlinear operators), the adjoint of y (about `base`) in each of `modes`.
    `device` takes a tuple of NumPy arrays to the backend under test (CuPy, or host-run kernels)."""
    runs = [(lambda *a: spec.forward(mesh, *a), x)]
    if not spec.linear:
        runs.append((lambda *a: spec.tangent(mesh, *a), base + dx))
    runs += [(lambda *a, mode=mode: spec.adjoint(mesh, *a, mode=mode), base + y) for mode in modes]
    return [pair for run, args in runs
            for pair in zip(_as_tuple(run(*args)), _as_tuple(run(*device(args))), strict=True)]
