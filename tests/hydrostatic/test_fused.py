"""The fused RK4 stage of hydrostatic.fused (hydrostatic/cuda/hydrostatic.cu) against the operator
path (hydrostatic.dynamics with framework.timestepping, the reference).

On the host (the CUDA sources compiled with g++, tests/meshops/host_harness.py), where neither path
contracts multiply-adds, the fused tendencies, their tangents, a 3-step run and a tangent-linear
step (hydrostatic.fused_tangent) equal the operator path's device code bitwise in float64 and
float32 (JW06's baroclinic wave and Held-Suarez, every kinetic-energy form, with del2 / del4 on u
and theta, phi_s perturbed or not), on a level-3 SCVT mesh with 26 levels and fresh random
perturbations, and on a rank's mesh with missing neighbours (every row). On a GPU (marked gpu)
the same comparisons run on CuPy: float64 bitwise (every product of the operator path rounded on
its own in the kernels) but for the tangent-linear step (to 1e-12 relative: nvcc contracts the
operator kernels' multiply-add pairs its own way), float32 within F32_TOL relative to the largest
value; also on columns longer than a warp (the column passes' chunks).
"""
import contextlib
import re
from dataclasses import replace

import numpy as np
import pytest

from grids.cache import cached_icosahedral
from grids.decompose import local_mesh
from grids.partition import partition_sfc
from framework.constants import GRAVITY
from hydrostatic import dynamics, fused, fused_tangent, levels, testcases
from hydrostatic.distribution import halo_depth
from hydrostatic.dynamics import Physics
from hydrostatic.forcing import HeldSuarez
from hydrostatic.model import Model
from framework.stepper import rk4_step, rk4_step_adj, rk4_step_and_tl, rk4_step_tl

from meshops.device import backend, kernels
from tests.meshops.host_harness import host, host_fixtures, route_to_host

#: Families the fused stage and the operator path launch.
FAMILIES = ("hydrostatic", "vertical", "curl", "divergence", "gradient", "interpolation",
            "kinetic_energy", "laplacian", "pv_flux", "reconstruct", "tangential")
host_kernels, _ = host_fixtures(*FAMILIES)


@contextlib.contextmanager
def on_kernels(table):
    """The CuPy code path on the host kernels of `table`, with the NumPy functions the Held-Suarez
    forcing calls on the array module; yields the launches."""
    with route_to_host(table, FAMILIES) as launches:
        module = backend.BACKENDS["cupy"]
        for name in ("sin", "cos", "log", "maximum"):
            setattr(module, name, getattr(np, name))
        module.where = lambda *args: host(np.where(*args))
        yield launches


@pytest.fixture
def on_host(host_kernels):
    with on_kernels(host_kernels) as launches:
        yield launches


A, B = levels.coefficients("jw06_26")
#: Variants: (case, Physics keywords) of the stage.
VARIANTS = {"baroclinic": ("jw06_baroclinic", {}),
            "del4": ("jw06_baroclinic", {"visc4": 1e16}),
            "held_suarez": ("held_suarez", {"forcing": True}),
            "mpas_ke_diffusion": ("jw06_baroclinic", dict(kinetic_energy="mpas", visc2=2e5, visc4=1e16,
                                                          visc2_theta=1e5, visc4_theta=5e15)),
            "perot_ke_held_suarez_del4": ("held_suarez", dict(kinetic_energy="perot", visc4=1e16,
                                                              forcing=True))}
#: float32 on the GPU, fused against the operator path in float32, relative to the largest value
#: (the same arithmetic; the margin allows for a compiler's contraction the kernels did not stop).
F32_TOL = 1e-5
STEPS, DT = 3, 1200.0


@pytest.fixture(scope="module")
def mesh():
    return cached_icosahedral(3, lloyd_iterations=50)


