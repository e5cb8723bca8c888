"""The model's tangent-linear and adjoint steps on 1-4 ranks (framework.stepper with
swm.distribution.Distributed): dot-product tests over owned rows with global inner products, the
gathered tangent-linear and the gathered deterministic gradient equal one process's bitwise (the
atomic one to round-off), on metis and space-filling-curve partitions; halo rows of the inputs are
never read (NaN there) and the adjoint's outputs have zero halo rows."""
import numpy as np
import pytest

from adjoint import dot_product_test
from framework.stepper import rk4_step_adj, rk4_step_tl
from meshops.modes import ADJOINT_MODES
from meshops.parallel.comm import allreduce_sum
from framework.distribution import owned_inner
from swm.distribution import Distributed, halo_depth
from swm.model import Model

from ..adjoint.states import DT, PHYSICS, adjoint_inputs, directions, perturbed_state
from .conftest import decomposition, local_fields, owned_rows

CONTROLS = ("cell", "edge", "cell")          # (h0, u0, b)
STATE = ("cell", "edge")                     # (h, u)


def _setup(comm, mesh, rng, physics, case="williamson5", method="metis"):
    """The global base state and the serial model (every rank), this rank's distribution and its
    model on the local mesh."""
    h, u, b, f = perturbed_state(mesh, case, rng)
    p = PHYSICS[physics]
    serial = Model(mesh, h, u, b, f, DT, p)
    d = decomposition(comm, mesh, method=method, halo_depth=halo_depth(p))
    dist = Distributed(d, comm, np.float64)
    local = [dist.scatter(loc, a if comm.Get_rank() == 0 else None)
             for loc, a in zip(("cell", "edge", "cell", "vertex"), (h, u, b, f))]
    model = Model(d.mesh, *local, DT, p, distribution=dist)
    return serial, model, dist


def _starts(model, steps):
    run = Model(model.mesh, model.h.copy(), model.u.copy(), model.b, model.f_vertex, model.dt,
                model.physics, distribution=model.distribution, device_mesh=model.device_mesh)
    starts = []
    for _ in range(steps):
        starts.append((run.h.copy(), run.u.copy()))
        run.step()
    return starts


def _tl(model, starts, dh, du, db):
    for h, u in starts:
        dh, du = rk4_step_tl(model, h, u, dh, du, db)
    return dh, du


def _adj(model, starts, h_adj, u_adj, mode):
    b_adj = None
    for h, u in reversed(starts):
        h_adj, u_adj, b_step = rk4_step_adj(model, h, u, h_adj, u_adj, mode=mode)
        b_adj = b_step if b_adj is None else b_adj + b_step
    return h_adj, u_adj, b_adj


@pytest.mark.parametrize("steps", [1, 3])
@pytest.mark.parametrize("mode", ADJOINT_MODES)
def test_dot_product_on_ranks(comm, ico_mesh, rng, mode, steps):
    """<M' x, y> = <x, M'^T y> over owned rows of every rank, controls (h0, u0, b), all physics;
    the adjoint's halo rows are zero."""
    _, model, dist = _setup(comm, ico_mesh, rng, "all", "williamson6")
    starts = _starts(model, steps)
    x = local_fields(dist, directions(ico_mesh, rng), CONTROLS)
    y = local_fields(dist, adjoint_inputs(ico_mesh, rng), STATE)
    adjoint = _adj(model, starts, *y, mode)
    for a, loc in zip(adjoint, CONTROLS):
        assert not np.any(a[dist.owned[loc]:]) and np.all(np.isfinite(a))
    result = dot_product_test(
        lambda *d: _tl(model, starts, *d), lambda *a: _adj(model, starts, *a, mode), x, y,
        restrict=lambda arrays, side: owned_rows(dist, arrays,
                                                 CONTROLS if side == "domain" else STATE),
        allreduce=allreduce_sum(comm))
    assert result.relative_error <= 1e-12, result


@pytest.mark.parametrize("physics,method", [("plain", "metis"), ("all", "metis"), ("all", "sfc")])
def test_tangent_linear_and_gradient_equal_one_process(comm, ico_mesh, rng, physics, method):
    """Three steps: the gathered tangent-linear and the gathered deterministic gradient (adjoint of
    a random y) equal one process's bitwise, the atomic gradient to round-off; owned_inner equals
    the inner product of the gathered fields."""
    serial, model, dist = _setup(comm, ico_mesh, rng, physics, method=method)
    x, y = directions(ico_mesh, rng), adjoint_inputs(ico_mesh, rng)
    starts, serial_starts = _starts(model, 3), _starts(serial, 3)
    tl = _tl(model, starts, *local_fields(dist, x, CONTROLS))
    gathered = [dist.gather(loc, a) for a, loc in zip(tl, STATE)]
    if comm.Get_rank() == 0:
        for got, ref in zip(gathered, _tl(serial, serial_starts, *x)):
            assert np.array_equal(got, ref)
    for mode in ADJOINT_MODES:
        adjoint = _adj(model, starts, *local_fields(dist, y, STATE), mode)
        gathered = [dist.gather(loc, a) for a, loc in zip(adjoint, CONTROLS)]
        if comm.Get_rank() == 0:
            reference = _adj(serial, serial_starts, *y, mode)
            diffs = [np.abs(g - r).max() / np.abs(r).max() for g, r in zip(gathered, reference)]
            print(f"{comm.Get_size()} ranks, {physics}, {method}, {mode}: largest relative "
                  f"difference of the gradient (h0, u0, b) from one process's: {max(diffs):.2e}")
            if mode == "deterministic":
                assert all(np.array_equal(g, r) for g, r in zip(gathered, reference)), diffs
            assert max(diffs) <= 1e-13, diffs
        pairs = [(loc, a, b) for loc, a, b in zip(CONTROLS, adjoint, local_fields(dist, x, CONTROLS))]
        total = owned_inner(dist, pairs)
        if comm.Get_rank() == 0:
            exact = sum(float(np.dot(g, b)) for g, b in zip(gathered, x))
            assert abs(total - exact) <= 1e-13 * sum(float(np.abs(g) @ np.abs(b))
                                                     for g, b in zip(gathered, x))


