"""The mesh cache (grids.cache): generated once, read back as stored, never trusted when wrong."""
import logging
import os
import subprocess
import sys

import numpy as np
import pytest

import grids.icosahedral
from grids.cache import CACHE_ENV, cache_path, cached_icosahedral, default_cache_dir
from grids.icosahedral import generate_icosahedral
from grids.mesh import EARTH_RADIUS, FIELD_DIMS
from grids.mpas_io import read_trusted_mesh, write_mesh
from grids.validate import MeshError


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    path = tmp_path / "cache"
    monkeypatch.setenv(CACHE_ENV, str(path))
    return path


@pytest.fixture
def records(caplog):
    caplog.set_level(logging.INFO, logger="grids")
    return caplog


def assert_same_mesh(a, b):
    for name in FIELD_DIMS:
        x, y = getattr(a, name), getattr(b, name)
        assert x.dtype == y.dtype and np.array_equal(x, y), name
    assert a.sphere_radius == b.sphere_radius
    assert (a.nCellsSolve, a.nEdgesSolve, a.nVerticesSolve) == (b.nCellsSolve, b.nEdgesSolve,
                                                                b.nVerticesSolve)


def messages(caplog, level):
    return [r.getMessage() for r in caplog.records if r.name == "grids" and r.levelno == level]


def no_generation(monkeypatch):
    def fail(*args, **kwargs):
        raise AssertionError("the generator ran on a cache hit")

    monkeypatch.setattr(grids.icosahedral, "generate_icosahedral", fail)


def test_first_call_generates_and_writes_second_reads_it_back(cache_dir, records, monkeypatch):
    first = cached_icosahedral(3)
    path = cache_path(3)
    assert path.parent == cache_dir and path.is_file()
    assert path.name.startswith("icos_l3_lloyd0_morton_r6371229_v2_") and path.name.endswith(".grid.nc")
    assert any(m.startswith("mesh: generated level 3 in ") and str(path) in m
               for m in messages(records, logging.INFO))
    assert first.nCells == 10 * 4**3 + 2
    assert_same_mesh(first, generate_icosahedral(3))
    stat = os.stat(path)
    records.clear()

    no_generation(monkeypatch)
    second = cached_icosahedral(3)
    assert_same_mesh(first, second)
    assert second.attributes["meshops_cache_key"] == first.attributes["meshops_cache_key"]
    assert int(second.attributes["meshops_cache_level"]) == 3
    after = os.stat(path)
    assert (after.st_mtime_ns, after.st_ino) == (stat.st_mtime_ns, stat.st_ino)
    assert any(m.startswith(f"mesh: cache hit {path} (") for m in messages(records, logging.INFO))
    assert not messages(records, logging.WARNING)
    assert [p.name for p in cache_dir.iterdir()] == [path.name]      # no temporaries left


@pytest.mark.parametrize("change", [dict(level=3), dict(lloyd_iterations=1), dict(order="hilbert"),
                                    dict(order="none"), dict(sphere_radius=1.0),
                                    dict(omega=2 * 7.29212e-5)])
def test_every_parameter_gives_its_own_file(cache_dir, change):
    base = dict(level=2, lloyd_iterations=0, order="morton", sphere_radius=EARTH_RADIUS)
    a = cached_icosahedral(**base)
    b = cached_icosahedral(**{**base, **change})
    pa, pb = cache_path(**base), cache_path(**{**base, **change})
    assert pa != pb and pa.is_file() and pb.is_file()
    assert sorted(p.name for p in cache_dir.iterdir()) == sorted([pa.name, pb.name])
    assert a.attributes["meshops_cache_key"] != b.attributes["meshops_cache_key"]
    want = generate_icosahedral(**{**base, **change})
    assert_same_mesh(b, want)
    if "omega" in change:
        assert np.allclose(b.fCell, 2 * a.fCell)
    if "sphere_radius" in change:
        assert b.sphere_radius == 1.0 and "_r1_" in pb.name


