"""Nothing a user had is lost through the files run_model.py writes beside its outputs: every file
of a run (`swm.files.written_files`: partial files, locks, grid files, PNGs) is claimed before any
work, a PNG this model did not write is never replaced, a path that is not a regular file is
refused, a full disk is one line that keeps the previous file, and `python -m swm.plot` names a
file it cannot draw. Every fault is made for real in a subprocess; every refusal is one line that
names the keys and files, before any work, with every file there left byte for byte."""
import os
import pathlib
import re
import subprocess
import sys

import netCDF4
import numpy as np
import pytest

from tests.swm.test_faults import (RANKS, ROOT, assert_full_disk_line, assert_same, env, error_of,
                                   history, limit_keeping, make_config, ok, refused, run_model,
                                   run_on_a_full_disk, snapshot)

PNG = b"\x89PNG\r\n\x1a\n"


def files_in(folder) -> set:
    return {p.name for p in folder.iterdir() if p.name != "cache"}


def user_png(path, rng) -> None:
    """A PNG of the user's (random pixels, written by matplotlib without this model's mark)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.imsave(path, rng.random((8, 8)))
    assert path.read_bytes()[:8] == PNG


def refused_before_work(out, tmp_path, before: dict, *words) -> str:
    """The run ended with status 2 and one line holding `words`; the files of `before` are
    byte for byte as they were, no other file was made, and no mesh was built."""
    assert out.returncode == 2, out.stderr
    line = error_of(out.stderr)
    for word in words:
        assert str(word) in line, (word, line)
    assert snapshot(*before) == before
    assert files_in(tmp_path) == {p.name for p in before} | {p.name for p in tmp_path.glob("*.yaml")}
    assert "mesh and initial state" not in out.stderr
    return line


# -- 1. a file of one output that is a file beside another -----------------------------------------

def _partial(tmp_path):
    return {"restart": {"path": str(tmp_path / "h.nc.partial"), "interval_hours": 12}}, \
        tmp_path / "h.nc.partial", ["the partial file", "restart.path", "output.path"]


def _lock(tmp_path):
    return {"output": {"path": str(tmp_path / "r.nc.lock")},
            "restart": {"path": str(tmp_path / "r.nc"), "interval_hours": 12}}, \
        tmp_path / "r.nc.lock", ["the lock file", "restart.path", "output.path"]


def _grid(tmp_path):
    return {"output": {"path": str(tmp_path / "h.nc"), "mesh": "reference"},
            "restart": {"path": str(tmp_path / "h.grid.nc"), "interval_hours": 12}}, \
        tmp_path / "h.grid.nc", ["the grid file", "restart.path", "output.path"]


def _fourdvar_plot(tmp_path):
    return {"fourdvar": {"output": str(tmp_path / "f.png"), "iterations": 2}}, \
        tmp_path / "f.png", ["the PNG plot", "fourdvar.output"]


def _plot_map(tmp_path):
    return {"restart": {"path": str(tmp_path / "h.vorticity.png")}}, \
        tmp_path / "h.vorticity.png", ["the --plot map", "restart.path", "output.path"]


@pytest.mark.parametrize("make", [
    _partial, _lock, _grid, _fourdvar_plot, _plot_map])
def test_a_file_of_one_output_that_is_a_file_beside_another_is_refused(tmp_path, make, rng):
    sections, victim, words = make(tmp_path)
    victim.write_bytes(rng.bytes(int(rng.integers(100, 1000))))     # what a user had there
    path = make_config(tmp_path, "h", **sections)
    before = snapshot(path, victim)
    line = refused_before_work(run_model(path, "--plot"), tmp_path, before, victim,
                               *words, "one would overwrite the other")
    assert line.count(str(victim)) >= 2, line                  # as the one file and the other


def test_the_files_of_a_run_are_all_listed(tmp_path):
    """written_files lists what the run then writes: a forward run with restarts, a grid file
    beside the history (a mesh file whose geometry is recomputed) and --plot writes no file
    that the list misses."""
    from swm.config import load_config
    from swm.files import written_files

    mesh = {"generate": None, "file": str(ROOT / "tests/data/x1.162.grid.nc"),
            "recompute_geometry": True}
    path = make_config(tmp_path, "all", mesh=mesh, case={"name": "williamson2", "alpha": 0.4},
                       output={"mesh": "reference", "variables": ["h", "u", "vorticity"]},
                       restart={"interval_hours": 12})
    listed = {w.path for w in written_files(load_config(path))}
    ok(run_model(path, "--plot"))
    made = {tmp_path / name for name in files_in(tmp_path)} - {path}
    assert made and made <= listed, made - listed
    assert {tmp_path / f"all.{n}.png" for n in ("h", "vorticity", "h_error")} | \
        {tmp_path / "all.grid.nc"} <= made


# -- 2. PNGs the model did not write ---------------------------------------------------------------

def test_plot_never_replaces_a_png_the_model_did_not_write(tmp_path, rng):
    from framework.output import png_written_by_model

    path = make_config(tmp_path, "p")
    theirs = tmp_path / "p.vorticity.png"
    user_png(theirs, rng)
    before = snapshot(path, theirs)
    refused_before_work(run_model(path, "--plot"), tmp_path, before, "--plot", theirs,
                        "output.path", "this model did not write")
    theirs.unlink()
    for _ in range(2):                      # a rerun replaces the PNGs the model wrote
        out = ok(run_model(path, "--plot", "--set", "output.clobber=overwrite"))
        assert f"wrote {theirs}" in out.stdout
        assert png_written_by_model(theirs) and png_written_by_model(tmp_path / "p.h.png")
    user_png(theirs, rng)
    before = snapshot(*(tmp_path / n for n in files_in(tmp_path)))
    out = subprocess.run([sys.executable, "-m", "swm.plot", str(tmp_path / "p.nc")],
                         env=env(tmp_path / "cache"), capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert str(theirs) in out.stderr and "this model did not write" in out.stderr, out.stderr
    assert snapshot(*before) == before                       # h.png not written either


# -- 3. paths that are not regular files -----------------------------------------------------------

def _fifo(tmp_path):
    os.mkfifo(tmp_path / "h.nc")
    return {}, tmp_path / "h.nc", ["output.path", "is a FIFO"]


def _fifo_partial(tmp_path):
    os.mkfifo(tmp_path / "h.nc.partial")
    return {}, tmp_path / "h.nc.partial", ["output.path", "the partial file", "is a FIFO"]


def _fifo_lock(tmp_path):
    os.mkfifo(tmp_path / "h.restart.nc.lock")
    return {}, tmp_path / "h.restart.nc.lock", ["restart.path", "the lock file", "is a FIFO"]


def _directory(tmp_path):
    (tmp_path / "h.restart.nc").mkdir()
    return {}, tmp_path / "h.restart.nc", ["restart.path", "is a directory"]


def _device(tmp_path):
    return {"output": {"path": "/dev/null"}}, pathlib.Path("/dev/null"), ["output.path", "is a device"]


@pytest.mark.parametrize("make", [_fifo, _fifo_partial, _fifo_lock, _directory, _device])
def test_an_output_that_is_not_a_regular_file_is_refused(tmp_path, make):
    sections, target, words = make(tmp_path)
    path = make_config(tmp_path, "h", **sections)
    before = snapshot(path)
    out = run_model(path)
    assert out.returncode == 2, out.stderr
    line = error_of(out.stderr)
    for word in [*words, str(target), "expected a regular file or a new path"]:
        assert word in line, (word, line)
    assert snapshot(path) == before and (target.is_dir() or not target.is_file())
    assert files_in(tmp_path) == {"h.yaml", target.name} - {"null"}


@pytest.mark.parametrize("ranks", RANKS)
def test_an_output_under_proc_names_its_key(tmp_path, ranks):
    path = make_config(tmp_path, "h", output={"path": "/proc/meshops-test.nc"})
    out = run_model(path, ranks=ranks)
    assert out.returncode == 2, out.stderr
    line = error_of(out.stderr)
    assert "output.path = '/proc/meshops-test.nc'" in line, line
    assert files_in(tmp_path) == {"h.yaml"} and not os.path.exists("/proc/meshops-test.nc")


# -- 4. a full disk --------------------------------------------------------------------------------

@pytest.mark.parametrize("limit", [100_000, 500_000])
def test_a_full_disk_is_one_line_and_keeps_the_previous_history(tmp_path, limit, rng):
    """The history of a first run (about 330 kB with its mesh) stays as it was when a longer
    second run cannot write its own: at 100 kB the mesh part fails, at 500 kB the first record (on
    the writer thread: no record is complete); the partial file and temporaries are removed.
    (One process: MPICH's shared memory cannot start under a file size limit.)"""
    alpha = float(rng.uniform(-1, 1))
    path = make_config(tmp_path, "h", case={"name": "williamson2", "alpha": alpha})
    ok(run_model(path))
    before = snapshot(tmp_path / "h.nc", path)
    assert len(before) == 2
    longer = ["--set", "time.days=10", "--set", "output.interval_hours=6",
              "--set", "output.clobber=overwrite"]
    out = run_on_a_full_disk(path, *longer, cache=tmp_path / "cache", limit=limit)
    assert out.returncode != 0, out.stderr
    assert_full_disk_line(out, tmp_path / "h.nc")
    assert snapshot(*before) == before
    assert files_in(tmp_path) == {"h.yaml", "h.nc"}         # no partial, lock or temporary


def assert_kept(tmp_path, whole, out, records: int, disk=None, status: int = 2) -> None:
    """A run of h.yaml that ran out of room mid-run (`out`, exit `status`): one line naming the
    history (h.nc in `disk`, default tmp_path), its partial file, the full disk and what was kept;
    the partial file holds the first `records` records of the uninterrupted run `whole`
    (`whole`.nc in tmp_path) bitwise and the restart (h.restart.nc in tmp_path) is no later than
    its last; no lock or temporary is left. Shared by both models."""
    assert out.returncode == status, out.stderr
    disk = tmp_path if disk is None else disk
    partial = disk / "h.nc.partial"
    line = error_of(out.stderr)
    for word in (f"output.path = '{disk / 'h.nc'}'", f"{partial} keeps its",
                 "no space left on device", f"the last restart file {tmp_path / 'h.restart.nc'} "
                 "(day ", ") is kept", "restart.resume: true"):
        assert word in line, (word, line)
    assert partial.exists() and (tmp_path / "h.restart.nc").exists()
    assert not [n for d in (tmp_path, disk) for n in files_in(d)
                if n.endswith((".lock", ".tmp", ".copy"))]
    kept, reference = history(partial, timed=()), history(tmp_path / f"{whole}.nc", timed=())
    n, total = kept["Time"].size, reference["Time"].size
    assert 0 < n == records < total and f"its {n} complete records" in line
    for name in kept.timed:
        assert np.array_equal(kept[name], reference[name][:n]), name
    restart = history(tmp_path / "h.restart.nc", timed=())
    assert restart["Time"][0] <= kept["Time"][-1]
    assert f"h.restart.nc (day {restart['Time'][0]:.4f}) is kept" in line


def assert_resumed(tmp_path, path, whole, cache, disk=None, ranks: int = 1) -> None:
    """h.yaml resumed with room: history (h.nc in `disk`, default tmp_path) and restart bitwise
    the uninterrupted run's, nothing left beside them."""
    disk = tmp_path if disk is None else disk
    ok(run_model(path, "--set", "restart.resume=true", cache=cache, ranks=ranks))
    assert_same(history(tmp_path / f"{whole}.nc", timed=()), history(disk / "h.nc", timed=()))
    assert_same(history(tmp_path / f"{whole}.restart.nc", timed=()),
                history(tmp_path / "h.restart.nc", timed=()))
    assert not [n for d in (tmp_path, disk) for n in files_in(d)
                if n.endswith((".lock", ".tmp", ".copy", ".partial"))]


def test_a_full_disk_mid_run_keeps_the_records_and_the_run_resumes_bitwise(tmp_path):
    """Shallow water: the history stops at its last complete record (a whole netCDF file), the
    restart written with it is kept (none after it); a resumed run that runs out of room keeps
    its records the same way, and a resume with room ends bitwise the uninterrupted run's. (One
    process: MPICH's shared memory cannot start under a file size limit.)"""
    sections = {"time": {"days": 3, "dt": 3600}, "output": {"interval_hours": 6},
                "restart": {"interval_hours": 6}, "mesh": {"generate": {"level": 3}}}
    ok(run_model(make_config(tmp_path, "whole", **sections)))
    path = make_config(tmp_path, "h", **sections)
    cache = tmp_path / "cache"
    out = run_on_a_full_disk(path, cache=cache, limit=limit_keeping(tmp_path / "whole.nc", 6))
    assert_kept(tmp_path, "whole", out, 6)
    out = run_on_a_full_disk(path, "--set", "restart.resume=true", cache=cache,
                             limit=limit_keeping(tmp_path / "whole.nc", 9))
    assert_kept(tmp_path, "whole", out, 9)              # a resumed run's disk fills up too
    assert_resumed(tmp_path, path, "whole", cache)


def test_a_full_disk_mid_run_without_restarts_says_there_is_none(tmp_path):
    """Restarts off (restart.interval_hours unset): the partial file keeps its complete records
    and the line says that no restart was written, so the run is to be run again."""
    sections = {"time": {"days": 3, "dt": 3600}, "output": {"interval_hours": 6},
                "mesh": {"generate": {"level": 3}}}
    ok(run_model(make_config(tmp_path, "whole", **sections)))
    path = make_config(tmp_path, "h", **sections)
    out = run_on_a_full_disk(path, cache=tmp_path / "cache",
                             limit=limit_keeping(tmp_path / "whole.nc", 3))
    line = refused(out, 2, f"{tmp_path / 'h.nc.partial'} keeps its 3 complete records",
                   "no restart file was written", "run it again")
    assert "resume" not in line
    assert files_in(tmp_path) == {"whole.yaml", "whole.nc", "h.yaml", "h.nc.partial"}
    kept, reference = history(tmp_path / "h.nc.partial", timed=()), history(tmp_path / "whole.nc")
    assert np.array_equal(kept["h"], reference["h"][:3])


@pytest.fixture
def small_disk(tmp_path):
    """mount(size): a tmpfs of `size` bytes at tmp_path/disk (a real full disk: ENOSPC), which
    mount() again resizes; unmounted at the end. Skipped where tmpfs cannot be mounted (not
    root)."""
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = []

    def mount(size: int):
        options = f"{'remount,' if mounted else ''}size={size}"
        out = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(disk)],
                             capture_output=True, text=True)
        if out.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here ({out.stderr.strip()})")
        mounted.append(size)
        return disk
    yield mount
    if mounted:
        subprocess.run(["umount", str(disk)], check=True)


