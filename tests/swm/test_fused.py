"""The fused RK4 kernels of swm.fused (swm/cuda/shallow_water.cu) against the operator path
(swm.tendencies with framework.timestepping, the reference).

On the host (the CUDA source compiled with g++, tests/meshops/host_harness.py), where neither path
contracts multiply-adds, the fused step equals the operator path's device code bitwise and the
NumPy reference to round-off, with APVM and viscosity, nlev 1 and 4, on a mesh with missing
neighbours and one with pad slots, and a rank's local mesh gives the one-process rows bitwise. On a GPU (marked gpu) the
same comparisons run on CuPy: tendencies and a 100-step run to 1e-12 relative in float64 and to the
float32 tolerances below.
"""
import re
from dataclasses import replace

import numpy as np
import pytest

from grids.decompose import local_mesh
from grids.icosahedral import generate_icosahedral
from grids.mesh import EARTH_RADIUS
from grids.partition import partition_sfc
from meshops.device import kernels
from swm import fused, testcases
from swm.distribution import halo_depth
from swm.fused import fused_tendencies
from swm.model import Model
from swm.tendencies import Physics, tendencies

from tests.meshops.host_harness import HostArray, host, host_fixtures
from tests.meshops.test_kernel_launch import _check_signature

#: Families the fused step and its APVM and viscosity terms launch.
FAMILIES = ("shallow_water", "curl", "divergence", "gradient", "interpolation", "kinetic_energy",
            "laplacian", "pv_flux", "tangential")
host_kernels, on_host = host_fixtures(*FAMILIES)

PHYSICS = {"plain": Physics(), "apvm": Physics(apvm=0.5, dt=600.0),
           "visc2": Physics(visc2=1e5), "visc4": Physics(visc4=1e15),
           "apvm_visc2_visc4": Physics(apvm=0.5, dt=600.0, visc2=2e4, visc4=1e14)}
#: float32 against the operator path in float32, relative to the largest value: the paths differ
#: only where the compiler contracts a multiply-add in one of them.
F32_TENDENCY_TOL, F32_RUN_TOL = 1e-5, 1e-4


@pytest.fixture(scope="module")
def ico():
    """A Morton-ordered icosahedral level-3 mesh on the Earth's radius."""
    return generate_icosahedral(3, lloyd_iterations=5, sphere_radius=EARTH_RADIUS)


@pytest.fixture(scope="module")
def mpas(x1_162_path):
    """The real MPAS x1.162 mesh on the Earth's radius."""
    from grids.mpas_io import read_mesh

    return read_mesh(x1_162_path, sphere_radius=EARTH_RADIUS)


@pytest.fixture(scope="module")
def rank_mesh(mpas):
    """Rank 1 of 3 of the x1.162 mesh with one halo layer: edges and vertices with missing cells."""
    return local_mesh(mpas, partition_sfc(mpas, 3), 1, halo_depth=1).mesh


def random_state(mesh, rng, nlev=None, dtype=np.float64):
    """(h, u, b, f_vertex): positive thickness around 5 km, winds of 20 m/s, topography up to
    500 m, Coriolis of 1e-4 / s, all fresh random."""
    def field(n, scale, offset=0.0):
        shape = (n,) if nlev is None else (n, nlev)
        return (offset + scale * rng.standard_normal(shape)).astype(dtype)
    return (field(mesh.nCells, 300.0, 5000.0), field(mesh.nEdges, 20.0),
            np.abs(field(mesh.nCells, 250.0)), field(mesh.nVertices, 1e-4))


def _rel(got, ref):
    return float(np.abs(np.asarray(got, np.float64) - ref).max() / np.abs(ref).max())


# -- declarations ---------------------------------------------------------------------------------

def test_declarations_match_the_cuda_signatures():
    """Every declared kernel's arguments are its parameters in shallow_water.cu, in order, each of
    its role's C type; every kernel of the file is declared."""
    source = (fused.CUDA_DIR / "shallow_water.cu").read_text()
    for kernel in fused._KERNELS.kernels.values():
        _check_signature(kernel, [source])
    assert set(re.findall(r"__global__ void (\w+)\(", source)) == set(fused._KERNELS.names)


