"""The netCDF files every model writes: history and restart, on rank 0 from gathered owned rows.

Every output file goes through `OutputFile`, which at construction (before any work) checks that
its directory exists and is writable, that a file
already there was written by this model (nothing else is replaced), and takes an exclusive lock
(`<path>.lock`, `fcntl.flock`) so that a second run on the same path stops with a clear error.
Files are written under a temporary name and renamed when complete (atomic).
The PNGs the models write (`framework.plot`) carry the same mark as a text chunk, model_name =
MODEL_NAME (`png_written_by_model`).

History: an MPAS mesh file plus what the model's history adds (`History._contents`: the
shallow-water model's `swm.output.History`, the hydrostatic core's `hydrostatic.output.History`),
and per output time its fields, a numeric `Time` coordinate (CF units and calendar), `xtime` and
the diagnostics' time series. Record k holds time k * interval; a final
state off that grid gets the record after the last full interval. It grows under `<path>.partial`
(renamed to `path` when the run ends); writes run on a writer thread, so stepping does not wait for
netCDF. A resumed run continues the history it resumes (same output.interval_hours and
output.variables: `check_resumed_history`), copied to the partial file atomically: records up to
the restart time are kept, and a later record there (a run killed after its last restart) is not
replaced by an earlier state (`History.write`).

Mesh (`output.mesh`): a history holds the mesh (`inside`, MPAS's sw output stream with its mesh
stream) or references an MPAS grid file (`reference`); `auto` references it above
MESH_INSIDE_MAX_CELLS cells. A referencing history holds the fields, h_s, the time and diagnostics,
latCell and lonCell, and the grid file's path (`mesh_file`, absolute; `mesh_file_relative`, from the
history's folder), its fingerprint (`mesh_file_fingerprint`, `stored_fingerprint`) and its
`file_id` as MPAS's `parent_id`. `open_history` reads either form as one xarray Dataset;
UXarray reads it as `uxarray.open_dataset(grid, history)`.

Restart: the state's fields (h and u; the hydrostatic core's mass, theta_mass and u) in its dtype,
its time (`Time`, `xtime`), the step count, dt, and the fingerprints of the mesh and of every
setting that changes the trajectory, checked when a run resumes from it; the mesh settings and the
fingerprint of the set of cells (`cells_fingerprint`) name the setting that differs (e.g. the cell
order) when the mesh is not the run's.

Every file of a run (history, restart, and the sensitivity and 4D-Var files of `adjoint`) carries
the global attributes of `provenance`: model_name, core_name, model_version, the resolved config
(YAML) and a `history` line "<UTC time>: <command line>" appended to the mesh file's own.
"""
from __future__ import annotations

import contextlib
import datetime
import errno
import fcntl
import hashlib
import json
import logging
import os
import pathlib
import queue
import re
import shlex
import shutil
import sys
import threading
import time
from dataclasses import dataclass

import numpy as np

from grids.atomic import atomic_path
from meshops.device.tables import SIZE_OF
from framework import stop
from framework.config import CLOBBER_MODES, MESH_INSIDE_MAX_CELLS, directory_problem, dump, kind_problem
from framework.constants import DAY
from framework.dates import CALENDAR, START, time_units, xtime
from framework.files import beside_grid_path, lock_path, partial_path

log = logging.getLogger("framework")

#: The `model_name` attribute of every file a model of this package writes (what `OutputFile` may
#: replace; each model's files name their core in `core_name`).
MODEL_NAME = "meshops swm"
#: CF time units and calendar of the `Time` coordinate at the default start date (MPAS's
#: shallow-water one; a run's own: `framework.dates`, the config's time.start where it has one).
TIME_UNITS, CALENDAR, START = time_units(START), CALENDAR, START


class OutputError(ValueError):
    """An output or restart path that cannot be used; the message names the config key."""


class SpaceError(OutputError):
    """A write that ran out of room (`reporting_space`): names the file, its config key and the full
    disk."""


#: Free space (bytes) of a folder below which a failed write there is reported as a full disk.
SPACE_MARGIN = 64 * 2**20


def space_problem(exc: BaseException, path) -> str | None:
    """"no space left on device (...)" when the write of `path` that raised `exc` ran out of room:
    errno ENOSPC, EDQUOT or EFBIG, or (netCDF's "HDF error" hides errno) less than SPACE_MARGIN
    free in its folder (`os.statvfs`) or a file size limit (RLIMIT_FSIZE, ulimit -f) set; None
    for any other failure."""
    import resource

    code = getattr(exc, "errno", None)
    if code in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
        return f"no space left on device ({os.strerror(code)})"
    folder = os.path.dirname(os.path.abspath(path))
    try:
        stats = os.statvfs(folder)
        free = stats.f_bavail * stats.f_frsize
    except OSError:
        free = None
    if free is not None and free < SPACE_MARGIN:
        return f"no space left on device ({free} bytes free in {folder})"
    limit = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
    if limit != resource.RLIM_INFINITY:
        return f"no space left on device for it (the file size limit, ulimit -f, is {limit} bytes)"
    return None


@contextlib.contextmanager
def reporting_space(path, key: str, owner=None, kept: str = "nothing was replaced"):
    """Inside the block, a failed write of `path` (the file of config key `key` = `owner`, default
    `path`) that ran out of room (`space_problem`) is raised as one OutputError naming the file, the
    key and the full disk; `kept` says what is left as it was. Other errors pass unchanged."""
    try:
        yield
    except (OSError, RuntimeError) as exc:
        problem = space_problem(exc, path)
        if problem is None:
            raise
        owner = path if owner is None else owner
        raise SpaceError(f"{key} = {str(owner)!r}: writing {path} failed: {problem}; {kept} "
                          "(expected room for the file: free some space or choose another "
                          "folder)") from None