@pytest.mark.parametrize("ranks", RANKS)
def test_a_really_full_disk_mid_run_keeps_the_records_on_any_rank_count(tmp_path, small_disk,
                                                                        ranks):
    """The history on a tmpfs that fills up (ENOSPC, free space from statvfs), under mpiexec too
    (rank 0 stops the job: MPI_Abort): the partial file keeps its complete records, the restart
    (on another disk) the one written with them; with room again the resume is bitwise the
    uninterrupted run's on as many ranks."""
    sections = {"time": {"days": 3, "dt": 3600}, "output": {"interval_hours": 6},
                "restart": {"interval_hours": 6}, "mesh": {"generate": {"level": 3}}}
    cache = tmp_path / "cache"
    ok(run_model(make_config(tmp_path, "whole", **sections), cache=cache, ranks=ranks))
    disk = small_disk(limit_keeping(tmp_path / "whole.nc", 5))
    path = make_config(tmp_path, "h", **sections)
    text = path.read_text().replace(str(tmp_path / "h.nc"), str(disk / "h.nc"))
    path.write_text(text)
    out = run_model(path, cache=cache, ranks=ranks)
    assert_kept(tmp_path, "whole", out, 5, disk, status=2 if ranks == 1 else out.returncode)
    assert out.returncode != 0
    small_disk(64 * 2**20)
    assert_resumed(tmp_path, path, "whole", cache, disk, ranks)


