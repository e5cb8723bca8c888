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
