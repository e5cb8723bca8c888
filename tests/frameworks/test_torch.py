"""meshops.torch: every registered operator (horizontal and vertical) in PyTorch autograd (eager
autograd Functions and custom ops), first and second derivatives by gradcheck / gradgradcheck
against finite differences, values against meshops, torch.compile(fullgraph=True), zero-copy
sharing and the errors."""
import contextlib
import dataclasses

import numpy as np
import pytest

from meshops.autodiff import maps, output_rows
from meshops.modes import ADJOINT_MODES
from meshops.registry import OPERATORS

from .conftest import fields, fixed_base, map_inputs, planned_maps

torch = pytest.importorskip("torch")
mt = pytest.importorskip("meshops.torch")

NAMES = sorted(OPERATORS)   # what the adapter wraps
#: Operators with second derivatives: linear and quadratic ones (the others: through their base
#: state, a NotImplementedError).
SECOND = [n for n in NAMES if OPERATORS[n].linear or OPERATORS[n].quadratic]
NOT_QUADRATIC = [n for n in NAMES if n not in SECOND]


def _tensors(arrays, device="cpu", requires_grad=True):
    return tuple(torch.tensor(a, device=device, requires_grad=requires_grad) for a in arrays)


def _inputs(mesh, name, kind, rng, nlev=2):
    return map_inputs(OPERATORS[name], kind, mesh, rng, nlev)


def _as_tuple(r):
    return r if isinstance(r, tuple) else (r,)


@pytest.mark.parametrize("name", NAMES)
def test_values_are_meshops(name, mesh, rng):
    """Forward, and the gradient of <g, X(x)>: meshops's forward and adjoint, bit for bit."""
    spec = OPERATORS[name]
    x = _inputs(mesh, name, "forward", rng)
    g = fields(mesh, spec.range, rng)
    xt = _tensors(x)
    y = _as_tuple(getattr(mt, name)(mesh, *xt))
    for a, b in zip(y, _as_tuple(spec.forward(mesh, *x)), strict=True):
        assert np.array_equal(a.detach().numpy(), b)
    grads = torch.autograd.grad(y, xt, _tensors(g, requires_grad=False))
    base = () if spec.linear else x
    for a, b in zip(grads, _as_tuple(spec.adjoint(mesh, *base, *g, mode="deterministic")), strict=True):
        assert np.array_equal(a.numpy(), b)


def _scaled(f, xt):
    """(z -> f(c z) / s, z = x / c): each input in units of its root mean square c and the output
    divided by s = |f(x)| / |x| in those units. gradcheck's tolerance is partly absolute (atol 1e-5),
    and on an Earth-sized mesh the Jacobians' entries are tiny (about 1e-23 for del4_e2e), so
    unscaled every check would pass; scaled, their entries are of order one, as are the inputs
    (pressures of 1e5 Pa would make its finite differences round-off)."""
    with torch.no_grad():
        c = [float(x.square().mean().sqrt()) for x in xt]
        zt = tuple((x / ci).detach().requires_grad_(x.requires_grad) for x, ci in zip(xt, c))
        y = _as_tuple(f(*xt))
        s = float(torch.sqrt(sum(o.square().sum() for o in y)) / torch.sqrt(sum(z.square().sum() for z in zt)))
    return (lambda *z: tuple(o / s for o in _as_tuple(f(*(ci * zi for ci, zi in zip(c, z)))))), zt


@pytest.mark.parametrize("mode", ADJOINT_MODES)
@pytest.mark.parametrize("name", NAMES)
def test_gradcheck(name, mode, mesh, rng):
    """The gradient (meshops's adjoint in `mode`) against finite differences, whole Jacobian."""
    xt = _tensors(_inputs(mesh, name, "forward", rng, nlev=None))
    f, zt = _scaled(lambda *x: getattr(mt, name)(mesh, *x, mode=mode), xt)
    assert torch.autograd.gradcheck(f, zt)


FULL = ["div_e2c", "ke_e2c", "reconstruct_zonal_meridional_e2c", "sum_layers_from_top_l2i"]


