"""The files every model writes, on rank 0 from gathered owned rows: their claim, their marks and
their time coordinate (the history: `framework.history`; the restart: `framework.restart`; the
mesh inside them or a reference to its grid file: `framework.mesh_files`).

Every output file goes through `OutputFile`, which at construction (before any work) checks that
its directory exists and is writable, that a file
already there was written by this model (nothing else is replaced), and takes an exclusive lock
(`<path>.lock`, `fcntl.flock`) so that a second run on the same path stops with a clear error.
Files are written under a temporary name and renamed when complete (atomic).
The PNGs the models write (`framework.plot`) carry the same mark as a text chunk, model_name =
MODEL_NAME (`png_written_by_model`).

Every file of a run (history, restart, and the sensitivity and 4D-Var files of `adjoint`) carries
the global attributes of `provenance`: model_name, core_name, model_version, the resolved config
(YAML) and a `history` line "<UTC time>: <command line>" appended to the mesh file's own.
"""
from __future__ import annotations

import contextlib
import datetime
import errno
import fcntl
import os
import pathlib
import re
import shlex
import sys

import numpy as np

from framework import stop
from framework.config import directory_problem, dump, kind_problem
from framework.dates import CALENDAR, START, time_units, xtime
from framework.files import lock_path, partial_path

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
