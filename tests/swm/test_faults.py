"""Faults users hit with run_model.py, each made for real in a subprocess: extending a finished run,
resuming past the end, two runs on one output path, record times, restarts of another mesh or
setting, impossible time steps, SIGTERM/SIGINT and resuming, bad inputs, the watchdog.

Every error must be one `run_model.py: ...` line (a config with several problems lists them on
indented lines below it), with the documented exit status and no traceback; files a refused run
touches must be left byte for byte; a resumed run must equal the uninterrupted one bitwise.
Multi-rank cases run under `mpiexec -n 2` (marker mpi)."""
import hashlib
import os
import pathlib
import re
import resource
import signal
import subprocess
import sys
import threading
import time

import netCDF4
import numpy as np
import pytest
import yaml

from tests.swm.test_driver import write_config

ROOT = __import__("pathlib").Path(__file__).resolve().parents[2]
RUN_MODEL = ROOT / "run_model.py"
TIMEOUT_S = 300
RANKS = [1, pytest.param(2, marks=pytest.mark.mpi)]

#: A run long enough to be stopped while it steps (level 3, 30 days of 1800 s: about 2 s).
LONG = {"mesh": {"generate": {"level": 3}}, "time": {"days": 30, "dt": 1800}}


# -- helpers --------------------------------------------------------------------------------------

def make_config(tmp_path, name, **sections):
    """A level-2 Williamson-5 config `name`.yaml in tmp_path, one day at dt 3600, daily output to
    `name`.nc, restarts to `name`.restart.nc; each section given is merged into the default."""
    return write_config(tmp_path, name, {"mesh": {"generate": {"level": 2}},
                                         "case": {"name": "williamson5"},
                                         "time": {"days": 1, "dt": 3600},
                                         "output": {"interval_hours": 24}}, **sections)


def env(cache_dir, ranks=1):
    out = {**os.environ, "PYTHONPATH": str(ROOT), "MESHOPS_CACHE_DIR": str(cache_dir),
           "PYTHONUNBUFFERED": "1"}
    out.pop("MESHOPS_NO_MPI", None)
    if ranks == 1:
        out["MESHOPS_NO_MPI"] = "1"
    return out


def command(path, *extra, ranks=1):
    launcher = []
    if ranks > 1:
        from tests.test_mpi_ranks import _mpiexec

        launcher = [_mpiexec(), "-n", str(ranks)]
    return launcher + [sys.executable, str(RUN_MODEL), str(path), "--no-progress", *extra]


def run_model(path, *extra, ranks=1, cache=None):
    """run_model.py on `path` (its directory's cache/ holds the meshes unless `cache` is given)."""
    cache = cache if cache is not None else path.parent / "cache"
    return subprocess.run(command(path, *extra, ranks=ranks), env=env(cache, ranks),
                          capture_output=True, text=True, timeout=TIMEOUT_S)


def run_on_a_full_disk(path, *extra, cache, limit):
    """run_model.py on `path` on one process whose files may not grow past `limit` bytes: a write
    past it fails with EFBIG, as on a full disk. (One process: MPICH's shared memory cannot start
    under a file size limit.)"""
    def limited():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))
    return subprocess.run(command(path, *extra), env=env(cache), capture_output=True, text=True,
                          timeout=TIMEOUT_S, preexec_fn=limited)


def limit_keeping(history_path, kept: int) -> int:
    """A file size limit (`run_on_a_full_disk`) under which the run that wrote the finished history
    `history_path` runs out of room after about `kept` of its records: the file's size less its
    later records, plus the room a record is checked for (`framework.history.RECORD_SLACK`) and
    half a record."""
    from framework.history import RECORD_SLACK, record_bytes

    with netCDF4.Dataset(history_path) as ds:
        n, record = len(ds.dimensions["Time"]), record_bytes(ds)
    size = os.path.getsize(history_path)
    return size - (n - kept) * record + RECORD_SLACK + record // 2