def test_cells_across_table_names_an_inconsistent_mesh(mpas):
    """cellsAcrossOnCell (the cell pass's neighbour and flux-owner table) on a mesh whose
    edgesOnCell lists an edge that does not touch the cell: the error names both fields."""
    from meshops.device.tables import HostTables

    bad = mpas.replace()
    bad.edgesOnCell = bad.edgesOnCell.copy()
    far = int(np.flatnonzero((bad.cellsOnEdge != 0).all(axis=1))[0])
    bad.edgesOnCell[0, 1] = far
    with pytest.raises(ValueError, match=rf"edgesOnCell\[0, 1\] = {far} .* cellsOnEdge\[{far}\]"):
        HostTables(bad)["cellsAcrossOnCell"]
    across = HostTables(mpas)["cellsAcrossOnCell"]
    c0, c1 = mpas.cellsOnEdge[mpas.edgesOnCell[5, :mpas.nEdgesOnCell[5]]].T
    assert np.array_equal(across[5, :mpas.nEdgesOnCell[5]], np.where(c0 == 5, -2 - c1, c0))


def test_fused_needs_device_fields(ico, rng):
    h, u, b, f = random_state(ico, rng)
    with pytest.raises(ValueError, match="fused: the fused RK4 kernels run on CuPy fields"):
        Model(ico, h, u, b, f, 600.0, fused=True)


# -- on the host ----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def padded(mpas):
    """The x1.162 mesh with two pad slots per cell (maxEdges 8) and one per vertex (vertexDegree
    4): the vertex and cell passes take their slot loops instead of the batched loads."""
    def pad(a, n, value):
        return np.concatenate([a, np.full((a.shape[0], n), value, a.dtype)], axis=1)
    return mpas.replace(**{name: pad(getattr(mpas, name), 2, value) for name, value in (
        ("edgesOnCell", -1), ("cellsOnCell", -1), ("verticesOnCell", -1), ("edgeSignOnCell", 0))},
        **{name: pad(getattr(mpas, name), 1, value) for name, value in (
            ("edgesOnVertex", -1), ("cellsOnVertex", -1), ("edgeSignOnVertex", 0),
            ("kiteAreasOnVertex", 0))})


@pytest.fixture(params=["ico", "mpas", "rank_mesh", "padded"])
def any_mesh(request):
    return request.getfixturevalue(request.param).replace()      # its own DeviceMesh


@pytest.mark.parametrize("nlev", [None, 4])
@pytest.mark.parametrize("physics", list(PHYSICS), ids=str)
def test_tendencies_on_host(any_mesh, physics, nlev, on_host, rng):
    """The fused tendencies equal the operator path's device code bitwise and NumPy's to 1e-13."""
    physics = PHYSICS[physics]
    state = random_state(any_mesh, rng, nlev)
    ref = tendencies(any_mesh, *state, physics)
    device = tendencies(any_mesh, *map(host, state), physics)
    got = fused_tendencies(any_mesh, *map(host, state), physics)
    assert "sw_pv_edge" + ("_apvm" if physics.apvm else "") in on_host["shallow_water"]
    for r, d, g in zip(ref, device, got):
        assert isinstance(g, HostArray)
        assert np.array_equal(g, d)
        assert _rel(g, r) <= 1e-13


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("physics", ["plain", "apvm_visc2_visc4"])
def test_steps_on_host(ico, physics, dtype, on_host, rng):
    """Three RK4 steps of the fused model equal the operator path's on the device code bitwise
    and NumPy's to round-off (1e-12 float64, F32_RUN_TOL float32); each step makes new arrays."""
    physics = PHYSICS[physics]
    state = random_state(ico, rng, dtype=dtype)
    physics = replace(physics, dt=0.0)          # the model's dt, 300 s, is the one APVM scales
    models = {name: Model(ico, *(xp(a) for a in state), 300.0, physics, fused=f)
              for name, xp, f in (("numpy", np.copy, None), ("device", host, False),
                                  ("fused", host, True))}
    assert models["fused"].fused and not models["device"].fused
    before = models["fused"].h
    for _ in range(3):
        for model in models.values():
            model.step()
    assert models["fused"].h is not before and np.array_equal(before, state[0])
    tol = 1e-12 if dtype == np.float64 else F32_RUN_TOL
    for name in ("h", "u"):
        got = getattr(models["fused"], name)
        assert np.array_equal(got, getattr(models["device"], name)), name
        assert _rel(got, getattr(models["numpy"], name)) <= tol, name