TORN = """
import resource, signal, sys
import netCDF4, numpy as np
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
ds = netCDF4.Dataset(sys.argv[1], "w", format="NETCDF4")
ds.createDimension("Time", None)
ds.createDimension("nCells", 40000)
ds.createVariable("Time", "f8", ("Time",))
for name in ("h", "u"):
    ds.createVariable(name, "f8", ("Time", "nCells"))
ds.sync()
resource.setrlimit(resource.RLIMIT_FSIZE, (int(sys.argv[2]), resource.RLIM_INFINITY))
good = 0
try:
    for k in range(100):
        ds["Time"][k] = k / 4
        for name in ("h", "u"):
            ds[name][k] = np.full(40000, k + 0.5)
        ds.sync()
        good = k + 1
except (OSError, RuntimeError):
    pass
from grids.netcdf_files import close_dataset, datasets_left_open
from meshrun.cli import _ending
try:
    close_dataset(ds)
except (OSError, RuntimeError):
    pass
from framework.history import _record_times, truncated_copy
print(f"\\nkept {good} torn {_record_times(sys.argv[1], good) is None}")
truncated_copy(sys.argv[1], good)
print(f"left open {datasets_left_open()}")
sys.exit(_ending(0))      # as run_model.py ends: past HDF5's teardown, which crashes on such files
"""


