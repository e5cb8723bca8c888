"""The native launch-plan runner (meshops/native/launch_plan.cc): it builds (with the XLA FFI handler
where JAX is installed), and refuses plans that do not fit the call before touching the GPU. Replays
on a GPU are checked in tests/frameworks (test_jax.py, test_torch.py, marked gpu)."""
import ctypes
import shutil

import numpy as np
import pytest

from meshops import native
from meshops import plans

pytestmark = pytest.mark.skipif(shutil.which("c++") is None and shutil.which("g++") is None,
                                reason="needs a C++ compiler")


@pytest.fixture(scope="module")
def runner(tmp_path_factory):
    lib = ctypes.CDLL(str(native.build(False, tmp_path_factory.mktemp("native"))))
    lib.meshops_run_plan.argtypes = [ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p,
                                     ctypes.c_int64, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int64]
    lib.meshops_set_token.argtypes = [ctypes.c_int64]
    lib.meshops_set_token(native.TOKEN)
    return lib


def test_runner_builds_with_the_xla_ffi_handler(tmp_path):
    pytest.importorskip("jax")
    path = native.build(True, tmp_path)
    assert hasattr(ctypes.CDLL(str(path)), "MeshopsRunPlan")
    assert native.build(True, tmp_path) == path   # cached by the source's and headers' hash


class _Array:
    """What `plans.encode` reads of a device array: its address and size."""

    def __init__(self, ptr, nbytes):
        self.data, self.nbytes = type("Memory", (), {"ptr": ptr})(), nbytes


def _plan(rng, n_in=2, n_out=1, alignment=16):
    sizes = [int(s) * 8 for s in rng.integers(10, 1000, n_in + n_out)]
    buffers = [_Array(4096 * (i + 1) * 1024, s) for i, s in enumerate(sizes)]
    table = _Array(2**40 + 4096 * int(rng.integers(1, 1000)), 64)
    kernel = type("Kernel", (), {"ptr": int(rng.integers(1, 2**40))})()
    args = (table, buffers[0], buffers[n_in], np.int32(rng.integers(-5, 5)), np.float32(rng.standard_normal()),
            np.float64(rng.standard_normal()))
    words, keep = plans.encode(99, buffers, alignment, [(kernel, (int(rng.integers(1, 99)),), (256,), args)])
    return words, buffers, keep, args


def _run(lib, words, pointers, sizes):
    message = ctypes.create_string_buffer(256)
    n = len(pointers)
    status = lib.meshops_run_plan(words.ctypes.data, words.size, (ctypes.c_void_p * n)(*pointers),
                                  (ctypes.c_int64 * n)(*sizes), n, None, message, 256)
    return status, message.value.decode()


def test_encode_names_buffers_constants_and_scalars(rng):
    words, buffers, keep, args = _plan(rng)
    assert list(words[:4]) == [plans.MAGIC, native.TOKEN, 99, 3]
    assert list(words[4:10]) == [b for buffer in buffers for b in (buffer.nbytes, 16)]
    assert words[10] == 1 and words[11] == plans.LAUNCH
    params = words[16:].reshape(-1, 3)
    assert keep == (args[0],)                                   # the table: a constant, kept alive
    assert tuple(params[0]) == (plans.RAW64, args[0].data.ptr, 0)
    assert tuple(params[1]) == (plans.BUFFER, 0, 0) and tuple(params[2]) == (plans.BUFFER, 2, 0)
    assert tuple(params[3]) == (plans.INT32, int(args[3]), 0)
    assert params[4][1] == np.asarray(args[4]).view(np.uint32)
    assert params[5][1] == np.asarray(args[5]).view(np.int64)


def test_plans_that_do_not_fit_the_call_are_refused(runner, rng):
    words, buffers, _, _ = _plan(rng)
    pointers, sizes = [b.data.ptr for b in buffers], [b.nbytes for b in buffers]
    bad = words.copy()
    bad[0] += 1
    assert _run(runner, bad, pointers, sizes) == (native.BAD_PLAN, f"not a meshops launch plan ({words.size} words)")
    bad = words.copy()
    bad[1] ^= 1
    status, message = _run(runner, bad, pointers, sizes)
    assert status == native.BAD_PLAN and message.startswith("launch plan of another process")
    assert _run(runner, words, pointers[:2], sizes[:2]) == (native.BAD_PLAN, "launch plan for 3 buffers, called with 2")
    small = sizes[:1] + [sizes[1] - 8] + sizes[2:]
    assert _run(runner, words, pointers, small) == (
        native.BAD_PLAN, f"buffer 1 holds {sizes[1] - 8} bytes, the plan needs {sizes[1]}")
    shifted = pointers[:2] + [pointers[2] + 8]
    assert _run(runner, words, shifted, sizes) == (native.MISALIGNED, "buffer 2 is not aligned to 16 bytes")
    assert _run(runner, words[:7], pointers, sizes)[0] == native.BAD_PLAN


def test_a_plan_that_fits_reaches_the_driver(runner, rng):
    """Every check passed: the runner asks the CUDA driver, which is absent on a machine without a
    GPU driver, has no context in this thread, or runs a device other than the plan's 99: each a
    clear error, nothing launched."""
    words, buffers, _, _ = _plan(rng)
    status, message = _run(runner, words, [b.data.ptr for b in buffers], [b.nbytes for b in buffers])
    assert (status, message) == (native.CUDA_FAILED, "the CUDA driver (libcuda.so.1) is not available") or (
        status == native.CUDA_FAILED and message.startswith("cuCtxGetDevice failed")) or (
        status == native.BAD_PLAN and message.startswith("launch plan for CUDA device 99, run on device"))
