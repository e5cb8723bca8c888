"""meshops.jax: every registered operator (horizontal and vertical) inside jax.jit, derivatives by
jax.test_util.check_grads in float64 (forward and reverse mode) through each callback, values
against meshops, jax.vmap of the forward maps, and the errors."""
import numpy as np
import pytest

from meshops.autodiff import maps
from meshops.modes import ADJOINT_MODES
from meshops.registry import OPERATORS

from .conftest import fields, map_inputs, planned_maps

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")
mj = pytest.importorskip("meshops.jax")
from jax.test_util import check_grads  # noqa: E402

jax.config.update("jax_enable_x64", True)

NAMES = sorted(OPERATORS)   # what the adapter wraps
#: check_grads's finite-difference step: small enough that the pressure-level interpolation's
#: brackets (where its derivative jumps) are crossed by a negligible fraction of draws.
EPS = 1e-6
CALLBACKS = ["pure", pytest.param("buffer", marks=pytest.mark.skipif(
    not mj.buffer_callback_available(), reason="jax.experimental.buffer_callback is not in this JAX"))]


def _inputs(mesh, name, kind, rng, nlev=2):
    return tuple(jnp.asarray(a) for a in map_inputs(OPERATORS[name], kind, mesh, rng, nlev))


def _as_tuple(r):
    return r if isinstance(r, tuple) else (r,)


def _scaled(f, args):
    """(z -> f(c z) / s, z = x / c): each input in units of its root mean square c and the output
    divided by s = |f(x)| / |x| in those units. check_grads's tolerance is partly absolute, and on an
    Earth-sized mesh the Jacobians' entries are tiny (about 1e-23 for del4_e2e); scaled, they are of
    order one, as are the inputs (pressures of 1e5 Pa would make its finite differences round-off)."""
    norm = lambda t: float(np.sqrt(sum(float(jnp.vdot(a, a)) for a in t)))  # noqa: E731
    c = [norm((a,)) / np.sqrt(a.size) for a in args]
    z = tuple(a / ci for a, ci in zip(args, c))
    s = norm(_as_tuple(f(*args))) / norm(z)
    return (lambda *a: tuple(o / s for o in _as_tuple(f(*(ci * ai for ci, ai in zip(c, a)))))), z


def _function(name, kind):
    return getattr(mj, name + {"forward": "", "adjoint": "_adj", "tangent": "_tl"}[kind])


@pytest.mark.parametrize("callback", CALLBACKS)
@pytest.mark.parametrize("name", NAMES)
def test_check_grads_under_jit(name, callback, mesh, rng):
    """Every map of the operator, jitted: first derivatives in forward and reverse mode against
    finite differences (for the adjoint and tangent of a nonlinear operator: in their linear
    input, about a fixed base state); second derivatives of a linear operator's maps."""
    spec = OPERATORS[name]
    for kind in maps(spec):
        fn = _function(name, kind)
        x = _inputs(mesh, name, kind, rng)
        n_base = 0 if (spec.linear or kind == "forward") else len(spec.domain)
        base, args = x[:n_base], x[n_base:]
        f, z = _scaled(lambda *a, fn=fn, base=base: fn(mesh, *base, *a, callback=callback), args)
        check_grads(jax.jit(f), z, order=2 if spec.linear else 1, modes=("fwd", "rev"), eps=EPS)


@pytest.mark.parametrize("mode", ADJOINT_MODES)
@pytest.mark.parametrize("name", NAMES)
def test_derivatives_are_meshops(name, mode, mesh, rng):
    """Under jit: the value is meshops's forward, jax.vjp its adjoint and jax.jvp its tangent-linear
    model (the forward for a linear operator), to the last bit."""
    spec = OPERATORS[name]
    x = _inputs(mesh, name, "forward", rng)
    dx = tuple(jnp.asarray(a) for a in fields(mesh, spec.domain, rng))
    g = tuple(jnp.asarray(a) for a in fields(mesh, spec.range, rng))
    f = lambda *a: _as_tuple(getattr(mj, name)(mesh, *a, mode=mode))  # noqa: E731
    y, pullback = jax.vjp(f, *x)
    x_adj = jax.jit(pullback)(g)
    _, dy = jax.jit(lambda x, dx: jax.jvp(f, x, dx))(x, dx)
    xn, dxn, gn = ([np.asarray(a) for a in t] for t in (x, dx, g))
    base = () if spec.linear else xn
    expected = [(y, spec.forward(mesh, *xn)), (x_adj, spec.adjoint(mesh, *base, *gn, mode=mode)),
                (dy, spec.forward(mesh, *dxn) if spec.linear else spec.tangent(mesh, *xn, *dxn))]
    for got, want in expected:
        for a, b in zip(_as_tuple(got), _as_tuple(want), strict=True):
            assert np.array_equal(np.asarray(a), b)


@pytest.mark.parametrize("callback", CALLBACKS)
def test_on_a_generated_mesh_in_float32(ico_mesh, rng, callback):
    u = jnp.asarray(fields(ico_mesh, ("edge",), rng, nlev=None, dtype=np.float32)[0])
    w = jnp.asarray(fields(ico_mesh, ("cell",), rng, nlev=None, dtype=np.float32)[0])
    grad = jax.jit(jax.grad(lambda u: jnp.vdot(w, mj.ke_e2c(ico_mesh, u, callback=callback))))(u)
    assert grad.dtype == jnp.float32
    assert np.array_equal(np.asarray(grad), OPERATORS["ke_e2c"].adjoint(ico_mesh, np.asarray(u), np.asarray(w)))


