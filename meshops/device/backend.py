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


def to_host(a) -> np.ndarray:
    """`a` as a NumPy array: a CuPy array copied to the host, anything else as np.asarray."""
    return a.get() if hasattr(a, "get") and not isinstance(a, np.ndarray) else np.asarray(a)


def article(word: str) -> str:
    """`word` with its indefinite article ("an edge field", "a cell field")."""
    return f"{'an' if word[:1].lower() in 'aeiou' else 'a'} {word}"


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
