"""Tangent-linear and adjoint of the model's RK4 step (framework.stepper): the recomputed stage states
are the forward's, dot-product tests over one and three steps with controls (h0, u0, b), the
tangent-linear and the gradient against the forward (Taylor), bitwise reproducibility of the
deterministic adjoint, and CuPy against NumPy."""
import numpy as np
import pytest

import meshops
from adjoint import dot_product_test, tangent_taylor_test, taylor_test
from framework.stepper import rk4_step_adj, rk4_step_tl, stage_records
from adjoint.verification import inner
from grids.icosahedral import generate_icosahedral
from meshops.modes import ADJOINT_MODES
from framework.constants import EARTH_RADIUS
from framework.distribution import Serial, owned_inner
from swm.model import Model
from swm.tendencies import tendencies
from framework.timestepping import RK4_B

from .states import DT, PHYSICS, adjoint_inputs, directions, perturbed_state


@pytest.fixture(scope="module")
def ico():
    """An icosahedral level-3 mesh (642 cells) on the Earth's radius."""
    return generate_icosahedral(3, sphere_radius=EARTH_RADIUS)


@pytest.fixture(scope="module")
def dmesh(ico):
    return meshops.device_mesh(ico, np)


def _model(mesh, dmesh, h, u, b, f, physics):
    return Model(mesh, h, u, b, f, DT, PHYSICS[physics], device_mesh=dmesh)


def forward(model, h, u, b, steps):
    """The states at the start of each step and the end state of `steps` forward steps."""
    run = Model(model.mesh, h.copy(), u.copy(), b, model.f_vertex, model.dt, model.physics,
                device_mesh=model.device_mesh)
    starts = []
    for _ in range(steps):
        starts.append((run.h.copy(), run.u.copy()))
        run.step()
    return starts, (run.h, run.u)


def run_tl(model, starts, dh, du, db):
    for h, u in starts:
        dh, du = rk4_step_tl(model, h, u, dh, du, db)
    return dh, du


def run_adj(model, starts, h_adj, u_adj, mode):
    b_adj = None
    for h, u in reversed(starts):
        h_adj, u_adj, b_step = rk4_step_adj(model, h, u, h_adj, u_adj, mode=mode)
        b_adj = b_step if b_adj is None else b_adj + b_step
    return h_adj, u_adj, b_adj


def test_stage_records_are_the_forward_steps(ico, dmesh, rng):
    """From the recomputed stage states (the operator path's records) the step's end state is the
    forward's, bitwise."""
    h, u, b, f = perturbed_state(ico, "williamson5", rng)
    model = _model(ico, dmesh, h.copy(), u.copy(), b, f, "all")
    stages = stage_records(model, h, u)
    model.step()
    new = [h.copy(), u.copy()]
    for stage, p in enumerate(stages):
        for y, k in zip(new, tendencies(dmesh, *p, b, f, model.physics)):
            y += (RK4_B[stage] * DT) * k
    assert np.array_equal(new[0], model.h) and np.array_equal(new[1], model.u)


@pytest.mark.parametrize("steps", [1, 3])
@pytest.mark.parametrize("mode", ADJOINT_MODES)
@pytest.mark.parametrize("physics", ["plain", "all"])
def test_dot_product(ico, dmesh, rng, physics, mode, steps):
    """<M'(h0, u0, b) x, y> = <x, M'^T y> over `steps` steps, x = (dh0, du0, db)."""
    case = "williamson5" if physics == "plain" else "williamson6"
    h, u, b, f = perturbed_state(ico, case, rng)
    model = _model(ico, dmesh, h, u, b, f, physics)
    starts, _ = forward(model, h, u, b, steps)
    inputs = [a.copy() for a in (h, u)]
    result = dot_product_test(lambda *x: run_tl(model, starts, *x),
                              lambda *y: run_adj(model, starts, *y, mode),
                              directions(ico, rng), adjoint_inputs(ico, rng))
    assert result.relative_error <= 1e-12, result
    assert all(np.array_equal(a, b) for a, b in zip(inputs, starts[0]))   # inputs not modified


@pytest.mark.parametrize("control", ["h0", "u0", "b"])
def test_dot_product_of_each_control(ico, dmesh, rng, control):
    """Three steps, one control perturbed at a time (the others zero), all physics on."""
    h, u, b, f = perturbed_state(ico, "williamson5", rng)
    model = _model(ico, dmesh, h, u, b, f, "all")
    starts, _ = forward(model, h, u, b, 3)
    i = ("h0", "u0", "b").index(control)
    x = tuple(a if k == i else np.zeros_like(a) for k, a in enumerate(directions(ico, rng)))
    result = dot_product_test(lambda *d: run_tl(model, starts, *d),
                              lambda *a: run_adj(model, starts, *a, None), x, adjoint_inputs(ico, rng))
    assert result.relative_error <= 1e-12, result


def test_tangent_linear_against_the_forward(ico, dmesh, rng):
    """Three steps, all physics: <M(x + eps dx), y> has a Taylor remainder of rate >= 1.9."""
    h, u, b, f = perturbed_state(ico, "williamson6", rng)
    model = _model(ico, dmesh, h, u, b, f, "all")

    def tl(h0, u0, b0, dh, du, db):
        base = Model(ico, h0, u0, b0, f, DT, model.physics, device_mesh=dmesh)
        return run_tl(base, forward(base, h0, u0, b0, 3)[0], dh, du, db)

    result = tangent_taylor_test(lambda *x: forward(model, *x, 3)[1], tl, (h, u, b),
                                 directions(ico, rng), adjoint_inputs(ico, rng))
    assert not result.exact and result.passed(1.9), result


