"""meshops operators inside PyTorch autograd and `torch.compile` (optional extra `torch`).

Every registered operator X (`meshops.registry.OPERATORS`) is here under the same name, with its
adjoint `X_adj` and, for a nonlinear operator, its tangent-linear model `X_tl`, each differentiable:

    y = meshops.torch.grad_c2e(mesh, x)                  # x: (nCells[, nlev]) tensor -> (nEdges[, nlev])
    y = meshops.torch.ke_e2c(mesh, u, mode="atomic")     # the adjoint mode its backward uses

`mesh` is a mesh (`meshops.contracts.MeshLike`) or a `meshops.DeviceMesh`, held by the caller; the
tables are those meshops keeps per mesh, backend and device (`meshops.device_mesh`). CPU tensors are
shared with NumPy without copies (`Tensor.numpy`, `torch.from_numpy`). On CUDA a map replays its
launch plan (`meshops.plans`: its kernels, recorded once per map, mesh, dtype, input shapes
and device) through the native runner on torch's current stream, into tensors from torch's
allocator; a map without a plan runs meshops on CuPy views of the tensors (DLPack), on the same
stream. Fields are float32 or float64, every input of one call on one device with one dtype: of
shape (n,) or (n, nlev) with one nlev for the horizontal operators; for the vertical ones (columns,
`meshops.operators.vertical`) layers (n, nVertLevels), interfaces (n, nVertLevels + 1) and columns
(n,), with one n (cells, edges or vertices) and one nVertLevels:

    p_i = meshops.torch.sum_layers_from_top_l2i(mesh, dp)  # (nCells, N) -> (nCells, N + 1)

Derivatives are meshops's own: the backward of a linear operator A is its adjoint A^T (in `mode`,
default the meshops default, `deterministic`), the backward of A^T is A, so every order works. The
backward of a nonlinear N about x is its adjoint about x, differentiable in the incoming gradient
(through the tangent-linear model). Second derivatives through the base state x need the second
derivative of N: for a quadratic N (`OperatorSpec.quadratic`: flux_div_e2c, ke_e2c, pv_flux_e2e)
it is exact from the tangent and adjoint (T(x) y = T(y) x); for any other nonlinear
operator asking for it raises NotImplementedError, and derivatives in the other inputs still work.
Forward mode (`torch.autograd.forward_ad`, `torch.func.jvp`) runs the same maps: the tangent of a
linear map is the map of the tangents, that of N the tangent-linear model.

Two forms of every map, one set of derivative rules (`_Rules`):
- `torch.autograd.Function`s (`functions(name)`), run by the public functions in eager mode when
  autograd records the call (otherwise meshops runs directly);
- custom ops `torch.ops.meshops.X`, `X_adj`, `X_tl` (`torch.library.custom_op` with
  `register_autograd` and `register_fake`), run under `torch.compile` so that a compiled graph keeps
  the operators without breaks (`fullgraph=True` works). The mesh enters them as an integer key
  (`mesh_key`), the adjoint mode as a string.
"""
from __future__ import annotations

import contextlib
import ctypes
import warnings
import weakref

import numpy as np

try:
    import torch
    from torch.autograd import forward_ad
except ModuleNotFoundError as exc:  # the optional extra
    raise ModuleNotFoundError("meshops.torch needs PyTorch: pip install 'meshops[torch]'", name="torch") from exc

from meshops import autodiff, native
from meshops.autodiff import SUFFIX as _SUFFIX
from meshops import plans
from meshops.modes import resolve_mode

_MESHES: dict[int, tuple] = {}   # id(mesh) -> (weak reference to it, the call signatures checked on it)


# -- meshes as integer keys -------------------------------------------------------------------------

def mesh_key(mesh) -> int:
    """The integer the custom ops take for `mesh`: its id, under which a weak reference to it is kept
    (an entry whose mesh is gone holds nothing and is replaced by the next mesh of that id)."""
    key = id(mesh)
    entry = _MESHES.get(key)
    if entry is None or entry[0]() is not mesh:
        _MESHES[key] = (weakref.ref(mesh), set())
    return key


