"""The hydrostatic model's tangent-linear and adjoint steps on 1-4 ranks (framework.stepper with
hydrostatic.distribution.Distributed, all physics: del2/del4 on u and theta, Held-Suarez):
dot-product tests over owned rows with global inner products, controls (mass0, theta_mass0, u0,
phi_s); the gathered tangent-linear and deterministic gradient equal one process's bitwise, the
atomic gradient to round-off; halo rows of the inputs are never read (NaN there) and the
adjoint's outputs have zero halo rows."""
import numpy as np
import pytest

from adjoint import dot_product_test
from grids.cache import cached_icosahedral
from meshops.modes import ADJOINT_MODES
from meshops.parallel.comm import allreduce_sum

from hydrostatic.distribution import Distributed, halo_depth
from hydrostatic.model import Model

from ..hydrostatic.test_adjoint import (DT, _starts, _steps_adj, _steps_tl, base_state,
                                        direction, physics_of, randn_like)
from .conftest import decomposition, local_fields, owned_rows, scatter

CONTROLS = ("cell", "cell", "edge", "cell")     # (mass0, theta_mass0, u0, phi_s)
STATE = ("cell", "cell", "edge")
STEPS = 2


@pytest.fixture(scope="module")
def hydro_mesh():
    return cached_icosahedral(2, lloyd_iterations=50)


def _setup(comm, mesh, rng):
    """The global base state, the one-process model (every rank) and this rank's distribution and
    model on its local mesh (the state's halo rows NaN: the steps exchange them)."""
    state = base_state(mesh, rng)
    serial = Model(mesh, *state, DT, physics_of("all", mesh))
    d = decomposition(comm, mesh, method="metis", halo_depth=halo_depth())
    dist = Distributed(d, comm, np.float64, state[0].shape[1])
    fields = [scatter(d, loc, a) for loc, a in zip(STATE, state[:3])]
    fixed = [state[3][d.local.l2g["cell"]], state[4][d.local.l2g["vertex"]]]
    model = Model(d.mesh, *fields, *fixed, DT, physics_of("all", d.mesh), distribution=dist)
    return state, serial, model, dist


@pytest.mark.parametrize("mode", ADJOINT_MODES)
def test_hydrostatic_dot_product_on_ranks(comm, hydro_mesh, rng, mode):
    """<M' x, y> = <x, M'^T y> over owned rows of every rank (1e-12); the adjoint's halo rows are
    zero."""
    state, _, model, dist = _setup(comm, hydro_mesh, rng)
    starts = _starts(model, STEPS)
    x = local_fields(dist, direction(state, rng), CONTROLS)
    y = local_fields(dist, randn_like(rng, state[:3]), STATE)
    adjoint = _steps_adj(model, starts, mode, *y)
    for a, loc in zip(adjoint, CONTROLS):
        assert not np.any(a[dist.owned[loc]:]) and np.all(np.isfinite(a))
    result = dot_product_test(
        lambda *dx: _steps_tl(model, starts, *dx), lambda *a: _steps_adj(model, starts, mode, *a),
        x, y, restrict=lambda arrays, side: owned_rows(dist, arrays, CONTROLS if side == "domain" else STATE),
        allreduce=allreduce_sum(comm))
    assert result.relative_error <= 1e-12, result


def test_hydrostatic_gradient_equals_one_process(comm, hydro_mesh, rng):
    """The gathered tangent-linear and deterministic gradient equal one process's bitwise, the
    atomic gradient to 1e-13 relative."""
    state, serial, model, dist = _setup(comm, hydro_mesh, rng)
    x, y = direction(state, rng), randn_like(rng, state[:3])
    starts, serial_starts = _starts(model, STEPS), _starts(serial, STEPS)
    tl = _steps_tl(model, starts, *local_fields(dist, x, CONTROLS))
    gathered = [dist.gather(loc, a) for a, loc in zip(tl, STATE)]
    if comm.Get_rank() == 0:
        for got, ref in zip(gathered, _steps_tl(serial, serial_starts, *x)):
            assert np.array_equal(got, ref)
    for mode in ADJOINT_MODES:
        adjoint = _steps_adj(model, starts, mode, *local_fields(dist, y, STATE))
        gathered = [dist.gather(loc, a) for a, loc in zip(adjoint, CONTROLS)]
        if comm.Get_rank() == 0:
            reference = _steps_adj(serial, serial_starts, mode, *y)
            diffs = [np.abs(g - r).max() / np.abs(r).max() for g, r in zip(gathered, reference)]
            print(f"{comm.Get_size()} ranks, {mode}: largest relative difference of the gradient "
                  f"(mass0, theta_mass0, u0, phi_s) from one process's: {max(diffs):.2e}")
            if mode == "deterministic":
                assert all(np.array_equal(g, r) for g, r in zip(gathered, reference)), diffs
            assert max(diffs) <= 1e-13, diffs
