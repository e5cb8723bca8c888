"""The hydrostatic core's tangent-linear and adjoint (hydrostatic.dynamics, hydrostatic.terms,
hydrostatic.forcing) on a real level-2 icosahedral mesh with the 26 JW06 levels, about fresh
random states near the JW06 baroclinic wave: dot-product tests (relative <= 1e-12 in float64) of
each piece (column diagnostics, vertical mass flux, flux diagnostics, every term, the Held-Suarez
forcing) and of the whole tendencies in both adjoint modes, Taylor tests of each piece's tangent
and of the whole against the forward (remainders fall as eps^2), and the dot and Taylor tests of
three RK4 steps through the shared stepper with the surface geopotential as control; in float32,
the dot tests to float32's round-off and the tangent and adjoint following float64's. Marked gpu:
the same on CuPy, and CuPy's tangent-linear and adjoint equal NumPy's to round-off. On ranks:
tests/mpi/test_hydrostatic_adjoint.py."""
from dataclasses import replace

import numpy as np
import pytest

import meshops
from adjoint import dot_product_test, tangent_taylor_test
from grids.cache import cached_icosahedral
from meshops.modes import ADJOINT_MODES
from framework.constants import GRAVITY
from framework.stepper import rk4_step, rk4_step_adj, rk4_step_tl

from hydrostatic import dynamics, levels, terms, testcases
from hydrostatic.dynamics import Physics, tendencies, tendencies_adj, tendencies_tl
from hydrostatic.forcing import HeldSuarez
from hydrostatic.model import Model

A, B = levels.coefficients("jw06_26")
DT = 1200.0
#: The physics every adjoint is tested with: the dynamics alone, with del2 and del4 on u and
#: theta, with the Held-Suarez forcing, and all together.
DIFFUSION = dict(visc2=2e5, visc4=1e15, visc2_theta=1e5, visc4_theta=5e14)
PHYSICS = ("plain", "diffusion", "held_suarez", "all")
#: The diagnostics' names a term reads (`hydrostatic.terms`), with the state's.
NAMES = ("mass", "theta_mass", "u", "p_i", "p", "theta", "pi", "alpha", "phi_i", "phi", "mass_e",
         "F", "div", "theta_e", "W", "q_e")


@pytest.fixture(scope="module")
def mesh():
    return cached_icosahedral(2, lloyd_iterations=50)


def physics_of(name, mesh, xp=np):
    kw = dict(DIFFUSION) if name in ("diffusion", "all") else {}
    if name in ("held_suarez", "all"):
        kw["forcing"] = HeldSuarez(xp.asarray(mesh.latCell))
    return Physics(p_top=float(A[-1]), dB=xp.asarray(B[:-1] - B[1:]), **kw)


def base_state(mesh, rng):
    """(mass, theta_mass, u, phi_s, f_vertex): the JW06 baroclinic wave with p_s by 5 hPa, theta
    by 0.1 %, u by 1 m/s and phi_s by 100 m2 s-2 at random."""
    s = testcases.initial_state(mesh, "jw06_baroclinic", A, B)
    mass = levels.layer_mass(A, B, levels.P0 + 500.0 * rng.standard_normal(mesh.nCells), GRAVITY)
    theta = s.theta_mass / s.mass * (1.0 + 1e-3 * rng.standard_normal(s.mass.shape))
    return (mass, mass * theta, s.u + rng.standard_normal(s.u.shape),
            s.phi_s + 100.0 * rng.standard_normal(mesh.nCells), s.f_vertex)


def direction(state, rng):
    """(dmass, dtheta_mass, du, dphi_s) scaled like the fields: 1 % of mass and theta_mass, 1 m/s,
    100 m2 s-2."""
    mass, theta_mass, u = state[:3]
    return (0.01 * mass * rng.standard_normal(mass.shape),
            0.01 * theta_mass * rng.standard_normal(mass.shape),
            rng.standard_normal(u.shape), 100.0 * rng.standard_normal(mass.shape[0]))


def randn_like(rng, arrays):
    return tuple(rng.standard_normal(a.shape) for a in arrays)


