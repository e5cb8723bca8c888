"""Meshes shared by the grids tests: the real MPAS file x1.162 and a generated icosahedral mesh."""
import pytest


@pytest.fixture(scope="module")
def mpas_mesh(x1_162_path):
    from grids.mpas_io import read_mesh

    return read_mesh(x1_162_path)


@pytest.fixture(scope="module")
def ico_mesh():
    from grids.icosahedral import generate_icosahedral

    return generate_icosahedral(3)


@pytest.fixture(params=["mpas_mesh", "ico_mesh"])
def mesh(request):
    return request.getfixturevalue(request.param)
