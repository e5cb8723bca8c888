"""The history every model writes (a model's own sets what it holds: `History._contents`), its
writer thread (`AsyncWriter`) and the checks of a path a run would write over or continue
(`check_clobber`, `check_resumed_history`).

History: an MPAS mesh file plus what the model's history adds (`History._contents`: the
shallow-water model's `swm.output.History`, the hydrostatic core's `hydrostatic.output.History`),
and per output time its fields, a numeric `Time` coordinate (CF units and calendar), `xtime` and
the diagnostics' time series. Record k holds time k * interval; a final
state off that grid gets the record after the last full interval. It grows under `<path>.partial`
(renamed to `path` when the run ends); writes run on a writer thread, so stepping does not wait for
netCDF. A resumed run continues the history it resumes (same output.interval_hours and
output.variables: `check_resumed_history`), copied to the partial file atomically: records up to
the restart time are kept, and a later record there (a run killed after its last restart) is not
replaced by an earlier state (`History.write`). A record that would not fit (checked before it is
written: `History._room_problem`) or whose write fails stops the run with one line: the partial
file keeps the records complete before it, a whole netCDF file (one torn by the failed write is
rewritten as them: `truncated_copy`), no restart is written after it (`AsyncWriter.failed`), and
restart.resume continues the run from the last restart as if it had not stopped.
"""
from __future__ import annotations

import contextlib
import logging
import os
import pathlib
import queue
import shutil
import threading

import numpy as np

from framework.config import CLOBBER_MODES
from framework.constants import DAY
from framework.dates import START
from framework.files import partial_path
from framework.mesh_files import (REFERENCE_ATTRIBUTES, GridReference, create_mesh_part, find_grid,
                                  fingerprint_attributes)
from framework.output import (OutputError, OutputFile, SpaceError, create_time, reporting_space,
                              set_time, space_problem, stamp)
from grids.netcdf_files import close_dataset, dataset

log = logging.getLogger("framework")


# -- history --------------------------------------------------------------------------------------

class AsyncWriter:
    """One writer thread running submitted jobs in order; at most `depth` jobs waiting. An error
    in a job is raised by the next `submit` or by `close`. Every netCDF access of a running model
    goes through it (the netCDF and HDF5 libraries are not thread-safe)."""

    def __init__(self, depth: int = 2):
        self._jobs: queue.Queue = queue.Queue(maxsize=depth)
        self._error: BaseException | None = None
        self.failed = False         # a job raised: later restarts are not written (`RestartOutput`)
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
                self.failed = True

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
        self.records = 0            # records the partial file holds whole
        self.restart = None         # the run's restart file (the driver sets it), named on failure
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
        """While the history is made or continued (before any record): a write that runs out of
        room (`reporting_space`) closes the partial file and removes it where this run made it (a
        new history, or a copy of the final file): the final file is kept as it was."""
        try:
            with reporting_space(self.partial, self.target.key, self.path,
                                 f"the partial file is removed, {self.path.name} left as it "
                                 "was"):
                yield
        except SpaceError:
            if self.ds is not None:
                try:
                    close_dataset(self.ds)
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
        ds.setncatts({"core_name": self.core_name, **fingerprint_attributes(fingerprint)})
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
        self.records = self.kept_times.size
        expected = fingerprint_attributes(fingerprint)
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
                problem = self._room_problem(ds)
                if problem is not None:    # refused before the file is touched
                    raise self._stop_keeping(record, seconds, problem, torn=False)
                try:
                    set_time(ds, record, seconds, self.start_date)
                    for name in self.variables:
                        value = fields[name]
                        ds[name][record] = value.reshape(ds[name].shape[1:])
                    for name, value in diagnostics.items():
                        if name in ds.variables:
                            ds[name][record] = value
                    ds.sync()
                    _fsync(self.partial)   # here, in the background, not all at the end
                except (OSError, RuntimeError) as exc:
                    raise self._stop_keeping(record, seconds, _write_problem(exc, self.partial),
                                             torn=True) from None
                self.records = max(self.records, record + 1)
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
            try:
                close_dataset(self.ds)
                self.ds = None
                if finished:
                    _fsync(self.partial)
                    os.replace(self.partial, self.path)
            except (OSError, RuntimeError) as exc:
                raise self._stop_keeping(None, None, _write_problem(exc, self.partial),
                                         torn=True) from None
        self.writer.submit(job)

    def _discard(self) -> None:
        if self.ds is not None and self.ds.isopen():
            close_dataset(self.ds)
        if self.made:
            self.partial.unlink(missing_ok=True)

    # -- a write that fails mid-run: the records written so far are kept ---------------------------

    def _room_problem(self, ds) -> str | None:
        """"no space left on device (...)" when the next record (`record_bytes` and RECORD_SLACK
        of netCDF-4 bookkeeping) would not fit: the folder's free space (`os.statvfs`) or the file
        size limit (RLIMIT_FSIZE, ulimit -f); None when it fits. Checked before a record is
        written, so that a full disk leaves the file as of its last complete record."""
        import resource

        need = record_bytes(ds) + RECORD_SLACK
        size = os.path.getsize(self.partial)
        limit = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
        if limit != resource.RLIM_INFINITY and size + need > limit:
            return (f"no space left on device for it (the file size limit, ulimit -f, is {limit} "
                    f"bytes; the file holds {size}, a record needs about {need})")
        stats = os.statvfs(self.partial.parent)
        free = stats.f_bavail * stats.f_frsize
        if free < need:
            return (f"no space left on device ({free} bytes free in {self.partial.parent}, a "
                    f"record needs about {need})")
        return None

    def _stop_keeping(self, record, seconds, problem: str, torn: bool) -> SpaceError:
        """The error of a write of record `record` (at `seconds`; None: the closing) that failed
        with `problem`, after the partial file is closed and left holding the records complete
        before it (`_keep`): it names the file and what was kept."""
        if self.ds is not None:
            try:
                close_dataset(self.ds)
            except (OSError, RuntimeError):
                pass                          # a torn file: `_keep` rewrites it
            self.ds = None
        kept = self._keep(self.records, torn)
        what = f"closing {self.partial}" if record is None else \
            f"writing record {record} (day {seconds / DAY:.4f}) to {self.partial}"
        if kept.size:
            days = f"day {kept[0] / DAY:.4f} to day {kept[-1] / DAY:.4f}"
            text = (f"{self.partial} keeps its {len(kept)} complete records ({days}), "
                    f"{self._restart_kept()}")
        else:
            text = (f"no record was complete, {self.partial.name} is removed, {self.path.name} "
                    "left as it was; expected room for the file (free some space or choose "
                    "another folder)")
        return SpaceError(f"{self.target.key} = {str(self.path)!r}: {what} failed: {problem}; "
                          f"{text}")

    def _restart_kept(self) -> str:
        """What a run stopped by a failed history write resumes from: its restart file (`restart`)
        and the restart's day, or that there is none to resume from."""
        import netCDF4

        resume = "expected room for the file: free some space and resume with restart.resume: true"
        if self.restart is None:
            return f"the last restart file is kept; {resume}"
        if not pathlib.Path(self.restart).is_file():
            return ("no restart file was written; expected room for the file: free some space "
                    "and run it again")
        try:
            with netCDF4.Dataset(self.restart) as ds:
                day = f" (day {float(ds['Time'][0]):.4f})"
        except (OSError, RuntimeError, IndexError, KeyError):
            day = ""
        return f"the last restart file {self.restart}{day} is kept; {resume}"

    def _keep(self, n: int, torn: bool) -> np.ndarray:
        """The times of the records the partial file keeps: its first `n`, whole. A file whose
        write failed midway (`torn`) or that does not read back as exactly `n` records is
        rewritten as its first `n` (`truncated_copy`, atomically); one that cannot be (or `n` 0)
        is removed, unless it is a previous run's left as it was."""
        times = None if torn else _record_times(self.partial, n)
        if times is None and n:
            try:
                truncated_copy(self.partial, n)
                times = _record_times(self.partial, n)
            except (OSError, RuntimeError, KeyError):
                times = None
        if times is None or not n:
            if self.made or torn:
                self.partial.unlink(missing_ok=True)
            return np.array([])
        return times