@pytest.fixture(scope="module")
def rank_mesh(mesh):
    """Rank 1 of 3 of the level-3 mesh with two halo layers: edges and vertices with missing cells."""
    return local_mesh(mesh, partition_sfc(mesh, 3), 1, halo_depth=2).mesh


def setup(mesh, rng, variant, dtype, cast, coefficients=(A, B)):
    """(state, fixed fields, Physics) of `variant`: the case's initial state with a fresh random
    perturbation of p_s, theta and u, the fields in `dtype` through `cast`, on the hybrid levels of
    `coefficients` (A, B)."""
    case, kw = VARIANTS[variant]
    A, B = coefficients
    s = testcases.initial_state(mesh, case, A, B)
    ps = levels.P0 + 500.0 * rng.standard_normal(mesh.nCells)
    mass = levels.layer_mass(A, B, ps, GRAVITY)
    theta = s.theta_mass / s.mass * (1.0 + 1e-3 * rng.standard_normal(s.mass.shape))
    u = s.u + rng.standard_normal(s.u.shape)
    kw = dict(kw)
    if kw.pop("forcing", False):
        kw["forcing"] = HeldSuarez(cast(mesh.latCell.astype(dtype)))
    physics = Physics(p_top=float(A[-1]), dB=cast((B[:-1] - B[1:]).astype(dtype)), **kw)
    state = tuple(cast(np.asarray(a, dtype)) for a in (mass, mass * theta, u))
    return state, (cast(s.phi_s.astype(dtype)), cast(s.f_vertex.astype(dtype))), physics


@pytest.fixture(params=[False, True], ids=["one_cell_pass", "split_cell_pass"])
def cell_pass(request, monkeypatch):
    """The forward cell pass as hs_cell_stage alone or as hs_cell_flux then hs_cell_column
    (`fused.FusedStage.split_cell_pass`); True when split."""
    monkeypatch.setattr(fused.FusedStage, "split_cell_pass", request.param)
    return request.param


def run(mesh, state, fixed, physics, fused_path):
    model = Model(mesh, *state, *fixed, DT, physics, fused=fused_path)
    for _ in range(STEPS):
        model.step()
    return model.state


def _max_rel(got, ref):
    got, ref = np.asarray(got, np.float64), np.asarray(ref, np.float64)
    return float(np.abs(got - ref).max() / np.abs(ref).max())


# -- declarations ---------------------------------------------------------------------------------

#: C types of the declared roles (every field is a plain T pointer: one level per thread).
_C_TYPES = {"idx": r"const int\*", "coef": r"const T\*", "in": r"const T\*", "out": r"T\*",
            "put": r"T\*", "int": "int", "real": "T"}


def test_declarations_match_the_cuda_signatures():
    """Every declared kernel's arguments are its parameters in hydrostatic.cu, in order, each of
    its role's C type, then (first, last, nlev); every kernel of the file is declared."""
    source = (fused.CUDA_DIR / "hydrostatic.cu").read_text()
    for kernel in fused._KERNELS.kernels.values():
        match = re.search(rf"__global__ void {kernel.name}\(([^)]*)\)", source)
        assert match is not None, kernel.name
        params = [" ".join(p.replace("__restrict__", "").split()) for p in match.group(1).split(",")]
        expected = ([(_C_TYPES[role], arg) for role, arg in kernel.arguments]
                    + [("int", a) for a in ("first", "last", "nlev")])
        assert len(params) == len(expected), kernel.name
        for param, (c_type, arg) in zip(params, expected):
            assert re.fullmatch(rf"{c_type} {arg}", param), (kernel.name, param, c_type, arg)
    assert set(re.findall(r"__global__ void (\w+)\(", source)) == set(fused._KERNELS.names)


# -- on the host ----------------------------------------------------------------------------------

