"""A per-user cache of generated icosahedral meshes, kept as MPAS grid files.

`cached_icosahedral(level, ...)` returns the same `Mesh` as `generate_icosahedral(level, ...)`, but
generates it only once per parameter set: the mesh is written (NETCDF4, atomically) into the cache
directory, and later calls read it back with `grids.mpas_io.read_trusted_mesh`, which reads the
arrays as stored and skips the topology/geometry checks (the mesh was validated once, when it was
generated).

Where: `$MESHOPS_CACHE_DIR` if set, else `$XDG_CACHE_HOME/meshops/meshes`, else
`~/.cache/meshops/meshes` (or the `cache_dir` argument).

Key: the file name holds the readable parameters and a hash of all of them,
``icos_l{level}_lloyd{n}_{order}_r{radius}_v{GENERATOR_VERSION}_{hash8}.grid.nc``, e.g.
``icos_l9_lloyd0_morton_r6371229_v2_3f0c9a1e.grid.nc``; the hash covers level, lloyd_iterations,
order, sphere_radius, omega, the generator version (`grids.icosahedral.GENERATOR_VERSION`) and the
cache format (`CACHE_FORMAT`). The same parameters are stored as global attributes of the file
(meshops_cache_level, _lloyd_iterations, _order, _sphere_radius, _omega, _generator_version,
_format, and the whole key as meshops_cache_key) and compared on read, as are the dimension sizes
of the level.

Trust: each file holds the CRC-32 of every variable's bytes as written (global attribute
meshops_cache_crc32), checked on every read (`read_trusted_mesh(checksums=True)`), so a flipped
bit that leaves a value plausible (an area, an index still in range) is caught. A cache file whose
checksums or attributes differ, that is shorter than its header says (truncated), that cannot be
read as netCDF, or whose fields have the wrong shapes, counts or index ranges, is regenerated with
one logged warning ("mesh: cache file <path> is unusable, regenerating it: <why>"), never used.

Concurrency: each writer writes its own temporary file (unique name beside the target), fsyncs it
and renames it over the target (`grids.atomic`): rename is atomic on a POSIX file system, so a
reader sees either no file or a complete one, never a half-written one. Two processes that miss at
the same time both generate and both rename; the last rename wins and both files are identical.
(On network file systems without atomic rename, or where HDF5's file locking fails, point
MESHOPS_CACHE_DIR at a local disk; HDF5_USE_FILE_LOCKING=FALSE is HDF5's own switch.)

Failure: when the cache directory cannot be created or written, the mesh is generated in memory,
a warning is logged, and the run goes on.

mesh_id: a cache file written before meshes carried one (`grids.mpas_io.mesh_id_of`) gets it on a
hit, computed from its cells and stored in the file atomically (`with_mesh_id`; in memory only
where the cache cannot be written).

Logs (logger "grids", info): "mesh: cache hit <path> (x.x s)" and
"mesh: generated level N in x.x s, cached to <path> (load x.x s)".
"""
from __future__ import annotations

import glob
import hashlib
import json
import logging
import math
import os
import time
from pathlib import Path

import numpy as np

from .mesh import EARTH_OMEGA, EARTH_RADIUS, Mesh

log = logging.getLogger("grids")

#: Environment variable naming the cache directory.
CACHE_ENV = "MESHOPS_CACHE_DIR"
#: Layout of the cache files (what is stored and how it is keyed); bump when it changes.
CACHE_FORMAT = 2      # 2: the CRC-32 of every variable (meshops_cache_crc32)
#: Prefix of the global attributes that hold the generation parameters.
ATTR_PREFIX = "meshops_cache_"
#: Temporary files of writers that died (older than this, in seconds) are removed on a miss.
STALE_TMP_SECONDS = 24 * 3600


def default_cache_dir() -> Path:
    """$MESHOPS_CACHE_DIR, else $XDG_CACHE_HOME/meshops/meshes, else ~/.cache/meshops/meshes."""
    env = os.environ.get(CACHE_ENV)
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "meshops" / "meshes"


def _parameters(level, lloyd_iterations, order, sphere_radius, omega) -> dict:
    """The generation parameters, checked and normalised (ValueError names the bad one)."""
    from .icosahedral import GENERATOR_VERSION, MAX_LEVEL
    from .reorder import METHODS

    if not (isinstance(level, (int, np.integer)) and not isinstance(level, bool)
            and 0 <= level <= MAX_LEVEL):
        raise ValueError(f"cached_icosahedral: level={level!r}, expected an integer in 0..{MAX_LEVEL}")
    if not (isinstance(lloyd_iterations, (int, np.integer)) and not isinstance(lloyd_iterations, bool)
            and lloyd_iterations >= 0):
        raise ValueError(f"cached_icosahedral: lloyd_iterations={lloyd_iterations!r}, "
                         "expected an integer >= 0")
    if order not in METHODS + ("none",):
        raise ValueError(f"cached_icosahedral: order={order!r}, expected one of {METHODS + ('none',)}")
    for name, value, positive in (("sphere_radius", sphere_radius, True), ("omega", omega, False)):
        try:
            ok = math.isfinite(float(value)) and (float(value) > 0 or not positive)
        except (TypeError, ValueError):
            ok = False
        if not ok:
            raise ValueError(f"cached_icosahedral: {name}={value!r}, expected a finite "
                             f"{'positive ' if positive else ''}number")
    return {"level": int(level), "lloyd_iterations": int(lloyd_iterations), "order": str(order),
            "sphere_radius": float(sphere_radius), "omega": float(omega),
            "generator_version": int(GENERATOR_VERSION), "format": int(CACHE_FORMAT)}


