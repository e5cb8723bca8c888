"""The model's RK4 step and n-step run as PyTorch and JAX functions (adjoint.differentiable): forwards
bitwise the model's, gradients bitwise the adjoint model's (`adjoint.gradient.run_gradient` of the
cost <x_N, y>), checkpointed backwards bitwise the stored one's, torch's gradcheck against finite
differences, the topography as a control, clear errors, and CUDA tensors on a CuPy model."""
import numpy as np
import pytest

from adjoint.gradient import run_gradient
from adjoint.sensitivity import FinalStateProjection
from grids.icosahedral import generate_icosahedral
from adjoint import differentiable
from framework.constants import EARTH_RADIUS
from swm.model import Model
from swm.tendencies import Physics

from ..adjoint.states import perturbed_state

#: Every physics term of the tendencies (APVM, del2, del4), so that each has its adjoint exercised.
PHYSICS = Physics(apvm=0.5, visc2=1e5, visc4=1e15)
STEPS = 4
CHECKPOINTS = {
    "revolve": dict(schedule="revolve", snapshots_in_ram=1),
    "multistage": dict(schedule="multistage", snapshots_in_ram=1, snapshots_on_disk=1),
    "two_level": dict(schedule="two_level", snapshots_in_ram=1, period=2),
}


@pytest.fixture(scope="module")
def level3():
    return generate_icosahedral(3, sphere_radius=EARTH_RADIUS)


@pytest.fixture
def problem(level3, rng):
    """A model (its own state and b untouched by the calls), controls (h0, u0, b) different from
    the model's fields, and a random y = dJ/dx_N."""
    h, u, b, f = perturbed_state(level3, "williamson5", rng)
    model = Model(level3, h.copy(), u.copy(), b.copy(), f, 900.0, PHYSICS)
    h0, u0, b0 = (h + 5.0 * rng.standard_normal(h.shape), u + 0.5 * rng.standard_normal(u.shape),
                  b + 5.0 * rng.standard_normal(b.shape))
    y = rng.standard_normal(h.shape), rng.standard_normal(u.shape)
    return model, (h0, u0, b0), y


def reference(model, controls, y, n_steps, mode="deterministic"):
    """(x_N, (dJ/dh0, dJ/du0, dJ/db)) of J = <x_N, y> from the model and run_gradient."""
    h0, u0, b = controls
    own = model.b
    model.b = b
    try:
        run = Model(model.mesh, h0.copy(), u0.copy(), b, model.f_vertex, model.dt, model.physics,
                    device_mesh=model.device_mesh)
        for _ in range(n_steps):
            run.step()
        _, grads, _ = run_gradient(model, (h0, u0), FinalStateProjection(y, n_steps), n_steps,
                                   mode=mode)
    finally:
        model.b = own
    return (run.h, run.u), grads


def untouched(model, fields):
    return all(np.array_equal(getattr(model, k), v) for k, v in fields.items())


def snapshot(model):
    return {k: getattr(model, k).copy() for k in ("h", "u", "b")}


# -- PyTorch ----------------------------------------------------------------------------------------

def _torch():
    return pytest.importorskip("torch")


def _torch_grads(torch, fn, controls, y):
    inputs = [torch.tensor(a, requires_grad=True) for a in controls]
    h_n, u_n = fn(*inputs)
    ((h_n * torch.from_numpy(y[0])).sum() + (u_n * torch.from_numpy(y[1])).sum()).backward()
    return (h_n.detach().numpy(), u_n.detach().numpy()), [t.grad.numpy() for t in inputs]


@pytest.mark.parametrize("mode", ["deterministic", "atomic"])
def test_torch_step_is_the_model_step_and_its_adjoint(problem, mode):
    torch = _torch()
    model, controls, y = problem
    before = snapshot(model)
    (x1, grads) = _torch_grads(torch, differentiable.torch_step(model, mode=mode), controls, y)
    (x1_ref, grads_ref) = reference(model, controls, y, 1, mode)
    assert all(np.array_equal(a, b) for a, b in zip(x1, x1_ref))
    for name, got, want in zip(("h0", "u0", "b"), grads, grads_ref):
        assert np.array_equal(got, want), name
    assert untouched(model, before)


