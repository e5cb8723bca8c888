"""meshops operators inside JAX transformations (optional extra `jax`).

Every registered operator X (`meshops.registry.OPERATORS`) is here under the same name, with its
adjoint `X_adj` and, for a nonlinear operator, its tangent-linear model `X_tl`:

    y = meshops.jax.grad_c2e(mesh, x)                    # x: (nCells[, nlev]) array -> (nEdges[, nlev])
    g = jax.jit(jax.grad(lambda u: meshops.jax.ke_e2c(mesh, u).sum()))(u)

`mesh` is a mesh (`meshops.contracts.MeshLike`) or a `meshops.DeviceMesh`, a Python object held by
the caller (close over it; it is not a JAX value). Fields are float32 or float64 arrays, every
input of one call with one dtype (float64 needs `jax.config.update("jax_enable_x64", True)`): of
shape (n,) or (n, nlev) with one nlev for the horizontal operators; for the vertical ones (columns,
`meshops.operators.vertical`) layers (n, nVertLevels), interfaces (n, nVertLevels + 1) and columns
(n,), with one n (cells, edges or vertices) and one nVertLevels. Every function works eagerly and
under `jax.jit`.

Derivatives (docs/decisions/0011-autodiff-adapters.md): each map is a `jax.custom_jvp` whose tangent
is a `jax.custom_derivatives.linear_call` of the tangent map with meshops's adjoint as its
transpose, so forward mode (`jax.jvp`) runs the tangent-linear model and reverse mode (`jax.grad`,
`jax.vjp`) the hand-derived adjoint, in `mode` (default the meshops default, `deterministic`).
Derivatives of every order work for linear operators (the transpose of A^T is A). For a nonlinear
operator, derivatives of its gradient in the incoming cotangent work; second derivatives through the
base state raise NotImplementedError (JAX's `linear_call` takes no tangents of its residuals).
`jax.vmap` maps the forward maps (one call per batch element); derivatives under `jax.vmap` are not
supported (`linear_call` has no batching rule).

How the maps run (`callback`, per call or `set_callback`):
- "pure": `jax.pure_callback` into the NumPy path (CPU; on a GPU, JAX copies through the host);
- "buffer": `jax.experimental.buffer_callback` on the device buffers, in place: NumPy on the CPU,
  CuPy on the GPU (DLPack, on XLA's compute stream), one device copy into the output buffer;
- "ffi" (GPU): a typed XLA FFI custom call that replays the map's launch plan
  (`meshops.plans`: its kernels, recorded once per map, mesh, dtype and input shapes on JAX's
  default GPU) on XLA's stream into XLA's buffers: no Python and no copy when the program runs.
  A map with no plan runs as "buffer".
The default is "ffi" where JAX's default backend is a GPU and the runner builds (`meshops.native`:
a C++ compiler, once), else "buffer" there, and "pure" elsewhere.
"""
from __future__ import annotations

import functools
import warnings
import weakref

import numpy as np

try:
    import jax
    import jax.numpy as jnp
    from jax.custom_derivatives import SymbolicZero, linear_call
except ModuleNotFoundError as exc:  # the optional extra
    raise ModuleNotFoundError("meshops.jax needs JAX: pip install 'meshops[jax]'", name="jax") from exc

from meshops import autodiff, native
from meshops import plans
from meshops.modes import resolve_mode
from meshops.registry import OPERATORS

CALLBACKS = ("pure", "buffer", "ffi")
FFI_TARGET = "meshops_run_plan"
_settings: dict = {"callback": None}


def set_callback(callback: str | None) -> None:
    """How the maps run: "pure", "buffer", "ffi", or None (by JAX's default backend; module
    docstring)."""
    if callback is not None and callback not in CALLBACKS:
        raise ValueError(f"meshops.jax callback: expected one of {CALLBACKS} or None, got {callback!r}")
    _settings["callback"] = callback