def test_gradient_of_a_gradient_in_the_cotangent(mesh, rng):
    """w -> grad_u <w, ke_e2c(u)> is linear in w: its derivatives are the tangent-linear model."""
    (u,) = _inputs(mesh, "ke_e2c", "forward", rng)
    w = jnp.asarray(fields(mesh, ("cell",), rng)[0])
    f, z = _scaled(lambda w: jax.grad(lambda u: jnp.vdot(w, mj.ke_e2c(mesh, u)))(u), (w,))
    check_grads(jax.jit(f), z, order=2, modes=("fwd", "rev"))


def test_second_derivative_through_the_base_state_raises(mesh, rng):
    (u,) = _inputs(mesh, "ke_e2c", "forward", rng)
    w = jnp.asarray(fields(mesh, ("cell",), rng)[0])
    grad = jax.grad(lambda u: jnp.vdot(w, mj.ke_e2c(mesh, u)))
    with pytest.raises(NotImplementedError, match="ke_e2c through the base state"):
        jax.grad(lambda u: jnp.sum(grad(u) ** 2))(u)
    with pytest.raises(NotImplementedError, match="ke_e2c_adj through the base state"):
        jax.jvp(lambda u: mj.ke_e2c_adj(mesh, u, w), (u,), (u,))


@pytest.mark.parametrize("name", ["interp_c2v", "flux_div_e2c", "diff_l2i", "interp_level_l2p"])
def test_vmap_of_the_forward(name, mesh, rng):
    """jax.vmap over a batch of inputs, jitted: each element meshops's forward."""
    spec = OPERATORS[name]
    batch = [map_inputs(spec, "forward", mesh, rng) for _ in range(3)]
    x = tuple(jnp.asarray(np.stack(a)) for a in zip(*batch))
    y = _as_tuple(jax.jit(jax.vmap(lambda *a: getattr(mj, name)(mesh, *a)))(*x))
    for i, xi in enumerate(batch):
        for a, b in zip(y, _as_tuple(spec.forward(mesh, *xi)), strict=True):
            assert np.array_equal(np.asarray(a[i]), b)


def test_bad_inputs_name_the_input(mesh, rng):
    e = jnp.asarray(fields(mesh, ("edge",), rng)[0])
    with pytest.raises(ValueError, match=r"meshops.jax.grad_c2e: input 0: expected a cell field"):
        mj.grad_c2e(mesh, e)
    with pytest.raises(TypeError, match="float32 or float64 edge field, got dtype int32"):
        mj.div_e2c(mesh, jnp.zeros(mesh.nEdges, dtype=jnp.int32))
    with pytest.raises(ValueError, match="meshops.jax callback: expected one of"):
        mj.div_e2c(mesh, e, callback="cuda")
    if jax.default_backend() != "gpu":
        with pytest.raises(RuntimeError, match="callback 'ffi': runs on a GPU"):
            mj.div_e2c(mesh, e, callback="ffi")
    with pytest.raises(ValueError, match="adjoint mode"):
        mj.div_e2c(mesh, e, mode="fast")
    with pytest.raises(ValueError, match=r"meshops.jax.diff_i2l: input 0: expected an interface field of shape "
                                         r"\(n, nVertLevels \+ 1\), n one of nCells=162"):
        mj.diff_i2l(mesh, jnp.ones((mesh.nCells + 1, 3)))


@pytest.mark.gpu
@pytest.mark.parametrize("callback", ["buffer", "ffi"])
@pytest.mark.parametrize("mode", ADJOINT_MODES)
@pytest.mark.parametrize("name", NAMES)
def test_gpu_callbacks_match_numpy(name, mode, callback, mesh, rng):
    """On a GPU (CuPy on XLA's stream, or the map's launch plan as an XLA FFI custom call): value,
    vjp and jvp equal meshops's NumPy results to round-off; check_grads passes."""
    if jax.default_backend() != "gpu":
        pytest.skip("needs a CUDA build of jaxlib and a GPU")
    spec = OPERATORS[name]
    x = _inputs(mesh, name, "forward", rng, nlev=8)
    g = tuple(jnp.asarray(a) for a in fields(mesh, spec.range, rng, nlev=8))
    f = lambda *a: _as_tuple(getattr(mj, name)(mesh, *a, mode=mode, callback=callback))  # noqa: E731
    y, pullback = jax.vjp(f, *x)
    x_adj = jax.jit(pullback)(g)
    xn, gn = [np.asarray(a) for a in x], [np.asarray(a) for a in g]
    base = () if spec.linear else xn
    for got, want in ((y, spec.forward(mesh, *xn)), (x_adj, spec.adjoint(mesh, *base, *gn, mode=mode))):
        for a, b in zip(_as_tuple(got), _as_tuple(want), strict=True):
            assert np.abs(np.asarray(a) - b).max() <= 1e-13 * np.abs(b).max()
    f, z = _scaled(f, x)
    check_grads(jax.jit(f), z, order=1, modes=("fwd", "rev"), eps=EPS)


@pytest.mark.gpu
@pytest.mark.parametrize("name", NAMES)
def test_gpu_ffi_replays_every_map_bitwise(name, mesh, rng):
    """Every map of every operator has a launch plan (none falls back to a Python callback), and in
    the deterministic mode its custom call equals the CuPy path bit for bit, in float32 and float64,
    with and without levels."""
    if jax.default_backend() != "gpu":
        pytest.skip("needs a CUDA build of jaxlib and a GPU")
    for what, x, want in planned_maps(OPERATORS[name], mesh, rng, mj._default_gpu(), (None, 5)):
        got = _as_tuple(jax.jit(lambda *a, kind=what[0]: mj.apply(name, kind, mesh, *a, callback="ffi"))(
            *(jnp.asarray(a) for a in x)))
        assert all(np.array_equal(np.asarray(a), b) for a, b in zip(got, want, strict=True)), what