@pytest.mark.parametrize("variant", VARIANTS)
def test_tendencies_equal_the_operator_path_bitwise(on_host, mesh, rng, variant):
    state, fixed, physics = setup(mesh, rng, variant, np.float64, host)
    ref = dynamics.tendencies(mesh, *state, *fixed, physics)
    got = fused.fused_tendencies(mesh, *state, *fixed, physics)
    assert on_host["hydrostatic"][:4] == ["hs_pv_vertex", "hs_pv_edge", "hs_cell_stage",
                                          "hs_edge_stage"]
    for name, a, b in zip(dynamics.TARGETS, got, ref):
        np.testing.assert_array_equal(a, b, err_msg=name)


def perturbation(state, fixed, rng, cast):
    """(dmass, dtheta_mass, du, dphi_s): fresh random perturbations of the state's size."""
    dtype = state[0].dtype
    return tuple(cast((scale * rng.standard_normal(np.shape(y))).astype(dtype)) for y, scale in
                 zip((*state, fixed[0]), (10.0, 3000.0, 1.0, 100.0)))


@pytest.mark.parametrize("control", [False, True], ids=["state", "state_and_phi_s"])
@pytest.mark.parametrize("variant", VARIANTS)
def test_tangent_tendencies_equal_the_operator_path_bitwise(on_host, mesh, rng, variant, control):
    state, fixed, physics = setup(mesh, rng, variant, np.float64, host)
    *dstate, dphi_s = perturbation(state, fixed, rng, host)
    dphi_s = dphi_s if control else None
    ref = dynamics.tendencies_tl(mesh, *state, *fixed, physics, *dstate, dphi_s)
    got = fused_tangent.fused_tendencies_tl(mesh, *state, *fixed, physics, *dstate, dphi_s)
    for name, a, b in zip(dynamics.TARGETS, got, ref):
        np.testing.assert_array_equal(a, b, err_msg=name)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("variant", VARIANTS)
def test_tangent_steps_equal_the_operator_path_bitwise(on_host, mesh, rng, variant, dtype, cell_pass):
    """rk4_step_tl of the fused model against the operator model's, with phi_s perturbed."""
    state, fixed, physics = setup(mesh, rng, variant, dtype, host)
    dstate = perturbation(state, fixed, rng, host)
    got = rk4_step_tl(Model(mesh, *state, *fixed, DT, physics, fused=True), *state, *dstate)
    cell = ["hs_cell_flux_ftl", "hs_cell_column_ftl"] if cell_pass else ["hs_cell_stage_ftl"]
    assert on_host["hydrostatic"][-4 - cell_pass:] == ["hs_pv_vertex_tl", "hs_pv_edge_tl", *cell,
                                                       "hs_edge_stage_ftl"]
    ref = rk4_step_tl(Model(mesh, *state, *fixed, DT, physics, fused=False), *state, *dstate)
    for name, a, b in zip(Model.state_names, got, ref):
        assert a.dtype == dtype
        np.testing.assert_array_equal(a, b, err_msg=name)


def test_tangent_step_runs_its_forward_in_its_own_passes(on_host, mesh, rng):
    """rk4_step_tl: no forward passes and no records, the forward's provisional states from the
    tangent-linear cell and edge passes that advance it too (`_ftl`), four stages of four passes."""
    state, fixed, physics = setup(mesh, rng, "del4", np.float64, host)
    model = Model(mesh, *state, *fixed, DT, physics, fused=True)
    start = len(on_host["hydrostatic"])
    rk4_step_tl(model, *state, *perturbation(state, fixed, rng, host))
    assert on_host["hydrostatic"][start:] == ["hs_pv_vertex_tl", "hs_pv_edge_tl", "hs_cell_stage_ftl",
                                              "hs_edge_stage_ftl"] * 4


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("variant", VARIANTS)
def test_step_and_tangent_in_one_sweep_equal_the_two_steps_bitwise(on_host, mesh, rng, variant, dtype,
                                                                   cell_pass):
    """rk4_step_and_tl of the fused model: rk4_step's state bitwise (the `_ftl` passes' forward
    against the forward passes) and rk4_step_tl's tangent, in four stages of four passes."""
    state, fixed, physics = setup(mesh, rng, variant, dtype, host)
    dstate = perturbation(state, fixed, rng, host)
    model = Model(mesh, *state, *fixed, DT, physics, fused=True)
    want = rk4_step(model, *(y.copy() for y in state)), rk4_step_tl(model, *state, *dstate)
    start = len(on_host["hydrostatic"])
    got = rk4_step_and_tl(model, *(y.copy() for y in state), *dstate)
    cell = ["hs_cell_flux_ftl", "hs_cell_column_ftl"] if cell_pass else ["hs_cell_stage_ftl"]
    assert on_host["hydrostatic"][start:] == ["hs_pv_vertex_tl", "hs_pv_edge_tl", *cell,
                                              "hs_edge_stage_ftl"] * 4
    for g, w in zip(got, want):
        for name, a, b in zip(Model.state_names, g, w):
            np.testing.assert_array_equal(a, b, err_msg=name)


