"""The CUDA sources of meshops/cuda compiled for the host with g++, to run the CuPy code path of the
operator families without a GPU.

Each kernel runs as one host thread (its grid-stride loop covers the whole range; atomicAdd is +=).
`HostArray` stands for a device array: an operator given one takes its CuPy code path, whose
allocations the fake array module of `route_to_host` makes HostArrays too. Every launch is checked
against the kernel's C++ signature: argument count, pointer dtypes, contiguity and int32 scalars.
"""
import ctypes
import importlib
import re
import shutil
import subprocess
import types

import numpy as np
import pytest

import meshops.backend
from meshops.kernels import CUDA_DIR

HOST_PRELUDE = """
#define __global__
#define __device__
#define __forceinline__ inline
#define __restrict__ __restrict
struct HostDim { unsigned x; };
static HostDim blockIdx = {0}, threadIdx = {0}, blockDim = {1}, gridDim = {1};
template <class T> inline T atomicAdd(T* p, T v) { T old = *p; *p += v; return old; }
"""
C_TYPES = {"int": np.int32, "float": np.float32, "double": np.float64}
_CTYPE_OF = {np.dtype(np.float32): "float", np.dtype(np.float64): "double"}


class HostArray(np.ndarray):
    """Stands for a device array: operators given one take their CuPy code path."""


def host(a):
    return np.ascontiguousarray(a).view(HostArray)


def compile_families(tmp, families) -> dict:
    """{(family, kernel, ctype): (function, parameter types)}: the kernels of `families`.cu compiled
    into shared libraries under `tmp`; skips the test when g++, nm or c++filt is missing."""
    if not (shutil.which("g++") and shutil.which("nm") and shutil.which("c++filt")):
        pytest.skip("needs g++, nm and c++filt")
    (tmp / "prelude.h").write_text(HOST_PRELUDE)
    table = {}
    for family in families:
        lib = tmp / f"lib{family}.so"
        subprocess.run(["g++", "-O1", "-shared", "-fPIC", "-std=c++17", "-include", str(tmp / "prelude.h"),
                        "-DMESHOPS_NVCC_CHECK", f"-I{CUDA_DIR}", "-x", "c++", "-o", str(lib),
                        str(CUDA_DIR / f"{family}.cu")], check=True, capture_output=True)
        handle = ctypes.CDLL(str(lib))
        symbols = [line.split()[2] for line in subprocess.run(
            ["nm", "-D", "--defined-only", str(lib)], capture_output=True, text=True,
            check=True).stdout.splitlines() if len(line.split()) == 3]
        names = subprocess.run(["c++filt"], input="\n".join(symbols), capture_output=True, text=True,
                               check=True).stdout.splitlines()
        for symbol, name in zip(symbols, names):
            match = re.fullmatch(r"void (\w+)<(float|double)>\((.*)\)", name)
            if match:
                params = [p.strip() for p in match.group(3).split(",")]
                table[(family, match.group(1), match.group(2))] = (getattr(handle, symbol), params)
    return table


def _call(label, function, params, args):
    """Call a host kernel after checking `args` against its parameter types."""
    assert len(args) == len(params), (label, len(args), params)
    c_args = []
    for arg, param in zip(args, params):
        base = param.replace("const", "").replace("*", "").strip()
        if "*" in param:
            assert isinstance(arg, HostArray) and arg.dtype == C_TYPES[base] \
                and arg.flags.c_contiguous, (label, param, type(arg), getattr(arg, "dtype", None))
            c_args.append(ctypes.c_void_p(arg.ctypes.data))
        else:
            assert param == "int" and isinstance(arg, np.int32), (label, param, type(arg))
            c_args.append(ctypes.c_int(int(arg)))
    function(*c_args)


def route_to_host(monkeypatch, table, families) -> dict:
    """Route the CuPy code path of `families` (meshops.<family> modules) to the host kernels of
    `table`; returns {family: [kernel names in launch order]}, filled as the kernels run."""
    module = types.SimpleNamespace(
        get_array_module=lambda *arrays: module if any(isinstance(a, HostArray) for a in arrays) else np,
        empty=lambda *a, **k: host(np.empty(*a, **k)), zeros=lambda *a, **k: host(np.zeros(*a, **k)),
        empty_like=lambda a: host(np.empty_like(np.asarray(a))),
        zeros_like=lambda a: host(np.zeros_like(np.asarray(a))),
        asarray=host, ascontiguousarray=host,
        cuda=types.SimpleNamespace(runtime=types.SimpleNamespace(getDevice=lambda: 0)))
    monkeypatch.setattr(meshops.backend, "_cupy", module)
    launches = {family: [] for family in families}

    def get_kernel_of(owner):
        def get_kernel(family, names, name, dtype):
            assert family == owner and name in names, (owner, family, name)
            ctype = _CTYPE_OF[np.dtype(dtype)]
            return (family, name, f"{family}.{name}<{ctype}>") + table[(family, name, ctype)]
        return get_kernel

    def launch(kernel, n_threads, args):
        family, name, label, function, params = kernel
        _call(label, function, params, args)
        launches[family].append(name)

    for family in families:
        mod = importlib.import_module(f"meshops.{family}")
        monkeypatch.setattr(mod, "get_kernel", get_kernel_of(family))
        monkeypatch.setattr(mod, "launch", launch)
    return launches