def test_model_builds_the_step_tables_before_the_first_step(ico, on_host, rng):
    """A fused Model builds every host table its step reads when it is made (`fused.TABLES`, on
    threads): the first step builds none."""
    mesh = ico.replace()                                            # its own DeviceMesh
    model = Model(mesh, *map(host, random_state(mesh, rng)), 300.0, PHYSICS["plain"])
    built = set(model.device_mesh.host.names())
    assert set(fused.TABLES) <= built
    model.step()
    assert set(model.device_mesh.host.names()) == built


@pytest.mark.parametrize("physics", ["plain", "apvm_visc2_visc4"])
def test_local_rows_equal_one_process_on_host(mpas, physics, on_host, rng):
    """On every rank's local mesh (3 ranks, the halo depth of the physics) the owned rows of the
    fused tendencies equal the one-process rows bitwise."""
    physics = PHYSICS[physics]
    state = random_state(mpas, rng)
    whole = fused_tendencies(mpas, *map(host, state), physics)
    owner = partition_sfc(mpas, 3)
    for rank in range(3):
        local = local_mesh(mpas, owner, rank, halo_depth=halo_depth(physics))
        rows = [local.l2g[loc] for loc in ("cell", "edge", "cell", "vertex")]
        got = fused_tendencies(local.mesh, *(host(a[r]) for a, r in zip(state, rows)), physics)
        for g, w, loc in zip(got, whole, ("cell", "edge")):
            n = local.n_owned(loc)
            assert np.array_equal(g[:n], w[local.l2g[loc][:n]]), (rank, loc)


# -- on a GPU -------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def ico4():
    """A Lloyd-optimised icosahedral level-4 mesh on the Earth's radius (as tests/swm/test_model.py)."""
    return generate_icosahedral(4, lloyd_iterations=200, sphere_radius=EARTH_RADIUS)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("physics", list(PHYSICS), ids=str)
def test_tendencies_on_gpu(ico4, physics, dtype, rng):
    import cupy

    physics = PHYSICS[physics]
    state = [cupy.asarray(a) for a in random_state(ico4, rng, dtype=dtype)]
    ref = tendencies(ico4, *state, physics)
    got = fused_tendencies(ico4, *state, physics)
    for r, g in zip(ref, got):
        assert _rel(cupy.asnumpy(g), cupy.asnumpy(r).astype(np.float64)) <= (
            1e-12 if dtype == np.float64 else F32_TENDENCY_TOL)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("case, physics", [("williamson5", "plain"), ("williamson5", "apvm"),
                                           ("galewsky", "apvm_visc2_visc4"),
                                           ("williamson6", "visc4")])
def test_run_on_gpu(ico4, case, physics, dtype):
    """100 steps of 600 s: the fused model equals the operator path to 1e-12 relative (float64)
    and F32_RUN_TOL (float32)."""
    import cupy

    physics = PHYSICS[physics]
    state = testcases.CASES[case](ico4)
    fields = [np.asarray(a, dtype) for a in (state.h, state.u, state.b, state.f_vertex)]
    models = [Model(ico4, *(cupy.asarray(a) for a in fields), 600.0, physics, fused=f)
              for f in (False, True)]
    assert models[1].fused and not models[0].fused
    for model in models:
        for _ in range(100):
            model.step()
    tol = 1e-12 if dtype == np.float64 else F32_RUN_TOL
    for name in ("h", "u"):
        ref, got = (cupy.asnumpy(getattr(m, name)).astype(np.float64) for m in models)
        assert np.all(np.isfinite(got)) and _rel(got, ref) <= tol, name


@pytest.mark.gpu
@pytest.mark.parametrize("physics", ["plain", "apvm_visc2_visc4"])
def test_local_rows_equal_one_process_on_gpu(mpas, physics, rng):
    import cupy

    physics = PHYSICS[physics]
    state = random_state(mpas, rng)
    whole = [cupy.asnumpy(t) for t in fused_tendencies(mpas, *map(cupy.asarray, state), physics)]
    owner = partition_sfc(mpas, 3)
    for rank in range(3):
        local = local_mesh(mpas, owner, rank, halo_depth=halo_depth(physics))
        rows = [local.l2g[loc] for loc in ("cell", "edge", "cell", "vertex")]
        got = fused_tendencies(local.mesh, *(cupy.asarray(a[r]) for a, r in zip(state, rows)), physics)
        for g, w, loc in zip(got, whole, ("cell", "edge")):
            n = local.n_owned(loc)
            assert np.array_equal(cupy.asnumpy(g)[:n], w[local.l2g[loc][:n]]), (rank, loc)