def _string(text: str, width: int = 64) -> np.ndarray:
    return np.array(list(text.ljust(width)), dtype="S1")


def create_time(ds, start: str = START) -> None:
    """The numeric `Time` coordinate (CF units "days since `start`" and calendar) and MPAS's
    `xtime` of netCDF4 Dataset `ds` (the Time and StrLen dimensions created where missing);
    `set_time` fills a record."""
    for name, size in (("Time", None), ("StrLen", 64)):
        if name not in ds.dimensions:
            ds.createDimension(name, size)
    time = ds.createVariable("Time", np.float64, ("Time",))
    time.setncatts({"units": time_units(start), "calendar": CALENDAR, "standard_name": "time",
                    "long_name": "model time", "axis": "T"})
    ds.createVariable("xtime", "S1", ("Time", "StrLen")).long_name = \
        "model time as YYYY-MM-DD_hh:mm:ss (MPAS)"


def set_time(ds, record: int, seconds: float, start: str = START) -> None:
    """Record `record` of `Time` and `xtime` (`create_time`) at `seconds` after `start`."""
    ds["Time"][record] = seconds / 86400.0
    ds["xtime"][record] = _string(xtime(seconds, start))


def provenance(config, core_name: str) -> dict:
    """The global attributes every file of a run carries (`stamp` writes them): model_name,
    core_name (the model's core: `core_name`), model_version, the resolved config as YAML, and the line the `history` attribute
    gains: "<UTC ISO time>: <command line>" (e.g. "run_model.py configs/williamson5.yaml")."""
    import meshops

    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)       # python -m NAME
    program = f"python -m {spec.name.removesuffix('.__main__')}" if spec is not None \
        else os.path.basename(sys.argv[0]) or "python"
    command = " ".join([program, *(shlex.quote(a) for a in sys.argv[1:])])
    return {"model_name": MODEL_NAME, "core_name": core_name, "model_version": meshops.__version__,
            "config": dump(config), "history": f"{now}: {command}"}


def stamp(ds, attributes: dict | None) -> None:
    """Set `provenance`'s attributes on netCDF4 Dataset `ds`, its `history` line appended to the
    one already there (a mesh file's); only model_name without them (None)."""
    attributes = dict(attributes or {"model_name": MODEL_NAME})
    line = attributes.pop("history", None)
    if line is not None:
        before = str(getattr(ds, "history", "")).rstrip("\n")
        attributes["history"] = f"{before}\n{line}" if before else line
    ds.setncatts(attributes)


def written_by_model(path) -> bool:
    """True when `path` is a netCDF file whose `model_name` is this model's."""
    import netCDF4

    try:
        with netCDF4.Dataset(path) as ds:
            return getattr(ds, "model_name", None) == MODEL_NAME
    except OSError:
        return False


def netcdf_problem(path) -> str | None:
    """Why `path` cannot be opened as netCDF (the library's words), or None when it can."""
    import netCDF4

    try:
        with netCDF4.Dataset(path):
            return None
    except OSError as exc:
        return str(exc)


def foreign_file_problem(path) -> str:
    """What is wrong with a file at an output path that `written_by_model` does not claim: one
    that cannot be read as netCDF may be this model's own file cut short (a copy or a transfer
    that stopped, a full disk), so nothing advises removing it (a restart may be the only way to
    resume); a readable one is another program's file."""
    problem = netcdf_problem(path)
    if problem is not None:
        return (f"cannot be read as netCDF ({problem}): truncated or damaged (a copy cut short, "
                "a full disk), or a file this model did not write; nothing was read or changed; "
                "expected an intact file of this model there (its own files are written whole "
                "and then renamed), or another path")
    return "a file is there that this model did not write; expected a new path (or remove the file)"


def png_written_by_model(path) -> bool:
    """True when `path` is a PNG whose text chunk `model_name` is this model's (`framework.plot`
    writes it through matplotlib's savefig metadata)."""
    import PIL.Image

    try:
        with PIL.Image.open(path, formats=["PNG"]) as image:
            return image.text.get("model_name") == MODEL_NAME
    except (OSError, SyntaxError, ValueError, PIL.Image.DecompressionBombError):
        return False


def map_problem(path) -> str | None:
    """Why a PNG cannot be written at `path` (its directory, something there that is not a regular
    file, or a PNG there that this model did not write: `png_written_by_model`), or None."""
    path = pathlib.Path(path)
    problem = directory_problem(path)
    if problem is None and path.exists() and not png_written_by_model(path):
        problem = ("is a file that this model did not write; expected a new path (or remove the "
                   "file)")
    return problem


class OutputFile:
    """A file the run writes, under config key `key`; see the module doc for the checks (the
    config refuses paths that are the run's inputs or its other files: `framework.config`). `grows`:
    the file grows under NAME.partial (a history), checked like the file itself."""

    def __init__(self, path, key: str, grows: bool = False):
        self.path, self.key = pathlib.Path(path), key
        where = f"{key} = {str(path)!r}"
        problem = directory_problem(self.path)
        if problem is not None:
            raise OutputError(f"{where}: {problem}")
        beside = [("its lock file", lock_path(self.path))]
        if grows:
            beside.append(("its partial file", partial_path(self.path)))
        for what, other in beside:
            problem = kind_problem(other)
            if problem is not None:
                raise OutputError(f"{where}: {what} {str(other)!r} {problem}")
        if self.path.exists() and not written_by_model(self.path):
            raise OutputError(f"{where}: {foreign_file_problem(self.path)}")
        self._lock = _lock(self.path, where)
        for what, other in beside[1:]:      # read under the lock: no other run writes it now
            if other.exists() and not written_by_model(other):
                self.close()
                raise OutputError(f"{where}: {what} {str(other)!r} is a file that this model did "
                                  "not write; expected a new path (or remove the file)")

    def close(self) -> None:
        if self._lock is not None:
            lock_path = self._lock.name
            os.unlink(lock_path) if os.path.exists(lock_path) else None
            self._lock.close()
            self._lock = None


