"""Lazy compilation of the CUDA sources in `meshops/cuda/` and launch configuration.

Each operator family keeps its forward and adjoint kernels in one `.cu` file, templated on the
floating type `T`. A module is compiled with NVRTC on first use and cached per (family, device,
dtype); nothing here touches CUDA at import time.
"""
from __future__ import annotations

import functools
import pathlib

import numpy as np

CUDA_DIR = pathlib.Path(__file__).parent / "cuda"
BLOCK_SIZE = 256
_CTYPES = {np.dtype(np.float32): "float", np.dtype(np.float64): "double"}


def cuda_sources() -> list[pathlib.Path]:
    """Every CUDA source of the package (CI compiles each with nvcc)."""
    return sorted(CUDA_DIR.glob("*.cu"))


@functools.lru_cache(maxsize=None)
def _module(family: str, kernel_names: tuple[str, ...], ctype: str, device: int):
    import cupy

    source = (CUDA_DIR / f"{family}.cu").read_text()
    expressions = [f"{name}<{ctype}>" for name in kernel_names]
    module = cupy.RawModule(code=source, options=("-std=c++17", f"-I{CUDA_DIR}"),
                            name_expressions=expressions)
    return {name: module.get_function(expr) for name, expr in zip(kernel_names, expressions)}


def get_kernel(family: str, kernel_names: tuple[str, ...], name: str, dtype):
    """The kernel `name<T>` of `family`.cu for `dtype` on the current device (compiled once)."""
    import cupy

    ctype = _CTYPES.get(np.dtype(dtype))
    if ctype is None:
        raise TypeError(f"CUDA kernels: expected float32 or float64, got dtype {np.dtype(dtype)}")
    return _module(family, kernel_names, ctype, cupy.cuda.runtime.getDevice())[name]


@functools.lru_cache(maxsize=None)
def _max_blocks(device: int) -> int:
    import cupy

    attributes = cupy.cuda.runtime.getDeviceProperties(device)
    threads_per_sm = attributes["maxThreadsPerMultiProcessor"]
    return attributes["multiProcessorCount"] * max(1, threads_per_sm // BLOCK_SIZE) * 4


def launch(kernel, n_threads: int, args: tuple) -> None:
    """Launch `kernel` over `n_threads` logical threads (kernels use grid-stride loops).

    The grid is sized from the current device: enough blocks to fill every multiprocessor
    several times over, never more than the work needs.
    """
    import cupy

    if n_threads <= 0:
        return
    blocks = min((n_threads + BLOCK_SIZE - 1) // BLOCK_SIZE,
                 _max_blocks(cupy.cuda.runtime.getDevice()))
    kernel((blocks,), (BLOCK_SIZE,), args)
