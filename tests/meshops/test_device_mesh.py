"""The device mesh: one set of tables per (mesh, backend, device), shared by every operator family
and dtype; `rows=` on NumPy inputs; clear errors for what is not a mesh or not a field; the mesh
and decomposition contracts."""
import gc
import pathlib
import subprocess
import sys

import numpy as np
import pytest

import meshops
from meshops.contracts import DecompositionLike, MeshLike
from meshops.device.mesh import DeviceMesh, device_mesh, for_fields
from meshops.device.tables import CATALOGUE
from meshops.registry import OPERATORS

from .conftest import random_field
from .host_harness import assert_repeatable, host, host_fixtures

host_kernels, on_host = host_fixtures("tangential", "pv_flux", "laplacian", "divergence", "curl",
                                      "gradient", "interpolation")


def _run_all(mesh, rng, dtype=np.float64, nlev=3, wrap=lambda a: a, names=sorted(OPERATORS)):
    """Every operator's forward and both adjoints on random fields; the results as NumPy arrays."""
    out = []
    for name in names:
        spec = OPERATORS[name]
        f = lambda locs: tuple(wrap(random_field(mesh, loc, rng, nlev=nlev, dtype=dtype)) for loc in locs)
        x, y = f(spec.domain), f(spec.range)
        out.append(spec.forward(mesh, *x))
        for mode in ("atomic", "deterministic"):
            out.append(spec.adjoint(mesh, *(() if spec.linear else x), *y, mode=mode))
    return [np.asarray(a) for r in out for a in (r if isinstance(r, tuple) else (r,))]


def test_every_table_is_held_once_and_integers_once_for_both_dtypes(ico_mesh, rng):
    m = DeviceMesh(ico_mesh)
    _run_all(m, rng, np.float64)
    _run_all(m, rng, np.float32)
    tables = m.tables()
    names = [key.split(" ")[0] for key in tables]
    ints = [key for key in tables if "[int32]" in key]
    assert ints and all(CATALOGUE[k.split(" ")[0]].kind == "int" for k in ints)
    assert len(ints) == len({k.split(" ")[0] for k in ints})          # one copy for both dtypes
    for dtype in ("float64", "float32"):
        floats = [k.split(" ")[0] for k in tables if f"[{dtype}]" in k]
        assert len(floats) == len(set(floats))
    assert names.count("edgesOnCell") == 1 and names.count("cellsOnEdge") == 1
    assert m.nbytes() == sum(tables.values()) > 0
    trisk = m.table("edgesOnEdge")
    assert trisk.shape == (ico_mesh.nEdges, int(ico_mesh.nEdgesOnEdge.max()))


def test_tables_built_on_threads_equal_the_serial_ones(mesh):
    """HostTables.build on several threads (each table once, dependencies waited for) gives every
    catalogue table bitwise as one thread does, int tables as int32."""
    from meshops.device.tables import HostTables

    names = list(CATALOGUE)
    serial, threaded = HostTables(mesh), HostTables(mesh)
    for name in names:
        serial[name]
    threaded.build(names[::-1], threads=4)
    assert sorted(threaded.names()) == sorted(serial.names())
    for name in serial.names():
        a, b = serial[name], threaded[name]
        assert a.dtype == b.dtype and np.array_equal(a, b), name
        if CATALOGUE[name].kind == "int":
            assert a.dtype == np.int32, name


def test_device_mesh_equals_the_plain_mesh_bitwise(mesh, rng):
    seed = int(rng.integers(1 << 30))
    plain = _run_all(mesh, np.random.default_rng(seed))
    explicit = _run_all(DeviceMesh(mesh.replace()), np.random.default_rng(seed))
    for a, b in zip(plain, explicit, strict=True):
        np.testing.assert_array_equal(a, b)


def test_lean_tables_on_host_kernels_equal_fast(ico_mesh, rng, on_host):
    """tables="lean": row-major tables only, no composed Laplacian stencil, kite and curl gather
    adjoints through positions into the forward coefficients; results bitwise those of "fast"
    except the vector Laplacian from 16 bytes of levels (three passes instead of the composed
    stencil: equal to rounding)."""
    from meshops.device.backend import array_module

    xp = array_module(host(np.zeros(1)))     # the host-run stand-in for CuPy
    fast, lean = DeviceMesh(ico_mesh, xp), DeviceMesh(ico_mesh, xp, tables="lean")
    for name in ("tangential_e2e", "pv_flux_e2e", "curl_e2v", "circulation_e2v", "interp_c2v",
                 "interp_v2c", "vector_laplacian_e2e"):
        for nlev in (None, 4):
            seed = int(rng.integers(1 << 30))
            a = _run_all(fast, np.random.default_rng(seed), nlev=nlev, wrap=host, names=[name])
            b = _run_all(lean, np.random.default_rng(seed), nlev=nlev, wrap=host, names=[name])
            for x, y in zip(a, b, strict=True):
                if name == "vector_laplacian_e2e" and nlev:
                    np.testing.assert_allclose(x, y, rtol=1e-12, atol=1e-12 * np.abs(x).max())
                else:
                    assert_repeatable(x, y, err_msg=f"{name} nlev {nlev}")
    held = lean.tables()
    assert not any("slot-major" in k or "Del2" in k or "CoefT " in k for k in held), held
    assert any("slot-major" in k for k in fast.tables()) and any("Del2" in k for k in fast.tables())
    assert lean.nbytes() < fast.nbytes()