def test_a_history_torn_by_a_failed_write_is_cut_back_to_its_complete_records(tmp_path, rng):
    """A netCDF-4 file whose record write failed for want of room (a real file size limit, the
    process that wrote it goes on, as the model does) holds a torn record along Time;
    `truncated_copy` there rewrites it as the complete ones, a whole file. The file whose close
    failed is held open and the process ends as run_model.py does (`meshrun.cli._ending`): with
    its status, not in HDF5's teardown (which crashed in about one run in twenty)."""
    from framework.history import _record_times

    path = tmp_path / "torn.nc"
    limit = int(rng.integers(1_000_000, 3_000_000))
    out = subprocess.run([sys.executable, "-c", TORN, str(path), str(limit)], capture_output=True,
                         text=True, timeout=120, env=env(tmp_path / "cache"))
    assert out.returncode == 0, out.stderr
    good, torn = re.search(r"kept (\d+) torn (\w+)", out.stdout).groups()   # (HDF5 speaks too)
    assert int(re.search(r"left open (\d+)", out.stdout).group(1)) >= 1      # the failed close
    good = int(good)
    assert 0 < good < 100 and torn == "True"         # the torn record is along Time too
    assert np.array_equal(_record_times(path, good), np.arange(good) / 4 * 86400.0)
    with netCDF4.Dataset(path) as ds:
        for name in ("h", "u"):
            assert np.array_equal(ds[name][:], np.arange(good)[:, None] + np.full((good, 40000), 0.5))
    assert files_in(tmp_path) == {"torn.nc"}