def test_torch_steps_chained_and_torch_run_give_the_adjoint_run(problem):
    """torch_step n times (autograd chains the adjoint steps) and torch_run: the run's forward and
    gradient. dJ/db is summed over the steps by torch in the chained case (to 1e-13)."""
    torch = _torch()
    model, controls, y = problem
    step = differentiable.torch_step(model)

    def chained(h, u, b):
        for _ in range(STEPS):
            h, u = step(h, u, b)
        return h, u

    x_ref, grads_ref = reference(model, controls, y, STEPS)
    x_chain, grads_chain = _torch_grads(torch, chained, controls, y)
    x_run, grads_run = _torch_grads(torch, differentiable.torch_run(model, STEPS), controls, y)
    for x in (x_chain, x_run):
        assert all(np.array_equal(a, b) for a, b in zip(x, x_ref))
    assert all(np.array_equal(a, b) for a, b in zip(grads_run, grads_ref))
    assert all(np.array_equal(a, b) for a, b in zip(grads_chain[:2], grads_ref[:2]))
    scale = np.abs(grads_ref[2]).max()
    assert scale > 0 and np.abs(grads_chain[2] - grads_ref[2]).max() <= 1e-13 * scale


@pytest.mark.parametrize("name", sorted(CHECKPOINTS))
def test_torch_run_checkpointed_gradient_is_the_stored_one_bitwise(problem, name, tmp_path):
    torch = _torch()
    model, controls, y = problem
    x_stored, stored = _torch_grads(torch, differentiable.torch_run(model, STEPS), controls, y)
    options = dict(CHECKPOINTS[name], directory=tmp_path)
    x, got = _torch_grads(torch, differentiable.torch_run(model, STEPS, checkpointing=options),
                          controls, y)
    assert all(np.array_equal(a, b) for a, b in zip(x, x_stored))
    for label, a, b in zip(("h0", "u0", "b"), got, stored):
        assert np.array_equal(a, b), label
    assert list(tmp_path.iterdir()) == []                    # disk snapshots removed


def test_torch_run_output_gradient_of_one_field_only(problem):
    """A loss of h_N alone: the backward gets no gradient of u_N (None) and uses zeros."""
    torch = _torch()
    model, controls, y = problem
    inputs = [torch.tensor(a, requires_grad=True) for a in controls]
    h_n, _ = differentiable.torch_run(model, 2)(*inputs)
    (h_n * torch.from_numpy(y[0])).sum().backward()
    _, want = reference(model, controls, (y[0], np.zeros_like(y[1])), 2)
    assert all(np.array_equal(t.grad.numpy(), w) for t, w in zip(inputs, want))


@pytest.mark.parametrize("checkpointing", [None, "revolve"])
def test_torch_run_gradcheck(rng, checkpointing):
    """torch.autograd.gradcheck (float64, central differences of eps = 1e-4 in m and m/s, fast
    mode: random projections of the Jacobian) of a 3-step run on a level-2 mesh with every physics
    term, to 1e-5 relative and 1e-8 absolute: the Jacobian of (h_N, u_N) in (h0, u0, b) together,
    and in each control alone (so that a small block, d/db, is checked on its own scale)."""
    torch = _torch()
    mesh = generate_icosahedral(2, sphere_radius=EARTH_RADIUS)
    h, u, b, f = perturbed_state(mesh, "williamson5", rng)
    model = Model(mesh, h, u, b, f, 1800.0, PHYSICS)
    run = differentiable.torch_run(model, 3, checkpointing=checkpointing and CHECKPOINTS[checkpointing])
    x = tuple(torch.tensor(a + rng.standard_normal(a.shape), requires_grad=True) for a in (h, u, b))
    options = dict(eps=1e-4, atol=1e-8, rtol=1e-5, fast_mode=True)
    assert torch.autograd.gradcheck(run, x, **options)
    assert torch.autograd.gradcheck(lambda h0: run(h0, x[1], x[2]), x[:1], **options)
    assert torch.autograd.gradcheck(lambda u0: run(x[0], u0, x[2]), x[1:2], **options)
    assert torch.autograd.gradcheck(lambda b: run(x[0], x[1], b), x[2:], **options)