def claim(comm, files, check=None) -> list:
    """Each (config key, path[, grows]) of `files` claimed as an `OutputFile` on rank 0 before any
    work, then `check()` there (further refusals, raising OutputError); an error on rank 0 is raised
    on every rank with nothing left claimed. The OutputFiles on rank 0 ([] elsewhere), in order:
    `release` them when the run ends."""
    from framework.collective import on_root

    claimed = []

    def work():
        with stop.deferred():              # a signal stops the claim whole (`framework.stop`)
            try:
                for key, path, *grows in files:
                    claimed.append(OutputFile(path, key, *grows))
                if check is not None:
                    check()
                stop.check(None)
            except BaseException:
                release(claimed)
                claimed.clear()
                raise
    on_root(comm, work)
    return claimed


def release(claimed) -> None:
    """Unlock the files of `claim` (all of them, whatever signal comes)."""
    with stop.deferred():
        for target in claimed:
            target.close()


def _lock(path: pathlib.Path, where: str):
    """The lock file of `path`, open and locked; a lock file that a finishing run removed while
    this one waited for it is not trusted (the lock is taken again on the file now there). A file
    there that is not a lock ("pid N") is refused, naming it."""
    lock = lock_path(path)
    while True:
        handle = _try_lock(lock, where)
        try:
            if os.stat(lock).st_ino == os.fstat(handle.fileno()).st_ino:
                break
        except FileNotFoundError:
            pass
        handle.close()
    handle.seek(0)
    held = handle.read(64)
    if held and not re.fullmatch(r"pid \d+\n?", held):
        handle.close()
        raise OutputError(f"{where}: its lock file {str(lock)!r} is a file that this model did not "
                          "write; expected a new path (or remove the file)")
    handle.seek(0)
    handle.truncate()
    handle.write(f"pid {os.getpid()}\n")
    handle.flush()
    return handle


def _try_lock(lock: pathlib.Path, where: str):
    try:
        handle = open(lock, "a+")
    except OSError as exc:
        raise OutputError(f"{where}: its lock file {str(lock)!r} cannot be created "
                          f"({exc.strerror}); expected a path in a writable folder") from None
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        handle.seek(0)
        holder = handle.read().strip() or "another process"
        handle.close()
        if exc.errno in (errno.EAGAIN, errno.EACCES):
            raise OutputError(f"{where}: another run ({holder}) is writing it; expected one run "
                              "per output path") from None
        raise OutputError(f"{where}: its lock file {str(lock)!r} cannot be locked "
                          f"({exc.strerror}); expected a path on a file system with locks") from None
    return handle


# -- fingerprints -----------------------------------------------------------------------------------

def mesh_fingerprint(mesh) -> str:
    """BLAKE2b (16 hex digits) of the mesh's cell positions, edges and metric terms: another
    order, Lloyd count, radius or file gives another fingerprint."""
    digest = hashlib.blake2b(digest_size=8)
    for name in ("xCell", "yCell", "zCell", "cellsOnEdge", "dcEdge", "areaCell"):
        digest.update(np.ascontiguousarray(getattr(mesh, name)).view(np.uint8))
    return digest.hexdigest()


def cells_fingerprint(mesh) -> str:
    """BLAKE2b (16 hex digits) of the set of cell positions (sorted, so the same in any cell
    order): a mesh with another `mesh_fingerprint` but this one holds the same cells in another
    order."""
    xyz = np.stack([np.asarray(getattr(mesh, n), dtype="<f8") for n in ("xCell", "yCell", "zCell")],
                   axis=1)
    xyz = xyz[np.lexsort(xyz.T[::-1])]
    return hashlib.blake2b(np.ascontiguousarray(xyz).view(np.uint8), digest_size=8).hexdigest()


def mesh_settings(config) -> dict:
    """The config keys that make the mesh, with their values (a restart names the one that differs
    when its mesh is not the run's)."""
    m = config.mesh
    out = {"mesh.radius": m.radius}
    if m.generate is not None:
        out.update({f"mesh.generate.{k}": v for k, v in m.generate.model_dump(mode="json").items()})
    else:
        out.update({"mesh.file": str(m.file), "mesh.recompute_geometry": m.recompute_geometry})
    return out


def trajectory_settings(config, dt: float) -> dict:
    """Every setting besides the mesh that changes the trajectory (config keys -> values)."""
    return {"case": config.case.model_dump(mode="json"), "time.dt": dt, "dtype": config.dtype,
            "diffusion": config.diffusion.model_dump(mode="json"), "mesh.radius": config.mesh.radius}


# -- the mesh of an output file: inside it, or a referenced grid file --------------------------------

#: The arrays `stored_fingerprint` hashes (those of `mesh_fingerprint`).
FINGERPRINT_ARRAYS = ("xCell", "yCell", "zCell", "cellsOnEdge", "dcEdge", "areaCell")
#: Global attributes of a referencing file that name its grid file.
REFERENCE_ATTRIBUTES = ("mesh_file", "mesh_file_relative", "mesh_file_fingerprint")


class MeshReferenceError(OutputError):
    """A referenced grid file that is missing or holds another mesh; the message names both files."""


def mesh_form(setting: str, n_cells: int) -> str:
    """The form of an output file's mesh for `output.mesh` = `setting`: "inside" or "reference"
    ("auto": reference above MESH_INSIDE_MAX_CELLS cells)."""
    if setting == "auto":
        return "reference" if n_cells > MESH_INSIDE_MAX_CELLS else "inside"
    return setting


