"""Mesh generation at scale (grids.icosahedral.write_icosahedral, grids.geometry.derive_fields):
the same arrays as before, written field by field, blockwise in parallel, within its memory."""
import hashlib
import tracemalloc

import numpy as np
import pytest

import grids.geometry
from grids.geometry import THREADS_ENV, complete_mesh, threads
from grids.icosahedral import generate_icosahedral, icosahedral_sizes, write_icosahedral
from grids.mesh import COUNT_FIELDS, FIELD_DIMS, INDEX_FIELDS, REQUIRED_FIELDS
from grids.mpas_io import (COMPRESSED_VARIABLES, MeshFileWriter, read_mesh, read_trusted_mesh,
                           write_mesh)
from grids.validate import MeshError

# Level 5, 3 Lloyd iterations, morton order, Earth radius, as the generator wrote it before it
# streamed fields to files and ran blocks on threads (GENERATOR_VERSION 2): a digest of each
# index field, and (sum |x|, sum x * ramp) of each float field, ramp = (1..n) / n over the
# flattened array (the float sums are compared to 1e-11 of sum |x|: libm may differ in the last bit).
INDEX_DIGESTS = {
    "nEdgesOnCell": "40078960359e456a",
    "edgesOnCell": "336812ced7ee654c",
    "cellsOnCell": "9dbd977fc78fd821",
    "verticesOnCell": "524c332cebcba4ce",
    "cellsOnEdge": "b88bc9d3916b3401",
    "verticesOnEdge": "d86e2a1d016f8363",
    "nEdgesOnEdge": "170131fe717310b3",
    "edgesOnEdge": "3249453c4543a5eb",
    "cellsOnVertex": "7dc1d523c84d80f2",
    "edgesOnVertex": "6c5801e453307505",
}
FLOAT_SUMS = {   # (sum |x|, sum x * ramp)
    "xCell": (32601313813.077827, 8673536588.381124),
    "yCell": (32613397398.19457, 4320576208.446297),
    "zCell": (32679888322.718796, 2215198917.8287754),
    "latCell": (5858.425685022826, 397.12047580450127),
    "lonCell": (32266.31837556521, 14147.760388769097),
    "edgeSignOnCell": (61440.0, -374.2564928724858),
    "areaCell": (510101140207791.6, 255073952560934.94),
    "fCell": (0.7480681269998746, 0.05070763060840405),
    "xEdge": (97786205043.76143, 26018010331.34102),
    "yEdge": (97831924908.41122, 12961174304.875837),
    "zEdge": (98031667425.70187, 6644396024.033202),
    "latEdge": (17573.49914967759, 1191.173238034103),
    "lonEdge": (96572.55817135023, 42394.46136706731),
    "weightsOnEdge": (35553.59637082721, 4.275732010312618),
    "dcEdge": (7388689846.144003, 3694375137.660468),
    "dvEdge": (4267314198.009535, 2134076036.6472511),
    "angleEdge": (48260.603235442344, 6092.903904822746),
    "fEdge": (2.244021311016475, 0.15209540619171905),
    "xVertex": (65190898652.26947, 17345999719.76734),
    "yVertex": (65220619120.63251, 8642067590.343952),
    "zVertex": (65355311033.08705, 4430513203.097048),
    "latVertex": (11715.723532129745, 794.3085076070388),
    "lonVertex": (64371.23347205486, 28287.50912140208),
    "edgeSignOnVertex": (61440.0, -3.0780924479166405),
    "areaTriangle": (510101140207791.6, 255079556662314.5),
    "kiteAreasOnVertex": (510101140207791.6, 255071254234902.22),
    "fVertex": (1.4960340326508268, 0.10141790206745999),
}


def same_arrays(a, b):
    for name in FIELD_DIMS:
        x, y = getattr(a, name), getattr(b, name)
        assert x.dtype == y.dtype and np.array_equal(x, y), name
    assert sorted(a.extra) == sorted(b.extra)
    for name in a.extra:
        assert a.extra[name][0] == b.extra[name][0] and np.array_equal(a.extra[name][1],
                                                                       b.extra[name][1]), name


def test_generator_output_is_the_one_before():
    m = generate_icosahedral(5, lloyd_iterations=3)
    for name, digest in INDEX_DIGESTS.items():
        arr = np.ascontiguousarray(getattr(m, name), dtype="<i4")
        assert hashlib.sha256(arr.tobytes()).hexdigest()[:16] == digest, name
    for name, (total, ramp) in FLOAT_SUMS.items():
        a = getattr(m, name).ravel()
        assert a.dtype == np.float64
        assert abs(np.abs(a).sum() - total) <= 1e-11 * total, name
        w = np.arange(1, a.size + 1) / a.size
        assert abs((a * w).sum() - ramp) <= 1e-11 * total, name


def test_derive_fields_equals_complete_mesh_on_a_jittered_mesh():
    rng = np.random.default_rng()
    from grids.icosahedral import voronoi_mesh

    g = generate_icosahedral(3)
    p = np.stack([g.xCell, g.yCell, g.zCell], axis=1) / g.sphere_radius
    p += 0.02 * rng.standard_normal(p.shape)
    m = voronoi_mesh(p, sphere_radius=float(rng.uniform(1.0, 7e6)))
    ref = complete_mesh({name: getattr(m, name) for name in REQUIRED_FIELDS}, m.sphere_radius)
    for name in FIELD_DIMS:
        assert np.array_equal(getattr(m, name), getattr(ref, name)), name