@pytest.mark.parametrize("mode", ADJOINT_MODES)
def test_gradient_against_the_forward(ico, dmesh, rng, mode):
    """J(h0, u0, b) = <y, M(h0, u0, b)> over three steps: the adjoint's gradient passes the Taylor
    test (rate >= 1.9) in a random direction."""
    h, u, b, f = perturbed_state(ico, "williamson5", rng)
    model = _model(ico, dmesh, h, u, b, f, "all")
    y = adjoint_inputs(ico, rng)
    gradient = run_adj(model, forward(model, h, u, b, 3)[0], *y, mode)
    dm = directions(ico, rng)
    J = lambda *m: inner(forward(model, *m, 3)[1], y)                         # noqa: E731
    scale = inner(tuple(np.abs(a) for a in forward(model, h, u, b, 3)[1]), tuple(np.abs(a) for a in y))
    result = taylor_test(J, (h, u, b), dm, inner(gradient, dm), scale=scale)
    assert not result.exact and result.passed(1.9), result


def test_deterministic_adjoint_is_bitwise_reproducible(ico, dmesh, rng):
    h, u, b, f = perturbed_state(ico, "williamson6", rng)
    model = _model(ico, dmesh, h, u, b, f, "all")
    starts, _ = forward(model, h, u, b, 3)
    y = adjoint_inputs(ico, rng)
    first, second = (run_adj(model, starts, *y, "deterministic") for _ in range(2))
    assert all(np.array_equal(a, b) for a, b in zip(first, second))
    atomic = run_adj(model, starts, *y, "atomic")
    for a, d in zip(atomic, first):
        assert np.abs(a - d).max() <= 1e-12 * np.abs(d).max()


def test_a_distribution_without_the_adjoint_exchanges_is_named(ico, dmesh, rng):
    class ForwardOnly:
        def exchange(self, h, u):
            pass

    h, u, b, f = perturbed_state(ico, "williamson5", rng)
    model = Model(ico, h, u, b, f, DT, distribution=ForwardOnly(), device_mesh=dmesh)
    model.step()
    with pytest.raises(ValueError, match="Model.distribution .ForwardOnly. has no exchange_tl: "
                                         "the model's tangent-linear and adjoint steps"):
        rk4_step_adj(model, h, u, *adjoint_inputs(ico, rng))
    with pytest.raises(ValueError, match="has no exchange_tl: the model's tangent-linear"):
        rk4_step_tl(model, h, u, *directions(ico, rng))


def test_one_process_distribution(ico, dmesh, rng):
    """A model with `swm.distribution.Serial`'s exchanges (a run_model.py run on one process) steps
    its tangent-linear and adjoint bitwise as one without, and `owned_inner` is the plain sum."""
    from meshops.parallel.comm import SerialComm

    h, u, b, f = perturbed_state(ico, "williamson5", rng)
    serial = Serial(ico, SerialComm())
    plain = _model(ico, dmesh, h, u, b, f, "all")
    model = Model(ico, h, u, b, f, DT, PHYSICS["all"], distribution=serial, device_mesh=dmesh)
    x, y = directions(ico, rng), adjoint_inputs(ico, rng)
    with_serial, without = (rk4_step_tl(m, h, u, *x) + rk4_step_adj(m, h, u, *y) for m in (model, plain))
    assert all(np.array_equal(a, c) for a, c in zip(with_serial, without))
    pairs = [("cell", x[0], with_serial[2]), ("edge", x[1], with_serial[3])]
    products = [x[0] * with_serial[2], x[1] * with_serial[3]]
    expected, scale = sum(float(p.sum()) for p in products), sum(float(abs(p).sum()) for p in products)
    assert abs(owned_inner(serial, pairs) - expected) <= 1e-14 * scale


# -- CuPy ------------------------------------------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.parametrize("mode", ADJOINT_MODES)
def test_cupy_equals_numpy_and_dot_product(rng, mode):
    """Level 4, three steps, all physics: CuPy's tangent-linear and adjoint equal NumPy's to 1e-12
    relative, pass the dot-product test on the GPU, and the deterministic adjoint is bitwise
    reproducible there."""
    import cupy

    mesh = generate_icosahedral(4, sphere_radius=EARTH_RADIUS)
    base = perturbed_state(mesh, "williamson5", rng)
    x, y = directions(mesh, rng), adjoint_inputs(mesh, rng)
    pairs, results = {}, {}
    for xp in (np, cupy):
        h, u, b, f = (xp.asarray(a) for a in base)
        model = Model(mesh, h, u, b, f, DT, PHYSICS["all"], device_mesh=meshops.device_mesh(mesh, xp))
        starts, _ = forward(model, h, u, b, 3)
        pairs[xp] = (lambda *d, model=model, starts=starts: run_tl(model, starts, *d),
                     lambda *a, model=model, starts=starts: run_adj(model, starts, *a, mode))
        tl, adj = pairs[xp]
        results[xp] = tl(*(xp.asarray(a) for a in x)) + adj(*(xp.asarray(a) for a in y))
    for ref, got in zip(results[np], results[cupy]):
        assert isinstance(got, cupy.ndarray)
        assert np.abs(cupy.asnumpy(got) - ref).max() <= 1e-12 * np.abs(ref).max()
    tl, adj = pairs[cupy]
    xs, ys = tuple(cupy.asarray(a) for a in x), tuple(cupy.asarray(a) for a in y)
    result = dot_product_test(tl, adj, xs, ys)
    assert result.relative_error <= 1e-12, result
    if mode == "deterministic":
        first, second = adj(*ys), adj(*ys)
        assert all(bool((a == b).all()) for a, b in zip(first, second))
