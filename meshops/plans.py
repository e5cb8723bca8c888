"""Launch plans: the kernel launches of one operator map, recorded once and replayed without Python.

A map (`autodiff.compute`: an operator's forward, tangent-linear or adjoint) on CuPy arrays is run
once through a recording launcher (`kernels.use_launcher`): each launch's kernel (its CUfunction),
grid, block and arguments are kept, every argument array named as one of the call's buffers (an
input or an output, at a byte offset) or as a constant (a mesh table, whose array the plan holds).
The plan is then replayed on fresh random inputs into NaN-filled outputs and must agree with the
map (exactly, or to round-off where atomics reorder sums); a map whose outputs need clearing first
gets clears; a map that does work outside the launcher (CuPy element-wise code on its inputs) fails
the check and gets no plan. The native runner (`meshops.native`) replays a plan on a stream:
PyTorch through ctypes, JAX as a typed XLA FFI custom call. A plan is specific to the map, the
mesh, the adjoint mode, the dtype, the shapes of the inputs (levels; a vertical operator's columns)
and the CUDA device; buffers must be aligned as the lanes recorded need (checked at every run).
The random inputs of a nonlinear operator defined on part of its domain only start from a base
state where it is defined (`OperatorSpec.sample`).

`MESHOPS_LAUNCH_PLANS=0` turns plans off (the adapters then run meshops through Python).
"""
from __future__ import annotations

import ctypes
import os
import weakref

import numpy as np

from meshops import autodiff, native
from meshops.device import kernels

MAGIC = 0x6d6573686f707331
CLEAR, LAUNCH = 1, 2
INT32, RAW64, FLOAT32, BUFFER = 0, 1, 2, 3


def enabled() -> bool:
    return os.environ.get("MESHOPS_LAUNCH_PLANS", "1") != "0"


class Plan:
    """A recorded map: `words` (the int64 plan the runner reads), `outputs` ((shape, dtype) of each
    output), `keep` (the constant arrays whose addresses it holds)."""

    def __init__(self, words: np.ndarray, outputs: tuple, keep: tuple):
        self.words, self.outputs, self.keep = words, outputs, keep
        self.n_buffers = n = int(words[3])
        self._address = words.ctypes.data
        self._types = (ctypes.c_void_p * n, ctypes.c_int64 * n)

    def run(self, pointers, sizes, stream: int) -> bool:
        """Run on `stream` with the buffers at `pointers` (inputs then outputs, `sizes` in bytes):
        True, or False when a buffer is not aligned as the plan needs (nothing was launched); a
        RuntimeError for anything else."""
        if len(pointers) != self.n_buffers:
            raise ValueError(f"meshops launch plan: {len(pointers)} buffers, the plan has {self.n_buffers}")
        message = ctypes.create_string_buffer(512)
        status = native.library().meshops_run_plan(self._address, self.words.size, self._types[0](*pointers),
                                                   self._types[1](*sizes), self.n_buffers, stream, message, 512)
        if status == native.OK:
            return True
        if status == native.MISALIGNED:
            return False
        raise RuntimeError(f"meshops launch plan: {message.value.decode(errors='replace')}")


class _Recorder:
    """A compiled kernel that records its launches before running them."""

    def __init__(self, kernel, launches: list):
        self.kernel, self.launches = kernel, launches

    def __call__(self, grid, block, args):
        self.launches.append((self.kernel, grid, block, args))
        self.kernel(grid, block, args)


def _function_pointer(kernel) -> int:
    function = getattr(kernel, "kernel", kernel)   # CuPy RawKernel -> cupy.cuda.Function
    return int(function.ptr)


def _parameter(value, buffers, keep: list) -> tuple:
    """(tag, value, offset) of one kernel argument."""
    if isinstance(value, np.int32):
        return INT32, int(value), 0
    if isinstance(value, np.float32):
        return FLOAT32, int(np.asarray(value).view(np.uint32)), 0
    if isinstance(value, (np.float64, np.int64)):
        return RAW64, int(np.asarray(value).view(np.int64)), 0
    address = getattr(getattr(value, "data", None), "ptr", None)
    if address is None:
        raise TypeError(f"launch plans: a kernel argument of type {type(value).__name__}")
    for i, b in enumerate(buffers):
        if b.data.ptr <= address < b.data.ptr + max(b.nbytes, 1):
            return BUFFER, i, address - b.data.ptr
    keep.append(value)
    return RAW64, int(address), 0