@pytest.mark.parametrize("level, lloyd, order", [(4, 1, "hilbert"), (3, 0, "none")])
def test_written_file_holds_the_generated_mesh(tmp_path, level, lloyd, order):
    path = tmp_path / "m.nc"
    sizes = write_icosahedral(level, path, lloyd_iterations=lloyd, order=order)
    assert sizes == icosahedral_sizes(level)
    back = read_mesh(path, validate=True)          # topology and the stored geometry checked
    mesh = generate_icosahedral(level, lloyd_iterations=lloyd, order=order)
    same_arrays(back, mesh)
    assert back.attributes["source"] == mesh.attributes["source"]
    assert back.attributes["file_id"] != mesh.attributes["file_id"]        # a new mesh each time
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.nc"]          # no temporaries left


def test_blocks_on_threads_give_the_same_mesh(monkeypatch):
    reference = generate_icosahedral(4, lloyd_iterations=2)
    monkeypatch.setattr(grids.geometry, "CHUNK", 997)           # many uneven blocks
    for n in ("1", "3"):
        monkeypatch.setenv(THREADS_ENV, n)
        assert threads() == int(n)
        same_arrays(generate_icosahedral(4, lloyd_iterations=2), reference)


@pytest.mark.parametrize("value", ["0", "-2", "many"])
def test_bad_thread_count_is_named(monkeypatch, value):
    monkeypatch.setenv(THREADS_ENV, value)
    with pytest.raises(ValueError, match=THREADS_ENV):
        threads()


def test_writing_needs_less_memory_than_the_mesh(tmp_path, monkeypatch):
    monkeypatch.setattr(grids.geometry, "CHUNK", 4096)          # block temporaries stay small
    level = 6
    mesh = generate_icosahedral(level)
    mesh_bytes = sum(a.nbytes for a in mesh.fields().values())
    mesh_bytes += sum(a.nbytes for _, a in mesh.extra.values())
    del mesh
    tracemalloc.start()
    try:
        write_icosahedral(level, tmp_path / "m.nc")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 0.75 * mesh_bytes, (peak, mesh_bytes)


def test_classic_format_limit_is_named_before_any_work(tmp_path, monkeypatch):
    import grids.icosahedral

    monkeypatch.setattr(grids.icosahedral, "icosahedral_triangulation",
                        lambda *a, **k: pytest.fail("generated before checking the format"))
    with pytest.raises(MeshError, match="NETCDF3_64BIT_DATA or NETCDF4") as info:
        write_icosahedral(11, tmp_path / "big.nc", format="NETCDF3_64BIT_OFFSET")
    assert info.value.field == "edgesOnEdge"
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("compress", [True, "connectivity", False])
def test_compressed_variables(tmp_path, compress):
    import netCDF4

    path = tmp_path / "m.nc"
    write_icosahedral(3, path, compress=compress)
    squeezed = set(COMPRESSED_VARIABLES) if compress else set()
    if compress == "connectivity":
        squeezed |= set(INDEX_FIELDS)
    with netCDF4.Dataset(path) as ds:
        for name in ds.variables:
            zlib = ds[name].filters()["zlib"]
            assert zlib == (name in squeezed), name
            if zlib:
                assert ds[name].filters()["shuffle"] and ds[name].filters()["complevel"] == 1
            else:
                assert ds[name].chunking() == "contiguous", name
    same_arrays(read_trusted_mesh(path), generate_icosahedral(3))


def test_unfinished_field_is_named_on_close(tmp_path):
    mesh = generate_icosahedral(1)
    writer = MeshFileWriter(str(tmp_path / "m.nc"), format="NETCDF4", sizes=mesh.sizes(),
                            attributes={}, extra=mesh.extra)
    for name, arr in mesh.fields().items():
        if name == "weightsOnEdge":
            writer.put_rows(name, slice(0, 10), arr[:10], mesh.nEdges)
        else:
            writer.put(name, arr)
    with pytest.raises(MeshError, match="incompletely") as info:
        writer.close()
    assert info.value.field == "weightsOnEdge"


def test_write_mesh_compress_option_reads_back_the_same(tmp_path):
    rng = np.random.default_rng()
    mesh = generate_icosahedral(int(rng.integers(1, 4)))
    write_mesh(mesh, tmp_path / "a.nc", format="NETCDF4", compress="connectivity")
    same_arrays(read_trusted_mesh(tmp_path / "a.nc"), mesh)
    with pytest.raises(ValueError, match="compress"):
        write_mesh(mesh, tmp_path / "b.nc", format="NETCDF4", compress="zstd")


def test_a_failing_background_write_leaves_no_file(tmp_path, monkeypatch):
    import grids.mpas_io

    real, calls = grids.mpas_io._write_variable, []

    def failing(ds, name, arr):
        calls.append(name)
        if len(calls) == 12:
            raise RuntimeError("disk full (simulated)")
        return real(ds, name, arr)

    monkeypatch.setattr(grids.mpas_io, "_write_variable", failing)
    with pytest.raises(RuntimeError, match="simulated"):
        write_icosahedral(3, tmp_path / "m.nc")
    assert list(tmp_path.iterdir()) == []