def stored_fingerprint(mesh) -> str:
    """BLAKE2b (16 hex digits) of `mesh`'s FINGERPRINT_ARRAYS as an MPAS grid file stores them
    (floats as little-endian float64, cellsOnEdge 1-based int32): equal to `grid_file_identity`'s
    of a grid file that holds this mesh as written by `grids.mpas_io.write_mesh`."""
    return _stored_digest({n: getattr(mesh, n) for n in FINGERPRINT_ARRAYS}, one_based=False)


def _stored_digest(arrays: dict, one_based: bool) -> str:
    digest = hashlib.blake2b(digest_size=8)
    for name in FINGERPRINT_ARRAYS:
        value = np.asarray(arrays[name])
        if name == "cellsOnEdge":
            value = value.astype("<i4") + (0 if one_based else 1)
        digest.update(np.ascontiguousarray(value, dtype="<i4" if name == "cellsOnEdge" else "<f8")
                      .view(np.uint8))
    return digest.hexdigest()


def grid_file_identity(path) -> tuple[str, dict]:
    """(stored_fingerprint, {file_id, parent_id}) of MPAS grid file `path`; MeshReferenceError
    when it cannot be read or is not a grid file."""
    import netCDF4

    try:
        with netCDF4.Dataset(path) as ds:
            ds.set_auto_mask(False)
            missing = [n for n in FINGERPRINT_ARRAYS if n not in ds.variables]
            if missing:
                raise MeshReferenceError(f"{path}: not an MPAS grid file (no {', '.join(missing)})")
            ids = {k: str(getattr(ds, k, "")) for k in ("file_id", "parent_id")}
            return _stored_digest({n: ds[n][:] for n in FINGERPRINT_ARRAYS}, True), ids
    except OSError as exc:
        raise MeshReferenceError(f"{path}: not a readable netCDF file ({exc})") from None


@dataclass(frozen=True)
class GridReference:
    """The MPAS grid file an output file references: its absolute path, `stored_fingerprint`,
    file_id and parent_id."""
    path: pathlib.Path
    fingerprint: str
    file_id: str = ""
    parent_id: str = ""

    @classmethod
    def of(cls, path) -> "GridReference":
        fingerprint, ids = grid_file_identity(path)
        return cls(pathlib.Path(path).resolve(), fingerprint, ids["file_id"], ids["parent_id"])

    def attributes(self, output) -> dict:
        """The global attributes of `output` (a path) that reference this grid file: mesh_file,
        mesh_file_relative, mesh_file_fingerprint, and MPAS's lineage: a new file_id and parent_id
        = the grid's file_id (its own parent_id on the following lines)."""
        from grids.mpas_io import new_file_id

        folder = pathlib.Path(output).resolve().parent
        parent = "\n".join(x for x in (self.file_id.strip(), self.parent_id.strip()) if x)
        return {"mesh_file": str(self.path),
                "mesh_file_relative": os.path.relpath(self.path, folder),
                "mesh_file_fingerprint": self.fingerprint,
                "file_id": new_file_id(), "parent_id": parent}


def reference_grid(mesh, output, candidate=None, *, trusted: bool = False,
                   key: str = "output.path") -> GridReference:
    """The grid file that `output` (written under config key `key`) references for `mesh` (rank 0):
    `candidate` when it holds `mesh` as stored (or is `trusted`: the user's mesh.file, which the mesh
    was read from), else NAME.grid.nc beside `output`, written once (NETCDF4, atomically) and
    reused while it holds `mesh`; a file there with another mesh is refused, naming both."""
    from grids.mpas_io import write_mesh

    expected = stored_fingerprint(mesh)
    if candidate is not None and pathlib.Path(candidate).is_file():
        try:
            found = GridReference.of(candidate)
        except MeshReferenceError as exc:
            log.warning("mesh: %s cannot be referenced (%s)", candidate, exc)
        else:
            if trusted or found.fingerprint == expected:
                return found
            log.warning("mesh: %s holds another mesh (fingerprint %s, the run's %s)", candidate,
                        found.fingerprint, expected)
    beside = beside_grid_path(output)
    if beside.exists():
        found = GridReference.of(beside)
        if found.fingerprint != expected:
            raise MeshReferenceError(
                f"{key} = {str(output)!r}: its grid file {str(beside)!r} holds another mesh "
                f"(fingerprint {found.fingerprint}, this run's {expected}); expected the grid file "
                "of this run's mesh (remove it, or choose another output path or output.mesh: "
                "inside)")
        return found
    t0 = time.perf_counter()
    with reporting_space(beside, key, output):
        write_mesh(mesh, beside, format="NETCDF4",
                   history=f"grid file of {pathlib.Path(output).name}")
    log.info("mesh: wrote the grid file %s in %.1f s", beside,
             time.perf_counter() - t0)
    return GridReference.of(beside)


def create_mesh_part(path, mesh, grid: GridReference | None, attributes: dict | None,
                     output=None):
    """A new netCDF-4 file at `path`, open for appending, with the mesh part of an output file:
    the whole mesh (`grid` None), or the dimensions, latCell and lonCell, the mesh's global
    attributes and the reference to `grid` (its relative path taken from `output`, default `path`);
    `provenance`'s `attributes` stamped on either."""
    import netCDF4
    from grids.mpas_io import file_attributes, mesh_variable_attributes, write_mesh

    if grid is None:
        write_mesh(mesh, path, format="NETCDF4")
        ds = netCDF4.Dataset(path, "a")
    else:
        ds = netCDF4.Dataset(path, "w", format="NETCDF4")
        kept = {k: v for k, v in file_attributes(mesh).items()
                if not k.startswith("meshops_cache_") and k not in ("file_id", "parent_id")}
        ds.setncatts({k: (np.int32(v) if isinstance(v, (bool, np.bool_)) else v)
                      for k, v in kept.items()})
        ds.setncatts(grid.attributes(output if output is not None else path))
        for dim, n in (("nCells", mesh.nCells), ("nEdges", mesh.nEdges),
                       ("nVertices", mesh.nVertices)):
            ds.createDimension(dim, n)
        for name in ("latCell", "lonCell"):
            var = ds.createVariable(name, np.float64, ("nCells",))
            var.setncatts(mesh_variable_attributes(name))
            var[:] = getattr(mesh, name)
    ds.set_auto_mask(False)
    stamp(ds, attributes)
    return ds


