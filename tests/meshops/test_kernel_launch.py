"""Launch decisions of `meshops.device.kernels.Launcher` (sm_90's tuning), checked through the host-compiled kernels: the lane
width and the level count a module is compiled for (and the kernels that take it at run time at
one lane per row), the offset width, and the grid size."""
import types

import numpy as np
import pytest

import meshops
import meshops.device.kernels as kernels
from meshops.device.kernels import GATHER, DeviceProperties, Launcher
from meshops.device.mesh import for_fields

from .conftest import random_field
from .host_harness import assert_repeatable, host, host_fixtures

host_kernels, on_host = host_fixtures("curl", "divergence", "gradient", "interpolation",
                                      "kinetic_energy", "pv_flux", "reconstruct", "tangential")


@pytest.fixture
def compiled(on_host):
    """[(family, kernel, lane width, lanes per row compiled in, 32-bit offsets)] of every launch,
    in order."""
    seen = []
    with kernels.observe_launches(
            lambda launch: seen.append((launch.family, launch.kernel, launch.width, launch.lanes,
                                        launch.offset32))):
        yield seen


def offsets64():
    """The current launcher with 32-bit offsets never fitting (as for launches too large)."""
    return kernels.use_launcher(kernels.launcher().replace(offset32_limit=0))


@pytest.mark.parametrize("nlev, width, lanes", [(None, 1, 1), (3, 1, 3), (4, 2, 2), (32, 2, 16)])
def test_level_count_is_compiled_in(ico_mesh, rng, compiled, nlev, width, lanes):
    F = random_field(ico_mesh, "edge", rng, nlev=nlev)
    meshops.div_e2c(ico_mesh, host(F))
    assert compiled == [("divergence", GATHER, width, lanes, True)]


@pytest.mark.parametrize("dtype, curl_width, div_width, ke_width", [(np.float64, 4, 2, 2),
                                                                    (np.float32, 8, 8, 8)])
def test_wide_lanes(ico_mesh, rng, compiled, dtype, curl_width, div_width, ke_width):
    """Gathers of at most WIDE_GATHER_SLOTS slots (curl_e2v: 3; div_e2c: 6, wide in float32 only)
    and ke_e2c's float32 forward run 32-byte lanes, with 32-bit offsets only."""
    u = host(random_field(ico_mesh, "edge", rng, nlev=32, dtype=dtype))
    meshops.curl_e2v(ico_mesh, u)
    meshops.div_e2c(ico_mesh, u)
    meshops.ke_e2c(ico_mesh, u)
    with offsets64():
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
    """reconstruct_xyz_e2c (in sm_90's runtime_nlev) and the slot-major gathers of tangential_e2e
    take nlev at run time when a row is one lane; reconstruct_zm_e2c does not."""
    u = host(random_field(ico_mesh, "edge", rng, nlev=nlev))
    meshops.reconstruct_e2c(ico_mesh, u)
    meshops.reconstruct_zonal_meridional_e2c(ico_mesh, u)
    meshops.tangential_e2e(ico_mesh, u)
    assert {name: lanes for _, name, _, lanes, _ in compiled} == expected


#: A device holding 100 resident blocks of 256 threads.
SMALL_DEVICE = DeviceProperties(index=0, architecture="sm_90", multiprocessors=50, threads_per_sm=512)


def test_grid_blocks():
    """32x the resident blocks with several lanes per row; with one, 4x or enough for at most
    `max_passes` grid-stride passes per thread; never more than the work."""
    grid_blocks = Launcher(device=lambda: SMALL_DEVICE).grid_blocks
    block = kernels.BLOCK_SIZE
    assert grid_blocks(10**9, 16, 3) == 3200
    assert grid_blocks(1000 * block + 1, 16, 3) == 1001
    assert grid_blocks(1, 1, 3) == 1
    assert grid_blocks(1000 * block, 1, None) == 400
    assert grid_blocks(1000 * block, 1, 3) == 400                 # 2.5 passes at 4x
    assert grid_blocks(3000 * block + 1, 1, 3) == 1001            # 7.5 passes at 4x
    assert grid_blocks(3000 * block + 1, 1, None) == 400
    assert grid_blocks(300 * block, 1, 3) == 300