@pytest.mark.parametrize("variant", ["baroclinic", "perot_ke_held_suarez_del4"])
def test_tendencies_on_a_rank_mesh_equal_the_operator_path_bitwise(on_host, rank_mesh, rng, variant,
                                                                   cell_pass):
    """The tendencies and their tangents, every row, halo rows with missing neighbours included."""
    state, fixed, physics = setup(rank_mesh, rng, variant, np.float64, host)
    dstate = perturbation(state, fixed, rng, host)
    ref = (*dynamics.tendencies(rank_mesh, *state, *fixed, physics),
           *dynamics.tendencies_tl(rank_mesh, *state, *fixed, physics, *dstate))
    got = (*fused.fused_tendencies(rank_mesh, *state, *fixed, physics),
           *fused_tangent.fused_tendencies_tl(rank_mesh, *state, *fixed, physics, *dstate))
    for name, a, b in zip(dynamics.TARGETS + tuple("d" + t for t in dynamics.TARGETS), got, ref):
        np.testing.assert_array_equal(a, b, err_msg=name)


@pytest.mark.parametrize("variant", ["mpas_ke_diffusion", "perot_ke_held_suarez_del4"])
def test_local_rows_equal_one_process_on_host(on_host, mesh, rng, variant):
    """On every rank's local mesh (3 ranks, the core's halo depth) the owned rows of the fused
    tendencies and their tangents (phi_s perturbed) equal the one-process rows bitwise."""
    state, fixed, physics = setup(mesh, rng, variant, np.float64, host)
    dstate = perturbation(state, fixed, rng, host)
    whole = (*fused.fused_tendencies(mesh, *state, *fixed, physics),
             *fused_tangent.fused_tendencies_tl(mesh, *state, *fixed, physics, *dstate))
    owner = partition_sfc(mesh, 3)
    for rank in range(3):
        local = local_mesh(mesh, owner, rank, halo_depth=halo_depth())
        rows = [local.l2g[loc] for loc in ("cell", "cell", "edge", "cell", "vertex")]
        part = [host(np.asarray(a)[r]) for a, r in zip((*state, *fixed), rows)]
        dpart = [host(np.asarray(a)[r]) for a, r in zip(dstate, rows)]
        local_physics = physics if physics.forcing is None else replace(
            physics, forcing=HeldSuarez(host(local.mesh.latCell)))
        got = (*fused.fused_tendencies(local.mesh, *part, local_physics),
               *fused_tangent.fused_tendencies_tl(local.mesh, *part, local_physics, *dpart))
        for g, w, loc in zip(got, whole, ("cell", "cell", "edge") * 2):
            n = local.n_owned(loc)
            np.testing.assert_array_equal(g[:n], w[local.l2g[loc][:n]], err_msg=f"{rank} {loc}")


