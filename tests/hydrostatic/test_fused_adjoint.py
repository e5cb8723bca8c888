"""The fused adjoint of the hydrostatic RK4 stage (hydrostatic.fused_adjoint, the hs_adj_ kernels
of hydrostatic/cuda/hydrostatic.cu) against the operator path's adjoint
(hydrostatic.dynamics.tendencies_adj, deterministic mode, the reference).

On the host (the CUDA sources compiled with g++, tests/meshops/host_harness.py), on a level-3 SCVT
mesh with 26 levels and fresh random adjoint tendencies: one stage's adjoint equals the operator
path's to ADJ_TOL relative to each output's largest value (not bitwise: the transposed sums run in
the passes' slot orders and the column's adjoint groups its sums otherwise, as the shallow-water
fused adjoint, decision 0015), for every variant and on a rank's mesh with missing neighbours
(every row), and on every rank's local mesh its owned rows equal one process's (bitwise in the
deterministic mode); it passes the dot-product test against the fused tangent-linear stage; the adjoint RK4
step of a fused model equals the operator path's to ADJ_TOL, is bitwise the same on a second
call and passes the dot-product test against the fused tangent-linear step; float32 to
F32_ADJ_TOL. The atomic mode (scatters through the forward tables) against the operator path's
atomic stage and deterministic step to ADJ_TOL, with the dot-product test. On a GPU (marked gpu)
the same comparisons on CuPy in both modes.
"""
from dataclasses import replace

import numpy as np
import pytest

from framework.stepper import rk4_step_adj, rk4_step_tl
from grids.decompose import local_mesh
from grids.partition import partition_sfc
from hydrostatic import dynamics, fused_adjoint, fused_tangent, levels
from hydrostatic.distribution import halo_depth
from hydrostatic.forcing import HeldSuarez
from hydrostatic.fused import fused_record
from hydrostatic.model import Model

from tests.dot_products import assert_adjoint_identity
from tests.meshops.host_harness import host
from tests.hydrostatic.test_fused import (A, B, DT, VARIANTS, _max_rel, cell_pass,  # noqa: F401
                                          host_kernels, mesh, on_host, perturbation, rank_mesh,
                                          setup)

#: The fused adjoint against the operator path's in float64, relative to each output's largest value.
ADJ_TOL = 1e-12
#: float32 against the float64 operator path, relative to each output's largest value.
F32_ADJ_TOL = 1e-5
NAMES = ("mass_adj", "theta_mass_adj", "u_adj", "phi_s_adj")


def adjoint_inputs(state, rng, cast):
    """Fresh random adjoint tendencies (tend_mass_adj, tend_theta_mass_adj, tend_u_adj)."""
    dtype = state[0].dtype
    return tuple(cast((scale * rng.standard_normal(np.shape(y))).astype(dtype))
                 for y, scale in zip(state, (1.0, 1e-3, 1.0)))


def stage_adjoint(mesh, state, fixed, physics, adj):
    record = fused_record(mesh, *state, *fixed, physics)
    return fused_adjoint.fused_tendencies_adj(mesh, record, fixed[0], physics, *adj)


# -- on the host ----------------------------------------------------------------------------------

@pytest.mark.parametrize("variant", VARIANTS)
def test_stage_adjoint_equals_the_operator_path(on_host, mesh, rng, variant):
    state, fixed, physics = setup(mesh, rng, variant, np.float64, host)
    adj = adjoint_inputs(state, rng, host)
    ref = dynamics.tendencies_adj(mesh, *state, *fixed, physics, *adj, mode="deterministic")
    got = stage_adjoint(mesh, state, fixed, physics, [a.copy() for a in adj])
    assert on_host["hydrostatic"][-5:] == ["hs_adj_edge", "hs_adj_vertex", "hs_adj_column",
                                           "hs_adj_u", "hs_adj_mass"]
    for name, g, r in zip(NAMES, got, ref):
        assert _max_rel(g, r) <= ADJ_TOL, (name, _max_rel(g, r))


@pytest.mark.parametrize("variant", ["baroclinic", "perot_ke_held_suarez_del4"])
def test_stage_adjoint_on_a_rank_mesh_equals_the_operator_path(on_host, rank_mesh, rng, variant):
    """Every row, halo rows with missing neighbours included."""
    state, fixed, physics = setup(rank_mesh, rng, variant, np.float64, host)
    adj = adjoint_inputs(state, rng, host)
    ref = dynamics.tendencies_adj(rank_mesh, *state, *fixed, physics, *adj, mode="deterministic")
    got = stage_adjoint(rank_mesh, state, fixed, physics, adj)
    for name, g, r in zip(NAMES, got, ref):
        assert _max_rel(g, r) <= ADJ_TOL, (name, _max_rel(g, r))