def test_torch_run_without_gradients_is_the_model_run(problem):
    """Under torch.no_grad (no trajectory kept) and on tensors that need no gradient."""
    torch = _torch()
    model, controls, _ = problem
    run = differentiable.torch_run(model, STEPS)
    x_ref, _ = reference(model, controls, (controls[0], controls[1]), STEPS)
    with torch.no_grad():
        h_n, u_n = run(*(torch.tensor(a, requires_grad=True) for a in controls))
    assert np.array_equal(h_n.numpy(), x_ref[0]) and np.array_equal(u_n.numpy(), x_ref[1])
    h_n, u_n = run(*map(torch.from_numpy, controls))
    assert not h_n.requires_grad
    assert np.array_equal(h_n.numpy(), x_ref[0]) and np.array_equal(u_n.numpy(), x_ref[1])


def test_adjoint_imports_without_torch_and_jax():
    import subprocess
    import sys

    code = ("import sys; sys.modules['torch'] = sys.modules['jax'] = None; import swm.model, "
            "adjoint.differentiable; assert 'torch' not in dir(adjoint.differentiable)")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_torch_bad_inputs_are_named(problem):
    torch = _torch()
    model, (h0, u0, b), _ = problem
    step = differentiable.torch_step(model)
    t = torch.from_numpy
    with pytest.raises(ValueError, match=r"torch_run: u has shape \(10,\), expected \(1920,\)"):
        step(t(h0), t(u0[:10]), t(b))
    with pytest.raises(TypeError, match="one dtype, float32 or float64, got h torch.float32"):
        step(t(h0).float(), t(u0), t(b))
    with pytest.raises(ValueError, match="tensors on meta, the model runs on numpy"):
        step(*(t(a).to("meta") for a in (h0, u0, b)))
    with pytest.raises(ValueError, match="n_steps: expected a positive number of steps, got 0"):
        differentiable.torch_run(model, 0)
    with pytest.raises(ValueError, match=r"adjoint mode: expected one of \('atomic', 'deterministic'\), got 'fast'"):
        differentiable.torch_step(model, mode="fast")
    with pytest.raises(TypeError, match="checkpointing: expected None, an adjoint.config.CheckpointConfig"):
        differentiable.torch_run(model, 3, checkpointing="revolve")
    with pytest.raises(Exception, match="snapshots_in_ram"):
        differentiable.torch_run(model, 3, checkpointing={"schedule": "revolve"})


# -- JAX --------------------------------------------------------------------------------------------

def _jax():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    return jax


def _jax_grads(jax, fn, controls, y, jit):
    import jax.numpy as jnp

    def cost(h, u, b):
        h_n, u_n = fn(h, u, b)
        return jnp.sum(h_n * y[0]) + jnp.sum(u_n * y[1])

    grad = jax.grad(cost, argnums=(0, 1, 2))
    forward = fn
    if jit:
        grad, forward = jax.jit(grad), jax.jit(fn)
    args = [jnp.asarray(a) for a in controls]
    return [np.asarray(a) for a in forward(*args)], [np.asarray(g) for g in grad(*args)]


@pytest.mark.parametrize("jit", [False, True])
@pytest.mark.parametrize("checkpointing", [None, "multistage"])
def test_jax_step_and_run_are_the_model_and_its_adjoint(problem, jit, checkpointing, tmp_path):
    jax = _jax()
    model, controls, y = problem
    before = snapshot(model)
    options = checkpointing and dict(CHECKPOINTS[checkpointing], directory=tmp_path)
    for n, fn in ((1, differentiable.jax_step(model)),
                  (STEPS, differentiable.jax_run(model, STEPS, checkpointing=options))):
        x, grads = _jax_grads(jax, fn, controls, y, jit)
        x_ref, grads_ref = reference(model, controls, y, n)
        assert all(np.array_equal(a, b) for a, b in zip(x, x_ref)), n
        for name, got, want in zip(("h0", "u0", "b"), grads, grads_ref):
            assert np.array_equal(got, want), (n, name)
    assert untouched(model, before)


