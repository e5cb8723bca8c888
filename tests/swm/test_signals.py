"""SIGTERM and SIGINT in every phase of run_model.py (`framework.stop`), sent for real to a running
subprocess once a log line marks the phase: mesh generation, start-up, the stepping loop (a second
signal while the first is handled), a sensitivity run's forward and adjoint sweeps, a 4D-Var
minimisation. Each must end with one `run_model.py: stopped by SIG...` line, exit status
128 + signum, no traceback, the user's files byte for byte, and nothing left behind (locks,
partial files, temporaries, snapshot folders, cache files). Also: a config that one rank of
several refuses ends every rank with one line, and a bad partition file is refused on one process.
Multi-rank cases run under `mpiexec -n 2` (marker mpi; the signal goes to mpiexec, which forwards
it to the ranks)."""
import os
import pathlib
import re
import signal
import subprocess
import sys
import time

import netCDF4
import numpy as np
import pytest
import yaml

from tests.swm.test_faults import (RANKS, ROOT, RUN_MODEL, Background, env, error_of, leftovers,
                                   make_config, run_model, snapshot)


def stopped(run, signum, *words) -> str:
    """The one line of a run stopped by `signum` (exit status 128 + signum); its text."""
    rc, err = run.finish()
    assert rc == 128 + signum, err
    line = error_of(err)
    assert line.startswith(f"run_model.py: stopped by {signal.Signals(signum).name}"), line
    for word in words:
        assert word in line, (word, line)
    return line


def user_files(folder):
    """A file of the user's beside the outputs, with random bytes; its snapshot."""
    mine = folder / "notes.bin"
    mine.write_bytes(np.random.default_rng().bytes(4096))
    return mine, snapshot(mine)


def listing(folder) -> list[str]:
    """Every file and folder under `folder` (relative names, sorted)."""
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def ranks_of(run) -> list[int]:
    """The pids of the run's Python processes: run_model.py itself, or under mpiexec its ranks
    (descendants of the launcher), found in /proc."""
    parents = {}
    for stat in pathlib.Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents[int(stat.parent.name)] = int(fields[1])

    def descends(pid):
        while pid in parents and pid > 1:
            if pid == run.proc.pid:
                return True
            pid = parents[pid]
        return False

    found = []
    for pid in parents:
        try:
            cmdline = (pathlib.Path("/proc") / str(pid) / "cmdline").read_bytes()
        except OSError:
            continue
        if descends(pid) and b"run_model.py" in cmdline and b"mpiexec" not in cmdline \
                and b"hydra" not in cmdline:
            found.append(pid)
    return found or [run.proc.pid]


def signal_ranks(run, signum) -> None:
    """`signum` to every rank at once, as a batch system signals every task of a job (mpiexec's
    forwarding can lag behind a phase of a second or two)."""
    for pid in ranks_of(run):
        os.kill(pid, signum)


def signal_after(run, signum, seconds):
    time.sleep(seconds)
    run.proc.send_signal(signum)


# -- mesh generation and start-up ------------------------------------------------------------------

def test_a_signal_during_mesh_generation_leaves_no_cache_file(tmp_path):
    cache = tmp_path / "cache"
    path = make_config(tmp_path, "gen", mesh={"generate": {"level": 7}})
    mine, before = user_files(tmp_path)
    run = Background(path, cache=cache)
    run.wait_for(lambda: "rank 0: config" in run.text(), "the config's log line")
    signal_after(run, signal.SIGINT, 1.0)             # level 7 takes seconds to generate
    stopped(run, signal.SIGINT)
    assert "mesh: generated" not in run.text() and "ready to step" not in run.text()
    assert not cache.exists() or not any(cache.iterdir()), listing(cache)
    assert snapshot(mine) == before
    assert listing(tmp_path) == sorted(["gen.yaml", "notes.bin"] + (["cache"] if cache.exists()
                                                                      else []))


@pytest.fixture(scope="module")
def level8_cache(tmp_path_factory):
    """A mesh cache holding the level-8 mesh (generated once for the start-up tests: its
    decomposition and the history with the mesh inside take seconds, a start-up long enough to
    be signalled in)."""
    from grids.cache import CACHE_ENV, cached_icosahedral

    cache = tmp_path_factory.mktemp("level8")
    before = os.environ.get(CACHE_ENV)
    os.environ[CACHE_ENV] = str(cache)
    try:
        cached_icosahedral(8)
    finally:
        if before is None:
            del os.environ[CACHE_ENV]
        else:
            os.environ[CACHE_ENV] = before
    return cache


