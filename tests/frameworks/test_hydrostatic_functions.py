"""The hydrostatic core's RK4 step and n-step run as PyTorch and JAX functions (adjoint.differentiable
on `hydrostatic.model.Model`: (mass, theta_mass, u, phi_s) -> (mass, theta_mass, u)), on a real
level-2 icosahedral mesh with the 26 JW06 levels, del2/del4 and the Held-Suarez forcing: forwards
bitwise the model's, gradients bitwise `adjoint.gradient.run_gradient`'s of the cost <x_N, y>,
checkpointed backwards bitwise the stored one's, directional derivatives against central differences,
errors naming the field, and CUDA tensors and JAX on a CuPy model (marked gpu)."""
import numpy as np
import pytest

from adjoint import differentiable
from adjoint.gradient import controls, run_gradient
from adjoint.sensitivity import FinalStateProjection
from grids.cache import cached_icosahedral

from hydrostatic.model import Model

from ..hydrostatic.test_adjoint import base_state, physics_of

DT = 1200.0
STEPS = 3
NAMES = ("mass", "theta_mass", "u", "phi_s")
CHECKPOINTS = {
    "revolve": dict(schedule="revolve", snapshots_in_ram=1),
    "multistage": dict(schedule="multistage", snapshots_in_ram=1, snapshots_on_disk=1),
    "two_level": dict(schedule="two_level", snapshots_in_ram=1, period=2),
}


@pytest.fixture(scope="module")
def mesh():
    return cached_icosahedral(2, lloyd_iterations=50)


def physics(mesh, xp=np):
    """Every term with an adjoint: del2 and del4 on u and theta, the Held-Suarez forcing."""
    return physics_of("all", mesh, xp)


def jw06_inputs(mesh, rng):
    """(mass, theta_mass, u, phi_s), f_vertex of `base_state`: the JW06 wave perturbed at random."""
    *state, f_vertex = base_state(mesh, rng)
    return tuple(state), f_vertex


@pytest.fixture
def problem(mesh, rng):
    """A model (its own state and phi_s untouched by the calls), inputs (mass0, theta_mass0, u0,
    phi_s) other than the model's fields, and a random y = dJ/dx_N."""
    own, f_vertex = jw06_inputs(mesh, rng)
    model = Model(mesh, *(a.copy() for a in own), f_vertex, DT, physics(mesh))
    inputs, _ = jw06_inputs(mesh, rng)
    y = tuple(rng.standard_normal(a.shape) for a in inputs[:3])
    return model, inputs, y


def reference(model, inputs, y, n_steps, mode="deterministic"):
    """(x_N, (dJ/dmass0, dJ/dtheta_mass0, dJ/du0, dJ/dphi_s)) of J = <x_N, y> from the model's
    step and run_gradient."""
    state = [a.copy() for a in inputs[:3]]
    with controls(model, inputs[3:]):
        for _ in range(n_steps):
            state = list(model.advance(*state))
        _, grads, _ = run_gradient(model, inputs[:3], FinalStateProjection(y, n_steps), n_steps,
                                   mode=mode)
    return state, grads


def snapshot(model):
    return [a.copy() for a in model.state + model.controls]


def untouched(model, before):
    return all(np.array_equal(a, b) for a, b in zip(model.state + model.controls, before))


def assert_equal(got, want, what=""):
    for name, a, b in zip(NAMES, got, want):
        assert np.array_equal(a, b), (what, name)


# -- PyTorch ----------------------------------------------------------------------------------------

def _torch():
    return pytest.importorskip("torch")


def _torch_grads(torch, fn, inputs, y):
    tensors = [torch.tensor(a, requires_grad=True) for a in inputs]
    out = fn(*tensors)
    sum(((x * torch.from_numpy(w)).sum() for x, w in zip(out, y))).backward()
    return [x.detach().numpy() for x in out], [t.grad.numpy() for t in tensors]


@pytest.mark.parametrize("mode", ["deterministic", "atomic"])
def test_torch_step_and_run_are_the_model_and_its_adjoint(problem, mode):
    torch = _torch()
    model, inputs, y = problem
    before = snapshot(model)
    for n, fn in ((1, differentiable.torch_step(model, mode=mode)),
                  (STEPS, differentiable.torch_run(model, STEPS, mode=mode))):
        x, grads = _torch_grads(torch, fn, inputs, y)
        x_ref, grads_ref = reference(model, inputs, y, n, mode)
        assert_equal(x, x_ref, n)
        assert_equal(grads, grads_ref, n)
    assert untouched(model, before)