def encode(device: int, buffers, alignment: int, launches, clears=()) -> tuple[np.ndarray, tuple]:
    """The plan's words and the constant arrays it holds."""
    keep: list = []
    words = [MAGIC, native.TOKEN, device, len(buffers)]
    for b in buffers:
        words += [b.nbytes, alignment]
    ops = [[CLEAR, i, buffers[i].nbytes] for i in clears]
    for kernel, grid, block, args in launches:
        params = [_parameter(a, buffers, keep) for a in args]
        grid, block = tuple(grid), tuple(block)
        if grid[1:] not in ((), (1,), (1, 1)) or block[1:] not in ((), (1,), (1, 1)):
            raise ValueError(f"launch plans: a launch of grid {grid}, block {block}; expected 1-d")
        ops.append([LAUNCH, _function_pointer(kernel), grid[0], block[0], len(params)]
                   + [w for p in params for w in p])
    words.append(len(ops))
    for op in ops:
        words += op
    return np.array(words, dtype=np.int64), tuple(keep)


def record(spec, kind: str, mesh, mode: str, dtype, shapes: tuple, device: int):
    """The Plan of map `kind` of `spec` on `mesh` for inputs of `dtype` and `shapes` on CUDA device
    `device`, checked by a replay; None when the map cannot be replayed from its launches alone."""
    import cupy

    dtype = np.dtype(dtype)
    rng = cupy.random.default_rng()
    n_base = 0 if spec.linear or spec.sample is None else len(spec.domain)   # the base state's inputs

    def fields():
        xs = [rng.standard_normal(shape, dtype=np.float64) for shape in shapes]
        if n_base:
            xs[:n_base] = spec.sample(*xs[:n_base])
        return [x.astype(dtype) for x in xs]

    with cupy.cuda.Device(device):
        xs = fields()
        autodiff.compute(spec, kind, mesh, xs, mode)           # tables built, kernels compiled
        launches, widths = [], []
        base = kernels.launcher()
        recording = base.replace(compile=lambda module: {name: _Recorder(k, launches)
                                                         for name, k in base.compile(module).items()})
        with kernels.use_launcher(recording), kernels.observe_launches(lambda launch: widths.append(launch.width)):
            ys = autodiff.compute(spec, kind, mesh, xs, mode)
        if not launches or any(not isinstance(y, cupy.ndarray) or not y.flags.c_contiguous for y in ys):
            return None
        alignment = max([dtype.itemsize] + [w * dtype.itemsize for w in widths])
        outputs = tuple((y.shape, y.dtype) for y in ys)
        buffers = list(xs) + list(ys)
        for clears in ((), tuple(range(len(xs), len(buffers)))):
            words, keep = encode(device, buffers, alignment, launches, clears)
            plan = Plan(words, outputs, keep)
            if _replays(plan, spec, kind, mesh, mode, fields(), outputs):
                return plan
    return None


def _replays(plan: Plan, spec, kind, mesh, mode, xs, outputs) -> bool:
    """Whether `plan` on inputs `xs` gives the map's outputs (every entry written)."""
    import cupy

    ys = [cupy.full(shape, np.nan, dtype) for shape, dtype in outputs]
    stream = cupy.cuda.get_current_stream()
    buffers = list(xs) + ys
    if not plan.run([b.data.ptr for b in buffers], [b.nbytes for b in buffers], stream.ptr):
        return False
    want = autodiff.compute(spec, kind, mesh, xs, mode)
    tol = 1e-12 if ys[0].dtype == np.float64 else 1e-5
    for y, w in zip(ys, want):
        scale = float(cupy.abs(w).max()) if w.size else 0.0
        if not bool(cupy.isfinite(y).all()) or float(cupy.abs(y - w).max() if w.size else 0.0) > tol * (scale or 1.0):
            return False
    return True


_PLANS: dict[int, tuple] = {}   # id(mesh) -> (weak reference, {key: Plan or None})


def plan(spec, kind: str, mesh, mode: str, dtype, shapes: tuple, device: int):
    """The Plan of map `kind` for inputs of `dtype` and `shapes` (one shape per input; recorded on
    first use, kept while the mesh object lives), or None."""
    entry = _PLANS.get(id(mesh))
    if entry is None or entry[0]() is not mesh:
        entry = _PLANS[id(mesh)] = (weakref.ref(mesh), {})
        weakref.finalize(mesh, _forget, id(mesh), entry[0])
    shapes = tuple(tuple(int(n) for n in shape) for shape in shapes)
    key = (spec.name, kind, mode, np.dtype(dtype).str, shapes, device)
    plans = entry[1]
    if key not in plans:
        plans[key] = record(spec, kind, mesh, mode, dtype, shapes, device)
    return plans[key]


def _forget(key, ref):
    if key in _PLANS and _PLANS[key][0] is ref:
        del _PLANS[key]