@pytest.mark.parametrize("variant", VARIANTS)
def test_steps_equal_the_operator_path_bitwise(on_host, mesh, rng, variant, cell_pass):
    state, fixed, physics = setup(mesh, rng, variant, np.float64, host)
    ref = run(mesh, [y.copy() for y in state], fixed, physics, False)
    got = run(mesh, state, fixed, physics, True)
    assert len(on_host["hydrostatic"]) == (5 if cell_pass else 4) * 4 * STEPS
    for name, a, b in zip(Model.state_names, got, ref):
        np.testing.assert_array_equal(a, b, err_msg=name)


@pytest.mark.parametrize("variant", VARIANTS)
def test_float32_steps_equal_the_operator_path_bitwise(on_host, mesh, rng, variant, cell_pass):
    state, fixed, physics = setup(mesh, rng, variant, np.float32, host)
    ref = run(mesh, [y.copy() for y in state], fixed, physics, False)
    got = run(mesh, state, fixed, physics, True)
    for name, a, b in zip(Model.state_names, got, ref):
        assert a.dtype == np.float32
        np.testing.assert_array_equal(a, b, err_msg=name)


def test_each_run_compiles_the_kernels_it_launches(on_host, mesh, rng):
    """A module of the family holds one group (forward, tangent-linear, adjoint) of one lane shape:
    forward steps compile their four kernels, a tangent-linear step adds its four (those that
    advance the forward too), an adjoint step
    those of its mode (deterministic, then atomic); no module holds kernels of two groups or lane
    shapes."""
    modules = []
    current = kernels.launcher()

    def compile(module):
        modules.append(module)
        return current.compile(module)

    def compiled():
        return {name for m in modules if m.family == "hydrostatic" for name in m.names}
    state, fixed, physics = setup(mesh, rng, "del4", np.float64, host)
    with kernels.use_launcher(current.replace(compile=compile)):
        model = Model(mesh, *state, *fixed, DT, physics, fused=True)
        model.step()
        assert compiled() == set(on_host["hydrostatic"]) == {"hs_pv_vertex", "hs_pv_edge",
                                                             "hs_cell_stage", "hs_edge_stage"}
        rk4_step_tl(model, *model.state, *perturbation(model.state, fixed, rng, host))
        assert compiled() == set(on_host["hydrostatic"])
        assert {name for name in compiled() if "_tl" in name or "_ftl" in name} == {
            "hs_pv_vertex_tl", "hs_pv_edge_tl", "hs_cell_stage_ftl", "hs_edge_stage_ftl"}
        adj = tuple(host(rng.standard_normal(np.shape(y))) for y in model.state)
        rk4_step_adj(model, *model.state, *adj, mode="deterministic")
        assert compiled() == set(on_host["hydrostatic"])
        assert {name for name in compiled() if name.startswith("hs_adj")} == {
            "hs_adj_edge", "hs_adj_vertex", "hs_adj_u", "hs_adj_mass", "hs_adj_column"}
        rk4_step_adj(model, *model.state, *adj, mode="atomic")
        assert compiled() == set(on_host["hydrostatic"])
    for module in modules:
        shapes = {(fused._KERNELS.kernels[name].group, fused._KERNELS.kernels[name].threads)
                  for name in module.names} if module.family == "hydrostatic" else {()}
        assert len(shapes) == 1, module


def test_fused_path_refuses_numpy_fields(mesh, rng):
    state, fixed, physics = setup(mesh, rng, "baroclinic", np.float64, np.asarray)
    with pytest.raises(ValueError, match="fused: the fused RK4 kernels run on CuPy fields"):
        Model(mesh, *state, *fixed, DT, physics, fused=True)
    assert not Model(mesh, *state, *fixed, DT, physics).fused


# -- on a GPU -------------------------------------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_gpu_steps_equal_the_operator_path(mesh, rng, variant, dtype, cell_pass):
    """Steps, tendencies and a tangent-linear step (phi_s perturbed) of the fused path on CuPy:
    in float64 the steps and tendencies bitwise, the tangent-linear step to 1e-12 (nvcc contracts
    the multiply-add pairs of the operator path's pv_flux_e2e_tl and specific_volume_tl in its
    own way: 1.4e-13 measured on an H200)."""
    check_gpu_against_the_operator_path(mesh, rng, variant, dtype, (A, B))