def resolve_callback(callback: str | None) -> str:
    callback = callback if callback is not None else _settings["callback"]
    if callback is None:
        if jax.default_backend() != "gpu":
            return "pure"
        if plans.enabled() and ffi_available():
            return "ffi"
        return "buffer" if buffer_callback_available() else "pure"
    if callback not in CALLBACKS:
        raise ValueError(f"meshops.jax callback: expected one of {CALLBACKS} or None, got {callback!r}")
    if callback == "ffi":
        if jax.default_backend() != "gpu":
            raise RuntimeError(f"meshops.jax callback 'ffi': runs on a GPU; JAX's default backend is "
                               f"{jax.default_backend()}")
        _ffi_target()   # the runner's build error, if any
    if callback in ("buffer", "ffi") and not buffer_callback_available():
        raise RuntimeError(f"meshops.jax callback 'buffer': jax.experimental.buffer_callback is not in "
                           f"JAX {jax.__version__}; use callback='pure' or a newer JAX")
    return callback


def buffer_callback_available() -> bool:
    try:
        from jax.experimental import buffer_callback  # noqa: F401
    except ImportError:
        return False
    return True


@functools.lru_cache(maxsize=None)
def _ffi_target() -> str:
    """FFI_TARGET, registered with XLA for CUDA (the runner built on first use)."""
    lib = native.library(xla=True)
    jax.ffi.register_ffi_target(FFI_TARGET, jax.ffi.pycapsule(lib.MeshopsRunPlan), platform="CUDA")
    return FFI_TARGET


@functools.lru_cache(maxsize=None)
def ffi_available() -> bool:
    """Whether the "ffi" callback can run here (the runner builds and loads; a warning says why not)."""
    try:
        _ffi_target()
    except (native.NativeUnavailable, OSError) as exc:
        warnings.warn(f"meshops.jax: the 'ffi' callback is unavailable, maps run as 'buffer': {exc}",
                      RuntimeWarning, stacklevel=3)
        return False
    return True


def _default_gpu() -> int:
    """The CUDA ordinal of JAX's default GPU (where "ffi" plans are recorded)."""
    device = jax.config.jax_default_device
    if device is None or isinstance(device, str) or getattr(device, "platform", "gpu") != "gpu":
        device = jax.local_devices(backend="gpu")[0]
    return int(device.local_hardware_id)


# -- host calls ---------------------------------------------------------------------------------------

def pure_call(fn, out_shapes, args):
    """fn(*NumPy arrays) -> NumPy arrays as JAX's `pure_callback` on JAX arrays `args` (results of
    `out_shapes`, `jax.ShapeDtypeStruct`s): the host path, on any backend."""
    def host(*arrays):
        return tuple(np.asarray(o) for o in fn(*(np.asarray(a) for a in arrays)))
    return jax.pure_callback(host, out_shapes, *args, vmap_method="sequential")


def _stream(ctx):
    """XLA's compute stream of a buffer callback on a GPU; None on the CPU."""
    try:
        return ctx.stream
    except jax.errors.JaxRuntimeError:
        return None


_STREAMS: dict = {}


def _cupy_stream(handle: int, device: int):
    """XLA's stream `handle` on `device` as a CuPy stream (one object per stream)."""
    stream = _STREAMS.get((handle, device))
    if stream is None:
        import cupy

        stream = _STREAMS[(handle, device)] = cupy.cuda.ExternalStream(handle, device)
    return stream


