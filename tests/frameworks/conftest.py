import numpy as np
import pytest

from meshops.device.tables import SIZE_OF as SIZES


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


def fields(mesh, locations, rng, nlev=2, dtype=np.float64):
    """Fresh standard-normal fields at `locations`, shape (n, nlev) (or (n,) for nlev None)."""
    shape = (lambda n: (n,)) if nlev is None else (lambda n: (n, nlev))
    return tuple(rng.standard_normal(shape(getattr(mesh, SIZES[loc]))).astype(dtype) for loc in locations)


def planned_maps(spec, mesh, rng, device: int, nlevs):
    """For every map of `spec`, in float32 and float64, with and without levels (`nlevs`): asserts
    the map has a launch plan on CUDA device `device` (deterministic mode), and yields (what, its
    fresh inputs, the CuPy path's outputs on the host)."""
    import cupy

    from meshops.autodiff import compute, maps
    from meshops.device import plans

    for kind, (ins, _) in maps(spec).items():
        for dtype in (np.float32, np.float64):
            for nlev in nlevs:
                what = (kind, np.dtype(dtype).name, nlev)
                x = fields(mesh, ins, rng, nlev, dtype)
                assert plans.plan(spec, kind, mesh, "deterministic", dtype, x[0].shape[1:], device) is not None, what
                want = [cupy.asnumpy(a) for a in compute(spec, kind, mesh, [cupy.asarray(a) for a in x],
                                                          "deterministic")]
                yield what, x, want