def test_other_architectures_get_the_default_tuning():
    """An unmeasured GPU runs the generic rules: no wide lanes, no per-kernel exceptions."""
    from meshops.device import tuning

    other = Launcher(device=lambda: SMALL_DEVICE._replace(architecture="sm_80"))
    assert other.tuning_of(other.device()) is tuning.DEFAULT
    assert not tuning.DEFAULT.wide_gather_slots and not tuning.DEFAULT.wide_lanes
    assert not tuning.DEFAULT.offsets64 | tuning.DEFAULT.runtime_nlev | tuning.DEFAULT.unbounded_passes


def test_passes_per_kernel(ico_mesh, rng, on_host):
    """Every kernel's grid bounds its grid-stride passes but those of the two-point edge
    stencils in sm_90's `unbounded_passes` (grad_2e, mean_2e)."""
    bounds = {}
    m = ico_mesh
    phi, u = host(random_field(m, "cell", rng)), host(random_field(m, "edge", rng))
    with kernels.observe_launches(lambda launch: bounds.update({launch.kernel: launch.max_passes})):
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
    fit = Launcher().offsets_fit_int32
    assert fit((array(limit), array(10)) + scalars, limit)
    assert not fit((array(limit + 1), array(10)) + scalars, 100)
    assert not fit((array(10),) + scalars, limit + 1)


def test_offset_width_per_kernel(ico_mesh, rng, compiled):
    """On a small mesh every kernel takes 32-bit offsets but the two-point edge stencils in sm_90's
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
def test_64_bit_offsets_give_the_same_bits(ico_mesh, rng, on_host, nlev):
    """The kernels compiled with 64-bit offsets (launches too large for 32-bit ones) compute the
    same bits as with 32-bit offsets."""
    m = ico_mesh
    u, q, F = (host(random_field(m, "edge", rng, nlev=nlev)) for _ in range(3))
    phi = host(random_field(m, "cell", rng, nlev=nlev))

    def run():
        """(results without atomics, results of atomic scatters)"""
        return ([meshops.div_e2c(m, F), meshops.flux_div_e2c(m, F, u), meshops.tangential_e2e(m, u),
                 meshops.pv_flux_e2e(m, F, q),
                 meshops.pv_flux_e2e_adj(m, F, q, u, mode="deterministic")[0],
                 meshops.reconstruct_e2c(m, u)[0],
                 meshops.interp_c2e_adj(m, u, mode="deterministic"), meshops.interp_c2e(m, phi)],
                [meshops.grad_c2e_adj(m, u, mode="atomic")])

    narrow, narrow_atomic = run()
    with offsets64():
        wide, wide_atomic = run()
    for a, b in zip(narrow, wide, strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    for a, b in zip(narrow_atomic, wide_atomic, strict=True):
        assert_repeatable(np.asarray(a), np.asarray(b))


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


FAMILIES = ("curl", "divergence", "gradient", "interpolation", "kinetic_energy", "laplacian",
            "pv_flux", "reconstruct", "tangential")


_C_TYPES = {"idx": r"const int\*", "coef": r"const T\*", "in": r"const (meshops::)?Lanes<T, W>\*",
            "out": r"(meshops::)?Lanes<T, W>\*", "put": r"(meshops::)?Lanes<T, W>\*", "int": "int",
            "real": "T"}


def _check_signature(kernel, texts):
    """`kernel`'s declared arguments are its parameters in one of the CUDA `texts`, in order, each
    of the declared role's C type, followed by (first, last, nlev)."""
    import re

    match = next((m for t in texts if (m := re.search(rf"__global__ void {kernel.name}\(([^)]*)\)", t))),
                 None)
    assert match is not None, f"no __global__ kernel {kernel.name}"
    text = " ".join(match.group(1).replace("__restrict__", "").replace("T, W", "T;W").split())
    params = [p.strip().replace("T;W", "T, W") for p in text.split(",")]
    expected = ([(_C_TYPES[role], arg) for role, arg in kernel.arguments]
                + [("int", a) for a in ("first", "last", "nlev")])
    assert len(params) == len(expected), (kernel.name, params)
    for param, (c_type, arg) in zip(params, expected):
        assert re.fullmatch(rf"{c_type} {arg}", param), (kernel.name, param, c_type, arg)