def buffer_call(fn, out_shapes, args):
    """fn(*arrays) -> arrays run by JAX's `buffer_callback` on JAX arrays `args` (results of
    `out_shapes`): on a GPU fn gets CuPy views of XLA's device buffers and runs on XLA's stream,
    its results copied into XLA's outputs; on the CPU NumPy views."""
    from jax.experimental.buffer_callback import buffer_callback

    def run(ctx, outs, *ins):
        stream = _stream(ctx)
        if stream is None:
            for out, result in zip(outs, fn(*(np.asarray(b) for b in ins))):
                np.asarray(out)[...] = result
            return
        import cupy

        device = cupy.cuda.runtime.pointerGetAttributes(ins[0].__cuda_array_interface__["data"][0]).device
        with cupy.cuda.Device(device), _cupy_stream(stream, device):
            for out, result in zip(outs, fn(*(cupy.from_dlpack(b) for b in ins))):
                cupy.from_dlpack(out)[...] = result

    return tuple(buffer_callback(run, out_shapes, vmap_method="sequential")(*args))


# -- one operator's maps as custom_jvp functions ------------------------------------------------------

class _Operator:
    """The maps of operator `spec` on `mesh` as JAX functions (`fn[kind](*arrays)` -> tuple), with
    the adjoint mode and the callback fixed."""

    def __init__(self, spec, mesh, mode: str, callback: str):
        self.spec, self._mesh, self.mode, self.callback = spec, weakref.ref(mesh), mode, callback
        self.call = pure_call if callback == "pure" else buffer_call
        self.io = autodiff.maps(spec)
        self.k = len(spec.domain)
        self.fn = {kind: self._differentiable(kind) for kind in self.io}

    @property
    def mesh(self):
        mesh = self._mesh()
        if mesh is None:
            raise RuntimeError(f"meshops.jax.{self.spec.name}: its mesh was freed; keep the mesh alive "
                               f"while functions that use it run")
        return mesh

    def host(self, kind, *arrays) -> tuple:
        """Map `kind` through the callback, not differentiable."""
        spec, mesh, mode, like = self.spec, self.mesh, self.mode, arrays[0]
        ins = tuple(tuple(a.shape) for a in arrays)
        shapes = tuple(jax.ShapeDtypeStruct(shape, like.dtype) for shape in autodiff.output_shapes(
            spec, kind, autodiff.output_rows(spec, kind, mesh, ins), ins))
        if self.callback == "ffi":
            plan = plans.plan(spec, kind, mesh, mode, like.dtype, ins, _default_gpu())
            if plan is not None:
                return tuple(jax.ffi.ffi_call(_ffi_target(), shapes, vmap_method="sequential")(
                    *arrays, plan=plan.words))
        return tuple(self.call(lambda *a: autodiff.compute(spec, kind, mesh, a, mode), shapes, arrays))

    def _linear(self, kind, transpose, residuals, linear):
        """The map `kind`, linear in `linear` about `residuals`, with map `transpose` as its transpose."""
        return linear_call(lambda r, x: self.host(kind, *r, *x),
                           lambda r, ct: self.host(transpose, *r, *ct), tuple(residuals), tuple(linear))

    def _differentiable(self, kind):
        spec, k = self.spec, self.k
        n_base = 0 if (spec.linear or kind == "forward") else k

        @jax.custom_jvp
        def f(*arrays):
            return self.host(kind, *arrays)

        def jvp(primals, tangents):
            base, rest = primals[:n_base], primals[n_base:]
            if any(not isinstance(t, SymbolicZero) for t in tangents[:n_base]):
                self._second_order(kind)
            dt = tuple(jnp.zeros(t.shape, t.dtype) if isinstance(t, SymbolicZero) else t
                       for t in tangents[n_base:])
            out = f(*primals)
            if spec.linear:                     # A dx, transposed by A^T (and A^T by A)
                other = "adjoint" if kind == "forward" else "forward"
                return out, self._linear(kind, other, (), dt)
            if kind == "forward":               # T(x) dx, transposed by T(x)^T
                return out, self._linear("tangent", "adjoint", _guarded(self, rest), dt)
            if kind == "tangent":               # T(x) d(dx)
                return out, self._linear("tangent", "adjoint", _guarded(self, base), dt)
            return out, self._linear("adjoint", "tangent", _guarded(self, base), dt)  # T(x)^T dg

        f.defjvp(jvp, symbolic_zeros=True)
        return f

    def _second_order(self, kind):
        raise NotImplementedError(
            f"meshops.jax: derivatives of {self.spec.name}{autodiff.SUFFIX[kind]} through the base state "
            f"of the nonlinear operator {self.spec.name} are second derivatives, which meshops.jax does "
            f"not take (linear_call takes no tangents of its residuals); use jax.lax.stop_gradient on "
            f"the base state to differentiate in the other inputs only")