@torch.compiler.assume_constant_result
def _traced_mesh_key(key: int) -> int:
    """mesh_key as `torch.compile` sees it, from `id(mesh)`: Dynamo makes the id a constant under a
    guard on the mesh's identity and runs this function for real while tracing, when the mesh is
    alive in the traced frame and its id names it; so the mesh is registered before the graph runs."""
    return mesh_key(ctypes.cast(key, ctypes.py_object).value)


def _mesh(key: int):
    entry = _MESHES.get(key)
    mesh = entry[0]() if entry is not None else None
    if mesh is None:
        raise KeyError(f"meshops.torch: mesh key {key} names no live mesh (the mesh object was freed; "
                       f"keep the mesh alive while its operators run)")
    return mesh


# -- tensors <-> arrays ---------------------------------------------------------------------------

def _as_tuple(r):
    return r if isinstance(r, tuple) else (r,)


def _run(fn, key: int, tensors) -> tuple:
    """fn(mesh, *arrays) -> tuple of arrays, on the tensors' device; its outputs as tensors (no
    copies)."""
    mesh, device = _mesh(key), tensors[0].device
    if device.type == "cpu":
        out = fn(mesh, *(t.detach().contiguous().numpy() for t in tensors))
        return tuple(torch.from_numpy(o) for o in out)
    if device.type == "cuda":
        import cupy

        with cupy.cuda.Device(device.index), _cupy_stream(device.index):
            out = fn(mesh, *(_cupy_view(cupy, t.detach().contiguous(), device.index) for t in tensors))
            return tuple(torch.from_dlpack(o) for o in out)
    raise ValueError(f"meshops.torch: tensors on device {device}; expected cpu or cuda")


def _cupy_view(cupy, t, index: int):
    """The memory of contiguous CUDA tensor `t` as a CuPy array, kept alive by the array. Cheaper
    than DLPack (torch's `__dlpack__` queries the current stream in Python): the caller already
    runs on torch's current stream, so there is nothing to order."""
    dtype = _NUMPY_DTYPES.get(t.dtype)
    if dtype is None or t.numel() == 0:
        return cupy.from_dlpack(t)
    memory = cupy.cuda.UnownedMemory(t.data_ptr(), t.numel() * t.element_size(), t, index)
    return cupy.ndarray(tuple(t.shape), dtype, cupy.cuda.MemoryPointer(memory, 0))


_NUMPY_DTYPES = {torch.float32: np.dtype(np.float32), torch.float64: np.dtype(np.float64)}
_STREAMS: dict = {}
_raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None) or (
    lambda index: torch.cuda.current_stream(index).cuda_stream)


def _cupy_stream(index: int):
    """torch's current stream on CUDA device `index` as a CuPy stream (one object per stream)."""
    handle = _raw_stream(index)
    stream = _STREAMS.get((handle, index))
    if stream is None:
        import cupy

        stream = _STREAMS[(handle, index)] = cupy.cuda.ExternalStream(handle, index)
    return stream


_FLOATS = (torch.float32, torch.float64)


def _check(where: str, mesh, locations, tensors) -> None:
    autodiff.check_fields(where, mesh, locations, tensors, is_array=lambda t: isinstance(t, torch.Tensor),
                          float_dtypes=_FLOATS, place=lambda t: f", device {t.device}")


def _rows(tensors) -> list:
    return [int(t.shape[0]) for t in tensors]


def _shapes(tensors) -> tuple:
    return tuple(tuple(t.shape) for t in tensors)


# -- one operator: its maps, their locations and their derivative rules ----------------------------

class _Maps:
    """The maps of operator `spec` on tensors (`autodiff.maps`): `compute(kind, key, mode, tensors)`
    -> tuple of tensors, and `io[kind]`: the locations of their inputs and outputs."""

    def __init__(self, spec):
        self.spec, self.io = spec, autodiff.maps(spec)

    def compute(self, kind: str, key: int, mode: str, tensors) -> tuple:
        if tensors[0].is_cuda and _PLANS["on"]:
            out = _replay(self.spec, kind, key, mode, tensors)
            if out is not None:
                return out
        return _run(lambda mesh, *arrays: autodiff.compute(self.spec, kind, mesh, arrays, mode), key, tensors)


_PLANS = {"on": plans.enabled()}