@pytest.mark.parametrize("name", SECOND)
def test_gradgradcheck(name, mesh, rng):
    """Second derivatives (linear operators: through A and A^T; quadratic nonlinear ones also
    through their base state), in gradcheck's fast mode (random projections u^T J v)."""
    f, zt = _scaled(lambda *x: getattr(mt, name)(mesh, *x), _tensors(_inputs(mesh, name, "forward", rng)))
    assert torch.autograd.gradgradcheck(f, zt, fast_mode=True)


@pytest.mark.parametrize("name", [n if n in FULL else pytest.param(n, marks=pytest.mark.slow) for n in SECOND])
def test_gradgradcheck_full_jacobians(name, mesh, rng):
    """As above with whole Jacobians, entry by entry (one level; vertical operators: LAYERS)."""
    f, zt = _scaled(lambda *x: getattr(mt, name)(mesh, *x), _tensors(_inputs(mesh, name, "forward", rng, nlev=None)))
    assert torch.autograd.gradgradcheck(f, zt)


@pytest.mark.parametrize("name", NOT_QUADRATIC)
def test_second_derivatives_of_an_operator_that_is_not_quadratic(name, mesh, rng):
    """Through the base state: a NotImplementedError naming the operator; in the incoming gradient
    w (the gradient of <w, N(x)> is N'(x)^T w, meshops's adjoint), gradcheck and gradgradcheck pass,
    also for the adjoint map about a base state that requires gradients."""
    spec = OPERATORS[name]
    xt = _tensors(_inputs(mesh, name, "forward", rng))
    wt = _tensors(fields(mesh, spec.range, rng))
    grads = torch.autograd.grad(_as_tuple(getattr(mt, name)(mesh, *xt)), xt, wt, create_graph=True)
    x, w = [t.detach().numpy() for t in xt], [t.detach().numpy() for t in wt]
    for a, b in zip(grads, _as_tuple(spec.adjoint(mesh, *x, *w)), strict=True):
        assert np.array_equal(a.detach().numpy(), b)
    with pytest.raises(NotImplementedError, match=f"second derivative of {name} through its base state"):
        torch.autograd.grad(sum(g.sum() for g in grads), xt)
    f, wz = _scaled(lambda *w: getattr(mt, name + "_adj")(mesh, *xt, *w), wt)
    assert torch.autograd.gradcheck(f, wz) and torch.autograd.gradgradcheck(f, wz, fast_mode=True)


@pytest.mark.parametrize("name", NAMES)
def test_adjoint_and_tangent_maps_are_differentiable(name, mesh, rng):
    """The tangent and adjoint maps: gradcheck and gradgradcheck in every input (in the linear ones
    only, about a fixed base state, for an operator that is not quadratic)."""
    spec = OPERATORS[name]
    for kind in maps(spec):
        if kind == "forward":
            continue
        x = _inputs(mesh, name, kind, rng, nlev=None)
        k = fixed_base(spec, kind)
        base, xt = _tensors(x[:k], requires_grad=False), _tensors(x[k:])
        f = getattr(mt, name + ("_adj" if kind == "adjoint" else "_tl"))
        f, zt = _scaled(lambda *a, f=f: f(mesh, *base, *a), xt)
        assert torch.autograd.gradcheck(f, zt), kind
        assert torch.autograd.gradgradcheck(f, zt, fast_mode=True), kind


