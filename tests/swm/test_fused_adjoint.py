"""The fused adjoint of the RK4 stage (swm.fused_adjoint, swm/cuda/shallow_water_adjoint.cu)
against the operator path's adjoint (swm.tendencies.tendencies_adj, the reference).

On the host (the CUDA sources compiled with g++, tests/meshops/host_harness.py): one stage's
adjoint equals the operator path's to round-off with APVM and viscosity, nlev 1 and 4, on meshes
with missing neighbours and with pad slots; the adjoint RK4 step of a fused model equals the
operator path's, passes the dot-product test against the tangent-linear step, and is bitwise the
same on every call. On a GPU (marked gpu) the same on CuPy at level 4.
"""
import re

import numpy as np
import pytest

from framework.stepper import rk4_step_adj, rk4_step_tl
from swm.tendencies import tendencies_adj
from meshops.device import kernels
from swm import fused_adjoint, fused_tangent
from swm.fused import fused_record
from swm.fused_adjoint import FusedStageAdjoint
from swm.model import Model

from tests.dot_products import assert_adjoint_identity
from tests.meshops.host_harness import HostArray, host, host_fixtures
from tests.meshops.test_kernel_launch import _check_signature
from tests.swm.test_fused import (FAMILIES, PHYSICS, _rel, ico, ico4, mpas, padded,  # noqa: F401
                                  random_state, rank_mesh)

host_kernels, on_host = host_fixtures(*FAMILIES, "shallow_water_adjoint", "shallow_water_tl")
DT = 600.0          # the apvm physics' dt (tests.swm.test_fused.PHYSICS): the model's must equal it


def adjoint_inputs(mesh, rng, nlev=None, dtype=np.float64):
    shape = (lambda n: (n,)) if nlev is None else (lambda n: (n, nlev))
    return (rng.standard_normal(shape(mesh.nCells)).astype(dtype),
            rng.standard_normal(shape(mesh.nEdges)).astype(dtype))


@pytest.mark.parametrize("module, name", [(fused_adjoint, "shallow_water_adjoint"),
                                          (fused_tangent, "shallow_water_tl")])
def test_declarations_match_the_cuda_signatures(module, name):
    source = (module.CUDA_DIR / f"{name}.cu").read_text()
    for kernel in module._KERNELS.kernels.values():
        _check_signature(kernel, [source])
    assert set(re.findall(r"__global__ void (\w+)\(", source)) == set(module._KERNELS.names)


@pytest.fixture(params=["ico", "mpas", "rank_mesh", "padded"])
def any_mesh(request):
    return request.getfixturevalue(request.param).replace()      # its own DeviceMesh


def stage_adjoint(mesh, state, physics, adj, convert):
    """The fused adjoint of the tendencies at `state` (stage 1 of a step from it)."""
    h, u, b, f = map(convert, state)
    record = fused_record(mesh, h, u, b, f, physics)
    return FusedStageAdjoint(mesh)(record, physics, *map(convert, adj))


@pytest.mark.parametrize("nlev", [None, 4])
@pytest.mark.parametrize("physics", list(PHYSICS), ids=str)
def test_stage_adjoint_on_host(any_mesh, physics, nlev, on_host, rng):
    """h_adj, u_adj, b_adj of the fused stage equal the operator path's (NumPy) to 1e-12."""
    physics = PHYSICS[physics]
    state, adj = random_state(any_mesh, rng, nlev), adjoint_inputs(any_mesh, rng, nlev)
    ref = tendencies_adj(any_mesh, *state, physics, *adj, mode="deterministic")
    got = stage_adjoint(any_mesh, state, physics, adj, host)
    assert on_host["shallow_water_adjoint"] == ["sw_adj_phi", "sw_adj_edge", "sw_adj_vertex",
                                                "sw_adj_u", "sw_adj_h"]
    for name, r, g in zip(("h_adj", "u_adj", "b_adj"), ref, got):
        assert isinstance(g, HostArray)
        assert _rel(g, r) <= 1e-12, name


@pytest.mark.parametrize("physics", ["plain", "apvm_visc2_visc4"])
def test_step_adjoint_on_host(ico, physics, on_host, rng):
    """The adjoint RK4 step of a fused model: equal to the operator path's to 1e-12, bitwise the
    same on a second call, and the dot-product test against the tangent-linear step (1e-12 of
    its sums' scale, tests.dot_products)."""
    physics = PHYSICS[physics]
    h, u, b, f = random_state(ico, rng)
    fused = Model(ico, *map(host, (h, u, b, f)), DT, physics, fused=True)
    numpy = Model(ico, h, u, b, f, DT, physics)
    h_adj, u_adj = adjoint_inputs(ico, rng)
    got = rk4_step_adj(fused, host(h), host(u), host(h_adj), host(u_adj), mode="deterministic")
    again = rk4_step_adj(fused, host(h), host(u), host(h_adj), host(u_adj), mode="deterministic")
    ref = rk4_step_adj(numpy, h, u, h_adj, u_adj, mode="deterministic")
    for name, g, a, r in zip(("h_adj", "u_adj", "b_adj"), got, again, ref):
        assert np.array_equal(g, a), name
        assert _rel(g, r) <= 1e-12, name
    dh, du, db = (10.0 * rng.standard_normal(ico.nCells), rng.standard_normal(ico.nEdges),
                  10.0 * rng.standard_normal(ico.nCells))
    tangent = rk4_step_tl(numpy, h, u, dh, du, db)
    assert_adjoint_identity(tangent, (h_adj, u_adj), (dh, du, db), got)