@pytest.mark.parametrize("mode", ["deterministic", "atomic"])
@pytest.mark.parametrize("variant", ["mpas_ke_diffusion", "perot_ke_held_suarez_del4"])
def test_local_rows_equal_one_process(on_host, mesh, rng, variant, mode):
    """On every rank's local mesh (3 ranks, the core's halo depth), with the inputs' halo rows
    valid, the owned rows of the fused stage adjoint equal the one-process rows: bitwise in the
    deterministic mode (the gathers run in the global slot order), to ADJ_TOL in the atomic one."""
    state, fixed, physics = setup(mesh, rng, variant, np.float64, host)
    adj = adjoint_inputs(state, rng, host)
    record = fused_record(mesh, *state, *fixed, physics)
    whole = fused_adjoint.FusedStageAdjoint(mesh)(record, fixed[0], physics, *adj, mode=mode)
    owner = partition_sfc(mesh, 3)
    for rank in range(3):
        local = local_mesh(mesh, owner, rank, halo_depth=halo_depth())
        rows = [local.l2g[loc] for loc in ("cell", "cell", "edge", "cell", "vertex")]
        part = [host(np.asarray(a)[r]) for a, r in zip((*state, *fixed), rows)]
        adj_part = [host(np.asarray(a)[r]) for a, r in zip(adj, rows)]
        local_physics = physics if physics.forcing is None else replace(
            physics, forcing=HeldSuarez(host(local.mesh.latCell)))
        local_record = fused_record(local.mesh, *part, local_physics)
        got = fused_adjoint.FusedStageAdjoint(local.mesh)(local_record, part[3], local_physics,
                                                          *adj_part, mode=mode)
        for name, g, w, loc in zip(NAMES, got, whole, ("cell", "cell", "edge", "cell")):
            n = local.n_owned(loc)
            g, w = np.asarray(g)[:n], np.asarray(w)[local.l2g[loc][:n]]
            if mode == "deterministic":
                np.testing.assert_array_equal(g, w, err_msg=f"{rank} {name}")
            else:
                assert _max_rel(g, w) <= ADJ_TOL, (rank, name, _max_rel(g, w))


@pytest.mark.parametrize("variant", VARIANTS)
def test_stage_adjoint_passes_the_dot_test_against_the_fused_tangent(on_host, mesh, rng, variant):
    """<T' d, g> = <d, T'^T g> over the state and phi_s, T' the fused tangent-linear stage."""
    state, fixed, physics = setup(mesh, rng, variant, np.float64, host)
    d = perturbation(state, fixed, rng, host)
    adj = adjoint_inputs(state, rng, host)
    tangent = fused_tangent.fused_tendencies_tl(mesh, *state, *fixed, physics, *d)
    assert_adjoint_identity(tangent, adj, d, stage_adjoint(mesh, state, fixed, physics, adj))


@pytest.mark.parametrize("variant", VARIANTS)
def test_step_adjoint_equals_the_operator_path(on_host, mesh, rng, variant, cell_pass):
    """rk4_step_adj of a fused model: the operator path's to ADJ_TOL, bitwise the same on a second
    call, and the dot-product test against the fused model's rk4_step_tl (phi_s perturbed)."""
    state, fixed, physics = setup(mesh, rng, variant, np.float64, host)
    adj = adjoint_inputs(state, rng, host)
    fused = Model(mesh, *state, *fixed, DT, physics, fused=True)
    got = rk4_step_adj(fused, *state, *adj, mode="deterministic")
    again = rk4_step_adj(fused, *state, *adj, mode="deterministic")
    assert on_host["hydrostatic"].count("hs_adj_mass") == 8
    ref = rk4_step_adj(Model(mesh, *state, *fixed, DT, physics, fused=False), *state, *adj,
                       mode="deterministic")
    for name, g, a, r in zip(NAMES, got, again, ref):
        np.testing.assert_array_equal(g, a, err_msg=name)
        assert _max_rel(g, r) <= ADJ_TOL, (name, _max_rel(g, r))
    d = perturbation(state, fixed, rng, host)
    assert_adjoint_identity(rk4_step_tl(fused, *state, *d), adj, d, got)


