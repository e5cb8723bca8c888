import numpy as np
import pytest

from grids.mesh import EARTH_RADIUS

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


def random_field(mesh, location, rng, *, nlev=None, dtype=np.float64, xp=np):
    """A fresh standard-normal field at `location` of shape (n,) or (n, nlev)."""
    n = getattr(mesh, SIZES[location])
    shape = (n,) if nlev is None else (n, nlev)
    return xp.asarray(rng.standard_normal(shape).astype(dtype))