def test_exchanging_model_takes_the_stage_loop_on_host(ico, on_host, rng):
    """A model that exchanges its state (here swm.distribution.Serial's no-op exchanges, as a
    rank's model is built) runs the fused stages in framework.stepper's loop, with the exchanges
    between them: the same adjoint as the in-kernel bookkeeping of one process, to round-off, and
    the same tangent-linear bitwise."""
    from framework.distribution import Serial

    serial = Serial(ico, None)
    h, u, b, f = random_state(ico, rng)
    physics = PHYSICS["apvm_visc2_visc4"]
    models = [Model(ico, *map(host, (h, u, b, f)), DT, physics, fused=True, **extra)
              for extra in ({}, dict(distribution=serial))]
    adj = adjoint_inputs(ico, rng)
    one, looped = (rk4_step_adj(m, host(h), host(u), *map(host, adj)) for m in models)
    assert on_host["shallow_water_adjoint"].count("sw_adj_h") == 8
    for name, a, b_ in zip(("h_adj", "u_adj", "b_adj"), one, looped):
        assert _rel(b_, np.asarray(a)) <= 1e-13, name
    x = (host(10.0 * rng.standard_normal(ico.nCells)), host(rng.standard_normal(ico.nEdges)), None)
    one, looped = (rk4_step_tl(m, host(h), host(u), *x) for m in models)
    for name, a, b_ in zip(("dh", "du"), one, looped):
        assert np.array_equal(a, b_), name


@pytest.mark.parametrize("mode", ["deterministic", "atomic"])
def test_stage_adjoint_builds_the_tables_it_reads_first(ico, mode, on_host, rng):
    """The first stage adjoint of a mode builds `fused_adjoint.TABLES[mode]` together (on
    threads); its passes read no other table. The mode comes from the meshops default here."""
    from meshops import adjoint_mode
    from meshops.device.mesh import for_fields

    mesh = ico.replace()                                            # its own DeviceMesh
    h, u, b, f = map(host, random_state(mesh, rng))
    record = fused_record(mesh, h, u, b, f, PHYSICS["plain"])
    m = for_fields(mesh, h)
    before = {key[0] for key in m._arrays}
    adj = map(host, adjoint_inputs(mesh, rng))
    with adjoint_mode(mode):
        FusedStageAdjoint(mesh)(record, PHYSICS["plain"], *adj)
    assert set(fused_adjoint.TABLES[mode]) <= set(m.host.names())
    assert {key[0] for key in m._arrays} - before <= set(fused_adjoint.TABLES[mode])


@pytest.mark.parametrize("nlev", [None, 4])
@pytest.mark.parametrize("physics", ["plain", "apvm_visc2_visc4"])
def test_atomic_stage_adjoint_on_host(any_mesh, physics, nlev, on_host, rng):
    """Atomic mode (scatters through the forward tables): the operator path's adjoint to 1e-12."""
    physics = PHYSICS[physics]
    state, adj = random_state(any_mesh, rng, nlev), adjoint_inputs(any_mesh, rng, nlev)
    ref = tendencies_adj(any_mesh, *state, physics, *adj, mode="atomic")
    h, u, b, f = map(host, state)
    record = fused_record(any_mesh, h, u, b, f, physics)
    got = FusedStageAdjoint(any_mesh)(record, physics, *map(host, adj), mode="atomic")
    assert on_host["shallow_water_adjoint"] == ["sw_adj_edge_atomic", "sw_adj_edge_finish_atomic",
                                                "sw_adj_vertex_atomic", "sw_adj_u_sum", "sw_adj_h_sum"]
    for name, r, g in zip(("h_adj", "u_adj", "b_adj"), ref, got):
        assert _rel(g, r) <= 1e-12, name


def test_atomic_step_adjoint_on_host(ico, on_host, rng):
    """The atomic adjoint step of a fused model equals the deterministic one to round-off."""
    h, u, b, f = random_state(ico, rng)
    fused = Model(ico, *map(host, (h, u, b, f)), DT, PHYSICS["apvm_visc2_visc4"], fused=True)
    adj = adjoint_inputs(ico, rng)
    atomic, deterministic = (rk4_step_adj(fused, host(h), host(u), *map(host, adj), mode=mode)
                             for mode in ("atomic", "deterministic"))
    for name, a, d in zip(("h_adj", "u_adj", "b_adj"), atomic, deterministic):
        assert _rel(a, np.asarray(d)) <= 1e-12, name