@pytest.mark.parametrize("name", NAMES)
def test_forward_mode(name, mesh, rng):
    """Forward-mode AD (torch.autograd.forward_ad, torch.func.jvp) runs the tangent-linear model:
    every map's Jacobian-vector products against finite differences (gradcheck's forward-AD check,
    whole Jacobians), and jvp of the forward equal to meshops's tangent (or the operator itself)."""
    spec = OPERATORS[name]
    for kind in maps(spec):
        x = _inputs(mesh, name, kind, rng, nlev=None)
        k = fixed_base(spec, kind)
        base = _tensors(x[:k], requires_grad=False)
        op = getattr(mt, name + {"forward": "", "adjoint": "_adj", "tangent": "_tl"}[kind])
        f, zt = _scaled(lambda *a, op=op: op(mesh, *base, *a), _tensors(x[k:]))
        assert torch.autograd.gradcheck(f, zt, check_forward_ad=True, check_backward_ad=False,
                                        check_undefined_grad=False, check_batched_grad=False), kind
    x = _inputs(mesh, name, "forward", rng)
    dx = fields(mesh, spec.domain, rng)
    _, dy = torch.func.jvp(lambda *a: _as_tuple(getattr(mt, name)(mesh, *a)),
                           _tensors(x, requires_grad=False), _tensors(dx, requires_grad=False))
    expected = spec.forward(mesh, *dx) if spec.linear else spec.tangent(mesh, *x, *dx)
    for a, b in zip(dy, _as_tuple(expected), strict=True):
        assert np.array_equal(a.numpy(), b)


@pytest.mark.parametrize("name", NAMES)
def test_custom_ops_gradcheck_and_gradgradcheck(name, mesh, rng):
    """The custom ops (what torch.compile runs) have the same derivatives (second ones where the
    operator has them) and fake implementations of the right shapes."""
    spec = OPERATORS[name]
    xt = _tensors(_inputs(mesh, name, "forward", rng, nlev=None))
    op, key = getattr(torch.ops.meshops, name), mt.mesh_key(mesh)
    rows = list(output_rows(spec, "forward", mesh, [x.shape for x in xt]))
    f, zt = _scaled(lambda *x: op(key, "atomic", rows, *x), xt)
    assert torch.autograd.gradcheck(f, zt)
    if name in SECOND:
        assert torch.autograd.gradgradcheck(f, zt, fast_mode=True)
    torch.library.opcheck(op, (key, "atomic", rows) + xt, test_utils=("test_schema", "test_faketensor"))


def test_gradgradcheck_on_a_generated_mesh(ico_mesh, rng):
    x = _tensors(fields(ico_mesh, ("edge",), rng, nlev=None))
    f, z = _scaled(lambda u: mt.vector_laplacian_e2e(ico_mesh, u), x)
    assert torch.autograd.gradcheck(f, z, fast_mode=True)
    assert torch.autograd.gradgradcheck(f, z, fast_mode=True)


def test_float32(mesh, rng):
    x = _tensors(fields(mesh, ("edge",), rng, dtype=np.float32))
    y = mt.div_e2c(mesh, *x)
    g = torch.ones_like(y)
    (gx,) = torch.autograd.grad(y, x, g)
    assert y.dtype == gx.dtype == torch.float32
    assert np.array_equal(gx.numpy(), OPERATORS["div_e2c"].adjoint(mesh, g.numpy()))


def test_second_order_of_a_non_quadratic_operator_raises(mesh, rng, monkeypatch):
    """Through the base state of a nonlinear operator that is not quadratic there is no second
    derivative: asking for one is a clear error; in the incoming gradient, it works."""
    monkeypatch.setitem(OPERATORS, "ke_e2c", dataclasses.replace(OPERATORS["ke_e2c"], quadratic=False))
    monkeypatch.setattr(mt, "_FUNCTIONS", {})
    monkeypatch.setattr(mt, "_ENTRIES", {})
    (u,) = _tensors(fields(mesh, ("edge",), rng))
    (w,) = _tensors(fields(mesh, ("cell",), rng))
    (gu,) = torch.autograd.grad(mt.ke_e2c(mesh, u), u, w, create_graph=True)
    assert np.array_equal(gu.detach().numpy(), OPERATORS["ke_e2c"].adjoint(mesh, u.detach().numpy(),
                                                                          w.detach().numpy()))
    (gw,) = torch.autograd.grad(gu, w, torch.ones_like(gu), retain_graph=True)  # d/dw: the tangent
    assert np.array_equal(gw.numpy(), OPERATORS["ke_e2c"].tangent(mesh, u.detach().numpy(),
                                                                 np.ones(u.shape)))
    with pytest.raises(NotImplementedError, match="second derivative of ke_e2c through its base state"):
        torch.autograd.grad(gu.sum(), u)
    with pytest.raises(NotImplementedError, match="second derivative of ke_e2c"):
        torch.autograd.grad(mt.ke_e2c_adj(mesh, u, w).sum(), u)
    assert torch.autograd.gradcheck(*_scaled(lambda w: mt.ke_e2c_adj(mesh, u, w), (w,)))