def find_grid(path, attributes: dict, grid=None) -> pathlib.Path:
    """The grid file of referencing output file `path` (global `attributes`): `grid` when given,
    else mesh_file_relative (from the file's folder), else mesh_file; the first that holds the
    referenced mesh. MeshReferenceError names the file and the grid file(s) when none does."""
    path = pathlib.Path(path)
    if grid is not None:
        candidates = [pathlib.Path(grid)]
    else:
        candidates = [path.resolve().parent / attributes["mesh_file_relative"],
                      pathlib.Path(attributes["mesh_file"])]
    expected = attributes["mesh_file_fingerprint"]
    problems = []
    for candidate in dict.fromkeys(c.resolve() for c in candidates):
        if not candidate.is_file():
            problems.append(f"{candidate} does not exist")
            continue
        try:
            found, _ = grid_file_identity(candidate)
        except MeshReferenceError as exc:
            problems.append(str(exc))
            continue
        if found == expected:
            return candidate
        problems.append(f"{candidate} holds another mesh (fingerprint {found}, the file's "
                        f"mesh_file_fingerprint {expected})")
    raise MeshReferenceError(
        f"{path}: references the grid file {attributes['mesh_file']}, but {'; '.join(problems)}; "
        "expected the MPAS grid file of the run that wrote it (pass it as grid=, or "
        "python -m swm.plot --grid; a generated mesh is written again to the cache by a run of "
        "the same mesh.generate)")


def history_mesh(path, grid=None):
    """The `grids.Mesh` of an output file of the model: the mesh inside it, or its referenced
    grid file's (`find_grid`) at the file's sphere_radius."""
    import netCDF4
    from grids.mpas_io import read_mesh

    with netCDF4.Dataset(path) as ds:
        attributes = {k: ds.getncattr(k) for k in ds.ncattrs()}
    if "mesh_file_fingerprint" not in attributes:
        return read_mesh(path)
    return read_mesh(find_grid(path, attributes, grid),
                     sphere_radius=float(attributes["sphere_radius"]))


def open_history(path, grid=None, **kwargs):
    """An output file of the model (history, gradient file) as an xarray Dataset with the mesh
    variables in it, whether the file holds the mesh or references a grid file (`find_grid`;
    `grid` overrides the recorded path). The grid's lengths and areas are scaled to the file's
    sphere_radius. `kwargs` go to `xarray.open_dataset`; closing the Dataset closes both files."""
    import xarray
    from grids.mpas_io import SCALED_AREAS, SCALED_LENGTHS

    ds = xarray.open_dataset(path, **kwargs)
    if "mesh_file_fingerprint" not in ds.attrs:
        return ds
    try:
        grid_path = find_grid(path, ds.attrs, grid)
        mesh = xarray.open_dataset(grid_path, **kwargs)
    except BaseException:
        ds.close()
        raise
    position = [float(mesh[name][0]) for name in ("xCell", "yCell", "zCell")]
    radius = float(mesh.attrs.get("sphere_radius", np.linalg.norm(position)))
    scale = float(ds.attrs.get("sphere_radius", radius)) / radius
    merged = ds.copy()
    for name, variable in mesh.variables.items():
        if name in ds.variables or "Time" in variable.dims:
            continue
        if scale != 1.0 and name in SCALED_LENGTHS + SCALED_AREAS:
            factor = scale ** (2 if name in SCALED_AREAS else 1)
            variable = variable.copy(data=variable.values * factor)
        merged[name] = variable
    merged.set_close(lambda: (ds.close(), mesh.close()))
    return merged


# -- history --------------------------------------------------------------------------------------

class AsyncWriter:
    """One writer thread running submitted jobs in order; at most `depth` jobs waiting. An error
    in a job is raised by the next `submit` or by `close`. Every netCDF access of a running model
    goes through it (the netCDF and HDF5 libraries are not thread-safe)."""

    def __init__(self, depth: int = 2):
        self._jobs: queue.Queue = queue.Queue(maxsize=depth)
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._work, name="history-writer", daemon=True)
        self._thread.start()

    def _work(self):
        while True:
            job = self._jobs.get()
            if job is None:
                return
            try:
                job()                # after an error too: each job releases what it holds
            except BaseException as exc:  # noqa: BLE001 - handed to the main thread
                self._error = self._error or exc

    def _raise(self):
        if self._error is not None:
            error, self._error = self._error, None
            raise error

    def submit(self, job) -> None:
        self._raise()
        self._jobs.put(job)

    def close(self) -> None:
        self._jobs.put(None)
        self._thread.join()
        self._raise()


def resumed_history(path) -> pathlib.Path | None:
    """The history a resumed run continues: `path`'s partial file (the latest run's) when there
    is one, else `path`; None when neither exists."""
    for source in (partial_path(path), pathlib.Path(path)):
        if source.exists():
            return source
    return None