@pytest.fixture
def setup(mesh, rng):
    state = base_state(mesh, rng)
    return state, dynamics.diagnostics(mesh, *state[:4], state[4], physics_of("all", mesh))


# -- the pieces ------------------------------------------------------------------------------------

COLUMN = ("p_i", "p", "theta", "pi", "alpha", "phi_i", "phi")
FLUX = ("mass_e", "F", "div", "theta_e", "W", "q_e")


def test_column_diagnostics(mesh, rng, setup):
    """column_diagnostics_adj is the transpose of column_diagnostics_tl; the tangent is the
    forward's derivative (Taylor)."""
    (mass, theta_mass, u, phi_s, _), b = setup
    p = physics_of("plain", mesh)
    x = direction((mass, theta_mass, u), rng)
    x = (x[0], x[1], x[3])

    def tangent(*dx):
        t = dynamics.column_diagnostics_tl(mesh, b, mass, *dx, p)
        return tuple(t[n] for n in COLUMN)

    def adjoint(*y):
        return dynamics.column_diagnostics_adj(mesh, b, mass, dict(zip(COLUMN, y)), p)

    y = randn_like(rng, tangent(*x))
    assert dot_product_test(tangent, adjoint, x, y).relative_error <= 1e-12

    def forward(m, tm, ph):
        d = dynamics.column_diagnostics(mesh, m, tm, ph, p)
        return tuple(d[n] for n in COLUMN)
    result = tangent_taylor_test(forward, lambda m, tm, ph, *dx: tangent(*dx),
                                 (mass, theta_mass, phi_s), x, y)
    assert result.passed(1.9), result


@pytest.mark.parametrize("mode", ADJOINT_MODES)
def test_vertical_mass_flux_and_flux_diagnostics(mesh, rng, setup, mode):
    """vertical_mass_flux_adj and flux_diagnostics_adj are the transposes of their tangents;
    the flux diagnostics' tangent is the forward's derivative (Taylor)."""
    (mass, theta_mass, u, _, f_vertex), b = setup
    p = physics_of("plain", mesh)
    div = rng.standard_normal(mass.shape)
    result = dot_product_test(lambda x: dynamics.vertical_mass_flux(mesh, x, p.dB),
                              lambda y: dynamics.vertical_mass_flux_adj(mesh, y, p.dB, mode), div,
                              rng.standard_normal((mass.shape[0], mass.shape[1] + 1)))
    assert result.relative_error <= 1e-12, result

    def tangent(*dx):
        t = dynamics.flux_diagnostics_tl(mesh, b, *dx, p)
        return tuple(t[n] for n in FLUX)

    def adjoint(*y):
        a = dict.fromkeys(("mass", "u", "theta"), None) | dict(zip(FLUX, y))
        dynamics.flux_diagnostics_adj(mesh, b, a, p, mode)
        return a["mass"], a["u"], a["theta"]

    x = (0.01 * mass * rng.standard_normal(mass.shape), rng.standard_normal(u.shape),
         rng.standard_normal(mass.shape))
    y = randn_like(rng, tangent(*x))
    assert dot_product_test(tangent, adjoint, x, y).relative_error <= 1e-12

    def forward(m, uu, th):
        d = dynamics.flux_diagnostics(mesh, m, uu, th, f_vertex, p)
        return tuple(d[n] for n in FLUX)
    result = tangent_taylor_test(forward, lambda m, uu, th, *dx: tangent(*dx), (mass, u, b["theta"]), x, y)
    assert result.passed(1.9), result


def _term_of_state(mesh, term, p, f_vertex):
    """(forward, tangent) of one term as a function of (mass, theta_mass, u, phi_s)."""
    def forward(*x):
        return term.forward(mesh, dynamics.diagnostics(mesh, *x, f_vertex, p), p)

    def tangent(*args):
        b = dynamics.diagnostics(mesh, *args[:4], f_vertex, p)
        return term.tangent(mesh, b, dynamics.diagnostics_tl(mesh, b, *args[4:], p), p)
    return forward, tangent