def _shares_memory(mesh, rng, monkeypatch, device, address, requires_grad):
    """The operator reads the tensor's memory and the result tensor is the operator's array
    (`address`: the data pointer of a NumPy or CuPy array)."""
    spec = OPERATORS["grad_c2e"]
    seen = {}

    def forward(m, x):
        seen["in"] = address(x)
        out = spec.forward(m, x)
        seen["out"] = address(out)
        return out

    monkeypatch.setitem(OPERATORS, "grad_c2e", dataclasses.replace(spec, forward=forward))
    monkeypatch.setattr(mt, "_FUNCTIONS", {})
    monkeypatch.setattr(mt, "_ENTRIES", {})
    (x,) = _tensors(fields(mesh, ("cell",), rng), device, requires_grad=requires_grad)
    y = mt.apply("grad_c2e", "forward", mesh, x)
    assert seen["in"] == x.data_ptr() and seen["out"] == y.data_ptr()
    torch.testing.assert_close(y.detach().cpu(), torch.from_numpy(spec.forward(mesh, x.detach().cpu().numpy())),
                               rtol=1e-13, atol=0)


@pytest.mark.parametrize("requires_grad", [False, True])
def test_cpu_tensors_are_shared_with_numpy(mesh, rng, monkeypatch, requires_grad):
    _shares_memory(mesh, rng, monkeypatch, "cpu", lambda a: a.__array_interface__["data"][0], requires_grad)


def test_bad_inputs_name_the_input(mesh, rng):
    (e,) = _tensors(fields(mesh, ("edge",), rng))
    with pytest.raises(ValueError, match=r"grad_c2e: input 0: expected a cell field of shape \(162,\)"):
        mt.grad_c2e(mesh, e)
    with pytest.raises(TypeError, match="float32 or float64 edge field, got dtype torch.int64"):
        mt.div_e2c(mesh, torch.zeros(mesh.nEdges, dtype=torch.int64))
    with pytest.raises(ValueError, match=r"input 1: levels \(3,\)"):
        mt.flux_div_e2c(mesh, e, torch.randn(mesh.nEdges, 3, dtype=torch.float64))
    with pytest.raises(ValueError, match="adjoint mode"):
        mt.div_e2c(mesh, e, mode="fast")
    with pytest.raises(AttributeError, match="no attribute 'div_c2e'"):
        mt.div_c2e


def test_bad_column_inputs_name_the_input(mesh):
    """Vertical operators: one set of columns (cells, edges or vertices) with one nVertLevels."""
    layers = torch.ones(mesh.nCells, 4, dtype=torch.float64)
    with pytest.raises(ValueError, match=r"avg_l2i: input 0: expected a layer field of shape \(n, nVertLevels\), "
                                         r"n one of nCells=162, nEdges=480, nVertices=320, got shape \(162,\)"):
        mt.avg_l2i(mesh, layers[:, 0])
    with pytest.raises(ValueError, match=r"input 1: expected a layer field of shape \(162, 4\) .* got shape \(480, 4\)"):
        mt.interp_level_l2p(mesh, layers, torch.ones(mesh.nEdges, 4, dtype=torch.float64))
    with pytest.raises(ValueError, match=r"interp_level_l2p_adj: input 2: expected a column field of shape \(162,\)"):
        mt.interp_level_l2p_adj(mesh, layers, layers, layers)
    with pytest.raises(ValueError, match=r"input 1: dtype torch.float32, device cpu; expected those of input 0"):
        mt.specific_volume(mesh, layers, layers.float())


