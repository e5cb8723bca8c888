"""The native launch-plan runner (`launch_plan.cc`), compiled on first use.

`library(xla=...)` compiles `launch_plan.cc` with the C++ compiler (`$CXX`, else `c++`) into a shared
library kept under the meshops cache (`$MESHOPS_CACHE_DIR/native`, else `~/.cache/meshops/meshes/
native`), named by the hash of the source and flags, and loads it. With `xla=True` it also holds the
typed XLA FFI handler `MeshopsRunPlan`, built against the XLA FFI headers that JAX ships
(`jax.ffi.include_dir()`). A library that cannot be built raises `NativeUnavailable` with the
compiler's message; callers fall back to their Python paths.
"""
from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import pathlib
import shutil
import subprocess
import tempfile

SOURCE = pathlib.Path(__file__).with_name("launch_plan.cc")
#: This process's token: a plan made by another process (a stale compiled JAX program) is refused.
TOKEN = int.from_bytes(os.urandom(8), "little") >> 1
#: meshops_run_plan's status codes (launch_plan.cc).
OK, BAD_PLAN, MISALIGNED, CUDA_FAILED = 0, 1, 2, 3


class NativeUnavailable(RuntimeError):
    """The launch-plan runner could not be built or loaded here."""


def cache_dir() -> pathlib.Path:
    from grids.cache import default_cache_dir

    return default_cache_dir() / "native"


def compiler() -> str:
    for name in (os.environ.get("CXX"), "c++", "g++", "clang++"):
        if name and shutil.which(name):
            return name
    raise NativeUnavailable("no C++ compiler found ($CXX, c++, g++ or clang++); the launch-plan runner "
                            "needs one once, to build meshops/native/launch_plan.cc")


def _xla_include() -> str:
    try:
        import jax.ffi
    except ImportError as exc:
        raise NativeUnavailable(f"the XLA FFI handler needs JAX's headers: {exc}") from exc
    return jax.ffi.include_dir()


def build(xla: bool, directory: pathlib.Path | None = None) -> pathlib.Path:
    """The path of the compiled library (built now unless cached)."""
    flags = ["-O2", "-std=c++17", "-shared", "-fPIC"]
    if xla:
        include = _xla_include()
        flags += ["-DMESHOPS_XLA_FFI", f"-I{include}"]
        headers = (pathlib.Path(include) / "xla/ffi/api").glob("*.h")
    else:
        headers = ()
    digest = hashlib.sha256(SOURCE.read_bytes() + " ".join(flags).encode())
    for header in sorted(headers):
        digest.update(header.read_bytes())
    directory = pathlib.Path(directory) if directory is not None else cache_dir()
    target = directory / f"launch_plan-{'xla-' if xla else ''}{digest.hexdigest()[:16]}.so"
    if target.exists():
        return target
    directory.mkdir(parents=True, exist_ok=True)
    fd, partial = tempfile.mkstemp(dir=directory, suffix=".so.partial")
    os.close(fd)
    command = [compiler(), *flags, "-o", partial, str(SOURCE), "-ldl"]
    try:
        result = subprocess.run(command, capture_output=True, text=True)
        if result.returncode:
            raise NativeUnavailable(f"building {SOURCE.name} failed ({' '.join(command)}):\n"
                                    f"{result.stderr[-2000:]}")
        os.replace(partial, target)   # atomic: a concurrent build or a crash leaves no torn library
    finally:
        if os.path.exists(partial):
            os.unlink(partial)
    return target


@functools.lru_cache(maxsize=None)
def library(xla: bool = False) -> ctypes.CDLL:
    """The loaded runner (with the XLA FFI handler when `xla`), its argument types declared."""
    lib = ctypes.CDLL(str(build(xla)))
    lib.meshops_set_token.argtypes = [ctypes.c_int64]
    lib.meshops_set_token.restype = None
    lib.meshops_run_plan.argtypes = [ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p,
                                     ctypes.c_int64, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int64]
    lib.meshops_run_plan.restype = ctypes.c_int
    lib.meshops_set_token(TOKEN)
    return lib
