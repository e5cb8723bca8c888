import pytest


@pytest.fixture(scope="session")
def mesh(x1_162_path):
    """The real MPAS x1.162 mesh (162 cells, 480 edges, 320 vertices) at the Earth's radius."""
    from grids.mesh import EARTH_RADIUS
    from grids.mpas_io import read_mesh

    return read_mesh(x1_162_path, sphere_radius=EARTH_RADIUS)


SIZES = {"cell": "nCells", "edge": "nEdges", "vertex": "nVertices"}


def field(mesh, location, rng, nlev=None, dtype="float64"):
    n = getattr(mesh, SIZES[location])
    return rng.standard_normal((n,) if nlev is None else (n, nlev)).astype(dtype)