def test_one_adjoint_exchange_per_stage(comm, ico_mesh, rng):
    """An adjoint step sends one message per neighbour and stage (its adjoint tendencies), a
    tangent-linear step likewise (db with the first stage's)."""
    _, model, dist = _setup(comm, ico_mesh, rng, "plain")
    h, u = model.h.copy(), model.u.copy()
    exchanges = (dist.state_exchange, dist.control_exchange)
    neighbours = len(dist.state_exchange.neighbours)

    def sent():
        return sum(ex.stats.messages_sent for ex in exchanges)

    before = sent()
    rk4_step_adj(model, h, u, *local_fields(dist, adjoint_inputs(ico_mesh, rng), STATE))
    after_adj = sent()
    rk4_step_tl(model, h, u, *local_fields(dist, directions(ico_mesh, rng), CONTROLS))
    # forward stage states (4 exchanges) and adjoint stages (4); tangent-linear: 4 + 4
    assert after_adj - before == 8 * neighbours
    assert sent() - after_adj == 8 * neighbours


def test_snapshot_room_is_shared_by_the_ranks_of_a_host_and_equal_on_all(comm):
    from adjoint.snapshot_memory import capacity, sharers
    from meshops.parallel.comm import host_name

    hosts = comm.allgather(host_name())
    assert sharers(comm, np) == hosts.count(hosts[comm.Get_rank()])
    room, basis = capacity(comm, np, 2 ** 20)
    assert basis["sharers"] == sharers(comm, np) >= 1
    assert len(set(comm.allgather(room))) == 1 and room > 0


def test_terms_of_every_target_on_ranks(comm, ico_mesh, rng):
    """With terms of one's own of every target (tests/swm/test_term_targets.py: tend_h, tend_u
    and a second pv_edge correction 3 halo layers deep) beside all physics, three steps on ranks:
    the forward, the gathered tangent-linear and deterministic gradient equal one process's
    bitwise, and the dot test over owned rows passes (1e-12)."""
    from dataclasses import replace

    from ..swm.test_term_targets import SurfaceRelaxation, ThicknessDrag, ThicknessSlopeCorrection

    h, u, b, f = perturbed_state(ico_mesh, "williamson6", rng)
    eta = 5000.0 + 300.0 * rng.standard_normal(ico_mesh.nCells)

    def physics(eta_rows):
        return replace(PHYSICS["all"], extra_terms=(SurfaceRelaxation(eta_rows, 1e-4), ThicknessDrag(1e-4),
                                                    ThicknessSlopeCorrection(1e-8)))
    serial = Model(ico_mesh, h, u, b, f, DT, physics(eta))
    assert halo_depth(serial.physics) == 3
    d = decomposition(comm, ico_mesh, method="metis", halo_depth=3)
    dist = Distributed(d, comm, np.float64)
    local = [dist.scatter(loc, a if comm.Get_rank() == 0 else None)
             for loc, a in zip(("cell", "edge", "cell", "vertex"), (h, u, b, f))]
    model = Model(d.mesh, *local, DT, physics(eta[d.local.l2g["cell"]]), distribution=dist)
    x, y = directions(ico_mesh, rng), adjoint_inputs(ico_mesh, rng)
    starts, serial_starts = _starts(model, 3), _starts(serial, 3)
    results = [dist.gather(loc, a) for a, loc in zip(starts[-1], STATE)]
    results += [dist.gather(loc, a) for a, loc in zip(_tl(model, starts, *local_fields(dist, x, CONTROLS)), STATE)]
    results += [dist.gather(loc, a) for a, loc in
                zip(_adj(model, starts, *local_fields(dist, y, STATE), "deterministic"), CONTROLS)]
    if comm.Get_rank() == 0:
        references = (*serial_starts[-1], *_tl(serial, serial_starts, *x),
                      *_adj(serial, serial_starts, *y, "deterministic"))
        for i, (got, ref) in enumerate(zip(results, references)):
            assert np.array_equal(got, ref), i
    result = dot_product_test(
        lambda *dx: _tl(model, starts, *dx), lambda *a: _adj(model, starts, *a, "deterministic"),
        local_fields(dist, x, CONTROLS), local_fields(dist, y, STATE),
        restrict=lambda arrays, side: owned_rows(dist, arrays,
                                                 CONTROLS if side == "domain" else STATE),
        allreduce=allreduce_sum(comm))
    assert result.relative_error <= 1e-12, result