@pytest.mark.parametrize("mode", ADJOINT_MODES)
@pytest.mark.parametrize("term", terms.TERMS, ids=lambda t: t.__name__)
def test_each_term(mesh, rng, setup, term, mode):
    """Each term's adjoint is the transpose of its tangent over every diagnostic it reads
    (random tangents of each), and its tangent, through the diagnostics' tangents, is the
    forward's derivative (Taylor)."""
    state, b = setup
    p = physics_of("all", mesh)
    assert term.active(p)
    t = dict(zip(NAMES, randn_like(rng, [b[n] for n in NAMES])))
    y = rng.standard_normal(term.forward(mesh, b, p).shape)

    def adjoint(g):
        a = dict.fromkeys(NAMES)
        term.adjoint(mesh, b, a, g, p, mode)
        return tuple(np.zeros_like(b[n]) if a[n] is None else a[n] for n in NAMES)

    result = dot_product_test(lambda *x: term.tangent(mesh, b, dict(zip(NAMES, x)), p), adjoint,
                              tuple(t[n] for n in NAMES), y)
    assert result.relative_error <= 1e-12, result
    forward, tangent = _term_of_state(mesh, term, p, state[4])
    result = tangent_taylor_test(forward, tangent, state[:4], direction(state, rng), y)
    assert result.exact or result.passed(1.9), result


@pytest.mark.parametrize("mode", ADJOINT_MODES)
@pytest.mark.parametrize("form", terms.KINETIC_ENERGIES)
def test_kinetic_energy_forms(mesh, rng, form, mode):
    """Each kinetic energy's adjoint is the transpose of its tangent, the tangent the forward's
    derivative, and the Bernoulli term with it passes the dot-product and Taylor tests."""
    state = base_state(mesh, rng)
    u, du = state[2], rng.standard_normal(state[2].shape)
    g = rng.standard_normal((mesh.nCells, u.shape[1]))
    result = dot_product_test(lambda x: terms.kinetic_energy_tl(mesh, u, x, form),
                              lambda y: terms.kinetic_energy_adj(mesh, u, y, form, mode), (du,), g)
    assert result.relative_error <= 1e-12, result
    result = tangent_taylor_test(lambda x: terms.kinetic_energy(mesh, x, form),
                                 lambda x, dx: terms.kinetic_energy_tl(mesh, x, dx, form), (u,),
                                 (du,), g)
    assert result.exact or result.passed(1.9), result
    p = replace(physics_of("plain", mesh), kinetic_energy=form)
    b = dynamics.diagnostics(mesh, *state[:4], state[4], p)
    t = dict(zip(NAMES, randn_like(rng, [b[n] for n in NAMES])))
    y = rng.standard_normal(u.shape)

    def adjoint(gu):
        a = dict.fromkeys(NAMES)
        terms.Bernoulli.adjoint(mesh, b, a, gu, p, mode)
        return tuple(np.zeros_like(b[n]) if a[n] is None else a[n] for n in NAMES)

    result = dot_product_test(lambda *x: terms.Bernoulli.tangent(mesh, b, dict(zip(NAMES, x)), p),
                              adjoint, tuple(t[n] for n in NAMES), y)
    assert result.relative_error <= 1e-12, result
    forward, tangent = _term_of_state(mesh, terms.Bernoulli, p, state[4])
    result = tangent_taylor_test(forward, tangent, state[:4], direction(state, rng), y)
    assert result.exact or result.passed(1.9), result