@pytest.mark.gpu
@pytest.mark.parametrize("variant", ["baroclinic", "mpas_ke_diffusion"])
def test_gpu_columns_longer_than_a_warp_equal_the_operator_path(mesh, rng, variant, cell_pass):
    """45 layers: the column passes take a column's levels in two chunks of a warp's lanes
    (meshops/cuda/warp_column.cuh), with the scans carried from one to the next; as above in float64."""
    check_gpu_against_the_operator_path(mesh, rng, variant, np.float64,
                                        levels.hybrid_coefficients(45, top_pa=500.0))


def check_gpu_against_the_operator_path(mesh, rng, variant, dtype, coefficients):
    cupy = pytest.importorskip("cupy")
    state, fixed, physics = setup(mesh, rng, variant, dtype, cupy.asarray, coefficients)
    ref = run(mesh, [y.copy() for y in state], fixed, physics, False)
    got = run(mesh, state, fixed, physics, None)
    tend_ref = dynamics.tendencies(mesh, *state, *fixed, physics)
    tend = fused.fused_tendencies(mesh, *state, *fixed, physics)
    dstate = perturbation(state, fixed, rng, cupy.asarray)
    tl_ref = rk4_step_tl(Model(mesh, *state, *fixed, DT, physics, fused=False), *state, *dstate)
    tl = rk4_step_tl(Model(mesh, *state, *fixed, DT, physics), *state, *dstate)
    for name, a, b in [*zip(Model.state_names, got, ref), *zip(dynamics.TARGETS, tend, tend_ref),
                       *zip(("dmass", "dtheta_mass", "du"), tl, tl_ref)]:
        a, b = cupy.asnumpy(a), cupy.asnumpy(b)
        if dtype == np.float64 and name.startswith("d"):
            assert _max_rel(a, b) <= 1e-12, name
        elif dtype == np.float64:
            np.testing.assert_array_equal(a, b, err_msg=name)
        else:
            assert _max_rel(a, b) <= F32_TOL, name


def test_the_config_refuses_fused_kernels_off_the_gpu_and_leaves_the_choice_to_the_model():
    from framework.errors import ConfigError
    from meshrun.config import load_config

    with pytest.raises(ConfigError, match=r"dynamics.fused = true with backend = 'numpy'.*"
                                          r"expected backend: cupy"):
        load_config("jw06_baroclinic_l5", ["dynamics.fused=true"])
    assert load_config("jw06_baroclinic_l5", ["backend=cupy", "dynamics.fused=true"]).dynamics.fused
    # by default the model's choice: fused on CuPy, the operator path on NumPy
    assert load_config("jw06_baroclinic_l5").dynamics.fused is None


@pytest.mark.gpu
def test_gpu_run_with_fused_kernels_writes_the_operator_paths_history(tmp_path):
    """`meshrun.run` of the JW06 wave at level 3 on CuPy (float64), with dynamics.fused true and
    false: the same history, bitwise."""
    pytest.importorskip("cupy")
    import meshrun

    runs = {}
    for flag in ("true", "false"):
        runs[flag] = meshrun.run(
            "jw06_baroclinic_l5", "backend=cupy", f"dynamics.fused={flag}",
            "mesh.generate.level=3", "mesh.generate.lloyd=10", "time.days=1", "time.dt=1800",
            "output.interval_hours=12", f"output.path={tmp_path / flag}.nc",
            f"restart.path={tmp_path / flag}.restart.nc")
    for name in ("surface_pressure", "theta", "uReconstructZonal"):
        np.testing.assert_array_equal(runs["true"][name].values, runs["false"][name].values,
                                      err_msg=name)
