"""Launch decisions of `meshops.device.kernels.Family`, checked through the host-compiled kernels: the lane
width and the level count a module is compiled for (and the kernels that take it at run time at
one lane per row), the offset width, and the grid size."""
import types

import numpy as np
import pytest

import meshops
import meshops.device.kernels as kernels
from meshops.device.kernels import GATHER, _grid_blocks
from meshops.device.mesh import for_fields

from .conftest import random_field
from .host_harness import host, host_fixtures

host_kernels, on_host = host_fixtures("curl", "divergence", "gradient", "interpolation",
                                      "kinetic_energy", "pv_flux", "reconstruct", "tangential")


@pytest.fixture
def compiled(on_host, monkeypatch):
    """[(family, kernel, lane width, lanes per row compiled in, 32-bit offsets)] of every launch,
    in order."""
    seen, routed = [], kernels.Family.kernel

    def kernel(self, name, dtype, width, lanes, offset32=False):
        seen.append((self.family, name, width, lanes, offset32))
        return routed(self, name, dtype, width, lanes, offset32)

    monkeypatch.setattr(kernels.Family, "kernel", kernel)
    return seen


@pytest.mark.parametrize("nlev, width, lanes", [(None, 1, 1), (3, 1, 3), (4, 2, 2), (32, 2, 16)])
def test_level_count_is_compiled_in(ico_mesh, rng, compiled, nlev, width, lanes):
    F = random_field(ico_mesh, "edge", rng, nlev=nlev)
    meshops.div_e2c(ico_mesh, host(F))
    assert compiled == [("divergence", GATHER, width, lanes, True)]


@pytest.mark.parametrize("dtype, curl_width, div_width, ke_width", [(np.float64, 4, 2, 2),
                                                                    (np.float32, 8, 8, 8)])
def test_wide_lanes(ico_mesh, rng, compiled, monkeypatch, dtype, curl_width, div_width, ke_width):
    """Gathers of at most WIDE_GATHER_SLOTS slots (curl_e2v: 3; div_e2c: 6, wide in float32 only)
    and ke_e2c's float32 forward run 32-byte lanes, with 32-bit offsets only."""
    u = host(random_field(ico_mesh, "edge", rng, nlev=32, dtype=dtype))
    meshops.curl_e2v(ico_mesh, u)
    meshops.div_e2c(ico_mesh, u)
    meshops.ke_e2c(ico_mesh, u)
    monkeypatch.setattr(kernels, "INT32_MAX", 0)
    meshops.curl_e2v(ico_mesh, u)
    lanes = 16 // np.dtype(dtype).itemsize
    assert [(name, width, offset32) for _, name, width, _, offset32 in compiled] == [
        (GATHER, curl_width, True), (GATHER, div_width, True), ("ke_e2c", ke_width, True),
        (GATHER, lanes, False)]


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
    assert {name: lanes for _, name, _, lanes, _ in compiled} == expected


def test_grid_blocks(monkeypatch):
    """32x the resident blocks with several lanes per row; with one, 4x or enough for at most
    `max_passes` grid-stride passes per thread; never more than the work."""
    monkeypatch.setattr(kernels, "_resident_blocks", lambda device, block_size: 100)
    block = kernels.BLOCK_SIZE
    assert _grid_blocks(10**9, 16, 0) == 3200
    assert _grid_blocks(1000 * block + 1, 16, 0) == 1001
    assert _grid_blocks(1, 1, 0) == 1
    assert _grid_blocks(1000 * block, 1, 0, max_passes=None) == 400
    assert _grid_blocks(1000 * block, 1, 0) == 400                 # 2.5 passes at 4x
    assert _grid_blocks(3000 * block + 1, 1, 0) == 1001            # 7.5 passes at 4x
    assert _grid_blocks(3000 * block + 1, 1, 0, max_passes=None) == 400
    assert _grid_blocks(300 * block, 1, 0) == 300


