import os
import pathlib

import numpy as np
import pytest

DATA = pathlib.Path(__file__).parent / "data"


@pytest.fixture(scope="session")
def x1_162_path():
    """The real MPAS mesh x1.162.grid.nc (unit sphere, written by MPAS's mesh converter)."""
    return DATA / "x1.162.grid.nc"


def pytest_collection_modifyitems(config, items):
    from meshops.device.backend import cupy_available

    if cupy_available():
        return
    skip = pytest.mark.skip(reason="needs CuPy and a CUDA device")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def rng(request):
    """A fresh random generator per test: its seed is printed on failure, and
    MESHOPS_TEST_SEED=<seed> replays it."""
    replay = os.environ.get("MESHOPS_TEST_SEED")
    seed = int(replay) if replay else np.random.SeedSequence().entropy % 2**32
    request.node.user_properties.append(("seed", seed))
    print(f"random seed: {seed}")
    return np.random.default_rng(seed)