# -- 5. python -m swm.plot on files it cannot draw; the colorbar's scale ---------------------------

def test_plot_names_a_file_that_is_not_a_history(tmp_path, rng):
    path = make_config(tmp_path, "h", restart={"interval_hours": 24})
    ok(run_model(path))
    junk = tmp_path / "junk.nc"
    junk.write_bytes(rng.bytes(2000))
    for target, words in ((tmp_path / "h.restart.nc", "a restart file"),
                          (junk, "not a netCDF file"), (path, "not a netCDF file")):
        out = subprocess.run([sys.executable, "-m", "swm.plot", str(target), "--out", str(tmp_path)],
                             env=env(tmp_path / "cache"), capture_output=True, text=True, timeout=120)
        assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1, out.stderr
        for word in (str(target), words, "expected a history file written by run_model.py"):
            assert word in out.stderr, (word, out.stderr)
        assert "engine" not in out.stderr and "KeyError" not in out.stderr, out.stderr
    assert not list(tmp_path.glob("*.png"))


def test_the_colorbar_scale_is_beside_it_not_over_the_title(tmp_path, monkeypatch):
    """The maps of a history with a long name draw no offset text above the colorbar (the
    vorticity's scale 10^n is the colorbar's label), and no text of the colorbar meets the
    title."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from swm import plot

    path = make_config(tmp_path, "a_history_with_a_rather_long_name_that_fills_the_title")
    ok(run_model(path))
    figures = []
    monkeypatch.setattr(plt, "close", figures.append)
    written = plot.plot_file(path.with_suffix(".nc"))
    assert [p.name.split(".")[-2] for p in written] == ["h", "vorticity"] and len(figures) == 2
    for fig in figures:
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        title, colorbar = fig.axes[0].title, fig.axes[1]
        assert colorbar.yaxis.get_offset_text().get_text() == ""
        box = title.get_window_extent(renderer)
        texts = [colorbar.yaxis.label, *colorbar.get_yticklabels()]
        assert not any(box.overlaps(t.get_window_extent(renderer)) for t in texts if t.get_text())
        assert box.x1 <= fig.axes[0].get_window_extent(renderer).x1 + 20
    low, high = figures[1].axes[0].collections[0].get_clim()
    exponent = int(np.floor(np.log10(max(abs(low), abs(high)))))
    assert exponent < -2 and figures[1].axes[1].get_ylabel() == rf"$\times 10^{{{exponent}}}$"
    monkeypatch.undo()
    for fig in figures:
        plt.close(fig)
