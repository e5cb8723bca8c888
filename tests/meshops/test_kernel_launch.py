"""Launch decisions of `meshops.kernels.Family`, checked through the host-compiled kernels: the lane
width and the level count a module is compiled for (and the kernels that take it at run time at
one lane per row), and the grid size."""
import numpy as np
import pytest

import meshops
import meshops.kernels as kernels
from meshops.kernels import GATHER, _grid_blocks

from .conftest import random_field
from .host_harness import host, host_fixtures

host_kernels, on_host = host_fixtures("divergence", "reconstruct", "tangential")


@pytest.fixture
def compiled(on_host, monkeypatch):
    """[(family, kernel, lane width, lanes per row compiled in)] of every launch, in order."""
    seen, routed = [], kernels.Family.kernel

    def kernel(self, name, dtype, width, lanes):
        seen.append((self.family, name, width, lanes))
        return routed(self, name, dtype, width, lanes)

    monkeypatch.setattr(kernels.Family, "kernel", kernel)
    return seen


@pytest.mark.parametrize("nlev, width, lanes", [(None, 1, 1), (3, 1, 3), (4, 2, 2), (32, 2, 16)])
def test_level_count_is_compiled_in(ico_mesh, rng, compiled, nlev, width, lanes):
    F = random_field(ico_mesh, "edge", rng, nlev=nlev)
    meshops.div_e2c(ico_mesh, host(F))
    assert compiled == [("divergence", GATHER, width, lanes)]


@pytest.mark.parametrize("nlev, expected", [
    (None, {"reconstruct_xyz_e2c": 0, "reconstruct_zm_e2c": 1, GATHER: 0}),  # one lane per row
    (2, {"reconstruct_xyz_e2c": 0, "reconstruct_zm_e2c": 1, GATHER: 0}),     # one 2-level lane
    (3, {"reconstruct_xyz_e2c": 3, "reconstruct_zm_e2c": 3, GATHER: 3}),
])
def test_run_time_level_count_at_one_lane_per_row(ico_mesh, rng, compiled, nlev, expected):
    """reconstruct_xyz_e2c (listed in runtime_nlev) and the slot-major gathers of tangential_e2e
    take nlev at run time when a row is one lane; reconstruct_zm_e2c does not."""
    u = host(random_field(ico_mesh, "edge", rng, nlev=nlev))
    meshops.reconstruct_e2c(ico_mesh, u)
    meshops.reconstruct_zonal_meridional_e2c(ico_mesh, u)
    meshops.tangential_e2e(ico_mesh, u)
    assert {name: lanes for _, name, _, lanes in compiled} == expected


def test_grid_blocks(monkeypatch):
    """4x the resident blocks at one lane per row, 32x with several, never more than the work."""
    monkeypatch.setattr(kernels, "_resident_blocks", lambda device, block_size: 100)
    block = kernels.BLOCK_SIZE
    assert _grid_blocks(10**9, 1, 0) == 400
    assert _grid_blocks(10**9, 16, 0) == 3200
    assert _grid_blocks(1000 * block + 1, 16, 0) == 1001
    assert _grid_blocks(1, 1, 0) == 1