def test_jax_run_atomic_mode_and_vjp(problem):
    jax = _jax()
    import jax.numpy as jnp

    model, controls, y = problem
    run = differentiable.jax_run(model, 2, mode="atomic")
    _, vjp = jax.vjp(run, *(jnp.asarray(a) for a in controls))
    got = vjp(tuple(jnp.asarray(a) for a in y))
    _, want = reference(model, controls, y, 2, mode="atomic")
    assert all(np.array_equal(np.asarray(a), b) for a, b in zip(got, want))


def test_jax_bad_inputs_are_named(problem):
    jax = _jax()
    import jax.numpy as jnp

    model, (h0, u0, b), _ = problem
    with pytest.raises(ValueError, match=r"jax_run: b has shape \(3,\), expected \(642,\)"):
        differentiable.jax_step(model)(jnp.asarray(h0), jnp.asarray(u0), jnp.asarray(b[:3]))


# -- CUDA tensors on a CuPy model -------------------------------------------------------------------

def _cupy_model(model):
    import cupy

    return Model(model.mesh, *(cupy.asarray(a) for a in (model.h, model.u, model.b, model.f_vertex)),
                 model.dt, model.physics)


def _cuda_problem(problem):
    torch = _torch()
    if not torch.cuda.is_available():
        pytest.skip("needs a PyTorch build with CUDA")
    model, controls, y = problem
    return torch, _cupy_model(model), model, controls, y


@pytest.mark.gpu
@pytest.mark.parametrize("mode", ["deterministic", "atomic"])
@pytest.mark.parametrize("checkpointing", [None, "revolve"])
def test_torch_cuda_tensors_on_a_cupy_model_match_numpy(problem, mode, checkpointing):
    """On a side stream of torch's: the forward and the gradient of a CuPy model's run equal the
    NumPy model's to 1e-13 relative (max norm), and the CuPy model's b is restored."""
    torch, gpu, model, controls, y = _cuda_problem(problem)
    options = checkpointing and CHECKPOINTS[checkpointing]
    run = differentiable.torch_run(gpu, STEPS, mode=mode, checkpointing=options)
    own_b = gpu.b
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        inputs = [torch.tensor(a, device="cuda", requires_grad=True) for a in controls]
        h_n, u_n = run(*inputs)
        yh, yu = (torch.tensor(a, device="cuda") for a in y)
        ((h_n * yh).sum() + (u_n * yu).sum()).backward()
    stream.synchronize()
    x_ref, grads_ref = reference(model, controls, y, STEPS, mode)
    got = ([h_n.detach().cpu().numpy(), u_n.detach().cpu().numpy()]
           + [t.grad.cpu().numpy() for t in inputs])
    for name, a, b in zip(("h_N", "u_N", "h0", "u0", "b"), got, list(x_ref) + list(grads_ref)):
        assert np.abs(a - b).max() <= 1e-13 * np.abs(b).max(), name
    assert gpu.b is own_b


@pytest.mark.gpu
def test_torch_step_refuses_tensors_of_another_backend(problem):
    torch, gpu, model, controls, _ = _cuda_problem(problem)
    with pytest.raises(ValueError, match="tensors on cpu, the model runs on cupy"):
        differentiable.torch_step(gpu)(*(torch.from_numpy(a) for a in controls))
    with pytest.raises(ValueError, match="tensors on cuda:0, the model runs on numpy"):
        differentiable.torch_step(model)(*(torch.tensor(a, device="cuda:0") for a in controls))


@pytest.mark.gpu
@pytest.mark.parametrize("callback", [None, "pure"])
def test_jax_on_a_cupy_model_matches_numpy(problem, callback):
    """JAX runs a CuPy model (on a GPU backend by default on XLA's device buffers, with "pure"
    through the host): the run and its gradients equal NumPy's to 1e-13."""
    jax = _jax()
    model, controls, y = problem
    run = differentiable.jax_run(_cupy_model(model), 2, callback=callback)
    x, grads = _jax_grads(jax, run, controls, y, jit=True)
    x_ref, grads_ref = reference(model, controls, y, 2)
    for a, b in zip(list(x) + list(grads), list(x_ref) + list(grads_ref)):
        assert np.abs(a - b).max() <= 1e-13 * np.abs(b).max()