def _replay(spec, kind: str, key: int, mode: str, tensors):
    """The map's outputs by its launch plan on torch's current stream, or None (no plan; a
    misaligned input)."""
    t = tensors[0]
    index = t.device.index if t.device.index is not None else torch.cuda.current_device()
    try:
        plan = plans.plan(spec, kind, _mesh(key), mode, _NUMPY_DTYPES[t.dtype], _shapes(tensors), index)
    except native.NativeUnavailable as exc:
        _PLANS["on"] = False
        warnings.warn(f"meshops.torch: launch plans are unavailable, maps run through CuPy: {exc}",
                      RuntimeWarning, stacklevel=4)
        return None
    if plan is None:
        return None
    buffers = [x.detach().contiguous() for x in tensors]
    outs = [torch.empty(shape, dtype=t.dtype, device=t.device) for shape, _ in plan.outputs]
    buffers += outs
    pointers, sizes = [b.data_ptr() for b in buffers], [b.nbytes for b in buffers]
    with torch.cuda.device(index) if index != torch.cuda.current_device() else contextlib.nullcontext():
        done = plan.run(pointers, sizes, _raw_stream(index))
    return tuple(outs) if done else None


class _Rules:
    """The backward of each map of one operator, written with differentiable calls
    `call(kind, key, mode, rows, *tensors)` of the same operator's maps (autograd Functions or
    custom ops; `rows`: the row counts of the call's outputs)."""

    def __init__(self, spec, call):
        self.spec, self.call = spec, call
        self.k = len(spec.domain)

    def backward(self, kind, key, mode, inputs, rows, needs, grads) -> tuple:
        """The gradients of map `kind`'s inputs (`inputs`: saved for a nonlinear operator only;
        `rows`: their row counts) from `grads`, those of its outputs."""
        spec, call, k = self.spec, self.call, self.k
        if kind == "forward" and spec.linear:   # d<g, A x> = <A^T g, dx>
            return call("adjoint", key, mode, rows, *grads)
        if kind == "adjoint" and spec.linear:   # (A^T)^T = A
            return call("forward", key, mode, rows, *grads)
        if kind == "forward":                   # A = N'(x) = T(x)
            return guarded_base(spec, inputs, lambda *x: call("adjoint", key, mode, rows, *x, *grads))
        x, rest = inputs[:k], inputs[k:]
        if kind == "adjoint":                   # x_adj = T(x)^T g: in g, T(x); in x, below
            g_rest = (call("tangent", key, mode, _rows(rest), *x, *grads) if any(needs[k:])
                      else (None,) * len(rest))
            g_x = self._through_base(needs, lambda: call("adjoint", key, mode, _rows(x), *grads, *rest))
            return g_x + tuple(g_rest)
        # tangent: dy = T(x) dx: in dx, T(x)^T; in x (quadratic: T(x) dx = T(dx) x), T(dx)^T
        g_dx = call("adjoint", key, mode, _rows(x), *x, *grads) if any(needs[k:]) else (None,) * k
        g_x = self._through_base(needs, lambda: call("adjoint", key, mode, _rows(x), *rest, *grads))
        return g_x + tuple(g_dx)

    def jvp(self, kind, key, mode, inputs, shapes, tangents) -> tuple:
        """The tangents of map `kind`'s outputs from `tangents`, those of its inputs (`inputs`, of
        `shapes`, saved for a nonlinear operator only; a None tangent is zero)."""
        spec, call, k = self.spec, self.call, self.k
        if spec.linear:                         # d(A x) = A dx, d(A^T g) = A^T dg
            return call(kind, key, mode, None, *_zeros_for_none(tangents, shapes))
        x, xd, rest, rest_d = inputs[:k], tangents[:k], inputs[k:], tangents[k:]
        if kind == "forward":                   # dN(x) = T(x) xd
            return call("tangent", key, mode, None, *x, *_zeros_for_none(xd, [t.shape for t in x]))
        terms = []                              # tangent: T(x) v; adjoint: T(x)^T g; linear in v, g
        if any(t is not None for t in rest_d):
            terms.append(call(kind, key, mode, None, *x, *_zeros_for_none(rest_d, [t.shape for t in rest])))
        if any(t is not None for t in xd):      # quadratic: d/dx T(x) v . xd = T(xd) v, T(xd)^T g
            if not spec.quadratic:
                _no_second_derivative(spec.name)
            terms.append(call(kind, key, mode, None, *_zeros_for_none(xd, [t.shape for t in x]), *rest))
        return tuple(sum(parts) for parts in zip(*terms))

    def _through_base(self, needs, exact) -> tuple:
        """Gradients through the base state x: exact for a quadratic operator (the adjoint is linear
        in x and, with T symmetric, <c, T(x)^T g> = <T(c)^T g, x>). Other operators never get here:
        `guarded_base` hands them their base state detached."""
        if not any(needs[:self.k]):
            return (None,) * self.k
        if not self.spec.quadratic:
            _no_second_derivative(self.spec.name)
        return tuple(exact())