@pytest.mark.parametrize("family", FAMILIES)
def test_declarations_match_the_cuda_signatures(family):
    """Every declared kernel's arguments are the kernel's parameters in the .cu source, in order,
    each of the declared role's C type, followed by (first, last, nlev); every kernel of the .cu
    file is declared."""
    import importlib
    import re

    declared = importlib.import_module(f"meshops.operators.{family}")._KERNELS.kernels
    source = (kernels.CUDA_DIR / f"{family}.cu").read_text()
    texts = [source, (kernels.CUDA_DIR / "stencil.cuh").read_text()]
    for kernel in declared.values():
        _check_signature(kernel, texts)
    assert set(re.findall(r"__global__ void (\w+)\(", source)) <= set(declared)


def test_shared_declarations_match_stencil_cuh():
    """Every kernel of stencil.cuh (the gather, the scatter and the positions gather of the lean
    tables) is declared in `kernels._SHARED` with its parameters, and the families that use the
    positions gather declare it."""
    import re

    from meshops.operators import curl, interpolation

    text = (kernels.CUDA_DIR / "stencil.cuh").read_text()
    assert set(re.findall(r"__global__ void (\w+)\(", text)) == set(kernels._SHARED)
    assert kernels.GATHER_POSITIONS in kernels._SHARED
    for kernel in kernels._SHARED.values():
        _check_signature(kernel, [text])
    for family in (curl, interpolation):
        assert family._KERNELS.kernels[kernels.GATHER_POSITIONS] is kernels._SHARED[kernels.GATHER_POSITIONS]


def test_wrong_arguments_name_the_kernel_and_the_argument(ico_mesh, rng, on_host):
    """A missing, extra, mistyped or misshapen argument raises before any launch."""
    from meshops.operators.kinetic_energy import _KERNELS

    m = ico_mesh
    u = host(random_field(m, "edge", rng, nlev=4))
    tables = for_fields(m, u)
    edges, coef = tables.table("edgesOnCell"), tables.table("keCoef", u.dtype)
    good = dict(edgesOnCell=edges, cellCoef=coef, u=u,
                ke=host(np.empty((m.nCells, 4))), maxEdges=m.maxEdges)
    _KERNELS.launch("ke_e2c", m.nCells, **good)
    bad = [(dict(good, extra=u), TypeError, r"ke_e2c: .*unexpected \['extra'\]"),
           ({k: v for k, v in good.items() if k != "u"}, TypeError, r"ke_e2c: missing arguments \['u'\]"),
           (dict(good, ke=host(np.empty((m.nCells, 4), np.float32))), TypeError, "ke_e2c, argument ke: .*float64"),
           (dict(good, cellCoef=host(np.asarray(coef, np.float32))), TypeError,
            "ke_e2c, argument cellCoef: .*float64"),
           (dict(good, edgesOnCell=host(np.asarray(edges, np.int64))), TypeError,
            "ke_e2c, argument edgesOnCell: .*int32"),
           (dict(good, ke=host(np.empty((m.nCells, 3)))), ValueError, "ke_e2c, argument ke: expected levels"),
           (dict(good, ke=host(np.empty((m.nCells - 1, 4)))), ValueError, "ke_e2c, argument ke: expected"),
           (dict(good, maxEdges=2.0), TypeError, "ke_e2c, argument maxEdges")]
    for arguments, error, message in bad:
        with pytest.raises(error, match=message):
            _KERNELS.launch("ke_e2c", m.nCells, **arguments)
    with pytest.raises(KeyError, match="kinetic_energy: no kernel 'ke'"):
        _KERNELS.launch("ke", m.nCells, **good)
    assert on_host["kinetic_energy"] == ["ke_e2c"]