@pytest.mark.parametrize("mode", ADJOINT_MODES)
def test_held_suarez_forcing(mesh, rng, setup, mode):
    """The forcing's adjoint is the transpose of its tangent in (p, p_i, theta, mass, u), both
    branches of each max present; its tangent through the column diagnostics' is the forward's
    derivative (Taylor)."""
    state, b = setup
    mass, u = b["mass"], b["u"]
    forcing = physics_of("all", mesh).forcing
    profile = forcing._profile(mesh, b)
    for name in ("s", "s_e"):
        assert (profile[name] > 0).any() and (profile[name] == 0).any(), name
    assert (profile["Q"] * profile["exner"] > 200.0).any() and (profile["Q"] * profile["exner"] < 200.0).any()
    x = randn_like(rng, (b["p"], b["p_i"], b["theta"], mass, u))

    def tangent(dp, dp_i, dtheta, dmass, du):
        return forcing.tendencies_tl(mesh, b, mass, u, dict(p=dp, p_i=dp_i, theta=dtheta), dmass, du)

    def adjoint(g, g_u):
        column, mass_adj, u_adj = forcing.tendencies_adj(mesh, b, mass, u, g, g_u, mode=mode)
        return column["p"], column["p_i"], column["theta"], mass_adj, u_adj

    y = randn_like(rng, (mass, u))
    result = dot_product_test(tangent, adjoint, x, y)
    assert result.relative_error <= 1e-12, result
    p = physics_of("held_suarez", mesh)

    def forward(*s):
        d = dynamics.diagnostics(mesh, *s, state[4], p)
        return forcing.tendencies(mesh, d, s[0], s[2])

    def state_tangent(*args):
        d = dynamics.diagnostics(mesh, *args[:4], state[4], p)
        return forcing.tendencies_tl(mesh, d, args[0], args[2],
                                     dynamics.diagnostics_tl(mesh, d, *args[4:], p), args[4], args[6])
    result = tangent_taylor_test(forward, state_tangent, state[:4], direction(state, rng), y)
    assert result.passed(1.9), result


# -- the tendencies and the RK4 steps ---------------------------------------------------------------

@pytest.mark.parametrize("name", PHYSICS)
def test_tendencies(mesh, rng, name):
    """Dot test of tendencies_tl / tendencies_adj in both modes, and the Taylor test of the
    tangent (state and phi_s) against the forward."""
    state = base_state(mesh, rng)
    p = physics_of(name, mesh)
    fixed = (state[4], p)
    x = direction(state, rng)
    y = randn_like(rng, state[:3])
    for mode in ADJOINT_MODES:
        result = dot_product_test(
            lambda *dx: tendencies_tl(mesh, *state[:4], *fixed, *dx),
            lambda *a: tendencies_adj(mesh, *state[:4], *fixed, *a, mode=mode), x, y)
        assert result.relative_error <= 1e-12, (mode, result)
    result = tangent_taylor_test(lambda *s: tendencies(mesh, *s, *fixed),
                                 lambda *s: tendencies_tl(mesh, *s[:4], *fixed, *s[4:]), state[:4], x, y)
    assert result.passed(1.9), result
    # without a perturbation of phi_s: the same as a zero one
    without = tendencies_tl(mesh, *state[:4], *fixed, *x[:3])
    zero = tendencies_tl(mesh, *state[:4], *fixed, *x[:3], np.zeros_like(x[3]))
    assert all(np.array_equal(a, b) for a, b in zip(without, zero))


def _model(mesh, state, physics, xp=np):
    mass, theta_mass, u, phi_s, f_vertex = (xp.asarray(a) for a in state)
    return Model(mesh, mass, theta_mass, u, phi_s, f_vertex, DT, physics)


def _starts(model, steps):
    starts, fields = [], model.state
    for _ in range(steps):
        starts.append(fields)
        fields = rk4_step(model, *(a.copy() for a in fields))
    return starts


def _steps_tl(model, starts, dmass, dtheta_mass, du, dphi_s):
    d = (dmass, dtheta_mass, du)
    for start in starts:
        d = rk4_step_tl(model, *start, *d, dphi_s)
    return d


def _steps_adj(model, starts, mode, *adj):
    phi_s_adj = None
    for start in reversed(starts):
        *adj, step = rk4_step_adj(model, *start, *adj, mode=mode)
        phi_s_adj = step if phi_s_adj is None else phi_s_adj + step
    return (*adj, phi_s_adj)