def check_resumed_history(config) -> None:
    """Refuse (ConfigError) to resume a history written with another output.interval_hours (record
    k holds time k * interval: records of another interval would land on the wrong ones or leave
    empty ones) or other output.variables (the others' new records would stay empty). Read from
    the resolved config the history carries; a history without one is checked later (`History`)."""
    import netCDF4
    import yaml

    from framework.errors import ConfigError

    source = resumed_history(config.output.path)
    if source is None:
        return
    try:
        with netCDF4.Dataset(source) as ds:
            text = getattr(ds, "config", None)
    except OSError:
        return                                     # named by History
    output = (yaml.safe_load(text) or {}).get("output", {}) if isinstance(text, str) else {}
    given = {"interval_hours": config.output.interval_hours,
             "variables": list(config.output.variables)}
    for key, value in given.items():
        found = output.get(key)
        if found is None or (sorted(found) == sorted(value) if key == "variables"
                             else float(found) == float(value)):
            continue
        why = "record k holds time k * interval" if key == "interval_hours" else \
            "the records of the others would stay empty"
        raise ConfigError(f"output.{key} = {value}: the history {source} being resumed was "
                          f"written with output.{key} = {found}; expected {found} to resume it "
                          f"({why})")


def check_clobber(config) -> None:
    """Refuse (OutputError, one line naming the file, the key and output.clobber's choices) a new
    run (restart.resume: false) whose history (output.path or its partial file) or restart file
    (restart.path) is there already, unless output.clobber is overwrite: never_modify leaves
    every file there as it is, append only adds records after a history's last, which a run from
    day 0 cannot do. A resumed run continues the history and restart of the run it resumes (as
    MPAS's restart runs append to theirs), whatever the mode."""

    mode = config.output.clobber
    if config.restart.resume or mode == "overwrite":
        return
    history, restart = pathlib.Path(config.output.path), pathlib.Path(config.restart.path)
    there = [(key, owner, path, what) for key, owner, path, what in (
        ("output.path", history, history, "a history"),
        ("output.path", history, partial_path(history), "the partial history of a stopped run"),
        ("restart.path", restart, restart, "a restart file")) if path.exists()]
    if not there:
        return
    key, owner, path, what = there[0]
    where = f"{key} = {str(owner)!r}: {what} is there already ({path})"
    choices = f"(output.clobber: one of {', '.join(CLOBBER_MODES)})"
    if mode == "append":
        raise OutputError(f"{where}; output.clobber = append only adds records after the last "
                          "one of the run it continues, and this run starts at day 0 "
                          "(restart.resume: false); expected restart.resume: true to continue "
                          f"it, output.clobber: overwrite to replace it, or another {key} "
                          f"{choices}")
    raise OutputError(f"{where} and output.clobber = never_modify leaves it as it is; expected "
                      f"another {key}, output.clobber: overwrite to replace it, or "
                      f"restart.resume: true to continue it {choices}")