def _key(params: dict) -> str:
    """Canonical text of the parameters (floats by repr: every bit counts)."""
    return json.dumps({k: (repr(v) if isinstance(v, float) else v) for k, v in params.items()},
                      sort_keys=True, separators=(",", ":"))


def _number(x: float) -> str:
    """A float for a file name: 6371229.0 -> '6371229', 0.5 -> '0.5', 1e+20 -> '1e20'."""
    return format(x, ".15g").replace("+", "")


def cache_file_name(params: dict) -> str:
    digest = hashlib.sha256(_key(params).encode()).hexdigest()[:8]
    return (f"icos_l{params['level']}_lloyd{params['lloyd_iterations']}_{params['order']}_"
            f"r{_number(params['sphere_radius'])}_v{params['generator_version']}_{digest}.grid.nc")


def cache_attributes(params: dict) -> dict:
    """Global attributes that identify a cache file: each parameter, and the whole key."""
    attrs = {ATTR_PREFIX + "key": _key(params)}
    for name, value in params.items():
        attrs[ATTR_PREFIX + name] = np.float64(value) if isinstance(value, float) else (
            np.int32(value) if isinstance(value, int) else value)
    return attrs


def cache_path(level: int, *, lloyd_iterations: int = 0, sphere_radius: float = EARTH_RADIUS,
               order: str = "morton", omega: float = EARTH_OMEGA, cache_dir=None) -> Path:
    """Path of the cache file of these generation parameters (whether it exists or not)."""
    params = _parameters(level, lloyd_iterations, order, sphere_radius, omega)
    directory = Path(cache_dir).expanduser() if cache_dir is not None else default_cache_dir()
    return directory / cache_file_name(params)


def _expected_sizes(level: int) -> dict:
    return {"nCells": 10 * 4 ** level + 2, "nEdges": 30 * 4 ** level, "nVertices": 20 * 4 ** level}


def _read(path: Path, params: dict) -> Mesh:
    """The cached mesh; MeshError (or OSError) when the file is not the one these params make."""
    from .mpas_io import read_trusted_mesh
    from .validate import MeshError

    mesh = read_trusted_mesh(path, expect_attributes=cache_attributes(params), checksums=True)
    for dim, n in _expected_sizes(params["level"]).items():
        if mesh.sizes()[dim] != n:
            raise MeshError("dimension size differs from the level's", file=str(path), field=dim,
                            value=mesh.sizes()[dim], expected=f"{n} for level {params['level']}")
    if mesh.sphere_radius != params["sphere_radius"]:
        raise MeshError("sphere_radius differs from the one asked for", file=str(path),
                        field="sphere_radius", value=mesh.sphere_radius,
                        expected=repr(params["sphere_radius"]))
    return mesh


def _remove_stale_temporaries(path: Path) -> None:
    """Temporary files of this key left by writers that died (older than STALE_TMP_SECONDS)."""
    now = time.time()
    for tmp in glob.glob(os.path.join(glob.escape(str(path.parent)), f".{glob.escape(path.name)}.*.tmp")):
        try:
            if now - os.path.getmtime(tmp) > STALE_TMP_SECONDS:
                os.remove(tmp)
        except OSError:
            pass


def with_mesh_id(mesh: Mesh, path: Path) -> Mesh:
    """`mesh`, read from cache file `path`, with its mesh_id (`grids.mpas_io.mesh_id_of` its cell
    positions): a file cached before mesh_id existed gets it computed, and stored in the file
    (`store_attribute`) where the cache can be written; one that cannot keeps it in memory only."""
    from .mpas_io import mesh_id_of

    if "mesh_id" in mesh.attributes:
        return mesh
    mesh_id = mesh_id_of(mesh.xCell, mesh.yCell, mesh.zCell)
    try:
        store_attribute(path, "mesh_id", mesh_id)
    except (OSError, RuntimeError) as exc:
        log.warning("mesh: cache file %s has no mesh_id and cannot be given one (%s); computed "
                    "for this run only", path, exc)
    else:
        log.info("mesh: cache file %s given its mesh_id %s", path, mesh_id)
    return mesh.replace(attributes={**mesh.attributes, "mesh_id": mesh_id})


