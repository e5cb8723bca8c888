"""The stepper (framework.stepper) for a model other than shallow water: a state of three fields (mass
and theta_mass on cells, u on edges, as the hydrostatic core's) and a control on cells, through
`TendencyStages` of its own tendencies, with its tangent-linear and adjoint. The sweeps are the
shallow-water model's: the dot test and the Taylor test pass, and on a distribution every sweep
exchanges the whole state tuple once per stage (the control's perturbation with the first
tangent-linear stage) and the adjoint's halo rows are zero."""
from types import SimpleNamespace

import numpy as np
import pytest

from adjoint import dot_product_test, tangent_taylor_test
from framework.stepper import TendencyStages, rk4_step, rk4_step_adj, rk4_step_and_tl, rk4_step_tl

N_CELLS, N_EDGES, DT = 12, 20, 0.05


@pytest.fixture
def toy(rng):
    """(model, state, control): coupled nonlinear tendencies through a random edge-cell matrix G,

        T_mass = -G^T (u G mass),  T_theta = -G^T (u G theta),  T_u = -G (s + theta / mass),

    with the control s on cells."""
    G = rng.standard_normal((N_EDGES, N_CELLS)) / 3

    def tendency(p, s):
        mass, theta, u = p
        return -G.T @ (u * (G @ mass)), -G.T @ (u * (G @ theta)), -G @ (s + theta / mass)

    def tendency_tl(p, dp, dc):
        (mass, theta, u), (dmass, dtheta, du) = p, dp
        ds = dc[0] if dc else 0.0
        return (-G.T @ (du * (G @ mass) + u * (G @ dmass)), -G.T @ (du * (G @ theta) + u * (G @ dtheta)),
                -G @ (ds + dtheta / mass - theta * dmass / mass**2))

    def tendency_adj(p, k_adj, mode):
        (mass, theta, u), (a_mass, a_theta, a_u) = p, k_adj
        w_mass, w_theta, v = -G @ a_mass, -G @ a_theta, -G.T @ a_u
        return (G.T @ (u * w_mass) - v * theta / mass**2, G.T @ (u * w_theta) + v / mass,
                w_mass * (G @ mass) + w_theta * (G @ theta), v)

    state = (1.0 + 0.1 * np.abs(rng.standard_normal(N_CELLS)), rng.standard_normal(N_CELLS),
             rng.standard_normal(N_EDGES))
    s = rng.standard_normal(N_CELLS)
    model = SimpleNamespace(dt=DT, distribution=None, state_locations=("cell", "cell", "edge"),
                            control_locations=("cell",), mesh=None)
    model.stages = TendencyStages(lambda p: tendency(p, model.s), tendency_tl, tendency_adj)
    model.s = s
    return model, state, s


def directions(rng):
    return (rng.standard_normal(N_CELLS), rng.standard_normal(N_CELLS), rng.standard_normal(N_EDGES),
            rng.standard_normal(N_CELLS))


def test_three_fields_and_a_control(toy, rng):
    """Dot test of the tangent-linear and adjoint steps (1e-12) and the Taylor test of the
    tangent-linear against the forward step (rate >= 1.9); inputs are not modified."""
    model, state, s = toy
    y = directions(rng)[:3]
    inputs = [a.copy() for a in (*state, s)]
    result = dot_product_test(lambda *x: rk4_step_tl(model, *state, *x),
                              lambda *a: rk4_step_adj(model, *state, *a), directions(rng), y)
    assert result.relative_error <= 1e-12, result
    assert all(np.array_equal(a, b) for a, b in zip(inputs, (*state, s)))

    def forward(*x):
        model.s = x[3]
        return rk4_step(model, *(a.copy() for a in x[:3]))

    def tangent(*x):
        model.s = x[3]
        return rk4_step_tl(model, *x[:3], *x[4:])

    result = tangent_taylor_test(forward, tangent, (*state, s), directions(rng), y)
    assert not result.exact and result.passed(1.9), result


def test_exchanges_of_the_state_tuple(toy, rng):
    """On a distribution (exchanges recording what they get): one exchange of the three fields per
    stage in every sweep, the control's perturbation with the first tangent-linear stage; the
    adjoint's owned rows are one process's bitwise and its halo rows zero."""
    model, state, s = toy
    x, y = directions(rng), directions(rng)[:3]
    serial = rk4_step_adj(model, *state, *y)
    calls = []
    model.distribution = SimpleNamespace(exchange=lambda *f: calls.append(("state", len(f))),
                                         exchange_tl=lambda *f: calls.append(("tl", len(f))))
    model.mesh = SimpleNamespace(nCellsSolve=N_CELLS - 3, nEdgesSolve=N_EDGES - 5)
    rk4_step(model, *(a.copy() for a in state))
    assert calls == [("state", 3)] * 4
    calls.clear()
    rk4_step_tl(model, *state, *x)
    assert calls == [("state", 3)] * 4 + [("tl", 4)] + [("tl", 3)] * 3
    calls.clear()
    got = rk4_step_adj(model, *state, *y)
    assert calls == [("state", 3)] * 4 + [("tl", 3)] * 4
    for g, r, n in zip(got, serial, (N_CELLS - 3, N_CELLS - 3, N_EDGES - 5, N_CELLS - 3)):
        assert np.array_equal(g[:n], r[:n]) and not np.any(g[n:])
    with pytest.raises(TypeError, match=r"rk4_step_adj: expected the state and its adjoint \(6 arrays\), got 7"):
        rk4_step_adj(model, *state, *directions(rng))


def test_the_step_and_its_tangent_linear_in_one_sweep(toy, rng):
    """rk4_step_and_tl: rk4_step's state and rk4_step_tl's tangent bitwise, the perturbation
    inputs unmodified; on a distribution one exchange of the state and one of its tangent per
    stage (the control's perturbation with the first)."""
    model, state, s = toy
    x = directions(rng)
    want = rk4_step(model, *(a.copy() for a in state)), rk4_step_tl(model, *state, *x)
    inputs = [a.copy() for a in x]
    got = rk4_step_and_tl(model, *(a.copy() for a in state), *x)
    for g, w in zip(got, want):
        assert all(np.array_equal(a, b) for a, b in zip(g, w))
    assert all(np.array_equal(a, b) for a, b in zip(inputs, x))
    calls = []
    model.distribution = SimpleNamespace(exchange=lambda *f: calls.append(("state", len(f))),
                                         exchange_tl=lambda *f: calls.append(("tl", len(f))))
    model.mesh = SimpleNamespace(nCellsSolve=N_CELLS - 3, nEdgesSolve=N_EDGES - 5)
    rk4_step_and_tl(model, *(a.copy() for a in state), *x)
    assert calls == [("state", 3), ("tl", 4)] + [("state", 3), ("tl", 3)] * 3