@pytest.mark.parametrize("mode", ADJOINT_MODES)
def test_rk4_steps(mesh, rng, mode):
    """Three RK4 steps (all physics) through the shared stepper: the dot test of the tangent-linear
    and adjoint with controls (mass0, theta_mass0, u0, phi_s), and the Taylor test of the
    tangent-linear against the forward steps; inputs are not modified."""
    state = base_state(mesh, rng)
    model = _model(mesh, state, physics_of("all", mesh))
    starts = _starts(model, 3)
    kept = [a.copy() for s in starts for a in s]
    x, y = direction(state, rng), randn_like(rng, state[:3])
    result = dot_product_test(lambda *dx: _steps_tl(model, starts, *dx),
                              lambda *a: _steps_adj(model, starts, mode, *a), x, y)
    assert result.relative_error <= 1e-12, result
    assert all(np.array_equal(a, b) for a, b in zip(kept, (a for s in starts for a in s)))
    if mode != ADJOINT_MODES[0]:
        return

    def forward(mass, theta_mass, u, phi_s):
        run = _model(mesh, (mass, theta_mass, u, phi_s, state[4]), model.physics)
        fields = run.state
        for _ in range(3):
            fields = rk4_step(run, *fields)
        return fields

    def tangent(mass, theta_mass, u, phi_s, *dx):
        run = _model(mesh, (mass, theta_mass, u, phi_s, state[4]), model.physics)
        return _steps_tl(run, _starts(run, 3), *dx)

    result = tangent_taylor_test(forward, tangent, state[:4], x, y)
    assert result.passed(1.9), result


@pytest.mark.parametrize("mode", ADJOINT_MODES)
def test_float32_tangent_and_adjoint(mesh, rng, mode):
    """In float32 (the geometry float64; all physics): the tendencies' and two RK4 steps'
    tangent-linear and adjoint stay float32, pass the dot test to float32's round-off, and follow
    float64's to 1e-3 of each field's largest entry."""
    state = base_state(mesh, rng)
    x, y = direction(state, rng), randn_like(rng, state[:3])
    out = {}
    for dtype in (np.float64, np.float32):
        p = physics_of("all", mesh)
        p = replace(p, dB=p.dB.astype(dtype))
        s, dx, dy = ([a.astype(dtype) for a in group] for group in (state, x, y))
        model = _model(mesh, s, p)
        starts = _starts(model, 2)
        tl_steps = lambda *d: _steps_tl(model, starts, *d)
        adj_steps = lambda *a: _steps_adj(model, starts, mode, *a)
        tl_tend = lambda *d: tendencies_tl(mesh, *s[:4], s[4], p, *d)
        adj_tend = lambda *a: tendencies_adj(mesh, *s[:4], s[4], p, *a, mode=mode)
        out[dtype] = (*tl_steps(*dx), *adj_steps(*dy), *tl_tend(*dx), *adj_tend(*dy))
        if dtype == np.float32:
            assert all(a.dtype == np.float32 for a in out[dtype])
            for tl, adj in ((tl_tend, adj_tend), (tl_steps, adj_steps)):
                result = dot_product_test(tl, adj, dx, dy)
                assert result.relative_error <= 1e-6, result
    for i, (a, b) in enumerate(zip(out[np.float64], out[np.float32])):
        np.testing.assert_allclose(b, a, rtol=0, atol=1e-3 * np.abs(a).max(), err_msg=str(i))


def test_model_sweeps_name_their_fields(mesh, rng):
    state = base_state(mesh, rng)
    model = _model(mesh, state, physics_of("plain", mesh))
    assert model.state_locations == ("cell", "cell", "edge") and model.control_locations == ("cell",)
    with pytest.raises(TypeError, match=r"rk4_step_tl: expected 2 x 3 state fields"):
        rk4_step_tl(model, *state[:3], *direction(state, rng)[:2])
    # a forcing without a tangent-linear is refused by name
    class Forward:
        def tendencies(self, mesh, d, mass, u):
            return 0.0 * mass, 0.0 * u
    model.physics = replace(model.physics, forcing=Forward())
    with pytest.raises(ValueError, match=r"Physics.forcing \(Forward\) has no tendencies_tl"):
        rk4_step_tl(model, *state[:3], *direction(state, rng))


