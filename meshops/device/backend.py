"""Array backends and per-mesh prepared arrays.

Operators infer the array module from their inputs (`array_module`), never from a global flag.
Mesh arrays an operator needs (connectivity as int32, geometry in the field's dtype, derived
coefficients, transposed connectivity) are built once by the operator family's `build` function
and cached on the mesh per (family, backend, device, dtype), so the GPU copy is made once.
"""
from __future__ import annotations

import contextlib
import types
from typing import Callable

import numpy as np

try:  # CuPy is optional: `import meshops` works on a machine without a GPU.
    import cupy as _cupy
except ImportError:  # pragma: no cover - depends on the machine
    _cupy = None

#: Registered backends: name -> array module (or None when unavailable here).
BACKENDS = {"numpy": np, "cupy": _cupy}


def cupy_available() -> bool:
    """True when CuPy imports and at least one CUDA device is visible."""
    if _cupy is None:
        return False
    try:
        return _cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:  # CUDA driver missing or broken
        return False


def array_module(*arrays):
    """The array module (numpy or cupy) of `arrays`; all must live on the same backend."""
    if _cupy is None:
        return np
    xp = _cupy.get_array_module(*arrays)
    return xp


def backend_name(xp) -> str:
    return "cupy" if xp is not np else "numpy"


def check_field(x, n: int, name: str, location: str):
    """Check that `x` is a float32/float64 field of shape (n,) or (n, nlev) and return it contiguous."""
    if x.dtype not in (np.float32, np.float64):
        raise TypeError(f"{name}: expected float32 or float64 {location} field, got dtype {x.dtype}")
    if x.ndim not in (1, 2) or x.shape[0] != n:
        raise ValueError(f"{name}: expected a {location} field of shape ({n},) or ({n}, nlev), "
                         f"got shape {tuple(x.shape)}")
    xp = array_module(x)
    return xp.ascontiguousarray(x)


def built(mesh, family: str, build: Callable[[object], dict]) -> types.SimpleNamespace:
    """The NumPy arrays `build(mesh)` returns for `family` as built (dtypes unchanged), built once
    per mesh and cached on it: what `prepared` converts."""
    cache = mesh.__dict__.setdefault("_meshops_cache", {})
    host_key = (family, "host")
    if host_key not in cache:
        cache[host_key] = build(mesh)
    return types.SimpleNamespace(**cache[host_key])


def prepared(mesh, family: str, build: Callable[[object], dict], xp, dtype, *,
             slot_major: bool = False, numpy_only: tuple[str, ...] = ()) -> types.SimpleNamespace:
    """Arrays of `family` for `mesh` on backend `xp` in `dtype`, built by `build(mesh)` once.

    `build` returns NumPy arrays; integer arrays become int32, floating arrays `dtype`.
    `slot_major=True` gives every 2-D array transposed (stencil tables (S, n): slot m of all rows
    contiguous). `numpy_only` names the arrays only the NumPy path reads (e.g. the coefficients
    of stencils whose kernels compute them): they are not copied to a device. The result is cached
    on the mesh per (family, backend, device, dtype, layout).
    """
    dtype = np.dtype(dtype)
    host = built(mesh, family, build)
    cache = mesh.__dict__["_meshops_cache"]
    device = xp.cuda.runtime.getDevice() if xp is not np else -1
    key = (family, backend_name(xp), device, dtype.str, slot_major)
    if key not in cache:
        arrays = {}
        for name, a in vars(host).items():
            if xp is not np and name in numpy_only:
                continue
            a = np.asarray(a)
            a = a.astype(np.int32) if a.dtype.kind in "iub" else a.astype(dtype)
            if slot_major and a.ndim == 2:
                a = a.T
            arrays[name] = xp.ascontiguousarray(xp.asarray(a))
        cache[key] = types.SimpleNamespace(**arrays)
    return cache[key]


@contextlib.contextmanager
def use_device_module(module):
    """Take `module` for CuPy while the context is active (an object with CuPy's `get_array_module`,
    allocation functions and `cuda.runtime.getDevice`): tests run the CuPy code path through it."""
    global _cupy
    saved, _cupy = _cupy, module
    try:
        yield module
    finally:
        _cupy = saved
