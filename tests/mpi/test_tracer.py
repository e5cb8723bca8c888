"""The tracer model on 1-4 ranks (tracer.distribution.Distributed): the step, its tangent-linear
(with a wind perturbation) and its deterministic adjoint gathered equal one process's bitwise, the
atomic adjoint to round-off; the dot-product test over owned rows with global inner products; the
inputs' halo rows are never read (NaN there) and the adjoint's outputs have zero halo rows."""
import numpy as np
import pytest

from adjoint import dot_product_test
from framework.stepper import rk4_step_adj, rk4_step_tl
from grids.cache import cached_icosahedral
from meshops.modes import ADJOINT_MODES
from meshops.parallel import layers_needed
from meshops.parallel.comm import allreduce_sum
from tracer.distribution import Distributed
from tracer.model import Model
from tracer.terms import CHAINS

from .conftest import decomposition, local_fields, owned_rows, scatter

DT = 600.0
STATE, CONTROLS = ("cell",), ("cell", "edge")       # (q,), and the tangent's (dq, du)


@pytest.fixture(scope="module")
def tracer_mesh():
    return cached_icosahedral(3)


def _setup(comm, mesh, rng):
    """(q, u), the one-process model (every rank), this rank's distribution and model (q's halo
    rows NaN: the step exchanges them; the fixed wind whole on the local mesh)."""
    q, u = rng.standard_normal(mesh.nCells), 40.0 * rng.standard_normal(mesh.nEdges)
    d = decomposition(comm, mesh, halo_depth=max(layers_needed(c) for c in CHAINS))
    dist = Distributed(d, comm, np.float64)
    model = Model(d.mesh, scatter(d, "cell", q), u[d.local.l2g["edge"]], DT, distribution=dist)
    return (q, u), Model(mesh, q, u, DT), model, dist


def test_the_step_tangent_and_gradient_equal_one_process(comm, tracer_mesh, rng):
    (q, u), serial, model, dist = _setup(comm, tracer_mesh, rng)
    dq, du, w = (rng.standard_normal(n) for n in (q.size, u.size, q.size))
    local_dq, local_du = local_fields(dist, (dq, du), CONTROLS)
    (local_w,) = local_fields(dist, (w,), STATE)
    results = {"step": (model.advance(model.q.copy()), serial.advance(q)),
               "tangent": (rk4_step_tl(model, model.q, local_dq, local_du),
                           rk4_step_tl(serial, q, dq, du))}
    for mode in ADJOINT_MODES:
        adjoint = rk4_step_adj(model, model.q, local_w, mode=mode)
        for a, loc in zip(adjoint, CONTROLS):
            assert not np.any(a[dist.owned[loc]:]) and np.all(np.isfinite(a))
        results[mode] = (adjoint, rk4_step_adj(serial, q, w, mode=mode))
    for name, (got, reference) in results.items():
        locations = STATE if name in ("step", "tangent") else CONTROLS
        gathered = [dist.gather(loc, a) for a, loc in zip(got, locations)]
        if comm.Get_rank() == 0:
            for g, r in zip(gathered, reference):
                if name == "atomic":
                    assert np.abs(g - r).max() <= 1e-13 * np.abs(r).max(), name
                else:
                    assert np.array_equal(g, r), name


@pytest.mark.parametrize("mode", ADJOINT_MODES)
def test_the_dot_product_on_ranks(comm, tracer_mesh, rng, mode):
    (q, u), _, model, dist = _setup(comm, tracer_mesh, rng)
    x = local_fields(dist, (rng.standard_normal(q.size), rng.standard_normal(u.size)), CONTROLS)
    y = local_fields(dist, (rng.standard_normal(q.size),), STATE)
    result = dot_product_test(
        lambda dq, du: rk4_step_tl(model, model.q, dq, du),
        lambda w: rk4_step_adj(model, model.q, w, mode=mode), x, y,
        restrict=lambda arrays, side: owned_rows(dist, arrays, CONTROLS if side == "domain" else STATE),
        allreduce=allreduce_sum(comm))
    assert result.relative_error <= 1e-12, result
