"""The serial shallow-water model: RK4 order, initial conditions, case-2 convergence, conservation."""
import numpy as np
import pytest

from grids.icosahedral import generate_icosahedral
from swm import testcases
from framework.constants import DAY, EARTH_RADIUS
from swm.model import Model
from swm.tendencies import Physics
from framework.stepper import TendencyStages, step


@pytest.fixture(scope="module")
def scvt():
    """Lloyd-optimised icosahedral meshes on the Earth's radius, by level."""
    return {level: generate_icosahedral(level, lloyd_iterations=200, sphere_radius=EARTH_RADIUS)
            for level in (3, 4, 5)}


def test_rk4_is_fourth_order(rng):
    """y' = A y (a random rotation-dominated 2x2 system): the error at t = 1 falls as dt^4."""
    A = rng.standard_normal((2, 2)) + np.array([[0.0, 3.0], [-3.0, 0.0]])
    y0 = rng.standard_normal(2)
    w, V = np.linalg.eig(A)
    exact = (V @ np.diag(np.exp(w)) @ np.linalg.solve(V, y0)).real
    errors = []
    for n in (16, 32, 64):
        y = [y0.copy()]
        for _ in range(n):
            y = step(TendencyStages(lambda f: [A @ f[0]]), y, 1.0 / n)
        errors.append(np.abs(y[0] - exact).max())
    rates = np.log2(np.array(errors[:-1]) / np.array(errors[1:]))
    assert np.all(rates > 3.8), rates


@pytest.mark.parametrize("alpha", [0.0, np.pi / 4, np.pi / 2 - 0.05])
def test_streamfunction_velocity_is_the_sampled_wind(scvt, alpha):
    """u = -grad_v2e(psi) matches the case-2 wind's normal component at xEdge to O(h)."""
    diffs = []
    for level in (3, 4, 5):
        mesh = scvt[level]
        zonal, meridional = testcases.williamson2_velocity(mesh.latEdge, mesh.lonEdge,
                                                           mesh.sphere_radius, alpha)
        sampled = testcases.normal_component(mesh, zonal, meridional)
        diffs.append(np.abs(testcases.williamson2(mesh, alpha).u - sampled).max() / np.abs(sampled).max())
    assert diffs[-1] < 2e-3 and diffs[0] / diffs[-1] > 3.5, diffs


def _run(mesh, state, dt, days, physics=None):
    model = Model(mesh, state.h.copy(), state.u.copy(), state.b, state.f_vertex, dt, physics)
    for _ in range(int(round(days * DAY / dt))):
        model.step()
    return model


def test_williamson2_converges_at_second_order(scvt):
    """Normalised l2 error of h after 2 days (dt halved with the spacing), alpha = 0.3: order close
    to 2 on SCVTs (Ringler et al. 2010); measured 1.85 (levels 3-4) and 1.78 (4-5)."""
    alpha = 0.3
    errors = []
    for level in (3, 4, 5):
        mesh = scvt[level]
        state = testcases.williamson2(mesh, alpha)
        model = _run(mesh, state, 2400.0 / 2 ** (level - 3), 2.0)
        exact = testcases.williamson2_height(mesh.latCell, mesh.lonCell, mesh.sphere_radius, alpha)
        w = mesh.areaCell
        errors.append(np.sqrt(np.sum(w * (model.h - exact) ** 2) / np.sum(w * exact ** 2)))
    orders = np.log2(np.array(errors[:-1]) / np.array(errors[1:]))
    assert errors[-1] < 1e-4 and np.all(orders > 1.7), (errors, orders)


def _energy(mesh, model, gravity):
    ke = np.sum(mesh.areaCell * model.h * __import__("meshops").ke_e2c(mesh, model.u))
    pe = 0.5 * gravity * np.sum(mesh.areaCell * ((model.h + model.b) ** 2 - model.b ** 2))
    return ke + pe


@pytest.mark.parametrize("case", ["williamson5", "williamson6", "galewsky"])
def test_mass_to_round_off_and_energy_bounded(scvt, case):
    mesh = scvt[4]
    state = testcases.CASES[case](mesh)
    physics = Physics()
    model = Model(mesh, state.h.copy(), state.u.copy(), state.b, state.f_vertex, 600.0, physics)
    mass0, energy0 = np.sum(mesh.areaCell * model.h), _energy(mesh, model, physics.gravity)
    for _ in range(72):                                   # half a day
        model.step()
    assert abs(np.sum(mesh.areaCell * model.h) - mass0) <= 1e-13 * mass0
    assert np.all(np.isfinite(model.u)) and model.h.min() > 0
    assert abs(_energy(mesh, model, physics.gravity) - energy0) <= 1e-5 * energy0


def test_galewsky_jet_is_balanced(scvt):
    """Without its perturbation the jet stays close to steady: h changes by far less than the
    perturbation's 120 m over 12 hours."""
    mesh = scvt[5]
    state = testcases.galewsky(mesh, perturbed=False)
    model = _run(mesh, state, 300.0, 0.5)
    assert np.abs(model.h - state.h).max() < 12.0
    assert state.u.max() > 70.0                       # the jet is there (umax 80 m/s)


@pytest.mark.gpu
@pytest.mark.parametrize("case", ["williamson5", "galewsky"])
def test_cupy_run_equals_numpy_to_round_off(scvt, case):
    """100 steps with APVM and hyperviscosity: CuPy and NumPy agree to 1e-12 relative."""
    import cupy

    mesh = scvt[4]
    state = testcases.CASES[case](mesh)
    physics = Physics(apvm=0.5, visc4=1e14)
    models = [Model(mesh, *(xp.asarray(a) for a in (state.h, state.u, state.b, state.f_vertex)),
                    600.0, physics) for xp in (np, cupy)]
    for model in models:
        for _ in range(100):
            model.step()
    cpu, gpu = models
    for name in ("h", "u"):
        ref, got = getattr(cpu, name), cupy.asnumpy(getattr(gpu, name))
        assert np.abs(got - ref).max() <= 1e-12 * np.abs(ref).max(), name


def test_a_term_of_one_s_own_is_summed_by_every_path(scvt):
    """A term added through the physics (`swm.terms.Relaxation` in `Physics.extra_terms`) enters
    the step: one step of relaxation towards u_ref changes u by about -dt (u - u_ref) / tau; a bad
    time scale is refused, naming it."""
    from swm.terms import Relaxation

    mesh = scvt[3]
    state = testcases.williamson5(mesh)
    rng = np.random.default_rng()
    u_ref = state.u + rng.standard_normal(mesh.nEdges)
    tau = 5 * DAY
    args = (mesh, state.h.copy(), state.u.copy(), state.b, state.f_vertex, 600.0)
    plain, relaxed = Model(*args), Model(*args, Physics(extra_terms=(Relaxation(u_ref, tau),)))
    plain.step()
    relaxed.step()
    change, expected = relaxed.u - plain.u, -600.0 * (state.u - u_ref) / tau
    assert np.linalg.norm(change - expected) < 0.05 * np.linalg.norm(expected)
    with pytest.raises(ValueError, match="Relaxation: tau = 0: expected a positive time scale"):
        Relaxation(u_ref, 0)