@pytest.mark.parametrize("variant", VARIANTS)
def test_split_column_pass_equals_the_one_pass_bitwise(on_host, mesh, rng, variant, monkeypatch):
    """The deterministic adjoint step with the column pass's gathers as their own kernel
    (hs_adj_cell_gather, then hs_adj_column reading its sums) equals the one-pass step bitwise."""
    state, fixed, physics = setup(mesh, rng, variant, np.float64, host)
    adj = adjoint_inputs(state, rng, host)
    model = Model(mesh, *state, *fixed, DT, physics, fused=True)
    one = rk4_step_adj(model, *state, *adj, mode="deterministic")
    monkeypatch.setattr(fused_adjoint.FusedStageAdjoint, "split_cell_pass", True)
    split = rk4_step_adj(Model(mesh, *state, *fixed, DT, physics, fused=True), *state, *adj,
                         mode="deterministic")
    assert on_host["hydrostatic"].count("hs_adj_cell_gather") == 4
    for name, a, b in zip(NAMES, split, one):
        np.testing.assert_array_equal(a, b, err_msg=name)


def in_dtype(mesh, fields, physics, dtype, cast):
    """`fields` and `physics` (its dB and forcing) in `dtype` through `cast`."""
    forcing = physics.forcing and HeldSuarez(cast(mesh.latCell.astype(dtype)))
    physics = replace(physics, dB=cast(physics.dB.astype(dtype)), forcing=forcing)
    return [cast(a.astype(dtype)) for a in fields], physics


@pytest.mark.parametrize("variant", ["baroclinic", "perot_ke_held_suarez_del4"])
def test_float32_step_adjoint(on_host, mesh, rng, variant):
    """float32 against the float64 operator path, to F32_ADJ_TOL."""
    state, fixed, physics = setup(mesh, rng, variant, np.float64, host)
    adj = adjoint_inputs(state, rng, host)
    ref = rk4_step_adj(Model(mesh, *state, *fixed, DT, physics, fused=False), *state, *adj,
                       mode="deterministic")
    f32, physics32 = in_dtype(mesh, (*state, *fixed, *adj), physics, np.float32, host)
    got = rk4_step_adj(Model(mesh, *f32[:5], DT, physics32, fused=True), *f32[:3], *f32[5:],
                       mode="deterministic")
    for name, g, r in zip(NAMES, got, ref):
        assert g.dtype == np.float32
        assert _max_rel(g, r) <= F32_ADJ_TOL, (name, _max_rel(g, r))


@pytest.mark.parametrize("variant", VARIANTS)
def test_atomic_stage_adjoint_equals_the_operator_path(on_host, mesh, rng, variant):
    """Atomic mode (scatters through the forward tables): the operator path's atomic adjoint to
    ADJ_TOL."""
    state, fixed, physics = setup(mesh, rng, variant, np.float64, host)
    adj = adjoint_inputs(state, rng, host)
    ref = dynamics.tendencies_adj(mesh, *state, *fixed, physics, *adj, mode="atomic")
    record = fused_record(mesh, *state, *fixed, physics)
    got = fused_adjoint.FusedStageAdjoint(mesh)(record, fixed[0], physics, *adj, mode="atomic")
    assert on_host["hydrostatic"][-5:] == ["hs_adj_edge_atomic", "hs_adj_vertex_atomic",
                                           "hs_adj_column_summed", "hs_adj_u_atomic", "hs_adj_mass_sum"]
    for name, g, r in zip(NAMES, got, ref):
        assert _max_rel(g, r) <= ADJ_TOL, (name, _max_rel(g, r))


@pytest.mark.parametrize("variant", ["baroclinic", "perot_ke_held_suarez_del4"])
def test_atomic_stage_adjoint_on_a_rank_mesh(on_host, rank_mesh, rng, variant):
    state, fixed, physics = setup(rank_mesh, rng, variant, np.float64, host)
    adj = adjoint_inputs(state, rng, host)
    ref = dynamics.tendencies_adj(rank_mesh, *state, *fixed, physics, *adj, mode="atomic")
    record = fused_record(rank_mesh, *state, *fixed, physics)
    got = fused_adjoint.FusedStageAdjoint(rank_mesh)(record, fixed[0], physics, *adj, mode="atomic")
    for name, g, r in zip(NAMES, got, ref):
        assert _max_rel(g, r) <= ADJ_TOL, (name, _max_rel(g, r))


