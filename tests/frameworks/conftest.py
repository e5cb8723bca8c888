import numpy as np
import pytest

from meshops.autodiff import maps
from meshops.device.tables import SIZE_OF as SIZES
from meshops.registry import VERTICAL


@pytest.fixture(scope="session")
def mesh(x1_162_path):
    """The real MPAS mesh x1.162 scaled to the Earth's radius."""
    from grids.mesh import EARTH_RADIUS
    from grids.mpas_io import read_mesh

    return read_mesh(x1_162_path, sphere_radius=EARTH_RADIUS)


@pytest.fixture(scope="session")
def ico_mesh():
    """A generated icosahedral level-3 mesh (642 cells) with a few Lloyd iterations."""
    from grids.icosahedral import generate_icosahedral

    return generate_icosahedral(3, lloyd_iterations=5)


#: The layers of the fields of a vertical operator where a test asks for no levels (nlev None).
LAYERS = 3


def fields(mesh, locations, rng, nlev=2, dtype=np.float64):
    """Fresh standard-normal fields at `locations`: at a horizontal location of shape (n, nlev) (or
    (n,) for nlev None); at a vertical one, columns of cells with N = nlev layers (LAYERS for None):
    (n, N) on layers, (n, N + 1) on interfaces, (n,) on columns."""
    def shape(loc):
        if loc in VERTICAL:
            n, N = mesh.nCells, LAYERS if nlev is None else nlev
            return {"layer": (n, N), "interface": (n, N + 1), "column": (n,)}[loc]
        n = getattr(mesh, SIZES[loc])
        return (n,) if nlev is None else (n, nlev)
    return tuple(rng.standard_normal(shape(loc)).astype(dtype) for loc in locations)


def map_inputs(spec, kind, mesh, rng, nlev=2, dtype=np.float64):
    """Fresh inputs of map `kind` of `spec` (`fields`), the base state of a nonlinear operator made
    one where it is defined (`OperatorSpec.sample`: positive pressures)."""
    x = fields(mesh, maps(spec)[kind][0], rng, nlev, np.float64)
    n_base = 0 if spec.linear or spec.sample is None else len(spec.domain)
    x = tuple(spec.sample(*x[:n_base])) + x[n_base:] if n_base else x
    return tuple(a.astype(dtype) for a in x)


def fixed_base(spec, kind) -> int:
    """How many leading inputs of map `kind` derivative checks hold fixed: the base state of the
    tangent and adjoint of a nonlinear operator with no second derivatives (not quadratic)."""
    return 0 if spec.linear or spec.quadratic or kind == "forward" else len(spec.domain)


def planned_maps(spec, mesh, rng, device: int, nlevs):
    """For every map of `spec`, in float32 and float64, with and without levels (`nlevs`): asserts
    the map has a launch plan on CUDA device `device` (deterministic mode), and yields (what, its
    fresh inputs, the CuPy path's outputs on the host)."""
    import cupy

    from meshops.autodiff import compute
    from meshops import plans

    for kind in maps(spec):
        for dtype in (np.float32, np.float64):
            for nlev in nlevs:
                what = (kind, np.dtype(dtype).name, nlev)
                x = map_inputs(spec, kind, mesh, rng, nlev, dtype)
                shapes = tuple(a.shape for a in x)
                assert plans.plan(spec, kind, mesh, "deterministic", dtype, shapes, device) is not None, what
                want = [cupy.asnumpy(a) for a in compute(spec, kind, mesh, [cupy.asarray(a) for a in x],
                                                          "deterministic")]
                yield what, x, want