@pytest.mark.parametrize("physics", ["plain", "apvm_visc2_visc4"])
@pytest.mark.parametrize("with_db", [False, True])
def test_tangent_step_on_host(ico, physics, with_db, on_host, rng):
    """The fused tangent-linear step equals the operator path's (NumPy) to 1e-12 and passes the dot
    test against the fused adjoint step (1e-12 of its sums' scale)."""
    physics = PHYSICS[physics]
    h, u, b, f = random_state(ico, rng)
    fused = Model(ico, *map(host, (h, u, b, f)), DT, physics, fused=True)
    numpy = Model(ico, h, u, b, f, DT, physics)
    dh, du, db = (10.0 * rng.standard_normal(ico.nCells), rng.standard_normal(ico.nEdges),
                  10.0 * rng.standard_normal(ico.nCells) if with_db else None)
    got = rk4_step_tl(fused, host(h), host(u), host(dh), host(du), None if db is None else host(db))
    assert on_host["shallow_water_tl"][:3] == ["sw_tl_vertex", "sw_tl_cell", "sw_tl_edge"]
    ref = rk4_step_tl(numpy, h, u, dh, du, db)
    for name, g, r in zip(("dh", "du"), got, ref):
        assert _rel(g, r) <= 1e-12, name
    h_adj, u_adj = adjoint_inputs(ico, rng)
    adj = rk4_step_adj(fused, host(h), host(u), host(h_adj), host(u_adj))
    assert_adjoint_identity(got, (h_adj, u_adj), (dh, du, db), adj)


# -- on a GPU -------------------------------------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("physics", list(PHYSICS), ids=str)
def test_stage_adjoint_on_gpu(ico4, physics, dtype, rng):
    import cupy

    physics = PHYSICS[physics]
    state, adj = random_state(ico4, rng, dtype=dtype), adjoint_inputs(ico4, rng, dtype=dtype)
    ref = tendencies_adj(ico4, *(a.astype(np.float64) for a in state), physics,
                         *(a.astype(np.float64) for a in adj), mode="deterministic")
    got = stage_adjoint(ico4, state, physics, adj, cupy.asarray)
    for name, r, g in zip(("h_adj", "u_adj", "b_adj"), ref, got):
        assert _rel(cupy.asnumpy(g), r) <= (1e-12 if dtype == np.float64 else 1e-4), name


@pytest.mark.gpu
@pytest.mark.parametrize("physics", ["plain", "apvm_visc2_visc4"])
def test_step_adjoint_on_gpu(ico4, physics, rng):
    import cupy

    physics = PHYSICS[physics]
    h, u, b, f = random_state(ico4, rng)
    fused = Model(ico4, *map(cupy.asarray, (h, u, b, f)), DT, physics, fused=True)
    numpy = Model(ico4, h, u, b, f, DT, physics)
    h_adj, u_adj = adjoint_inputs(ico4, rng)
    args = (cupy.asarray(h), cupy.asarray(u), cupy.asarray(h_adj), cupy.asarray(u_adj))
    got, again = (rk4_step_adj(fused, *args, mode="deterministic") for _ in range(2))
    ref = rk4_step_adj(numpy, h, u, h_adj, u_adj, mode="deterministic")
    for name, g, a, r in zip(("h_adj", "u_adj", "b_adj"), got, again, ref):
        assert bool((g == a).all()), name
        assert _rel(cupy.asnumpy(g), r) <= 1e-12, name


@pytest.mark.gpu
@pytest.mark.parametrize("physics", ["plain", "apvm_visc2_visc4"])
def test_atomic_step_adjoint_on_gpu(ico4, physics, rng):
    import cupy

    physics = PHYSICS[physics]
    h, u, b, f = random_state(ico4, rng)
    fused = Model(ico4, *map(cupy.asarray, (h, u, b, f)), DT, physics, fused=True)
    numpy = Model(ico4, h, u, b, f, DT, physics)
    h_adj, u_adj = adjoint_inputs(ico4, rng)
    got = rk4_step_adj(fused, *map(cupy.asarray, (h, u, h_adj, u_adj)), mode="atomic")
    ref = rk4_step_adj(numpy, h, u, h_adj, u_adj, mode="deterministic")
    for name, g, r in zip(("h_adj", "u_adj", "b_adj"), got, ref):
        assert _rel(cupy.asnumpy(g), r) <= 1e-12, name


@pytest.mark.gpu
@pytest.mark.parametrize("physics", ["plain", "apvm_visc2_visc4"])
def test_tangent_step_on_gpu(ico4, physics, rng):
    import cupy

    physics = PHYSICS[physics]
    h, u, b, f = random_state(ico4, rng)
    fused = Model(ico4, *map(cupy.asarray, (h, u, b, f)), DT, physics, fused=True)
    numpy = Model(ico4, h, u, b, f, DT, physics)
    dh, du, db = (10.0 * rng.standard_normal(ico4.nCells), rng.standard_normal(ico4.nEdges),
                  10.0 * rng.standard_normal(ico4.nCells))
    got = rk4_step_tl(fused, *map(cupy.asarray, (h, u, dh, du, db)))
    ref = rk4_step_tl(numpy, h, u, dh, du, db)
    for name, g, r in zip(("dh", "du"), got, ref):
        assert _rel(cupy.asnumpy(g), r) <= 1e-12, name