def test_passes_per_kernel(ico_mesh, rng, on_host, monkeypatch):
    """Every kernel's grid bounds its grid-stride passes but those of the two-point edge
    stencils listed in `unbounded_passes` (grad_2e, mean_2e)."""
    bounds, launch = {}, kernels.Family.launch

    def grid_blocks(n_threads, lanes, device, max_passes):
        bounds[launched[-1]] = max_passes
        return 1

    launched = []

    def tracking_launch(self, name, *args, **kwargs):
        launched.append(name)
        return launch(self, name, *args, **kwargs)

    monkeypatch.setattr(kernels, "_grid_blocks", grid_blocks)
    monkeypatch.setattr(kernels.Family, "launch", tracking_launch)
    m = ico_mesh
    phi, u = host(random_field(m, "cell", rng)), host(random_field(m, "edge", rng))
    meshops.grad_c2e(m, phi)
    meshops.grad_c2e_adj(m, u, mode="deterministic")
    meshops.interp_c2e(m, phi)
    meshops.interp_c2e_adj(m, u, mode="deterministic")
    meshops.flux_div_e2c(m, u, host(random_field(m, "edge", rng)))
    assert bounds == {"grad_2e": None, GATHER: 3, "mean_2e": None, "mean_2e_adj_gather": 3,
                      "flux_div_e2c": 3}


def test_offset_width_rule():
    """32-bit offsets only when every array argument and the logical thread index stay below
    2^31."""
    def array(size):
        return types.SimpleNamespace(ndim=1, size=size)

    limit = kernels.INT32_MAX
    scalars = (np.int32(7), np.int32(1))
    assert kernels.offsets_fit_int32((array(limit), array(10)) + scalars, limit)
    assert not kernels.offsets_fit_int32((array(limit + 1), array(10)) + scalars, 100)
    assert not kernels.offsets_fit_int32((array(10),) + scalars, limit + 1)


def test_offset_width_per_kernel(ico_mesh, rng, compiled):
    """On a small mesh every kernel takes 32-bit offsets but the two-point edge stencils listed in
    `offsets64` (grad_2e, mean_2e); a launch whose arrays would not fit takes 64-bit ones."""
    m = ico_mesh
    phi, u = host(random_field(m, "cell", rng, nlev=4)), host(random_field(m, "edge", rng, nlev=4))
    meshops.grad_c2e(m, phi)
    meshops.interp_c2e(m, phi)
    meshops.interp_c2e_adj(m, u, mode="deterministic")
    meshops.pv_flux_e2e(m, u, host(random_field(m, "edge", rng, nlev=4)))
    assert {name: offset32 for _, name, _, _, offset32 in compiled} == {
        "grad_2e": False, "mean_2e": False, "mean_2e_adj_gather": True, "pv_flux_e2e": True}


@pytest.mark.parametrize("nlev", [None, 4])
def test_64_bit_offsets_give_the_same_bits(ico_mesh, rng, on_host, monkeypatch, nlev):
    """The kernels compiled with 64-bit offsets (launches too large for 32-bit ones) compute the
    same bits as with 32-bit offsets."""
    m = ico_mesh
    u, q, F = (host(random_field(m, "edge", rng, nlev=nlev)) for _ in range(3))
    phi = host(random_field(m, "cell", rng, nlev=nlev))

    def run():
        return [meshops.div_e2c(m, F), meshops.flux_div_e2c(m, F, u), meshops.tangential_e2e(m, u),
                meshops.pv_flux_e2e(m, F, q),
                meshops.pv_flux_e2e_adj(m, F, q, u, mode="deterministic")[0],
                meshops.reconstruct_e2c(m, u)[0],
                meshops.interp_c2e_adj(m, u, mode="deterministic"),
                meshops.grad_c2e_adj(m, u, mode="atomic"), meshops.interp_c2e(m, phi)]

    narrow = run()
    monkeypatch.setattr(kernels, "INT32_MAX", 0)
    wide = run()
    for a, b in zip(narrow, wide):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_numpy_only_tables_stay_on_the_host(ico_mesh, rng, on_host):
    """The per-slot coefficients of the two-point stencils, which only the NumPy path reads (the
    kernels take invLength or multiply by 1/2), are not copied to the device, and every device
    path runs without them."""
    m = ico_mesh.replace()
    phi, u = random_field(m, "cell", rng, nlev=4), random_field(m, "edge", rng, nlev=4)
    for field in (host(phi), phi):
        meshops.grad_c2e(m, field)
        meshops.interp_c2e(m, field)
    for field in (host(u), u):
        for mode in ("atomic", "deterministic"):
            meshops.grad_c2e_adj(m, field, mode=mode)
            meshops.interp_c2e_adj(m, field, mode=mode)
    numpy_only = {"gradCellCoef", "meanCellCoef", "meanCellCoefT"}
    names = {backend: {key.split(" ")[0] for key in for_fields(m, field).tables()}
             for backend, field in (("device", host(phi)), ("numpy", phi))}
    assert numpy_only <= names["numpy"]
    assert not numpy_only & names["device"]
    assert names["device"] == names["numpy"] - numpy_only | {"invDcEdge"}   # grad_2e takes 1/dcEdge