class History:
    """The history file on rank 0 (other ranks hold None and take part in the gathers only). A
    model's own history (`swm.output.History`, `hydrostatic.output.History`) sets `core_name` and
    `_contents`: what a new file holds besides its mesh part, Time and nVertLevels."""

    core_name: str

    def __init__(self, target: OutputFile, writer: AsyncWriter, global_mesh, dtype, variables,
                 diagnostics, *, fingerprint: dict, resume_time: float | None = None, nlev: int = 1,
                 topography=None, attributes: dict | None = None,
                 grid: GridReference | None = None, start: str = START):
        """`topography`: the global b (written once as h_s); `attributes`: `provenance`'s;
        `grid`: the grid file a new history references (None: the mesh inside); `start`: the
        start date (`framework.dates`) of Time's units and xtime. A resumed history keeps the
        form it has."""
        self.target, self.path, self.partial = target, target.path, partial_path(target.path)
        self.start_date = start
        self.kept_times = np.array([])          # the times of a resumed history's records
        self.variables, self.diagnostics = tuple(variables), tuple(diagnostics)
        self.writer, self.ds = writer, None
        self.made = False           # the partial file is this run's (new, or a copy of the final)
        try:
            with self._space():
                if resume_time is not None:
                    self._continue(fingerprint, resume_time)
                    if attributes is not None:     # the resumed run's config and history line
                        stamp(self.ds, attributes)
                else:
                    self._create(global_mesh, dtype, nlev, fingerprint, topography, attributes, grid)
        except BaseException:      # an error, a full disk or a signal: no half-made file is left
            self._discard()
            raise

    @contextlib.contextmanager
    def _space(self):
        """A write that runs out of room (`reporting_space`) closes the partial file and removes it
        where this run made it (a new history, or a copy of the final file): the final file is
        kept as it was."""
        try:
            with reporting_space(self.partial, self.target.key, self.path,
                                 f"the partial file is removed, {self.path.name} left as it "
                                 "was"):
                yield
        except SpaceError:
            if self.ds is not None:
                try:
                    self.ds.close()
                except (OSError, RuntimeError):
                    pass
                self.ds = None
            if self.made and self.partial.exists():
                self.partial.unlink()
            raise

    def _create(self, global_mesh, dtype, nlev, fingerprint, topography=None, attributes=None,
                grid=None):
        if self.partial.exists():
            self.partial.unlink()
        self.made = True
        self.ds = ds = create_mesh_part(self.partial, global_mesh, grid, attributes, self.path)
        ds.setncatts({"core_name": self.core_name, **_attrs(fingerprint)})
        ds.createDimension("nVertLevels", nlev)
        create_time(ds, self.start_date)
        self._contents(ds, dtype, nlev, topography)

    def _contents(self, ds, dtype, nlev, topography) -> None:
        """The model's part of a new history `ds` (its mesh part, Time and nVertLevels made)."""
        raise NotImplementedError

    def _continue(self, fingerprint, resume_time):
        """Reopen the history of the run being resumed (final or partial file), after checking
        that it belongs to the same trajectory and holds the records up to `resume_time`."""
        import netCDF4

        source = resumed_history(self.path)                  # the latest run's
        where = f"{self.target.key} = {str(self.path)!r}"
        if source is None:
            raise OutputError(f"{where}: restart.resume continues the run's history, but neither "
                              f"{self.path.name} nor {self.partial.name} exists; expected the "
                              "history of the run being resumed")
        try:
            ds = netCDF4.Dataset(source)
        except OSError as exc:
            fix = f"remove {self.partial} to resume {self.path}" if source == self.partial and \
                self.path.exists() else "the history of the run being resumed"
            raise OutputError(f"{where}: {source} is not a readable netCDF file ({exc}; a run "
                              f"killed while writing it?); expected {fix}") from None
        with ds:
            found = {k: getattr(ds, k, None) for k in ("mesh_fingerprint", "trajectory_settings")}
            reference = {k: getattr(ds, k) for k in REFERENCE_ATTRIBUTES if k in ds.ncattrs()}
            times = ds["Time"][:] * 86400.0 if "Time" in ds.variables else np.array([])
            variables = [v for v in self.variables if v not in ds.variables]
        self.kept_times = np.asarray(times, dtype=np.float64)
        expected = _attrs(fingerprint)
        for key in found:
            if found[key] != expected[key]:
                raise OutputError(f"{where}: the history was written by another run ({key} "
                                  f"{found[key]} vs {expected[key]}); expected the history of "
                                  "the run being resumed")
        if variables:
            raise OutputError(f"{where}: the history has no {', '.join(variables)}; expected "
                              "output.variables of the run being resumed")
        if not np.any(np.isclose(times, resume_time, rtol=0, atol=1e-3)) and resume_time > 0:
            have = f"{times.max() / 86400:.4g}" if times.size else "none"
            raise OutputError(f"{where}: the history ends at day {have}, before the restart at day "
                              f"{resume_time / 86400:.4g}; expected the history of the run that "
                              "wrote the restart")
        if reference:
            find_grid(self.path, reference)
        if source == self.path:
            self.made = True
            copy_to_partial(self.path, self.partial)
        self.ds = netCDF4.Dataset(self.partial, "a")
        self.ds.set_auto_mask(False)

    def write(self, record: int, seconds: float, fields: dict, diagnostics: dict, *, wait=None,
              done=None):
        """Queue output record `record` at `seconds`: fields {name: global host array} (rank 0),
        diagnostics {name: float}; on the writer thread `wait()` runs before the fields are read
        and `done()` once the record is written. A record that the resumed history holds at a
        later time (a run killed after its last restart wrote it) is not replaced by an earlier
        state (the stop record of a run stopped before it: watchdog or signal)."""
        def job():
            try:
                if wait is not None:
                    wait()
                if record < self.kept_times.size and self.kept_times[record] > seconds + 1e-3:
                    log.info("history: the state of day %.4f is not written over record %d (day "
                             "%.4f) of the run being resumed", seconds / DAY, record,
                             self.kept_times[record] / DAY)
                    return
                ds = self.ds
                if ds is None:             # a write before failed
                    return
                with self._space():
                    set_time(ds, record, seconds, self.start_date)
                    for name in self.variables:
                        value = fields[name]
                        ds[name][record] = value.reshape(ds[name].shape[1:])
                    for name, value in diagnostics.items():
                        if name in ds.variables:
                            ds[name][record] = value
                    ds.sync()
                    _fsync(self.partial)   # here, in the background, not all at the end
            finally:
                if done is not None:
                    done()
        self.writer.submit(job)

    def close(self, finished: bool, discard: bool = False) -> None:
        """Queue the closing of the file: when the run finished, it is renamed to its final name
        (the partial file stays for a resumed run otherwise); with `discard` (a run stopped before
        its first step) a partial file that this run made is removed."""
        def job():
            if discard:
                self._discard()
                return
            if self.ds is None:            # a write before failed
                return
            with self._space():
                self.ds.close()
                self.ds = None
                if finished:
                    _fsync(self.partial)
                    os.replace(self.partial, self.path)
        self.writer.submit(job)

    def _discard(self) -> None:
        if self.ds is not None and self.ds.isopen():
            self.ds.close()
        if self.made:
            self.partial.unlink(missing_ok=True)


def copy_to_partial(path, partial) -> None:
    """Copy history `path` to `partial` through `<partial>.copy` (fsynced, then renamed): a run
    killed while copying leaves no partial file (which a resume would take for the latest
    history), only the incomplete copy, which the next resume (holding the lock) replaces."""
    partial = pathlib.Path(partial)
    tmp = partial.with_name(partial.name + ".copy")
    if tmp.exists():
        log.info("history: replacing %s, the incomplete copy of a resume that was stopped", tmp)
    shutil.copyfile(path, tmp)
    _fsync(tmp)
    os.replace(tmp, partial)