def test_a_truncated_file_is_regenerated_with_a_warning(cache_dir, records, monkeypatch):
    good = cached_icosahedral(2)
    path = cache_path(2)
    size = path.stat().st_size
    with open(path, "r+b") as fh:
        fh.truncate(size // 2)
    records.clear()
    again = cached_icosahedral(2)
    warnings = messages(records, logging.WARNING)
    assert len(warnings) == 1 and str(path) in warnings[0] and "regenerating" in warnings[0]
    assert "truncated" in warnings[0]
    assert any(m.startswith("mesh: generated level 2") for m in messages(records, logging.INFO))
    assert_same_mesh(good, again)
    assert path.stat().st_size == size
    no_generation(monkeypatch)
    assert_same_mesh(good, cached_icosahedral(2))         # the rewritten file is a hit


def test_garbage_in_place_of_the_file_is_regenerated(cache_dir, records):
    path = cache_path(2)
    cache_dir.mkdir()
    path.write_bytes(b"not a netCDF file at all")
    mesh = cached_icosahedral(2)
    assert len(messages(records, logging.WARNING)) == 1
    assert_same_mesh(mesh, generate_icosahedral(2))
    read_trusted_mesh(path)


def test_a_file_with_other_parameters_is_not_trusted(cache_dir, records):
    import netCDF4

    good = cached_icosahedral(2)
    path = cache_path(2)
    with netCDF4.Dataset(path, "a") as ds:        # as if another generator version had written it
        ds.setncattr("meshops_cache_generator_version", np.int32(0))
    records.clear()
    mesh = cached_icosahedral(2)
    warnings = messages(records, logging.WARNING)
    assert len(warnings) == 1 and "meshops_cache_generator_version" in warnings[0]
    assert_same_mesh(good, mesh)


def test_a_file_with_bad_indices_is_not_trusted(cache_dir, records):
    import netCDF4

    cached_icosahedral(2)
    path = cache_path(2)
    with netCDF4.Dataset(path, "a") as ds:
        ds["cellsOnEdge"][5, 1] = ds.dimensions["nCells"].size + 7
    with pytest.raises(MeshError, match="cellsOnEdge"):
        read_trusted_mesh(path)
    records.clear()
    mesh = cached_icosahedral(2)
    assert len(messages(records, logging.WARNING)) == 1
    assert_same_mesh(mesh, generate_icosahedral(2))


def test_an_unwritable_cache_dir_still_gives_the_mesh(tmp_path, monkeypatch, records):
    blocker = tmp_path / "file"
    blocker.write_text("a file where the cache directory should be")   # fails as root too
    monkeypatch.setenv(CACHE_ENV, str(blocker / "meshes"))
    mesh = cached_icosahedral(2)
    warnings = messages(records, logging.WARNING)
    assert len(warnings) == 1 and "cannot write the mesh cache" in warnings[0]
    assert_same_mesh(mesh, generate_icosahedral(2))
    assert blocker.read_text().startswith("a file")


def test_cache_dir_argument_and_environment(tmp_path, monkeypatch):
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "env"))
    assert default_cache_dir() == tmp_path / "env"
    monkeypatch.delenv(CACHE_ENV)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_cache_dir() == tmp_path / "xdg" / "meshops" / "meshes"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_cache_dir() == tmp_path / "home" / ".cache" / "meshops" / "meshes"
    cached_icosahedral(1, cache_dir=tmp_path / "explicit")
    assert cache_path(1, cache_dir=tmp_path / "explicit").is_file()
    assert not (tmp_path / "home").exists()


@pytest.mark.parametrize("bad", [dict(level=-1), dict(level=2.0), dict(lloyd_iterations=-1),
                                 dict(order="zigzag"), dict(sphere_radius=0.0),
                                 dict(omega=float("nan"))])
def test_bad_parameters_raise_before_touching_the_cache(cache_dir, bad):
    with pytest.raises(ValueError):
        cached_icosahedral(**{"level": 2, **bad})
    assert not cache_dir.exists()


def test_two_processes_generating_at_once_leave_one_good_file(cache_dir):
    code = ("import logging, sys; logging.basicConfig(level=logging.INFO); "
            "from grids.cache import cached_icosahedral; cached_icosahedral(4)")
    env = {**os.environ, CACHE_ENV: str(cache_dir)}
    procs = [subprocess.Popen([sys.executable, "-c", code], env=env, stderr=subprocess.PIPE,
                              text=True) for _ in range(2)]
    errs = [p.communicate(timeout=300)[1] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], errs
    assert [p.name for p in cache_dir.iterdir()] == [cache_path(4).name]   # no temporaries
    assert_same_mesh(read_trusted_mesh(cache_path(4)), generate_icosahedral(4))