# -- torch.compile ------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["div_e2c", "pv_flux_e2e", "reconstruct_zonal_meridional_e2c",
                                  "sum_layers_from_top_l2i", "interp_level_l2p"])
def test_compile_fullgraph(name, mesh, rng):
    """A loss through the operator compiles into one graph (fullgraph=True: no breaks) and gives
    the eager value and gradient."""
    torch._dynamo.reset()
    xt = _tensors(_inputs(mesh, name, "forward", rng))
    weights = [torch.tensor(w) for w in fields(mesh, OPERATORS[name].range, rng)]

    def loss(*x):
        return sum((w * torch.tanh(y)).sum() for w, y in zip(weights, _as_tuple(getattr(mt, name)(mesh, *x))))

    compiled = torch.compile(loss, fullgraph=True, backend="aot_eager" if name != "div_e2c" else "inductor")
    value, expected = compiled(*xt), loss(*xt)
    grads, expected_grads = torch.autograd.grad(value, xt), torch.autograd.grad(expected, xt)
    torch.testing.assert_close(value, expected, rtol=1e-13, atol=0)
    for a, b in zip(grads, expected_grads, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-13, atol=1e-300)


def test_compiled_graph_follows_the_mesh(mesh, rng):
    """The mesh is a guard of the compiled graph: another mesh object recompiles, not reuses."""
    torch._dynamo.reset()
    other = dataclasses.replace(mesh, dcEdge=2.0 * mesh.dcEdge)
    (x,) = _tensors(fields(mesh, ("cell",), rng), requires_grad=False)
    f = torch.compile(lambda m, x: mt.grad_c2e(m, x), fullgraph=True, backend="aot_eager")
    torch.testing.assert_close(f(mesh, x), mt.grad_c2e(mesh, x), rtol=0, atol=0)
    torch.testing.assert_close(f(other, x), mt.grad_c2e(other, x), rtol=0, atol=0)
    torch.testing.assert_close(f(mesh, x), 2 * f(other, x), rtol=1e-15, atol=0)


# -- GPU --------------------------------------------------------------------------------------------

def _cuda():
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA build of PyTorch and a CUDA device")


@pytest.mark.gpu
@pytest.mark.parametrize("requires_grad", [False, True])
def test_cuda_tensors_are_shared_with_cupy(mesh, rng, monkeypatch, requires_grad):
    """Without launch plans, CUDA tensors reach meshops as CuPy views."""
    _cuda()
    monkeypatch.setitem(mt._PLANS, "on", False)
    _shares_memory(mesh, rng, monkeypatch, "cuda", lambda a: a.data.ptr, requires_grad)


@pytest.mark.gpu
@pytest.mark.parametrize("mode", ADJOINT_MODES)
@pytest.mark.parametrize("name", NAMES)
def test_cuda_matches_cpu(name, mode, mesh, rng):
    """CUDA tensors through CuPy (DLPack, on a non-default torch stream): forward and gradient equal
    the CPU ones to round-off."""
    _cuda()
    spec = OPERATORS[name]
    x = _inputs(mesh, name, "forward", rng, nlev=8)
    g = fields(mesh, spec.range, rng, nlev=8)
    results = []
    for device in ("cpu", "cuda"):
        xt, gt = _tensors(x, device), _tensors(g, device, requires_grad=False)
        stream = torch.cuda.Stream() if device == "cuda" else None
        if stream is not None:
            stream.wait_stream(torch.cuda.current_stream())   # the inputs' copies come first
        with torch.cuda.stream(stream) if stream is not None else contextlib.nullcontext():
            y = _as_tuple(getattr(mt, name)(mesh, *xt, mode=mode))
            grads = torch.autograd.grad(y, xt, gt)
            with torch.no_grad():   # straight to meshops, no autograd Function
                y_plain = _as_tuple(getattr(mt, name)(mesh, *xt, mode=mode))
        if stream is not None:
            stream.synchronize()
        assert all(torch.equal(a, b) for a, b in zip(y, y_plain, strict=True))
        results.append([t.detach().cpu().numpy() for t in y + grads])
    for a, b in zip(*results, strict=True):
        assert np.abs(a - b).max() <= 1e-13 * np.abs(a).max()


