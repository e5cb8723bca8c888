"""Array backends and field checks.

Operators infer the array module from their inputs (`array_module`), never from a global flag;
the mesh tables they read come from a `meshops.device.mesh.DeviceMesh`.
"""
from __future__ import annotations

import contextlib

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


_SIZE_OF = {"cell": "nCells", "edge": "nEdges", "vertex": "nVertices"}


def article(word: str) -> str:
    """`word` with its indefinite article ("an edge field", "a cell field")."""
    return f"{'an' if word[:1].lower() in 'aeiou' else 'a'} {word}"


def check_field(x, mesh, name: str, location: str):
    """Check that `x` is a float32/float64 array of shape (n,) or (n, nlev), n the number of
    `location` entities of `mesh`, and return it contiguous; a TypeError names a mesh or field
    that is not one."""
    from meshops.device.mesh import check_mesh

    n = getattr(check_mesh(mesh), _SIZE_OF[location])
    what = f"{article(location)} field of shape ({n},) or ({n}, nlev)"
    if not (hasattr(x, "dtype") and hasattr(x, "shape") and hasattr(x, "ndim")):
        raise TypeError(f"{name}: expected {what} (a NumPy or CuPy array), got {type(x).__name__}")
    if x.dtype not in (np.float32, np.float64):
        raise TypeError(f"{name}: expected float32 or float64 {location} field, got dtype {x.dtype}")
    if x.ndim not in (1, 2) or x.shape[0] != n:
        raise ValueError(f"{name}: expected {what}, got shape {tuple(x.shape)}")
    xp = array_module(x)
    return xp.ascontiguousarray(x)


@contextlib.contextmanager
def use_device_module(module):
    """Take `module` for CuPy while the context is active (an object with CuPy's `get_array_module`,
    allocation functions and `cuda.runtime.getDevice`): tests run the CuPy code path through it."""
    global _cupy
    saved, _cupy = _cupy, module
    BACKENDS["cupy"] = module
    try:
        yield module
    finally:
        _cupy = saved
        BACKENDS["cupy"] = saved
