"""The CUDA sources of meshops/cuda compiled for the host with g++, to run the CuPy code path of the
operator families without a GPU.

Each kernel runs as one host thread (its grid-stride loop covers the whole range; atomicAdd is +=),
with the lane width `meshops.device.kernels.Launcher` picks, so vector lanes (nlev divisible by 2 or
4) run too. Families built as a warp (`compile_families(..., warp_families=...)`) run each launch as
one block of 32 host threads instead: the warp-per-column kernels (meshops/cuda/warp_column.cuh)
then take their 32-lane code, with shared memory, warp syncs (a barrier of the 32 threads) and
atomicAdd (under a lock) as on the GPU. MESHOPS_HOST_WARP=1 builds every family of `host_fixtures`
that way, so that the whole host-kernel test set runs with racing threads.
`HostArray` stands for a device array: an operator given one takes its CuPy code path, whose
allocations the fake array module of `route_to_host` makes HostArrays too. Every launch is checked
against the kernel's C++ signature: argument count, pointer dtypes, contiguity and scalar types
(int32, and float32 / float64 for the kernel's floating type).
"""
import contextlib
import ctypes
import itertools
import os
import re
import shutil
import subprocess
import threading
import types

import numpy as np
import pytest

import meshops.device.backend
from meshops.device import kernels
from meshops.device.kernels import CUDA_DIR

#: The vector types of CUDA the sources use.
_VECTOR_TYPES = """
struct float2 { float x, y; };
struct float4 { float x, y, z, w; };
struct double2 { double x, y; };
"""
#: CUDA's function qualifiers, for g++.
_QUALIFIERS = """
#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __restrict__ __restrict
"""
HOST_PRELUDE = _VECTOR_TYPES + _QUALIFIERS + """
#define __shared__
#define __syncthreads()
struct HostDim { unsigned x; };
static HostDim blockIdx = {0}, threadIdx = {0}, blockDim = {1}, gridDim = {1};
template <class T> inline T atomicAdd(T* p, T v) { T old = *p; *p += v; return old; }
"""
#: Lanes of a warp build's block (one warp): its threads run the kernel together.
WARP_LANES = 32
#: MESHOPS_HOST_WARP=1: every family of `host_fixtures` built as a warp (a search for races).
ALL_WARP = os.environ.get("MESHOPS_HOST_WARP") == "1"
HOST_WARP_PRELUDE = _VECTOR_TYPES + _QUALIFIERS + """
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>
#define __shared__ static
struct HostDim { unsigned x; };
static thread_local HostDim threadIdx = {0};
static HostDim blockIdx = {0}, blockDim = {MESHOPS_HOST_WARP}, gridDim = {1};
namespace meshops_host {
// The block's barrier: the lanes yield until the last one arrives; a lane left waiting 60 s (lanes
// that diverged at a sync) aborts.
struct Barrier {
    std::atomic<unsigned> waiting{0}, generation{0};
    void wait() {
        const unsigned g = generation.load(std::memory_order_acquire);
        if (waiting.fetch_add(1, std::memory_order_acq_rel) + 1 == MESHOPS_HOST_WARP) {
            waiting.store(0, std::memory_order_relaxed);
            generation.fetch_add(1, std::memory_order_acq_rel);
            return;
        }
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
        for (unsigned spins = 1; generation.load(std::memory_order_acquire) == g; ++spins) {
            std::this_thread::yield();
            if (spins % 65536 == 0 && std::chrono::steady_clock::now() > deadline) {
                std::fprintf(stderr, "host warp: lane %u waited 60 s at a sync\\n", threadIdx.x);
                std::abort();
            }
        }
    }
};
static Barrier barrier;
static std::mutex atomics;
}
inline void __syncwarp(unsigned = 0xffffffffu) { meshops_host::barrier.wait(); }
#define __syncthreads() __syncwarp()
template <class T> inline T atomicAdd(T* p, T v) {
    std::lock_guard<std::mutex> lock(meshops_host::atomics);
    T old = *p; *p += v; return old;
}
extern "C" void meshops_host_lane(unsigned lane) { threadIdx.x = lane; }
"""
C_TYPES = {"int": np.int32, "float": np.float32, "double": np.float64}
_C_SCALARS = {"int": ctypes.c_int, "float": ctypes.c_float, "double": ctypes.c_double}
_CTYPE_OF = {np.dtype(np.float32): "float", np.dtype(np.float64): "double"}