def test_write_and_trusted_read_neither_derive_nor_validate(tmp_path, monkeypatch):
    import grids.geometry
    import grids.mpas_io
    import grids.validate

    mesh = generate_icosahedral(2)

    def fail(*args, **kwargs):
        raise AssertionError("derived or validated")

    for module, name in ((grids.validate, "check_topology"), (grids.validate, "validate_mesh"),
                         (grids.validate, "check_geometry"), (grids.mpas_io, "validate_mesh"),
                         (grids.mpas_io, "check_fields"), (grids.geometry, "complete_mesh")):
        monkeypatch.setattr(module, name, fail)
    path = tmp_path / "m.nc"
    write_mesh(mesh, path, format="NETCDF4")
    back = read_trusted_mesh(path)
    assert_same_mesh(mesh, back)


def test_write_mesh_netcdf4_is_contiguous_and_uncompressed(tmp_path):
    import netCDF4

    write_mesh(generate_icosahedral(1), tmp_path / "m.nc", format="NETCDF4")
    with netCDF4.Dataset(tmp_path / "m.nc") as ds:
        for name in FIELD_DIMS:
            assert ds[name].chunking() == "contiguous", name
            assert not ds[name].filters()["zlib"], name


def test_generator_validates_only_when_asked(monkeypatch):
    import grids.validate

    calls = []
    real = grids.validate.validate_mesh
    monkeypatch.setattr(grids.validate, "validate_mesh",
                        lambda mesh, **kw: calls.append(kw) or real(mesh, **kw))
    generate_icosahedral(2)
    assert calls == []
    generate_icosahedral(2, validate=True)
    assert len(calls) == 1 and calls[0]["geometry"] is False


def flip_bit(path, name, index, bit):
    """Flip one bit of entry `index` of variable `name` in the file (as stored, in place)."""
    import netCDF4

    with netCDF4.Dataset(path, "a") as ds:
        ds.set_auto_maskandscale(False)
        var = ds[name]
        value = np.array(var[index])
        bits = value.view(np.uint64 if value.dtype.itemsize == 8 else np.uint32)
        bits ^= bits.dtype.type(1) << bits.dtype.type(bit)
        var[index] = value
    return value


@pytest.mark.parametrize("name, bit", [("areaCell", None), ("cellsOnEdge", 0)])
def test_a_flipped_bit_is_caught_and_the_entry_regenerated(cache_dir, records, monkeypatch,
                                                           name, bit):
    rng = np.random.default_rng()
    cached_icosahedral(2)
    path = cache_path(2)
    before = read_trusted_mesh(path)
    if name == "areaCell":          # a mantissa bit: the area stays positive and plausible
        index, bit = int(rng.integers(before.nCells)), int(rng.integers(0, 52))
    else:                           # the lowest bit of a stored (1-based) cell in 2..nCells-1:
        inside = np.argwhere((before.cellsOnEdge >= 1) & (before.cellsOnEdge <= before.nCells - 2))
        index = tuple(int(i) for i in inside[rng.integers(len(inside))])    # still in range
    flip_bit(path, name, index, bit)
    flipped = read_trusted_mesh(path)           # without checksums the change goes unnoticed
    assert not np.array_equal(getattr(flipped, name), getattr(before, name))
    with pytest.raises(MeshError, match=f"{name}: stored bytes have CRC-32 .*corrupt"):
        read_trusted_mesh(path, checksums=True)
    records.clear()
    mesh = cached_icosahedral(2)
    warnings = messages(records, logging.WARNING)
    assert len(warnings) == 1 and str(path) in warnings[0] and "regenerating" in warnings[0]
    assert f"{name}: stored bytes have CRC-32" in warnings[0] and "corrupt" in warnings[0]
    assert any(m.startswith("mesh: generated level 2") for m in messages(records, logging.INFO))
    assert_same_mesh(mesh, generate_icosahedral(2))
    no_generation(monkeypatch)
    records.clear()
    assert_same_mesh(cached_icosahedral(2), mesh)            # the rewritten file is a good hit
    assert not messages(records, logging.WARNING)


def test_a_cache_file_without_checksums_is_not_trusted(cache_dir, records):
    import netCDF4

    cached_icosahedral(2)
    path = cache_path(2)
    with netCDF4.Dataset(path, "a") as ds:
        ds.delncattr("meshops_cache_crc32")
    records.clear()
    mesh = cached_icosahedral(2)
    warnings = messages(records, logging.WARNING)
    assert len(warnings) == 1 and "meshops_cache_crc32" in warnings[0]
    assert_same_mesh(mesh, generate_icosahedral(2))
