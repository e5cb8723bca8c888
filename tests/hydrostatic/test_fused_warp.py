"""The fused hydrostatic stage with the column passes' 32 lanes, on the host.

The one-lane host build (test_fused.py) runs one level per chunk and no warp sync, so the lanes'
code of the column passes (meshops/cuda/warp_column.cuh) does not run there: the scans' terms
through the warp's shared scratch, the stencil row read once per column and shared, the chunks of
columns longer than a warp. Here hydrostatic/cuda/hydrostatic.cu is built as a warp of 32 host
threads (tests/meshops/host_harness.py, MESHOPS_HOST_WARP: shared memory, warp syncs and atomicAdd
as on the GPU) and, on the level-3 SCVT mesh with fresh random perturbations, with 26 levels (one
chunk) and 45 (two), both forms of the cell pass:
- an RK4 step, and the forward and tangent-linear step in one sweep (phi_s perturbed), equal the
  operator path's rk4_step and rk4_step_tl bitwise, in float64 and float32;
- the tendencies and their tangents on a rank's mesh (missing neighbours) equal the operator
  path's bitwise;
- the deterministic adjoint step equals the one-lane build's bitwise (the same sums in the same
  order), the atomic one (concurrent atomicAdd) the deterministic one to ADJ_TOL.
"""
import numpy as np
import pytest

from framework.stepper import rk4_step, rk4_step_adj, rk4_step_and_tl, rk4_step_tl
from hydrostatic import dynamics, fused, fused_tangent, levels
from hydrostatic.model import Model

from tests.meshops.host_harness import compile_families, host
from tests.hydrostatic.test_fused import (A, B, DT, FAMILIES, _max_rel, cell_pass,  # noqa: F401
                                          mesh, on_kernels, perturbation, rank_mesh, setup)
from tests.hydrostatic.test_fused_adjoint import ADJ_TOL, NAMES, adjoint_inputs

#: Hybrid levels: one chunk of a warp's lanes, and two.
COEFFICIENTS = {"26_levels": (A, B), "45_levels": levels.hybrid_coefficients(45, top_pa=500.0)}


@pytest.fixture(scope="module")
def kernel_tables(tmp_path_factory):
    """(warp, one lane): the families' host kernels with hydrostatic.cu built as a warp, and the
    same with hydrostatic.cu built as one lane."""
    warp = compile_families(tmp_path_factory.mktemp("warp"), FAMILIES, warp_families=("hydrostatic",))
    one_lane = compile_families(tmp_path_factory.mktemp("one_lane"), ("hydrostatic",))
    return warp, {**warp, **one_lane}


@pytest.fixture
def on_warp(kernel_tables):
    with on_kernels(kernel_tables[0]) as launches:
        yield launches


@pytest.mark.parametrize("variant,coefficients", [("mpas_ke_diffusion", "26_levels"),
                                                  ("perot_ke_held_suarez_del4", "26_levels"),
                                                  ("del4", "45_levels")])
def test_warp_steps_equal_the_operator_path_bitwise(on_warp, mesh, rng, variant, coefficients,
                                                    cell_pass):
    state, fixed, physics = setup(mesh, rng, variant, np.float64, host, COEFFICIENTS[coefficients])
    dstate = perturbation(state, fixed, rng, host)
    operator = Model(mesh, *state, *fixed, DT, physics, fused=False)
    want_state = rk4_step(operator, *(y.copy() for y in state))
    want_tangent = rk4_step_tl(operator, *state, *dstate)
    model = Model(mesh, *state, *fixed, DT, physics, fused=True)
    start = len(on_warp["hydrostatic"])
    got_state = rk4_step(model, *(y.copy() for y in state))
    cell = ["hs_cell_flux", "hs_cell_column"] if cell_pass else ["hs_cell_stage"]
    assert on_warp["hydrostatic"][start:] == ["hs_pv_vertex", "hs_pv_edge", *cell, "hs_edge_stage"] * 4
    swept_state, got_tangent = rk4_step_and_tl(model, *(y.copy() for y in state), *dstate)
    for name, a, b, c in zip(Model.state_names, got_state, swept_state, want_state):
        np.testing.assert_array_equal(a, c, err_msg=name)
        np.testing.assert_array_equal(b, c, err_msg=name)
    for name, a, b in zip(Model.state_names, got_tangent, want_tangent):
        np.testing.assert_array_equal(a, b, err_msg="d" + name)


def test_warp_float32_step_equals_the_operator_path_bitwise(on_warp, mesh, rng, cell_pass):
    state, fixed, physics = setup(mesh, rng, "mpas_ke_diffusion", np.float32, host)
    want = rk4_step(Model(mesh, *state, *fixed, DT, physics, fused=False), *(y.copy() for y in state))
    got = rk4_step(Model(mesh, *state, *fixed, DT, physics, fused=True), *(y.copy() for y in state))
    for name, a, b in zip(Model.state_names, got, want):
        assert a.dtype == np.float32
        np.testing.assert_array_equal(a, b, err_msg=name)


def test_warp_tendencies_on_a_rank_mesh_equal_the_operator_path_bitwise(on_warp, rank_mesh, rng,
                                                                        cell_pass):
    """Every row, halo rows whose stencil rows have missing entries included."""
    state, fixed, physics = setup(rank_mesh, rng, "perot_ke_held_suarez_del4", np.float64, host)
    dstate = perturbation(state, fixed, rng, host)
    want = (*dynamics.tendencies(rank_mesh, *state, *fixed, physics),
            *dynamics.tendencies_tl(rank_mesh, *state, *fixed, physics, *dstate))
    got = (*fused.fused_tendencies(rank_mesh, *state, *fixed, physics),
           *fused_tangent.fused_tendencies_tl(rank_mesh, *state, *fixed, physics, *dstate))
    for name, a, b in zip(dynamics.TARGETS + tuple("d" + t for t in dynamics.TARGETS), got, want):
        np.testing.assert_array_equal(a, b, err_msg=name)


@pytest.mark.parametrize("coefficients", COEFFICIENTS)
def test_warp_adjoint_step_equals_the_one_lane_build(kernel_tables, mesh, rng, coefficients,
                                                     cell_pass):
    state, fixed, physics = setup(mesh, rng, "mpas_ke_diffusion", np.float64, host,
                                  COEFFICIENTS[coefficients])
    adj = adjoint_inputs(state, rng, host)

    def step_adjoint(table, mode):
        with on_kernels(table) as launches:
            model = Model(mesh, *state, *fixed, DT, physics, fused=True)
            got = rk4_step_adj(model, *state, *adj, mode=mode)
            assert launches["hydrostatic"].count("hs_adj_mass" if mode == "deterministic"
                                                 else "hs_adj_mass_sum") == 4
            return got

    warp, one_lane = kernel_tables
    want = step_adjoint(one_lane, "deterministic")
    for name, a, b in zip(NAMES, step_adjoint(warp, "deterministic"), want):
        np.testing.assert_array_equal(a, b, err_msg=name)
    for name, a, b in zip(NAMES, step_adjoint(warp, "atomic"), want):
        assert _max_rel(a, b) <= ADJ_TOL, (name, _max_rel(a, b))