@pytest.mark.parametrize("ranks", RANKS)
def test_a_signal_at_start_up_leaves_nothing(tmp_path, ranks, level8_cache):
    """Between the mesh and the first step (decomposition, a history with the level-8 mesh
    inside, the first record): no history, partial, restart or lock is left, the cache intact."""
    path = make_config(tmp_path, "start", mesh={"generate": {"level": 8}},
                       time={"days": 1, "dt": 75}, output={"mesh": "inside"})
    mine, before = user_files(tmp_path)
    cached = snapshot(*sorted(level8_cache.iterdir()))
    run = Background(path, cache=level8_cache, ranks=ranks)
    run.wait_for(lambda: "mesh and initial state" in run.text(), "the initial state")
    signal_ranks(run, signal.SIGTERM)
    line = stopped(run, signal.SIGTERM)
    assert snapshot(mine) == before
    assert snapshot(*sorted(level8_cache.iterdir())) == cached   # the mesh, complete and alone
    if "ready to step" in run.text():
        # Under mpiexec a rank busy in a collective may act on the signal at the first step's
        # check instead: then the run stops there as the stepping loop does, resumable.
        assert ranks > 1 and "resume with --set restart.resume=true" in line, line
        assert listing(tmp_path) == sorted(["notes.bin", "start.nc.partial", "start.restart.nc",
                                            "start.yaml"])
        return
    assert "day 0.000" not in run.text()
    assert listing(tmp_path) == sorted(["notes.bin", "start.yaml"])


# -- the stepping loop: a second signal while the first is handled ---------------------------------

@pytest.mark.parametrize("ranks", RANKS)
def test_a_second_signal_does_not_cut_the_first_ones_finish(tmp_path, ranks):
    """SIGTERM in the stepping loop, SIGINT while its restart and history are written: the
    first is reported, and the restart and the partial history hold the step it names."""
    path = make_config(tmp_path, "twice", time={"days": 30, "dt": 3600})
    mine, before = user_files(tmp_path)
    run = Background(path, ranks=ranks)
    run.wait_for(lambda: "day 2.000:" in run.text(), "two daily records")
    run.proc.send_signal(signal.SIGTERM)
    time.sleep(0.02)
    run.proc.send_signal(signal.SIGINT)                 # while the first one's finish runs
    line = stopped(run, signal.SIGTERM, "at step", "restart.resume")
    step = int(re.search(r"at step (\d+)", line)[1])
    assert snapshot(mine) == before
    with netCDF4.Dataset(tmp_path / "twice.restart.nc") as ds:
        assert int(ds.step) == step and np.isfinite(ds["h"][:]).all()
    with netCDF4.Dataset(tmp_path / "twice.nc.partial") as ds:
        assert ds["Time"][-1] * 24 == step and np.isfinite(ds["h"][-1]).all()
    assert leftovers(tmp_path, "twice") == ["twice.nc.partial"]
    assert listing(tmp_path) == sorted(["cache", *(f"cache/{p.name}" for p in
                                                   (tmp_path / "cache").iterdir()),
                                        "notes.bin", "twice.nc.partial", "twice.restart.nc",
                                        "twice.yaml"])


# -- a sensitivity run: its forward and adjoint sweeps ---------------------------------------------

def sensitivity_config(tmp_path):
    """configs/sensitivity_williamson5.yaml on a level-3 mesh for half a day, its multistage
    schedule keeping snapshots on disk in the folder tmp_path/snapshots."""
    tree = yaml.safe_load((ROOT / "configs" / "sensitivity_williamson5.yaml").read_text())
    tree["mesh"] = {"generate": {"level": 3}}
    tree["time"] = {"days": 0.5, "dt": 1200}
    tree["sensitivity"].update(output=str(tmp_path / "grad.nc"), plot=True, checkpointing={
        "schedule": "multistage", "snapshots_in_ram": 2, "snapshots_on_disk": 4,
        "directory": str(tmp_path / "snapshots")})
    (tmp_path / "snapshots").mkdir()
    path = tmp_path / "sens.yaml"
    path.write_text(yaml.safe_dump(tree))
    return path