_OPERATORS: dict[int, tuple] = {}   # id(mesh) -> (weak reference to it, {(name, mode, callback): _Operator})


def _operator(spec, mesh, mode: str, callback: str) -> _Operator:
    """The _Operator of `spec` on `mesh`, made once per mesh, mode and callback (eager calls reuse its
    functions instead of tracing new ones)."""
    entry = _OPERATORS.get(id(mesh))
    if entry is None or entry[0]() is not mesh:
        entry = _OPERATORS[id(mesh)] = (weakref.ref(mesh), {})
    key = (spec.name, mode, callback)
    op = entry[1].get(key)
    if op is None or op.spec is not spec:
        op = entry[1][key] = _Operator(spec, mesh, mode, callback)
    return op


def _guarded(op: _Operator, base) -> tuple:
    """The base state of a nonlinear map as a residual of its tangent: the identity, whose derivative
    (a second derivative of the operator) raises a clear error."""
    f = jax.custom_jvp(lambda *x: x)

    def jvp(primals, tangents):
        if any(not isinstance(t, SymbolicZero) for t in tangents):
            op._second_order("forward")
        return primals, tuple(jnp.zeros(t.shape, t.dtype) for t in tangents)

    f.defjvp(jvp, symbolic_zeros=True)
    return f(*base)


# -- the public functions ------------------------------------------------------------------------------

def _is_array(x) -> bool:
    return hasattr(x, "shape") and hasattr(x, "dtype") and hasattr(x, "ndim")


def apply(name: str, kind: str, mesh, *arrays, mode: str | None = None, callback: str | None = None):
    """Map `kind` ("forward", "adjoint", "tangent") of operator `name` on JAX arrays, differentiable;
    one output: an array, several: a tuple."""
    spec = autodiff.spec_of("meshops.jax", name)
    ins, _ = autodiff.maps(spec)[kind]
    arrays = tuple(jnp.asarray(a) if isinstance(a, np.ndarray) else a for a in arrays)
    autodiff.check_fields(f"meshops.jax.{name}{autodiff.SUFFIX[kind]}", mesh, ins, arrays,
                          is_array=_is_array, float_dtypes=(np.float32, np.float64))
    out = _operator(spec, mesh, resolve_mode(mode), resolve_callback(callback)).fn[kind](*arrays)
    return out[0] if len(out) == 1 else out


def _public(name: str, kind: str):
    ins, outs = autodiff.maps(OPERATORS[name])[kind]

    def op(mesh, *arrays, mode: str | None = None, callback: str | None = None):
        return apply(name, kind, mesh, *arrays, mode=mode, callback=callback)

    op.__name__ = op.__qualname__ = f"{name}{autodiff.SUFFIX[kind]}"
    op.__doc__ = (f"`meshops.{op.__name__}` on JAX arrays, differentiable ({', '.join(ins)} -> "
                  f"{', '.join(outs)}); `mode`: the adjoint mode of its derivatives; `callback`: "
                  f"\"pure\", \"buffer\" or \"ffi\". See `meshops.{op.__name__}` for the formula.")
    return op


def __getattr__(attr: str):
    """Operators registered after this module was imported are wrapped on first access."""
    return autodiff.public_attribute(globals(), _public, __name__, attr)


__all__ = ["CALLBACKS", "apply", "buffer_callback_available", "set_callback",
           *autodiff.install_public(globals(), _public)]