def _no_second_derivative(name: str):
    raise NotImplementedError(
        f"meshops.torch: a second derivative of {name} through its base state was asked for; meshops "
        f"has second derivatives of quadratic nonlinear operators only (OperatorSpec.quadratic)")


def guarded_base(spec, base, fn) -> tuple:
    """fn(*base) for a map that is nonlinear in `base`. For a quadratic operator, as it is (its
    derivatives in the base state are exact). For any other, fn runs on the detached base state
    and each output gets zeros that depend on `base` through `meshops::no_second_derivative`,
    whose backward raises: derivatives in the other inputs work, one through the base state is an
    error, never a silent zero."""
    if spec.quadratic:
        return tuple(fn(*base))
    out = fn(*(b.detach() for b in base))
    guard = torch.ops.meshops.no_second_derivative
    return tuple(o + guard(spec.name, o.detach(), list(base)) for o in out)


@torch.library.custom_op("meshops::no_second_derivative", mutates_args=())
def _no_second_derivative_op(name: str, like: torch.Tensor, base: list[torch.Tensor]) -> torch.Tensor:
    return torch.zeros_like(like)


@_no_second_derivative_op.register_fake
def _(name, like, base):
    return torch.empty_like(like)


def _guard_setup(ctx, inputs, output):
    ctx.name = inputs[0]


def _guard_backward(ctx, grad):
    _no_second_derivative(ctx.name)


_no_second_derivative_op.register_autograd(_guard_backward, setup_context=_guard_setup)


def _zeros_for_none(grads, shapes):
    like = next(g for g in grads if g is not None)
    return tuple(like.new_zeros(s) if g is None else g for g, s in zip(grads, shapes))


def _save(ctx, spec, key, mode, tensors, out) -> None:
    """What a backward needs: the inputs of a nonlinear map (its base state), the row counts and
    shapes of the inputs and the shapes of the outputs (a linear map keeps no tensor alive)."""
    ctx.key, ctx.mode, ctx.rows, ctx.in_shapes = key, mode, _rows(tensors), _shapes(tensors)
    ctx.shapes = [o.shape for o in out]
    ctx.save_for_backward(*(() if spec.linear else tensors))


# -- autograd Functions ----------------------------------------------------------------------------

_FUNCTIONS: dict[tuple[str, str, bool], type] = {}