def test_torch_steps_chained_give_the_adjoint_run(problem):
    """torch_step STEPS times: the state's gradients bitwise the run's, dJ/dphi_s (summed over the
    steps by torch) to 1e-13."""
    torch = _torch()
    model, inputs, y = problem
    step = differentiable.torch_step(model)

    def chained(mass, theta_mass, u, phi_s):
        x = (mass, theta_mass, u)
        for _ in range(STEPS):
            x = step(*x, phi_s)
        return x

    x, grads = _torch_grads(torch, chained, inputs, y)
    x_ref, grads_ref = reference(model, inputs, y, STEPS)
    assert_equal(x, x_ref)
    assert_equal(grads[:3], grads_ref[:3])
    scale = np.abs(grads_ref[3]).max()
    assert scale > 0 and np.abs(grads[3] - grads_ref[3]).max() <= 1e-13 * scale


@pytest.mark.parametrize("name", sorted(CHECKPOINTS))
def test_torch_run_checkpointed_gradient_is_the_stored_one_bitwise(problem, name, tmp_path):
    torch = _torch()
    model, inputs, y = problem
    x_stored, stored = _torch_grads(torch, differentiable.torch_run(model, STEPS), inputs, y)
    options = dict(CHECKPOINTS[name], directory=tmp_path)
    x, got = _torch_grads(torch, differentiable.torch_run(model, STEPS, checkpointing=options),
                          inputs, y)
    assert_equal(x, x_stored)
    assert_equal(got, stored)
    assert list(tmp_path.iterdir()) == []                    # disk snapshots removed


def test_torch_run_gradient_of_one_field_only(problem):
    """A loss of theta_mass_N alone: the backward gets None for mass_N and u_N and uses zeros."""
    torch = _torch()
    model, inputs, y = problem
    tensors = [torch.tensor(a, requires_grad=True) for a in inputs]
    _, theta_mass_n, _ = differentiable.torch_run(model, 2)(*tensors)
    (theta_mass_n * torch.from_numpy(y[1])).sum().backward()
    _, want = reference(model, inputs, (0 * y[0], y[1], 0 * y[2]), 2)
    assert_equal([t.grad.numpy() for t in tensors], want)


@pytest.mark.parametrize("checkpointing", [None, "revolve"])
def test_torch_run_against_finite_differences(problem, rng, checkpointing):
    """Directional derivatives of J = <x_N, w> (float64, a 3-step run) by central differences
    against the torch gradient's <dJ/dx, d>, for d in each input alone and in all four: d = eps S
    r, r standard normal, S the fields' scales (1 % of mass and theta_mass, 1 m/s, 100 m2 s-2),
    eps = 1e-3, to 1e-8 of sum_i |g_i d_i|, the derivative's size before its terms cancel (measured
    over 81 draws: at most 1.4e-10; the terms can cancel to 7e-5 of that size, so a tolerance
    relative to <g, d> itself fails at random; a gradient off by 1e-3 in one input fails)."""
    torch = _torch()
    model, inputs, w = problem
    run = differentiable.torch_run(model, STEPS, checkpointing=checkpointing and CHECKPOINTS[checkpointing])

    def cost(fields):
        return sum((x * torch.from_numpy(y)).sum() for x, y in zip(run(*fields), w))

    tensors = [torch.tensor(a, requires_grad=True) for a in inputs]
    cost(tensors).backward()
    scales = (0.01 * inputs[0], 0.01 * inputs[1], np.ones_like(inputs[2]), np.full_like(inputs[3], 100.0))
    eps = 1e-3
    for which in (*NAMES, "all"):
        d = [s * rng.standard_normal(s.shape) if which in (name, "all") else 0 * s
             for name, s in zip(NAMES, scales)]
        terms = [t.grad.numpy() * di for t, di in zip(tensors, d)]
        want = sum(float(t.sum()) for t in terms)
        size = sum(float(np.abs(t).sum()) for t in terms)
        with torch.no_grad():
            plus, minus = (float(cost([torch.from_numpy(a + sign * eps * di) for a, di in zip(inputs, d)]))
                           for sign in (1, -1))
        got = (plus - minus) / (2 * eps)
        assert abs(got - want) <= 1e-8 * size, (which, got, want, size)


def test_torch_run_without_gradients_is_the_model_run(problem):
    torch = _torch()
    model, inputs, y = problem
    x_ref, _ = reference(model, inputs, y, 2)
    with torch.no_grad():
        out = differentiable.torch_run(model, 2)(*(torch.tensor(a, requires_grad=True) for a in inputs))
    assert_equal([x.numpy() for x in out], x_ref)


def test_torch_bad_inputs_are_named(problem):
    torch = _torch()
    model, inputs, _ = problem
    step = differentiable.torch_step(model)
    t = [torch.from_numpy(a) for a in inputs]
    n_cells, n_layers = inputs[0].shape
    with pytest.raises(ValueError, match=rf"torch_run: theta_mass has shape \({n_cells}, 25\), "
                                         rf"expected \({n_cells}, {n_layers}\) \(the model's theta_mass\)"):
        step(t[0], t[1][:, 1:], t[2], t[3])
    with pytest.raises(ValueError, match=rf"phi_s has shape \({n_cells}, 1\), expected \({n_cells},\)"):
        step(*t[:3], t[3][:, None])
    with pytest.raises(TypeError, match="expected mass, theta_mass, u, phi_s of one dtype, float32 or "
                                        "float64, got mass torch.float64, theta_mass torch.float64, "
                                        "u torch.float32, phi_s torch.float64"):
        step(t[0], t[1], t[2].float(), t[3])
    with pytest.raises(TypeError, match=r"expected 4 inputs \(mass, theta_mass, u, phi_s\) -> "
                                        r"\(mass, theta_mass, u\), got 3"):
        step(*t[:3])
    assert "(mass, theta_mass, u, phi_s) -> (mass, theta_mass, u)" in step.__doc__


