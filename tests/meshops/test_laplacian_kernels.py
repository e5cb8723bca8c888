"""The fused Laplacian kernels (meshops/cuda/laplacian.cu) compiled for the host: every launch of
the CuPy path of laplacian_c2c, vector_laplacian_e2e and del4_* (forward, both adjoint modes; the
atomic mode runs the composed kernels of the other families) against the NumPy compositions, on
the x1.162 mesh, a generated mesh and a rank's local mesh (missing neighbours)."""
import ctypes
import re
import shutil
import subprocess

import numpy as np
import pytest

import meshops.laplacian
from meshops.kernels import CUDA_DIR
from meshops.modes import ADJOINT_MODES
from meshops.registry import OPERATORS

from .conftest import random_field
from .test_linear_operators import (_C_TYPES, _HOST_PRELUDE, _close, _host, _HostArray, any_mesh,  # noqa: F401
                                    host_kernels, on_host, rank_mesh)

LAPLACIANS = ("laplacian_c2c", "vector_laplacian_e2e", "del4_c2c", "del4_e2e")


@pytest.fixture(scope="module")
def laplacian_host_kernels(tmp_path_factory):
    """{(kernel, ctype): (function, parameter types)} of laplacian.cu compiled for one host thread."""
    if not (shutil.which("g++") and shutil.which("nm") and shutil.which("c++filt")):
        pytest.skip("needs g++, nm and c++filt")
    tmp = tmp_path_factory.mktemp("laplacian_kernels")
    (tmp / "prelude.h").write_text(_HOST_PRELUDE)
    lib = tmp / "liblaplacian.so"
    subprocess.run(["g++", "-O1", "-shared", "-fPIC", "-std=c++17", "-include", str(tmp / "prelude.h"),
                    "-DMESHOPS_NVCC_CHECK", f"-I{CUDA_DIR}", "-x", "c++", "-o", str(lib),
                    str(CUDA_DIR / "laplacian.cu")], check=True, capture_output=True)
    handle = ctypes.CDLL(str(lib))
    symbols = [line.split()[2] for line in subprocess.run(
        ["nm", "-D", "--defined-only", str(lib)], capture_output=True, text=True,
        check=True).stdout.splitlines() if len(line.split()) == 3]
    names = subprocess.run(["c++filt"], input="\n".join(symbols), capture_output=True, text=True,
                           check=True).stdout.splitlines()
    table = {}
    for symbol, name in zip(symbols, names):
        match = re.fullmatch(r"void (\w+)<(float|double)>\((.*)\)", name)
        if match:
            params = [p.strip() for p in match.group(3).split(",")]
            table[(match.group(1), match.group(2))] = (getattr(handle, symbol), params)
    return table


@pytest.fixture
def laplacian_on_host(on_host, laplacian_host_kernels, monkeypatch):
    """`on_host` plus meshops.laplacian's launches, argument counts and types checked."""
    launches = []

    def get_kernel(family, names, name, dtype):
        assert family == "laplacian" and name in names, (family, name)
        ctype = {np.dtype(np.float32): "float", np.dtype(np.float64): "double"}[np.dtype(dtype)]
        return (name,) + laplacian_host_kernels[(name, ctype)]

    def launch(kernel, n_threads, args):
        name, function, params = kernel
        assert len(args) == len(params), (name, len(args), params)
        c_args = []
        for arg, param in zip(args, params):
            base = param.replace("const", "").replace("*", "").strip()
            if "*" in param:
                assert isinstance(arg, _HostArray) and arg.dtype == _C_TYPES[base] \
                    and arg.flags.c_contiguous, (name, param, getattr(arg, "dtype", None))
                c_args.append(ctypes.c_void_p(arg.ctypes.data))
            else:
                assert param == "int" and isinstance(arg, np.int32), (name, param, type(arg))
                c_args.append(ctypes.c_int(int(arg)))
        function(*c_args)
        launches.append(name)

    monkeypatch.setattr(meshops.laplacian, "get_kernel", get_kernel)
    monkeypatch.setattr(meshops.laplacian, "launch", launch)
    return launches


@pytest.mark.parametrize("dtype, tol", [(np.float64, 1e-13), (np.float32, 1e-5)])
@pytest.mark.parametrize("name", LAPLACIANS)
def test_fused_laplacians_on_host(name, dtype, tol, any_mesh, laplacian_on_host, rng):
    spec = OPERATORS[name]
    mesh = any_mesh.replace()
    x = random_field(mesh, spec.domain[0], rng, nlev=3, dtype=dtype)
    y = random_field(mesh, spec.range[0], rng, nlev=3, dtype=dtype)
    pairs = [(spec.forward(mesh, x), spec.forward(mesh, _host(x)))]
    fused = len(laplacian_on_host)
    for mode in ADJOINT_MODES:
        pairs.append((spec.adjoint(mesh, y, mode=mode), spec.adjoint(mesh, _host(y), mode=mode)))
    assert fused > 0 and len(laplacian_on_host) > fused, "the fused kernels did not run"
    for reference, result in pairs:
        assert isinstance(result, _HostArray), name
        _close(np.asarray(result, dtype=np.float64), reference, rtol=tol)


def test_inconsistent_signs_are_named(mpas_mesh, laplacian_on_host, rng):
    sign = mpas_mesh.edgeSignOnCell.copy()
    sign[4, 1] = -sign[4, 1]
    bad = mpas_mesh.replace(edgeSignOnCell=sign)
    with pytest.raises(ValueError, match=r"edgeSignOnCell\[4, 1\]"):
        meshops.laplacian_c2c(bad, _host(random_field(bad, "cell", rng)))