def test_plain_meshes_share_a_weakly_cached_device_mesh(ico_mesh):
    m = ico_mesh.replace()
    assert device_mesh(m) is device_mesh(m) is for_fields(m, np.zeros(m.nCells))
    assert device_mesh(m, tables="lean") is not device_mesh(m)
    assert not hasattr(m, "_meshops_cache") and "_meshops_cache" not in vars(m)
    dmesh = device_mesh(m)
    del m
    gc.collect()
    with pytest.raises(ReferenceError):
        dmesh.mesh


def test_a_device_mesh_on_another_backend_is_rejected(ico_mesh, on_host):
    dmesh = DeviceMesh(ico_mesh)                                   # NumPy
    with pytest.raises(ValueError, match="DeviceMesh on numpy"):
        meshops.div_e2c(dmesh, host(np.zeros(ico_mesh.nEdges)))


@pytest.mark.parametrize("name", sorted(OPERATORS))
def test_rows_are_honoured_on_numpy(ico_mesh, rng, name):
    """rows=(first, last) on NumPy inputs computes those rows (bitwise as a full call); a range
    outside the output rows is an error, as on the GPU."""
    spec = OPERATORS[name]
    x = tuple(random_field(ico_mesh, loc, rng, nlev=3) for loc in spec.domain)
    full = spec.forward(ico_mesh, *x)
    full = full if isinstance(full, tuple) else (full,)
    n = full[0].shape[0]
    first, last = n // 3, n // 2
    part = spec.forward(ico_mesh, *x, rows=(first, last))
    part = part if isinstance(part, tuple) else (part,)
    for a, b in zip(full, part, strict=True):
        np.testing.assert_array_equal(a[first:last], b[first:last])
    if spec.single_pass:
        assert not all(np.array_equal(a, b) for a, b in zip(full, part))
    with pytest.raises(ValueError, match="rows"):
        spec.forward(ico_mesh, *x, rows=(0, n + 1))


def test_a_list_as_a_field_is_a_type_error_naming_it(ico_mesh):
    with pytest.raises(TypeError, match=r"F: expected an edge field of shape \(1920,\) or \(1920, nlev\)"
                                        r" \(a NumPy or CuPy array\), got list"):
        meshops.div_e2c(ico_mesh, [0.0] * ico_mesh.nEdges)
    with pytest.raises(TypeError, match="phi: expected a cell field"):
        meshops.grad_c2e(ico_mesh, None)


@pytest.mark.parametrize("bad, what", [(None, "got None"), ("x1.162.grid.nc", "grids.read_mesh"),
                                       (pathlib.Path("mesh.nc"), "the path 'mesh.nc'"),
                                       (42, "a int without nCells")])
def test_what_is_not_a_mesh_is_a_type_error(bad, what):
    with pytest.raises(TypeError, match="mesh: expected a mesh with MPAS fields") as err:
        meshops.div_e2c(bad, np.zeros(10))
    assert what in str(err.value)
    with pytest.raises(TypeError, match="mesh: expected"):
        DeviceMesh(bad)


def test_field_errors_use_the_right_article(ico_mesh):
    with pytest.raises(ValueError, match="expected an edge field of shape"):
        meshops.div_e2c(ico_mesh, np.zeros(3))
    with pytest.raises(ValueError, match="expected a cell field of shape"):
        meshops.grad_c2e(ico_mesh, np.zeros(3))


def test_grids_objects_satisfy_the_contracts(ico_mesh):
    from grids.decompose import distribute_mesh
    from meshops.contracts import ExchangeListLike
    from meshops.parallel.comm import SerialComm

    assert isinstance(ico_mesh, MeshLike)
    d = distribute_mesh(SerialComm(), ico_mesh, halo_depth=1, method="sfc")
    assert isinstance(d, DecompositionLike) and isinstance(d.mesh, MeshLike)
    assert all(isinstance(ex, ExchangeListLike) for ex in d.exchange.values())


def test_meshops_imports_nothing_from_grids():
    code = "import sys, meshops; print(sorted(m for m in sys.modules if m.split('.')[0] == 'grids'))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