def _function(name: str, kind: str, transforms: bool = False) -> type:
    """The torch.autograd.Function of map `kind` ("forward", "adjoint", "tangent") of operator `name`:
    apply(key, mode, *tensors) -> tuple of tensors. `transforms`: the form `torch.func` transforms
    need (a separate `setup_context`); PyTorch binds that form's arguments through `inspect` at every
    call (about 90 us), so outside transforms the form with the context in `forward` runs."""
    fn = _FUNCTIONS.get((name, kind, transforms))
    if fn is not None:
        return fn
    spec = _spec(name)
    maps = _Maps(spec)

    def call(kind_, key, mode, rows, *t):   # recorded only when the derivative is itself differentiated
        if _tracked(t):
            return _current_function(name, kind_).apply(key, mode, *t)
        return maps.compute(kind_, key, mode, t)

    rules = _Rules(spec, call)

    def save(ctx, key, mode, tensors, output):
        _save(ctx, spec, key, mode, tensors, output)
        ctx.set_materialize_grads(False)    # an input without a tangent gets None, not zeros
        if not spec.linear:
            ctx.save_for_forward(*tensors)

    class Derivatives(torch.autograd.Function):
        @staticmethod
        def jvp(ctx, _key, _mode, *tangents):
            return rules.jvp(kind, ctx.key, ctx.mode, ctx.saved_tensors, ctx.in_shapes, tangents)

        @staticmethod
        def backward(ctx, *grads):
            if all(g is None for g in grads):
                return (None,) * (2 + len(ctx.rows))
            grads = _zeros_for_none(grads, ctx.shapes)
            return (None, None) + tuple(rules.backward(kind, ctx.key, ctx.mode, ctx.saved_tensors,
                                                       ctx.rows, ctx.needs_input_grad[2:], grads))

    if transforms:
        class Function(Derivatives):
            @staticmethod
            def forward(key, mode, *tensors):
                return maps.compute(kind, key, mode, tensors)

            @staticmethod
            def setup_context(ctx, inputs, output):
                key, mode, *tensors = inputs
                save(ctx, key, mode, tensors, output)
    else:
        class Function(Derivatives):
            @staticmethod
            def forward(ctx, key, mode, *tensors):
                out = maps.compute(kind, key, mode, tensors)
                save(ctx, key, mode, tensors, out)
                return out

    Function.__name__ = Function.__qualname__ = f"{name}_{kind}"
    _FUNCTIONS[(name, kind, transforms)] = Function
    return Function


def _current_function(name: str, kind: str) -> type:
    """`_function` in the form the current context needs."""
    return _function(name, kind, torch._C._are_functorch_transforms_active())


def functions(name: str) -> dict:
    """{"forward", "adjoint"[, "tangent"]: torch.autograd.Function} of operator `name`; each
    `.apply(mesh_key(mesh), mode, *tensors)` returns a tuple of tensors."""
    return {kind: _function(name, kind) for kind in autodiff.maps(_spec(name))}


# -- custom ops (torch.compile) ----------------------------------------------------------------------

_CUSTOM: dict[tuple[str, str], object] = {}


def _schema(n_in: int, n_out: int) -> str:
    args = ", ".join(f"Tensor x{i}" for i in range(n_in))
    out = "Tensor" if n_out == 1 else "(" + ", ".join(["Tensor"] * n_out) + ")"
    return f"(int mesh, str mode, int[] rows, {args}) -> {out}"


def custom_op(name: str, kind: str):
    """The custom op `torch.ops.meshops.<name><suffix>` of map `kind` of operator `name`
    (registered on first use): op(mesh_key, mode, rows, *tensors) -> tensor or tuple of tensors,
    `rows` the row counts of its outputs (what its fake implementation needs)."""
    op = _CUSTOM.get((name, kind))
    if op is not None:
        return op
    spec = _spec(name)
    maps = _Maps(spec)
    ins, outs = maps.io[kind]
    single = len(outs) == 1

    def impl(mesh, mode, rows, *tensors):
        out = maps.compute(kind, mesh, mode, tensors)
        return out[0] if single else out

    def fake(mesh, mode, rows, *tensors):
        out = tuple(tensors[0].new_empty(shape)
                    for shape in autodiff.output_shapes(spec, kind, rows, _shapes(tensors)))
        return out[0] if single else out

    def setup_context(ctx, inputs, output):
        _save(ctx, spec, inputs[0], inputs[1], inputs[3:], _as_tuple(output))

    def call(kind_, key, mode, rows, *tensors):
        return _as_tuple(custom_op(name, kind_)(key, mode, rows, *tensors))

    rules = _Rules(spec, call)

    def backward(ctx, *grads):
        grads = _zeros_for_none(grads, ctx.shapes)
        return (None, None, None) + tuple(rules.backward(kind, ctx.key, ctx.mode, ctx.saved_tensors,
                                                         ctx.rows, ctx.needs_input_grad[3:], grads))

    qualified = f"meshops::{name}{_SUFFIX[kind]}"
    op = torch.library.custom_op(qualified, impl, mutates_args=(), schema=_schema(len(ins), len(outs)))
    op.register_fake(fake)
    op.register_autograd(backward, setup_context=setup_context)
    _CUSTOM[(name, kind)] = op
    return op


# -- the public functions ----------------------------------------------------------------------------