def assert_full_disk_line(out, history) -> None:
    """The one error line of a run that could not write its history `history` (output.path) names
    the key, the file and its partial file, the full disk and the previous history kept."""
    line = error_of(out.stderr)
    for word in (f"output.path = '{history}'", f"{history}.partial", "no space left on device",
                 "left as it was"):
        assert word in line, (word, line)
    assert "HDF error" not in out.stderr


def ok(out):
    assert out.returncode == 0, out.stderr
    assert "Traceback" not in out.stderr, out.stderr
    return out


def error_of(stderr: str) -> str:
    """The one `run_model.py:` line of stderr (with the indented lines that list a config's
    problems below it); fails unless there is exactly one such line and no traceback."""
    assert "Traceback" not in stderr, stderr
    lines = stderr.splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith("run_model.py:")]
    assert len(starts) == 1, stderr
    block = [lines[starts[0]]]
    for line in lines[starts[0] + 1:]:
        if not line.startswith("  "):
            break
        block.append(line)
    return "\n".join(block)


def refused(out, status, *words) -> str:
    assert out.returncode == status, out.stderr
    text = error_of(out.stderr)
    for word in words:
        assert word in text, (word, text)
    return text


def wait_stopped(pid: int, timeout: float = 10.0) -> None:
    """Until every thread of process `pid` is stopped (state T in /proc/PID/task/*/stat): a
    system call in flight when SIGSTOP arrived has then returned."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        states = [pathlib.Path(t, "stat").read_text().rsplit(")", 1)[1].split()[0]
                  for t in pathlib.Path(f"/proc/{pid}/task").iterdir()]
        if all(state in "tT" for state in states):
            return
        time.sleep(0.01)
    raise AssertionError(f"process {pid} did not stop within {timeout} s")


def snapshot(*paths) -> dict:
    """{path: (sha256, mtime_ns)} of files that exist."""
    return {p: (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns)
            for p in paths if p.exists()}


class Records(dict):
    """{name: array} of every variable of a history; `timed`: the names along Time."""
    timed = frozenset()


def history(path, timed=("h", "u", "mass")) -> Records:
    """{name: array} of every variable of a history or restart file; fails unless Time, xtime
    and `timed` (the shallow-water history's fields) lie along Time."""
    with netCDF4.Dataset(path) as ds:
        ds.set_auto_mask(False)
        out = Records((name, ds[name][:]) for name in ds.variables)
        out.timed = frozenset(n for n in ds.variables if ds[n].dimensions[:1] == ("Time",))
    assert {"Time", "xtime", *timed} <= out.timed
    return out


def assert_same(a: Records, b: Records, records=None):
    """Every variable equal bitwise (only the first `records` records of those along Time)."""
    assert set(a) == set(b) and a.timed == b.timed
    for name in a:
        x, y = a[name], b[name]
        if records is not None and name in a.timed:
            x, y = x[:records], y[:records]
        assert x.shape == y.shape and np.array_equal(x, y), name


def leftovers(tmp_path, name):
    """Lock and partial files of run `name` that are still there."""
    return [p.name for p in (tmp_path / f"{name}.nc.lock", tmp_path / f"{name}.restart.nc.lock",
                             tmp_path / f"{name}.nc.partial") if p.exists()]


class Background:
    """run_model.py started with Popen; its stderr read by a thread (so the pipe never fills)."""

    def __init__(self, path, *extra, ranks=1, cache=None):
        cache = cache if cache is not None else path.parent / "cache"
        self.proc = subprocess.Popen(command(path, *extra, ranks=ranks), env=env(cache, ranks),
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.lines = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.proc.stderr:
            self.lines.append(line)

    def text(self) -> str:
        return "".join(self.lines)

    def wait_for(self, condition, what: str, timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            if self.proc.poll() is not None:
                self.reader.join(10)
                pytest.fail(f"the run ended (rc {self.proc.returncode}) before {what}:\n{self.text()}")
            if time.monotonic() > deadline:
                self.proc.kill()
                pytest.fail(f"no {what} within {timeout} s:\n{self.text()}")
            time.sleep(0.005)

    def finish(self, timeout: float = TIMEOUT_S) -> tuple[int, str]:
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise
        self.reader.join(10)
        return rc, self.text()


@pytest.fixture(scope="module")
def long_reference(tmp_path_factory):
    """The history of an uninterrupted LONG run on 1 or 2 ranks (made once per rank count)."""
    made = {}

    def reference(ranks: int) -> dict:
        if ranks not in made:
            folder = tmp_path_factory.mktemp(f"reference{ranks}")
            path = make_config(folder, "whole", **LONG)
            ok(run_model(path, ranks=ranks))
            made[ranks] = history(folder / "whole.nc")
        return made[ranks]
    return reference


# -- 1. extending a finished run -------------------------------------------------------------------

@pytest.mark.parametrize("ranks, first_days, days", [
    (1, 1, 2), pytest.param(2, 1, 2, marks=pytest.mark.mpi),
    (1, 1.5, 3)])       # the first run ends off the daily grid: its last record becomes day 2's
def test_extending_a_finished_run_appends_to_its_history_bitwise(tmp_path, ranks, first_days, days):
    restart = {"interval_hours": 24}
    whole = make_config(tmp_path, "whole", time={"days": days}, restart=restart)
    ok(run_model(whole, ranks=ranks))
    part = make_config(tmp_path, "part", time={"days": first_days}, restart=restart)
    ok(run_model(part, ranks=ranks))
    first = history(tmp_path / "part.nc")
    on_grid = int(np.floor(first_days)) + 1               # the records at whole days
    assert first["h"].shape[0] == int(np.ceil(first_days)) + 1

    ok(run_model(part, "--set", "restart.resume=true", "--set", f"time.days={days}", ranks=ranks))
    extended = history(tmp_path / "part.nc")
    assert_same(first, extended, records=on_grid)            # every earlier record kept
    assert_same(history(tmp_path / "whole.nc"), extended)    # = one uninterrupted run, bitwise
    np.testing.assert_array_equal(extended["Time"], np.arange(days + 1.0))
    with netCDF4.Dataset(tmp_path / "part.restart.nc") as ds:
        assert int(ds.step) == days * 24
    assert leftovers(tmp_path, "part") == []


# -- 2. resuming at or past the end ----------------------------------------------------------------

@pytest.mark.parametrize("days", [2, 1])
def test_resuming_at_or_past_the_end_is_refused_and_changes_nothing(tmp_path, days):
    path = make_config(tmp_path, "done", time={"days": 2}, restart={"interval_hours": 24})
    ok(run_model(path))
    files = (tmp_path / "done.nc", tmp_path / "done.restart.nc")
    before = snapshot(*files)
    assert len(before) == 2
    out = run_model(path, "--set", "restart.resume=true", "--set", f"time.days={days}")
    refused(out, 2, "restart.resume", "time.days", "at or past the run's end")
    assert snapshot(*files) == before
    assert leftovers(tmp_path, "done") == []


# -- 3. two runs on one output path; outputs that are inputs ----------------------------------------

def test_a_second_run_on_the_same_output_path_is_refused(tmp_path, long_reference):
    path = make_config(tmp_path, "busy", **LONG)
    lock, partial = tmp_path / "busy.nc.lock", tmp_path / "busy.nc.partial"
    first = Background(path)
    first.wait_for(lambda: lock.exists() and "day 1.000:" in first.text(), "the first run's records")
    # Stop the first run while it holds the lock, so the second surely starts during it.
    first.proc.send_signal(signal.SIGSTOP)
    try:
        wait_stopped(first.proc.pid)          # a write in flight (the writer thread's) lands first
        held = snapshot(partial, lock)
        second = run_model(path)
        line = refused(second, 2, "output.path", "another run", f"pid {first.proc.pid}")
        assert str(tmp_path / "busy.nc") in line
        assert snapshot(partial, lock) == held             # the first run's files untouched
    finally:
        first.proc.send_signal(signal.SIGCONT)
    rc, err = first.finish()
    assert rc == 0 and "Traceback" not in err, err
    assert_same(long_reference(1), history(tmp_path / "busy.nc"))
    assert leftovers(tmp_path, "busy") == []


@pytest.mark.parametrize("key, target, words", [
    ("output.path", "config", ["output.path", "the config file itself"]),
    ("restart.path", "config", ["restart.path", "the config file itself"]),
    ("restart.path", "output", ["restart.path", "same file as output.path"]),
])
def test_an_output_that_is_an_input_or_the_other_output_is_refused(tmp_path, key, target, words):
    path = tmp_path / "run.yaml"
    make_config(tmp_path, "run")
    tree = yaml.safe_load(path.read_text())
    section, name = key.split(".")
    tree[section][name] = str(path) if target == "config" else tree["output"]["path"]
    path.write_text(yaml.safe_dump(tree))
    before = snapshot(path)
    refused(run_model(path), 2, *words)
    assert snapshot(path) == before
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "cache") == ["run.yaml"]


# -- 4. records land where their time says ---------------------------------------------------------

@pytest.mark.parametrize("days, expected", [(1.5, [(1, 0), (2, 0), (2, 12)]), (0.25, [(1, 0), (1, 6)])])
def test_records_land_where_their_time_says(tmp_path, days, expected):
    import cftime
    import xarray as xr

    path = make_config(tmp_path, "rec", time={"days": days})
    ok(run_model(path))
    with xr.open_dataset(tmp_path / "rec.nc") as ds:
        times = list(ds["Time"].values)
        assert times == [cftime.DatetimeNoLeap(0, 1, day, hour) for day, hour in expected]
        xtimes = [stamp.decode().strip() for stamp in ds["xtime"].values]
        assert xtimes == [f"0000-01-{day:02d}_{hour:02d}:00:00" for day, hour in expected]
        assert ds["h"].shape[0] == len(expected) and np.isfinite(ds["h"].values).all()


# -- 5. a restart of another mesh or other settings ------------------------------------------------

@pytest.mark.parametrize("override, words", [
    ("mesh.generate.lloyd=2", ["another mesh"]),
    ("mesh.generate.order=hilbert", ["mesh.generate.order", "another order"]),
    ("time.dt=1800", ["time.dt = 3600.0", "1800.0"]),
    ("case.name=williamson2", ["case", "williamson2"]),
])
def test_a_restart_of_another_mesh_or_setting_is_refused(tmp_path, override, words):
    path = make_config(tmp_path, "base", restart={"interval_hours": 24})
    ok(run_model(path))
    files = (tmp_path / "base.nc", tmp_path / "base.restart.nc")
    before = snapshot(*files)
    out = run_model(path, "--set", "restart.resume=true", "--set", "time.days=2", "--set", override)
    refused(out, 2, "restart.path", *words)
    assert snapshot(*files) == before
    assert leftovers(tmp_path, "base") == []


# -- 6. sensitivity runs do not resume -------------------------------------------------------------

def test_a_sensitivity_config_with_resume_is_refused(tmp_path):
    path = make_config(tmp_path, "sens", restart={"resume": True},
                       sensitivity={"cost": {"kind": "mean"}, "output": str(tmp_path / "grad.nc"),
                                    "plot": False})
    refused(run_model(path), 2, "restart.resume", "sensitivity")
    assert not (tmp_path / "grad.nc").exists() and not (tmp_path / "cache").exists()


# -- 7. runs that cannot be stepped ----------------------------------------------------------------

@pytest.mark.parametrize("sections, words", [
    ({"mesh": {"radius": 1.0}, "time": {"dt": None, "cfl": 1.0}}, ["time.cfl", "mesh.radius", "dt"]),
    ({"time": {"max_steps": 10}}, ["time.max_steps = 10", "24 steps"]),
])
def test_a_run_that_cannot_be_stepped_is_refused_before_work(tmp_path, sections, words):
    path = make_config(tmp_path, "steps", **sections)
    out = run_model(path)
    refused(out, 2, *words)
    assert "ready to step" not in out.stderr
    assert not any((tmp_path / name).exists()
                   for name in ("steps.nc", "steps.nc.partial", "steps.restart.nc"))
    assert leftovers(tmp_path, "steps") == []


# -- 8. SIGTERM / SIGINT and resuming -------------------------------------------------------------

@pytest.mark.parametrize("ranks, signum", [
    (1, signal.SIGTERM), (1, signal.SIGINT),
    # MPICH's hydra mpiexec forwards SIGTERM to the ranks, so the signal goes to mpiexec.
    pytest.param(2, signal.SIGTERM, marks=pytest.mark.mpi)])
def test_a_signal_stops_the_run_with_a_restart_that_resumes_bitwise(tmp_path, long_reference,
                                                                    ranks, signum):
    path = make_config(tmp_path, "cut", **LONG)
    partial, restart = tmp_path / "cut.nc.partial", tmp_path / "cut.restart.nc"
    run = Background(path, ranks=ranks)
    run.wait_for(lambda: partial.exists() and "day 2.000:" in run.text(), "two daily records")
    run.proc.send_signal(signum)
    rc, err = run.finish()
    assert rc == 128 + signum, err
    line = refused(subprocess.CompletedProcess([], rc, "", err), 128 + signum,
                   f"stopped by {signal.Signals(signum).name}", "restart.resume")
    step = int(re.search(r"at step (\d+)", line)[1])
    assert 96 <= step < 1440, line
    with netCDF4.Dataset(restart) as ds:
        assert int(ds.step) == step
    assert not (tmp_path / "cut.nc").exists() and partial.exists()
    assert leftovers(tmp_path, "cut") == ["cut.nc.partial"]

    ok(run_model(path, "--set", "restart.resume=true", ranks=ranks))
    assert_same(long_reference(ranks), history(tmp_path / "cut.nc"))
    assert leftovers(tmp_path, "cut") == []


# -- 9. bad inputs: one line, no traceback ---------------------------------------------------------

def _missing_directory(tmp_path):
    return make_config(tmp_path, "x", output={"path": str(tmp_path / "nodir" / "x.nc")}), ()


def _infinite_dt(tmp_path):
    return make_config(tmp_path, "x", time={"dt": float("inf")}), ()


def _duplicate_key(tmp_path):
    path = tmp_path / "x.yaml"
    path.write_text("mesh: {generate: {level: 2}}\ncase: {name: williamson5}\ntime:\n"
                    "  days: 1\n  dt: 3600\n  dt: 1800\n"
                    f"output: {{path: {tmp_path / 'x.nc'}}}\n"
                    f"restart: {{path: {tmp_path / 'x.restart.nc'}}}\n")
    return path, ()


def _boolean_level(tmp_path):
    return make_config(tmp_path, "x", mesh={"generate": {"level": True}}), ()


def _mesh_not_netcdf(tmp_path):
    bad = tmp_path / "bad.nc"
    bad.write_bytes(b"this is not a netCDF file\n" + bytes(range(256)) * 8)
    return make_config(tmp_path, "x", mesh={"generate": None, "file": str(bad)}), ()


def _restart_not_ours(tmp_path):
    (tmp_path / "x.restart.nc").write_bytes(b"\x89HDF\r\n\x1a\n garbage" * 50)
    return make_config(tmp_path, "x", time={"days": 2}), ("--set", "restart.resume=true")


def _restart_is_a_history(tmp_path):
    other = make_config(tmp_path, "other")
    ok(run_model(other))
    return (make_config(tmp_path, "x", time={"days": 2}, restart={"path": str(tmp_path / "other.nc")}),
            ("--set", "restart.resume=true"))


def _no_restart(tmp_path):
    return make_config(tmp_path, "x", time={"days": 2}), ("--set", "restart.resume=true")


@pytest.mark.parametrize("make, words, before_mesh", [
    (_missing_directory, ["output.path", "nodir", "does not exist"], True),
    (_infinite_dt, ["time.dt = inf", "finite"], True),
    (_duplicate_key, ["line 6", "duplicate key time.dt", "first at line 5"], True),
    (_boolean_level, ["mesh.generate.level", "boolean"], True),
    (_mesh_not_netcdf, ["bad.nc", "netCDF"], True),
    (_restart_not_ours, ["restart.path", "x.restart.nc", "did not write"], False),
    (_restart_is_a_history, ["restart.path", "other.nc", "not a restart file"], False),
    (_no_restart, ["restart.path", "no restart file"], False),
], ids=lambda v: v.__name__.strip("_") if callable(v) else None)
def test_a_bad_input_is_one_line_and_exit_2(tmp_path, make, words, before_mesh):
    path, extra = make(tmp_path)
    kept = snapshot(*(p for p in tmp_path.iterdir() if p.is_file()))
    out = run_model(path, *extra)
    line = refused(out, 2, *words)
    assert "--debug" not in line and "ready to step" not in out.stderr
    cache = tmp_path / "cache"
    if before_mesh:                      # refused before any work: not even a mesh was cached
        assert not cache.exists() or not any(cache.iterdir())
    assert snapshot(*(p for p in tmp_path.iterdir() if p.is_file())) == kept   # nothing written
    assert leftovers(tmp_path, "x") == []


@pytest.mark.skipif(__import__("importlib").util.find_spec("cupy") is not None,
                    reason="CuPy is installed here: backend cupy is not a bad input")
def test_backend_cupy_without_cupy_is_one_line_before_work(tmp_path):
    path = make_config(tmp_path, "x", backend="cupy")
    out = run_model(path)
    refused(out, 2, "backend = cupy", "CuPy cannot be imported", "backend: numpy")
    assert not (tmp_path / "cache").exists() and leftovers(tmp_path, "x") == []


@pytest.mark.mpi
def test_a_bad_partition_file_under_mpiexec_is_one_line(tmp_path):
    part = tmp_path / "graph.info.part.2"
    part.write_text("0\n1\nnot a rank\n")
    path = make_config(tmp_path, "x", partition={"method": "file", "file": str(part)})
    out = run_model(path, ranks=2)
    assert out.returncode != 0, out.stderr
    line = error_of(out.stderr)
    assert str(part) in line, line
    assert not (tmp_path / "x.nc").exists() and not (tmp_path / "x.nc.partial").exists()


# -- 10. the watchdog ------------------------------------------------------------------------------

@pytest.mark.parametrize("dt, cfl_limit, words", [
    (10800, 5.0, ["Courant number", "above the limit 5.0", "watchdog.cfl_limit"]),
    (21600, 1e6, ["not finite"]),       # a limit no finite state reaches: the not-finite path
])
def test_the_watchdog_stops_an_unstable_run_and_keeps_the_last_good_state(tmp_path, dt, cfl_limit,
                                                                          words):
    watchdog = {"interval_steps": 5, **({} if cfl_limit is None else {"cfl_limit": cfl_limit})}
    path = make_config(tmp_path, "wd", time={"days": 30, "dt": dt}, watchdog=watchdog,
                       output={"interval_hours": 720})
    line = refused(run_model(path), 3, "stopped: step", "lat", "lon", *words)
    step = int(re.search(r"stopped: step (\d+):", line)[1])
    kept = int(re.search(r"the last checked state \(step (\d+),", line)[1])
    assert step % 5 == 0 and kept == step - 5, line
    f = history(tmp_path / "wd.nc")
    assert np.isfinite(f["h"][-1]).all() and np.isfinite(f["u"][-1]).all()
    assert f["Time"][-1] * 86400 == kept * dt
    with netCDF4.Dataset(tmp_path / "wd.restart.nc") as ds:
        assert int(ds.step) == kept
    assert leftovers(tmp_path, "wd") == []