def assert_repeatable(got, want, err_msg=""):
    """Results of two runs, atomic-mode ones among them: the same bits when the host's atomicAdd
    runs in one order (one thread), to round-off (1e-13 of the largest) when lanes race for it as
    on a GPU (ALL_WARP)."""
    if ALL_WARP:
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-13 * np.abs(want).max(), err_msg=err_msg)
    else:
        np.testing.assert_array_equal(got, want, err_msg=err_msg)


class HostArray(np.ndarray):
    """Stands for a device array: operators given one take their CuPy code path."""


#: Alignment of device allocations (CuPy's memory pool: 256 bytes), which the lane width depends on.
DEVICE_ALIGNMENT = 256


def _aligned(shape, dtype) -> HostArray:
    """An uninitialised C-contiguous HostArray aligned as a device allocation."""
    dtype = np.dtype(dtype)
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    raw = np.empty(nbytes + DEVICE_ALIGNMENT, dtype=np.uint8)
    start = -raw.ctypes.data % DEVICE_ALIGNMENT
    return raw[start:start + nbytes].view(dtype).reshape(shape).view(HostArray)


def host(a):
    """`a` as a HostArray aligned as a device allocation (itself if it is one)."""
    if isinstance(a, HostArray) and a.flags.c_contiguous and a.ctypes.data % DEVICE_ALIGNMENT == 0:
        return a
    a = np.asarray(a)
    out = _aligned(a.shape, a.dtype)
    out[...] = a
    return out


