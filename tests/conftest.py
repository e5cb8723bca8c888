import pathlib

import pytest

DATA = pathlib.Path(__file__).parent / "data"


@pytest.fixture(scope="session")
def x1_162_path():
    """The real MPAS mesh x1.162.grid.nc (unit sphere, written by MPAS's mesh converter)."""
    return DATA / "x1.162.grid.nc"