def _fsync(path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _attrs(fingerprint: dict) -> dict:
    return {"mesh_fingerprint": fingerprint["mesh"],
            "trajectory_settings": json.dumps(fingerprint["settings"], sort_keys=True)}


# -- restart --------------------------------------------------------------------------------------

def _another_mesh(ds, fingerprint: dict) -> str:
    """Why restart `ds` (open) is not of the run's mesh: the mesh settings that differ (restart vs
    config), and whether it holds the same cells in another order (`cells_fingerprint`)."""
    stored = json.loads(getattr(ds, "mesh_settings", "null") or "null")
    given = fingerprint.get("mesh_settings") or {}
    differ = [] if stored is None else \
        [k for k in {**stored, **given} if stored.get(k) != given.get(k)]
    said = ", ".join(f"{k} = {stored.get(k)!r} in the restart, {given.get(k)!r} in the config"
                     for k in differ)
    if getattr(ds, "mesh_cells_fingerprint", None) == fingerprint.get("cells"):
        return (f"written on the same cells in another order ({said or 'another cell order'}); "
                "expected the restart's cell order" +
                (f" ({', '.join(f'{k} = {stored.get(k)!r}' for k in differ)})" if differ else ""))
    if differ:
        return (f"written on another mesh ({said}); expected a restart of this mesh (the "
                "restart's mesh settings)")
    return (f"written on another mesh (fingerprint {ds.mesh_fingerprint}, this config's mesh "
            f"{fingerprint['mesh']}); expected a restart of this mesh (same mesh.generate or "
            "mesh.file)")


#: What each core of this package calls itself in its files (`core_name`, MPAS's attribute).
CORES = {"sw": "the shallow-water model", "atmosphere": "the hydrostatic core"}


def _kind_of(ds) -> str:
    """' (it is ...)': what file `ds` (open) is when it is not the restart a run expects: a
    restart of a core (its core_name and state variables), a history (a Time dimension without
    a restart's step), or nothing said."""
    attributes = set(ds.ncattrs())
    if getattr(ds, "model_name", None) == MODEL_NAME and {"step", "dt"} <= attributes:
        core = str(getattr(ds, "core_name", "sw"))
        fields = ", ".join(n for n in ds.variables if n not in ("Time", "xtime"))
        return f" (it is a restart of {CORES.get(core, core)}, core_name = {core!r}: {fields})"
    if "Time" in ds.dimensions:
        return " (it is a history file: records along Time, no restart step)"
    return ""


def write_restart(path, fields: dict, step: int, dt: float, fingerprint: dict,
                  attributes: dict | None = None, start: str = START) -> None:
    """Write the global state (rank 0) atomically: temporary file, fsync, rename. `fields`: {name:
    (array (rows[, levels]), location, variable attributes)} in the state's dtype, each stored
    as (nCells | nEdges, nVertLevels); `attributes`: `provenance`'s; `start`: the run's start
    date (`framework.dates`), of its Time's units and xtime."""
    import netCDF4

    with reporting_space(path, "restart.path", kept="the restart file there is kept as it was"), \
            atomic_path(path) as tmp, netCDF4.Dataset(tmp, "w", format="NETCDF4") as ds:
        for value, location, _ in fields.values():
            if SIZE_OF[location] not in ds.dimensions:
                ds.createDimension(SIZE_OF[location], value.shape[0])
        first = next(iter(fields.values()))[0]
        ds.createDimension("nVertLevels", 1 if first.ndim == 1 else first.shape[1])
        stamp(ds, attributes)
        ds.setncatts({"step": np.int64(step), "dt": np.float64(dt),
                      "xtime": xtime(step * dt, start), **_attrs(fingerprint)})
        if "cells" in fingerprint:          # named when a resume finds another mesh
            ds.setncatts({"mesh_cells_fingerprint": fingerprint["cells"],
                          "mesh_settings": json.dumps(fingerprint["mesh_settings"])})
        create_time(ds, start)
        set_time(ds, 0, step * dt, start)
        for name, (value, location, var_attributes) in fields.items():
            var = ds.createVariable(name, value.dtype, (SIZE_OF[location], "nVertLevels"))
            var.setncatts(var_attributes)
            var[:] = value.reshape(value.shape[0], -1)


def read_restart(path, *, locations: dict, sizes: dict, dtype, fingerprint: dict,
                 levels: int | None = None) -> tuple[dict, int]:
    """({name: global array}, step) of the state fields `locations` ({name: location}) of a
    restart file, checked against the run's mesh (`sizes`: {dimension: size}), dtype, levels and
    settings. `levels` None: a one-level state, returned as vectors; else the nVertLevels
    expected, the arrays (rows, levels)."""
    import netCDF4

    path = pathlib.Path(path)
    where = f"restart.path = {str(path)!r}"
    if not path.is_file():
        raise OutputError(f"{where}: no restart file to resume from")
    try:
        ds = netCDF4.Dataset(path)
    except OSError as exc:
        raise OutputError(f"{where}: not a readable netCDF file ({exc})") from None
    with ds:
        ds.set_auto_mask(False)
        attributes = set(ds.ncattrs())
        if getattr(ds, "model_name", None) != MODEL_NAME \
                or not set(locations) <= set(ds.variables) \
                or not {"step", "dt", "mesh_fingerprint", "trajectory_settings"} <= attributes \
                or not set(sizes) | {"nVertLevels"} <= set(ds.dimensions):
            raise OutputError(f"{where}: not a restart file of this model{_kind_of(ds)} (a "
                              f"restart of it holds {', '.join(locations)}); expected the "
                              "restart.path of the run being resumed")
        expected = {**sizes, "nVertLevels": 1 if levels is None else levels,
                    "dtype": np.dtype(dtype).name}
        found = {key: len(ds.dimensions[key]) for key in expected if key != "dtype"}
        found["dtype"] = np.dtype(ds[next(iter(locations))].dtype).name
        for key in expected:
            if found[key] != expected[key]:
                raise OutputError(f"{where}: restart {key} = {found[key]!r}, expected "
                                  f"{expected[key]!r} (the run's config)")
        if ds.mesh_fingerprint != fingerprint["mesh"]:
            raise OutputError(f"{where}: {_another_mesh(ds, fingerprint)}")
        settings = json.loads(ds.trajectory_settings)
        for key, value in fingerprint["settings"].items():
            if settings.get(key) != value:
                found = settings[key] if key in settings else "unset (its default)"
                raise OutputError(f"{where}: written with {key} = {found}, the config gives "
                                  f"{value}; expected the settings of the run being resumed")
        state = {name: ds[name][:] for name in locations}
        if levels is None:
            state = {name: value[:, 0] for name, value in state.items()}
        return state, int(ds.step)