#: Bytes of netCDF-4 bookkeeping (chunk indexes, the 1-D series' first chunks) a record may add.
RECORD_SLACK = 256 * 2**10


def record_bytes(ds) -> int:
    """Bytes of one record of netCDF4 Dataset `ds`: its variables along Time, one row each."""
    return sum(int(np.prod(v.shape[1:], dtype=np.int64)) * v.dtype.itemsize
               for v in ds.variables.values() if v.dimensions[:1] == ("Time",))


def _write_problem(exc: BaseException, path) -> str:
    """What a failed write of `path` ran into: `space_problem`'s words, else the error's."""
    return space_problem(exc, path) or f"{type(exc).__name__}: {exc}"


def _record_times(path, n: int):
    """The times (s) of history `path`'s records when it reads back whole with exactly `n`
    records along Time (every variable along Time read); None otherwise."""
    import netCDF4

    try:
        with netCDF4.Dataset(path) as ds:
            ds.set_auto_mask(False)
            if len(ds.dimensions["Time"]) != n:
                return None
            for var in ds.variables.values():
                if var.dimensions[:1] == ("Time",):
                    var[:]
            return np.asarray(ds["Time"][:], dtype=np.float64) * 86400.0
    except (OSError, RuntimeError, KeyError, IndexError):
        return None


def truncated_copy(path, n: int) -> None:
    """Rewrite netCDF file `path` as its first `n` records along Time (every other variable,
    attribute and dimension as it is): through `<path>.copy`, fsynced, then renamed over it."""
    import netCDF4

    tmp = pathlib.Path(f"{path}.copy")
    src = netCDF4.Dataset(path)
    try:
        src.set_auto_mask(False)
        with dataset(tmp, "w", format="NETCDF4") as dst:
            dst.setncatts({k: src.getncattr(k) for k in src.ncattrs()})
            for name, dim in src.dimensions.items():
                dst.createDimension(name, None if dim.isunlimited() else len(dim))
            for name, var in src.variables.items():
                attributes = {k: var.getncattr(k) for k in var.ncattrs()}
                out = dst.createVariable(name, var.dtype, var.dimensions,
                                         fill_value=attributes.pop("_FillValue", None))
                out.setncatts(attributes)
                out[:] = var[:n] if var.dimensions[:1] == ("Time",) else var[:]
        _fsync(tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
        try:
            close_dataset(src)
        except (OSError, RuntimeError):
            pass                        # a torn file's metadata cannot be flushed: replaced


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