def store_attribute(path: Path, name: str, value) -> None:
    """Set global attribute `name` = `value` of netCDF file `path` atomically: a copy beside it
    gets the attribute and is renamed over it (`grids.atomic`), so a reader sees the file before
    or after, whole. The variables (and their checksums) are unchanged."""
    import shutil

    from .atomic import atomic_path
    from .netcdf_files import dataset

    with atomic_path(path) as tmp:
        shutil.copyfile(path, tmp)
        with dataset(tmp, "a") as ds:
            ds.setncattr(name, value)


def cached_icosahedral(level: int, *, lloyd_iterations: int = 0, sphere_radius: float = EARTH_RADIUS,
                       order: str = "morton", omega: float = EARTH_OMEGA, cache_dir=None,
                       validate: bool = True, level_key: str = "level") -> Mesh:
    """`generate_icosahedral(level, ...)`, generated once and cached as an MPAS grid file.

    Parameters as `grids.icosahedral.generate_icosahedral`; `cache_dir` overrides the cache
    directory (default: `default_cache_dir()`). A cache hit reads the file back without re-checking
    topology or geometry (`read_trusted_mesh`); a miss generates the mesh, validates it once
    (`validate`, topology/orientation/signs, see `generate_icosahedral`) and writes it atomically
    (NETCDF4). A miss writes the file field by field while generating
    (`grids.icosahedral.write_icosahedral`: the whole mesh is never in memory twice), then loads
    it as a hit does, so the returned mesh is the same on a hit and on a miss, arrays and
    attributes, with the generation parameters in `mesh.attributes["meshops_cache_*"]`; a mesh
    that fails validation is removed from the cache and the error raised. A bad, truncated or
    mismatching cache file is regenerated with a warning; a cache directory that cannot be
    written gives a warning and the mesh generated in memory. Bad parameters raise ValueError.
    Memory: before any work, `grids.memory.check_memory` raises InsufficientMemory (a ValueError
    naming `level_key`, the setting that chose the level, e.g. "mesh.generate.level") when
    loading the mesh (and, on a miss, generating and validating it) needs more memory than the
    machine has available.
    """
    from .icosahedral import generate_icosahedral, write_icosahedral
    from .memory import check_memory

    params = _parameters(level, lloyd_iterations, order, sphere_radius, omega)
    directory = Path(cache_dir).expanduser() if cache_dir is not None else default_cache_dir()
    path = directory / cache_file_name(params)
    hit = path.exists()
    check_memory(params["level"], key=level_key, generate=not hit, load=True,
                 validate=validate and not hit)

    if hit:
        start = time.perf_counter()
        try:
            mesh = _read(path, params)
        except Exception as exc:      # noqa: BLE001 - any unusable file is regenerated, not trusted
            log.warning("mesh: cache file %s is unusable, regenerating it: %s", path, exc)
        else:
            log.info("mesh: cache hit %s (%.1f s)", path, time.perf_counter() - start)
            return with_mesh_id(mesh, path)

    start = time.perf_counter()
    try:
        directory.mkdir(parents=True, exist_ok=True)
        _remove_stale_temporaries(path)
        write_icosahedral(params["level"], path, lloyd_iterations=params["lloyd_iterations"],
                          sphere_radius=params["sphere_radius"], order=params["order"],
                          omega=params["omega"], format="NETCDF4", compress=True,
                          attributes=cache_attributes(params), cache_key=True, checksums=True,
                          history=f"cache {path.name}")
    except (OSError, RuntimeError) as exc:   # netCDF/HDF5 write errors: generate in memory instead
        mesh = generate_icosahedral(params["level"], lloyd_iterations=params["lloyd_iterations"],
                                    sphere_radius=params["sphere_radius"], order=params["order"],
                                    omega=params["omega"], validate=validate)
        mesh = mesh.replace(attributes={**mesh.attributes,
                                        "sphere_radius": np.float64(mesh.sphere_radius),
                                        **cache_attributes(params)})
        log.warning("mesh: cannot write the mesh cache %s (%s); generated level %d in %.1f s, "
                    "kept in memory only (set %s to a writable directory)", path, exc,
                    params["level"], time.perf_counter() - start, CACHE_ENV)
        return mesh
    written = time.perf_counter() - start
    start = time.perf_counter()
    mesh = _read(path, params)
    loaded = time.perf_counter() - start
    if validate:
        from .validate import validate_mesh

        try:
            validate_mesh(mesh, source=f"{path} (just generated)", geometry=False)
        except Exception:
            path.unlink(missing_ok=True)
            raise
    log.info("mesh: generated level %d in %.1f s, cached to %s (load %.1f s)", params["level"],
             written, path, loaded)
    return mesh