@pytest.mark.parametrize("sweep, marker", [("forward", "checkpointing multistage"),
                                           ("adjoint", "forward sweep done")])
@pytest.mark.parametrize("ranks", RANKS)
def test_a_signal_stops_a_sensitivity_run_in_either_sweep(tmp_path, ranks, sweep, marker):
    path = sensitivity_config(tmp_path)
    mine, before = user_files(tmp_path)
    run = Background(path, ranks=ranks)
    run.wait_for(lambda: marker in run.text(), f"the {sweep} sweep")
    run.proc.send_signal(signal.SIGTERM)
    stopped(run, signal.SIGTERM, f"in the {sweep} sweep")
    assert snapshot(mine) == before
    cached = [f"cache/{p.name}" for p in (tmp_path / "cache").iterdir()]
    assert listing(tmp_path) == sorted(["cache", *cached, "notes.bin", "sens.yaml", "snapshots"])


# -- a 4D-Var run: the minimisation ------------------------------------------------------------------

def test_a_signal_stops_a_fourdvar_minimisation(tmp_path):
    tree = yaml.safe_load((ROOT / "configs" / "fourdvar_twin.yaml").read_text())
    tree["mesh"] = {"generate": {"level": 3}}
    tree["time"] = {"days": 0.25, "dt": 1200}
    tree["fourdvar"].update(observation_hours=[2, 4, 6], output=str(tmp_path / "fv.nc"))
    path = tmp_path / "fv.yaml"
    path.write_text(yaml.safe_dump(tree))
    mine, before = user_files(tmp_path)
    run = Background(path)
    run.wait_for(lambda: "iteration 1:" in run.text(), "the minimisation")
    run.proc.send_signal(signal.SIGINT)
    stopped(run, signal.SIGINT)
    assert snapshot(mine) == before
    found = listing(tmp_path)
    assert "fv.nc" not in found and "fv.png" not in found and "fv.nc.lock" not in found, found
    assert "fv.observations.nc" not in found, found
    assert not [name for name in found if name.endswith(".tmp")], found


# -- a rank that refuses its config; a partition file on one process ------------------------------

@pytest.mark.mpi
def test_a_config_one_rank_refuses_ends_every_rank_with_one_line(tmp_path):
    """MPMD: the same config on two ranks, its output path relative to each rank's working
    directory; only rank 0's has the output folder."""
    from tests.test_mpi_ranks import _mpiexec

    for rank in ("a", "b"):
        (tmp_path / rank).mkdir()
    (tmp_path / "a" / "out").mkdir()
    path = make_config(tmp_path, "x")
    tree = yaml.safe_load(path.read_text())
    tree["output"]["path"], tree["restart"]["path"] = "out/x.nc", "out/x.restart.nc"
    path.write_text(yaml.safe_dump(tree))
    one = [sys.executable, str(RUN_MODEL), str(path), "--no-progress"]
    command = [_mpiexec(), "-n", "1", "-wdir", str(tmp_path / "a"), *one, ":",
               "-n", "1", "-wdir", str(tmp_path / "b"), *one]
    t0 = time.monotonic()
    out = subprocess.run(command, env=env(tmp_path / "cache", ranks=2), capture_output=True,
                         text=True, timeout=120)
    assert time.monotonic() - t0 < 60 and out.returncode == 2, out.stderr
    line = error_of(out.stderr)
    assert "rank 1:" in line and "output.path = 'out/x.nc'" in line and "does not exist" in line
    assert listing(tmp_path) == ["a", "a/out", "b", "x.yaml"]


def test_a_bad_partition_file_on_one_process_is_one_line(tmp_path):
    part = tmp_path / "graph.info.part.1"
    part.write_text("0\n" * 10 + "seven\n")
    before = snapshot(part)
    path = make_config(tmp_path, "x", partition={"method": "file", "file": str(part)})
    out = run_model(path)
    assert out.returncode == 2, out.stderr
    line = error_of(out.stderr)
    assert "partition.file" in line and str(part) in line and "11 lines" in line, line
    assert snapshot(part) == before and leftovers(tmp_path, "x") == []
    assert not (tmp_path / "x.nc").exists()