def _split_params(text: str) -> list[str]:
    """C++ parameter list -> parameters (commas inside template arguments kept)."""
    params, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += {"<": 1, ">": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            params.append(text[start:i].strip())
            start = i + 1
    return params + [text[start:].strip()]


def _base_type(param: str) -> str:
    """Element type of a kernel parameter: `meshops::Lanes<double, 2> const*` -> double."""
    lanes = re.search(r"Lanes<(\w+), \d+>", param)
    return lanes.group(1) if lanes else param.replace("const", "").replace("*", "").strip()


#: Directories of the package's CUDA sources: meshops's operator families and the models' kernels.
SOURCE_DIRS = (CUDA_DIR, CUDA_DIR.parent.parent / "swm" / "cuda",
               CUDA_DIR.parent.parent / "hydrostatic" / "cuda")


def source_of(family: str):
    """The .cu file of kernel family `family` (meshops/cuda, swm/cuda or hydrostatic/cuda)."""
    (path,) = [d / f"{family}.cu" for d in SOURCE_DIRS if (d / f"{family}.cu").exists()]
    return path


def _warp_launch(handle, function):
    """`function` run by WARP_LANES host threads at once, each its lane (threadIdx.x); ctypes
    releases the GIL for the calls, so the lanes meet at the kernel's warp syncs."""
    def launch(*c_args):
        def lane(index):
            handle.meshops_host_lane(ctypes.c_uint(index))
            function(*c_args)
        threads = [threading.Thread(target=lane, args=(i,)) for i in range(WARP_LANES)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    return launch


def compile_families(tmp, families, warp_families=()) -> dict:
    """{(family, kernel, ctype, width, offset32): (function, parameter types)}: the kernels of
    `families`.cu compiled into shared libraries under `tmp`, with 64-bit and with 32-bit offsets
    (MESHOPS_OFFSET32), those of `warp_families` as a warp of host threads (MESHOPS_HOST_WARP);
    skips the test when g++, nm or c++filt is missing."""
    if not (shutil.which("g++") and shutil.which("nm") and shutil.which("c++filt")):
        pytest.skip("needs g++, nm and c++filt")
    (tmp / "prelude.h").write_text(HOST_PRELUDE)
    (tmp / "warp_prelude.h").write_text(HOST_WARP_PRELUDE)
    table = {}
    for family, offset32 in itertools.product(families, (False, True)):
        warp = family in warp_families
        lib = tmp / f"lib{family}{'_offset32' if offset32 else ''}{'_warp' if warp else ''}.so"
        build = (["-pthread", f"-DMESHOPS_HOST_WARP={WARP_LANES}", "-include", str(tmp / "warp_prelude.h")]
                 if warp else ["-include", str(tmp / "prelude.h")])
        # -fno-gnu-unique: each library keeps its own statics (the scratch of warp_column.cuh is
        # one lane's in one build and a warp's in the other; unique symbols would share one)
        subprocess.run(["g++", "-O1", "-shared", "-fPIC", "-fno-gnu-unique", "-std=c++17", *build,
                        "-DMESHOPS_NVCC_CHECK", *(["-DMESHOPS_OFFSET32"] if offset32 else []),
                        f"-I{CUDA_DIR}", "-x", "c++", "-o", str(lib),
                        str(source_of(family))], check=True, capture_output=True)
        handle = ctypes.CDLL(str(lib))
        symbols = [line.split()[2] for line in subprocess.run(
            ["nm", "-D", "--defined-only", str(lib)], capture_output=True, text=True,
            check=True).stdout.splitlines() if len(line.split()) == 3]
        names = subprocess.run(["c++filt"], input="\n".join(symbols), capture_output=True, text=True,
                               check=True).stdout.splitlines()
        for symbol, name in zip(symbols, names):
            match = re.fullmatch(r"void (\w+)<(float|double), (\d)>\((.*)\)", name)
            if match:
                function = getattr(handle, symbol)
                table[(family, match.group(1), match.group(2), int(match.group(3)), offset32)] = (
                    _warp_launch(handle, function) if warp else function,
                    _split_params(match.group(4)))
    return table


def _call(label, function, params, args):
    """Call a host kernel after checking `args` against its parameter types."""
    assert len(args) == len(params), (label, len(args), params)
    c_args = []
    for arg, param in zip(args, params):
        base = _base_type(param)
        if "*" in param:
            assert isinstance(arg, HostArray) and arg.dtype == C_TYPES[base] \
                and arg.flags.c_contiguous, (label, param, type(arg), getattr(arg, "dtype", None))
            c_args.append(ctypes.c_void_p(arg.ctypes.data))
        else:
            assert param in C_TYPES and type(arg) is C_TYPES[param], (label, param, type(arg))
            c_args.append(_C_SCALARS[param](arg.item()))
    function(*c_args)


#: The device the host stands for: an H200's architecture and resident threads, so the launches
#: (lane width, offsets, level count compiled in) are those of the measured GPU.
HOST_DEVICE = kernels.DeviceProperties(index=0, architecture="sm_90", multiprocessors=132,
                                       threads_per_sm=2048)


def host_launcher(table, families) -> tuple[kernels.Launcher, dict]:
    """A launcher running the kernels of `families` from the host-compiled `table` (others through
    NVRTC), and {family: [kernel names in launch order]}, filled as the kernels run."""
    launches = {family: [] for family in families}

    def compile(module):
        if module.family not in families:
            return kernels.nvrtc_compile(module)

        def kernel(name):
            label = (f"{module.family}.{name}<{module.ctype}, {module.width}>"
                     f"{' (32-bit offsets)' if module.offset32 else ''}")

            def run(grid, block, args):
                function, params = table[(module.family, name, module.ctype, module.width,
                                          module.offset32)]
                _call(label, function, params, args)
                launches[module.family].append(name)
            return run
        return {name: kernel(name) for name in module.names}

    launcher = kernels.Launcher(device=lambda: HOST_DEVICE, compile=compile,
                                address=lambda a: a.ctypes.data)
    return launcher, launches


@contextlib.contextmanager
def route_to_host(table, families):
    """Route the CuPy code path of `families` (meshops.<family> modules) to the host kernels of
    `table` while the context is active; yields {family: [kernel names in launch order]}."""
    module = types.SimpleNamespace(
        get_array_module=lambda *arrays: module if any(isinstance(a, HostArray) for a in arrays) else np,
        empty=lambda *a, **k: host(np.empty(*a, **k)), zeros=lambda *a, **k: host(np.zeros(*a, **k)),
        empty_like=lambda a: _aligned(np.shape(a), np.asarray(a).dtype),
        zeros_like=lambda a: host(np.zeros_like(np.asarray(a))),
        asarray=host, ascontiguousarray=host,
        cuda=types.SimpleNamespace(runtime=types.SimpleNamespace(getDevice=lambda: 0)))
    launcher, launches = host_launcher(table, families)
    with meshops.device.backend.use_device_module(module), kernels.use_launcher(launcher):
        yield launches


def host_fixtures(*families):
    """The pytest fixtures `host_kernels` (the kernels of `families` compiled once per module) and
    `on_host` (their CuPy code path routed to those kernels for one test; returns
    {family: [kernel names in launch order]}). Assign both in a test module:
    `host_kernels, on_host = host_fixtures("divergence", ...)`. With MESHOPS_HOST_WARP=1 in the
    environment every family is built as a warp of host threads (a search for races: slower)."""
    @pytest.fixture(scope="module")
    def host_kernels(tmp_path_factory):
        warp = families if ALL_WARP else ()
        return compile_families(tmp_path_factory.mktemp("host_kernels"), families, warp_families=warp)

    @pytest.fixture
    def on_host(host_kernels):
        with route_to_host(host_kernels, families) as launches:
            yield launches

    return host_kernels, on_host