def _spec(name: str):
    return autodiff.spec_of("meshops.torch", name)


class _Entry:
    """Map `kind` of operator `name` as `apply` calls it."""

    def __init__(self, name: str, kind: str):
        self.spec, self.kind = _spec(name), kind
        self.ins = autodiff.maps(self.spec)[kind][0]
        self.where, self.k = f"meshops.torch.{name}{_SUFFIX[kind]}", len(self.spec.domain)
        self.plain = self.spec.linear or kind == "forward"   # no guard on the base state needed
        self.maps = _Maps(self.spec)


_ENTRIES: dict[tuple[str, str], _Entry] = {}


def _entry(name: str, kind: str) -> _Entry:
    entry = _ENTRIES.get((name, kind))
    if entry is None:
        entry = _ENTRIES[(name, kind)] = _Entry(name, kind)
    return entry


def _check_once(entry: _Entry, key: int, mesh, tensors) -> None:
    """`_check`, once per mesh and call signature (map, shapes, dtypes, devices)."""
    try:
        signature = (entry.where, tuple((t.shape, t.dtype, t.device) for t in tensors))
    except AttributeError:   # not a tensor: _check says which input
        signature = None
    checked = _MESHES[key][1]
    if signature not in checked:
        _check(entry.where, mesh, entry.ins, tensors)
        checked.add(signature)


def _tracked(tensors) -> bool:
    """Whether autograd has anything to record: a reverse-mode input, a forward-mode level or a
    torch.func transform."""
    if forward_ad._current_level >= 0 or torch._C._functorch.peek_interpreter_stack() is not None:
        return True
    return torch.is_grad_enabled() and any(t.requires_grad for t in tensors)


def apply(name: str, kind: str, mesh, *tensors, mode: str | None = None):
    """Map `kind` of operator `name` on tensors, differentiable: through the custom op while
    `torch.compile` traces, through the autograd Function when autograd records, directly otherwise.
    One output: a tensor; several: a tuple."""
    entry = _entry(name, kind)
    mode = resolve_mode(mode)
    if torch.compiler.is_compiling():
        _check(entry.where, mesh, entry.ins, tensors)
        key = _traced_mesh_key(id(mesh))
        rows = list(autodiff.output_rows(entry.spec, kind, mesh, _shapes(tensors)))
        op, k = custom_op(name, kind), entry.k
        if entry.plain:
            return op(key, mode, rows, *tensors)
        out = guarded_base(entry.spec, tensors[:k], lambda *x: _as_tuple(op(key, mode, rows, *x, *tensors[k:])))
        return out[0] if len(out) == 1 else out
    key = mesh_key(mesh)
    _check_once(entry, key, mesh, tensors)
    if not _tracked(tensors):
        out = entry.maps.compute(kind, key, mode, tensors)
    elif entry.plain:
        out = _current_function(name, kind).apply(key, mode, *tensors)
    else:
        k, function = entry.k, _current_function(name, kind)
        out = guarded_base(entry.spec, tensors[:k], lambda *x: function.apply(key, mode, *x, *tensors[k:]))
    return out[0] if len(out) == 1 else out


def _public(name: str, kind: str):
    ins, outs = autodiff.maps(_spec(name))[kind]

    def op(mesh, *tensors, mode: str | None = None):
        return apply(name, kind, mesh, *tensors, mode=mode)

    op.__name__ = op.__qualname__ = f"{name}{_SUFFIX[kind]}"
    op.__doc__ = (f"`meshops.{op.__name__}` on tensors, differentiable ({', '.join(ins)} -> "
                  f"{', '.join(outs)}); `mode`: the adjoint mode of its derivatives. See "
                  f"`meshops.{op.__name__}` for the formula.")
    return op


def __getattr__(attr: str):
    """Operators registered after this module was imported are wrapped on first access."""
    return autodiff.public_attribute(globals(), _public, __name__, attr)


def _public_and_custom_op(name: str, kind: str):
    custom_op(name, kind)   # registered with torch.library at import, before any trace needs it
    return _public(name, kind)


__all__ = ["apply", "custom_op", "functions", "mesh_key",
           *autodiff.install_public(globals(), _public_and_custom_op)]