@pytest.mark.gpu
@pytest.mark.parametrize("name", NAMES)
def test_cuda_gradcheck_and_compile(name, mesh, rng):
    """On CUDA tensors: gradcheck (reverse and forward mode), gradgradcheck, and the operator under
    torch.compile(fullgraph=True) equal to eager."""
    _cuda()
    xt = _tensors(_inputs(mesh, name, "forward", rng), "cuda")
    f = lambda *x: getattr(mt, name)(mesh, *x)  # noqa: E731
    assert torch.autograd.gradcheck(*_scaled(f, xt), check_forward_ad=True)
    if name in SECOND:
        assert torch.autograd.gradgradcheck(*_scaled(f, xt), fast_mode=True)
    torch._dynamo.reset()
    loss = lambda *x: sum(y.square().sum() for y in _as_tuple(f(*x)))  # noqa: E731
    value = torch.compile(loss, fullgraph=True)(*xt)
    torch.testing.assert_close(value, loss(*xt), rtol=1e-13, atol=0)


@pytest.mark.gpu
@pytest.mark.parametrize("name", NAMES)
def test_cuda_launch_plans_replay_every_map_bitwise(name, mesh, rng):
    """Every map of every operator has a launch plan, and its replay on torch's stream into torch's
    tensors equals the CuPy path bit for bit (deterministic mode; float32 and float64, with and
    without levels); a misaligned input runs through CuPy instead, with the same result."""
    _cuda()
    for what, x, want in planned_maps(OPERATORS[name], mesh, rng, torch.cuda.current_device(), (None, 8)):
        xt = _tensors(x, "cuda", requires_grad=False)
        got = _as_tuple(mt.apply(name, what[0], mesh, *xt))
        assert all(np.array_equal(a.cpu().numpy(), b) for a, b in zip(got, want, strict=True)), what
        if what[2] is not None:   # one element off: the lanes' alignment is lost
            shifted = []
            for t in xt:
                buffer = torch.empty(t.numel() + 1, dtype=t.dtype, device="cuda")
                shifted.append(buffer[1:].view(t.shape).copy_(t))
            got = _as_tuple(mt.apply(name, what[0], mesh, *shifted))
            assert all(np.array_equal(a.cpu().numpy(), b) for a, b in zip(got, want, strict=True)), what


@pytest.mark.gpu
def test_a_launch_plan_runs_on_a_thread_left_without_a_current_context(mesh, rng):
    """A library that pops its own CUDA context can leave the thread with none current (JAX's
    tests before these did): the plan's runner makes the device's primary context current again
    instead of failing in cuCtxGetDevice with CUDA error 201."""
    import ctypes

    _cuda()
    name = "avg_i2l"
    x = _inputs(mesh, name, "forward", rng, nlev=8)
    xt = _tensors(x, "cuda", requires_grad=False)
    want = _as_tuple(mt.apply(name, "forward", mesh, *xt))
    torch.cuda.synchronize()
    libcuda = ctypes.CDLL("libcuda.so.1")
    current = ctypes.c_void_p()
    assert libcuda.cuCtxGetCurrent(ctypes.byref(current)) == 0
    try:
        assert libcuda.cuCtxSetCurrent(ctypes.c_void_p(0)) == 0
        device = ctypes.c_int(-1)
        assert libcuda.cuCtxGetDevice(ctypes.byref(device)) == 201        # none current now
        got = _as_tuple(mt.apply(name, "forward", mesh, *xt))
        assert libcuda.cuCtxGetDevice(ctypes.byref(device)) == 0 and device.value == xt[0].device.index
    finally:                         # the later tests of this process keep their context
        libcuda.cuCtxSetCurrent(current)
    assert all(torch.equal(a, b) for a, b in zip(got, want, strict=True))