# -- JAX --------------------------------------------------------------------------------------------

def _jax():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    return jax


def _jax_grads(jax, fn, inputs, y, jit):
    import jax.numpy as jnp

    def cost(*fields):
        return sum(jnp.sum(x * w) for x, w in zip(fn(*fields), y))

    grad, forward = jax.grad(cost, argnums=(0, 1, 2, 3)), fn
    if jit:
        grad, forward = jax.jit(grad), jax.jit(fn)
    args = [jnp.asarray(a) for a in inputs]
    return [np.asarray(a) for a in forward(*args)], [np.asarray(g) for g in grad(*args)]


@pytest.mark.parametrize("jit", [False, True])
@pytest.mark.parametrize("checkpointing", [None, "multistage"])
def test_jax_step_and_run_are_the_model_and_its_adjoint(problem, jit, checkpointing, tmp_path):
    jax = _jax()
    model, inputs, y = problem
    before = snapshot(model)
    options = checkpointing and dict(CHECKPOINTS[checkpointing], directory=tmp_path)
    for n, fn in ((1, differentiable.jax_step(model)),
                  (STEPS, differentiable.jax_run(model, STEPS, checkpointing=options))):
        x, grads = _jax_grads(jax, fn, inputs, y, jit)
        x_ref, grads_ref = reference(model, inputs, y, n)
        assert_equal(x, x_ref, n)
        assert_equal(grads, grads_ref, n)
    assert untouched(model, before)


def test_jax_bad_inputs_are_named(problem):
    _jax()
    import jax.numpy as jnp

    model, inputs, _ = problem
    args = [jnp.asarray(a) for a in inputs]
    with pytest.raises(ValueError, match=r"jax_run: u has shape \(3, 26\), expected"):
        differentiable.jax_step(model)(args[0], args[1], args[2][:3], args[3])
    with pytest.raises(TypeError, match="jax_run: expected mass, theta_mass, u, phi_s of one dtype"):
        differentiable.jax_step(model)(*args[:3], args[3].astype(jnp.float32))


# -- CUDA tensors and JAX on a CuPy model -----------------------------------------------------------

def _cupy_model(model):
    import cupy

    return Model(model.mesh, *(cupy.asarray(a) for a in model.state + model.controls),
                 cupy.asarray(model.f_vertex), model.dt, physics(model.mesh, cupy))


def _close(got, want):
    for name, a, b in zip(NAMES, got, want):
        assert np.abs(a - b).max() <= 1e-13 * np.abs(b).max(), name


@pytest.mark.gpu
@pytest.mark.parametrize("checkpointing", [None, "revolve"])
def test_torch_cuda_tensors_on_a_cupy_model_match_numpy(problem, checkpointing):
    """On a side stream of torch's: the forward and gradient of a CuPy model's run equal the NumPy
    model's to 1e-13 relative (max norm), and the CuPy model's phi_s is restored."""
    torch = _torch()
    if not torch.cuda.is_available():
        pytest.skip("needs a PyTorch build with CUDA")
    model, inputs, y = problem
    gpu = _cupy_model(model)
    own = gpu.phi_s
    run = differentiable.torch_run(gpu, STEPS, checkpointing=checkpointing and CHECKPOINTS[checkpointing])
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        tensors = [torch.tensor(a, device="cuda", requires_grad=True) for a in inputs]
        out = run(*tensors)
        sum(((x * torch.tensor(w, device="cuda")).sum() for x, w in zip(out, y))).backward()
    stream.synchronize()
    x_ref, grads_ref = reference(model, inputs, y, STEPS)
    _close([x.detach().cpu().numpy() for x in out], x_ref)
    _close([t.grad.cpu().numpy() for t in tensors], grads_ref)
    assert gpu.phi_s is own


@pytest.mark.gpu
@pytest.mark.parametrize("callback", [None, "pure"])
def test_jax_on_a_cupy_model_matches_numpy(problem, callback):
    jax = _jax()
    pytest.importorskip("cupy")
    model, inputs, y = problem
    run = differentiable.jax_run(_cupy_model(model), 2, callback=callback)
    x, grads = _jax_grads(jax, run, inputs, y, jit=True)
    x_ref, grads_ref = reference(model, inputs, y, 2)
    _close(x, x_ref)
    _close(grads, grads_ref)