@pytest.mark.parametrize("variant", ["baroclinic", "mpas_ke_diffusion"])
def test_atomic_step_adjoint(on_host, mesh, rng, variant):
    """The atomic adjoint step of a fused model: the operator path's deterministic one to ADJ_TOL
    and the dot-product test against the fused tangent-linear step."""
    state, fixed, physics = setup(mesh, rng, variant, np.float64, host)
    adj = adjoint_inputs(state, rng, host)
    fused = Model(mesh, *state, *fixed, DT, physics, fused=True)
    got = rk4_step_adj(fused, *state, *adj, mode="atomic")
    assert on_host["hydrostatic"].count("hs_adj_mass_sum") == 4
    ref = rk4_step_adj(Model(mesh, *state, *fixed, DT, physics, fused=False), *state, *adj,
                       mode="deterministic")
    for name, g, r in zip(NAMES, got, ref):
        assert _max_rel(g, r) <= ADJ_TOL, (name, _max_rel(g, r))
    d = perturbation(state, fixed, rng, host)
    assert_adjoint_identity(rk4_step_tl(fused, *state, *d), adj, d, got)


@pytest.mark.parametrize("mode", ["deterministic", "atomic"])
def test_stage_adjoint_builds_the_tables_it_reads_first(on_host, mesh, rng, mode):
    """The first stage adjoint of a mode builds `fused_adjoint.TABLES[mode]` together; its passes
    read no other table (the forward record's tables aside)."""
    from meshops.device.mesh import for_fields

    local = mesh.replace()                                          # its own DeviceMesh
    state, fixed, physics = setup(local, rng, "baroclinic", np.float64, host)
    record = fused_record(local, *state, *fixed, physics)
    m = for_fields(local, state[0])
    before = {key[0] for key in m._arrays}
    fused_adjoint.FusedStageAdjoint(local)(record, fixed[0], physics,
                                           *adjoint_inputs(state, rng, host), mode=mode)
    assert set(fused_adjoint.TABLES[mode]) <= set(m.host.names())
    assert {key[0] for key in m._arrays} - before <= set(fused_adjoint.TABLES[mode])


# -- on a GPU -------------------------------------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("mode", ["deterministic", "atomic"])
def test_gpu_step_adjoint(mesh, rng, variant, dtype, mode, cell_pass):
    """The fused adjoint step on CuPy in either mode against the operator path's deterministic one
    in float64 (ADJ_TOL, float32 F32_ADJ_TOL), bitwise the same on a second call in the
    deterministic mode, and the float64 dot-product test against the fused tangent-linear step."""
    check_gpu_step_adjoint(mesh, rng, variant, dtype, mode, (A, B))


@pytest.mark.gpu
@pytest.mark.parametrize("variant", ["baroclinic", "mpas_ke_diffusion"])
@pytest.mark.parametrize("mode", ["deterministic", "atomic"])
def test_gpu_columns_longer_than_a_warp_step_adjoint(mesh, rng, variant, mode):
    """45 layers: the column pass takes a column's levels in two chunks of a warp's lanes
    (meshops/cuda/warp_column.cuh), with the scans carried from one to the next; as above in float64."""
    check_gpu_step_adjoint(mesh, rng, variant, np.float64, mode,
                           levels.hybrid_coefficients(45, top_pa=500.0))


def check_gpu_step_adjoint(mesh, rng, variant, dtype, mode, coefficients):
    cupy = pytest.importorskip("cupy")
    state, fixed, physics = setup(mesh, rng, variant, np.float64, cupy.asarray, coefficients)
    adj = adjoint_inputs(state, rng, cupy.asarray)
    ref = rk4_step_adj(Model(mesh, *state, *fixed, DT, physics, fused=False), *state, *adj,
                       mode="deterministic")
    fields, physics_t = in_dtype(mesh, (*state, *fixed, *adj), physics, dtype, cupy.asarray)
    args = (*fields[:3], *fields[5:])
    model = Model(mesh, *fields[:5], DT, physics_t)
    got = rk4_step_adj(model, *args, mode=mode)
    again = rk4_step_adj(model, *args, mode=mode)
    for name, g, a, r in zip(NAMES, got, again, ref):
        if mode == "deterministic":
            assert bool((g == a).all()), name
        tol = ADJ_TOL if dtype == np.float64 else F32_ADJ_TOL
        assert _max_rel(cupy.asnumpy(g), cupy.asnumpy(r)) <= tol, name
    if dtype == np.float64:
        d = perturbation(state, fixed, rng, cupy.asarray)
        assert_adjoint_identity(rk4_step_tl(model, *state, *d), adj, d, got)