# -- CuPy --------------------------------------------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.parametrize("mode", ADJOINT_MODES)
def test_cupy_tangent_and_adjoint_equal_numpy(mesh, rng, mode):
    """On CuPy (all physics): tendencies_tl and tendencies_adj equal NumPy's to round-off (1e-12
    relative to each field's largest entry), the dot tests of the tendencies and of two RK4 steps
    pass (1e-12)."""
    import cupy

    state = base_state(mesh, rng)
    x, y = direction(state, rng), randn_like(rng, state[:3])
    out = {}
    for xp in (np, cupy):
        p, m = physics_of("all", mesh, xp), meshops.device_mesh(mesh, xp)
        s, dx, dy = ([xp.asarray(a) for a in group] for group in (state, x, y))
        tl = tendencies_tl(m, *s[:4], s[4], p, *dx)
        adj = tendencies_adj(m, *s[:4], s[4], p, *dy, mode=mode)
        out[xp] = [cupy.asnumpy(a) if xp is cupy else a for a in (*tl, *adj)]
    for i, (a, b) in enumerate(zip(out[np], out[cupy])):
        np.testing.assert_allclose(b, a, rtol=0, atol=1e-12 * np.abs(a).max(), err_msg=str(i))
    result = dot_product_test(lambda *d: tendencies_tl(m, *s[:4], s[4], p, *d),
                              lambda *a: tendencies_adj(m, *s[:4], s[4], p, *a, mode=mode), dx, dy)
    assert result.relative_error <= 1e-12, result
    model = _model(mesh, state, p, cupy)
    starts = _starts(model, 2)
    result = dot_product_test(lambda *d: _steps_tl(model, starts, *d),
                              lambda *a: _steps_adj(model, starts, mode, *a), dx, dy)
    assert result.relative_error <= 1e-12, result


class _SurfacePressureSquares:
    """J = sum_k (w . p_s(x_k))^2 / 2 over the steps of a run: a nonlinear cost of every state."""

    def __init__(self, weights):
        self.w = weights

    def _ps(self, mass):
        return GRAVITY * mass.sum(axis=1)

    def value(self, k, state):
        return 0.5 * float(self.w @ self._ps(state[0])) ** 2

    def gradient(self, k, state):
        mass, theta_mass, u = state
        g = float(self.w @ self._ps(mass)) * GRAVITY * self.w
        return [np.repeat(g[:, None], mass.shape[1], axis=1), np.zeros_like(theta_mass),
                np.zeros_like(u)]


def test_whole_run_gradient_through_run_gradient(mesh, rng):
    """`adjoint.gradient.run_gradient` of the hydrostatic model (its state and its control phi_s)
    under a Revolve schedule: the Taylor test of J(mass0, theta_mass0, u0, phi_s) over four steps
    against the gradient, and the gradient independent of the schedule (bitwise)."""
    from adjoint.checkpointing import make_schedule
    from adjoint.gradient import cost_of_controls, run_gradient
    from adjoint.verification import taylor_test

    state = base_state(mesh, rng)
    model = _model(mesh, state, physics_of("all", mesh))
    cost = _SurfacePressureSquares(rng.random(mesh.nCells) / mesh.nCells)
    value, grads, _ = run_gradient(model, state[:3], cost, 4, schedule="none")
    _, revolve, _ = run_gradient(model, state[:3], cost, 4,
                                 schedule=make_schedule("revolve", 4, snapshots_in_ram=2))
    assert all(np.array_equal(a, b) for a, b in zip(grads, revolve))
    assert [g.shape for g in grads] == [a.shape for a in state[:4]]
    m, dm = state[:4], direction(state, rng)
    derivative = sum(float(np.vdot(g, d)) for g, d in zip(grads, dm))
    result = taylor_test(cost_of_controls(model, cost, 4), m, dm, derivative, eps0=1e-2, steps=4)
    assert result.passed(1.9), result
    assert np.array_equal(model.phi_s, state[3])        # the model's own control is restored
