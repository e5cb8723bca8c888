"""Faults of resuming a run (`--set restart.resume=true`), each made for real in a subprocess:
another output interval or variables, a resumed run stopped by the watchdog or a signal, a resume
killed while it copies the history, a restart of the same cells in another order.

The outcome asserted: one `run_model.py:` line naming the key, the value and the expectation; the
files of the first run intact byte for byte; resumed runs bitwise equal to the uninterrupted one."""
import random
import re
import shutil
import signal
import subprocess
import sys

import netCDF4
import numpy as np
import pytest

from tests.swm.test_faults import (RANKS, RUN_MODEL, TIMEOUT_S, Background, assert_same, env,
                                   history, leftovers, make_config, ok, refused, run_model,
                                   snapshot)

RESUME = ("--set", "restart.resume=true")


def first_run(tmp_path, name, days=2, ranks=1, **sections):
    """A finished run of `days` days with daily records and restarts: (config, history, restart)."""
    path = make_config(tmp_path, name, time={"days": days}, restart={"interval_hours": 24},
                       **sections)
    ok(run_model(path, ranks=ranks))
    return path, tmp_path / f"{name}.nc", tmp_path / f"{name}.restart.nc"


# -- another output interval or other variables ---------------------------------------------------

@pytest.mark.parametrize("ranks, setting, value, found", [
    (1, "output.interval_hours", 12, "24.0"),   # finer: empty records and a repeated time
    pytest.param(2, "output.interval_hours", 12, "24.0", marks=pytest.mark.mpi),
    (1, "output.interval_hours", 48, "24.0"),   # coarser: a record of the first run replaced
    (1, "output.variables", "[h, u]", "'vorticity'"),   # the others' records left empty
])
def test_resuming_with_other_output_settings_is_refused_before_work(tmp_path, ranks, setting,
                                                                    value, found):
    path, hist, restart = first_run(tmp_path, "out", ranks=ranks)
    before = snapshot(hist, restart)
    out = run_model(path, *RESUME, "--set", "time.days=4", "--set", f"{setting}={value}",
                    ranks=ranks)
    refused(out, 2, f"{setting} = ", str(hist), f"written with {setting} = ", found, "expected")
    assert "mesh and initial state" not in out.stderr          # before any work
    assert snapshot(hist, restart) == before
    assert leftovers(tmp_path, "out") == []


# -- a resumed run stopped by the watchdog or a signal --------------------------------------------

def crashed_run(tmp_path, name, ranks):
    """The files of a run killed after its day-2 restart and its day-4 record: a history of days
    0..4 and the restart of day 2 (made by extending a 2-day run to 4 days and putting its day-2
    restart back). (config, history, restart)."""
    path, hist, restart = first_run(tmp_path, name, ranks=ranks)
    shutil.copy2(restart, tmp_path / "day2.restart.nc")
    ok(run_model(path, *RESUME, "--set", "time.days=4", ranks=ranks))
    shutil.copy2(tmp_path / "day2.restart.nc", restart)
    return path, hist, restart


@pytest.mark.parametrize("ranks", RANKS)
def test_a_resumed_run_stopped_by_the_watchdog_keeps_the_later_records(tmp_path, ranks):
    path, hist, restart = crashed_run(tmp_path, "wd", ranks)
    records = history(hist)
    cfl = records["max_cfl"]
    assert cfl[3] > cfl[2]
    # a limit the state passes at day 2 and fails before day 3: the last good state is off the
    # daily grid, its record index (3) that of the first run's day 3
    limit = cfl[2] + random.uniform(0.3, 0.7) * (cfl[3] - cfl[2])
    out = run_model(path, *RESUME, "--set", "time.days=10", "--set", f"watchdog.cfl_limit={limit}",
                    "--set", "watchdog.interval_steps=1", ranks=ranks)
    line = refused(out, 3, "watchdog.cfl_limit", f"above the limit {limit}")
    kept = int(re.search(r"the last checked state \(step (\d+),", line)[1])
    assert 48 < kept < 72, line
    assert_same(records, history(hist))                 # every record of the first run kept
    with netCDF4.Dataset(restart) as ds:                # the restart: the later, checked state
        assert int(ds.step) == kept and np.isfinite(ds["h"][:]).all()
    assert leftovers(tmp_path, "wd") == []


def test_a_resumed_run_stopped_at_its_first_state_rewrites_nothing(tmp_path, ranks=1):
    path, hist, restart = first_run(tmp_path, "first", ranks=ranks)
    records, before = history(hist), snapshot(restart)
    out = run_model(path, *RESUME, "--set", "time.days=4", "--set", "watchdog.cfl_limit=0.01",
                    ranks=ranks)
    line = refused(out, 3, "above the limit 0.01")
    assert "step 48:" in line and "the restart's state is out of range" in line, line
    assert snapshot(restart) == before                  # the restart it resumed: not rewritten
    assert_same(records, history(hist))
    assert leftovers(tmp_path, "first") == []


def test_a_signal_while_the_state_blows_up_writes_the_last_checked_state(tmp_path):
    # dt 21600 s is unstable from the first step (NaN within days), and the watchdog checks the
    # state only at the end (no output, no restart, its interval beyond the run: 4000 steps of
    # NaN arithmetic, seconds) unless the signal makes it
    # (a Courant limit far above the first state's 5, so that the first state passes its check)
    path = make_config(tmp_path, "nan", time={"days": 1000, "dt": 21600},
                       output={"interval_hours": 24000},
                       watchdog={"interval_steps": 100000, "cfl_limit": 1e6})
    run = Background(path)
    run.wait_for(lambda: "ready to step" in run.text(), "the stepping")
    __import__("time").sleep(0.5)
    run.proc.send_signal(signal.SIGTERM)
    rc, err = run.finish()
    line = refused(subprocess.CompletedProcess([], rc, "", err), 3,
                   "the last checked state (step 0,")
    assert "not finite" in line or "above the limit" in line, line
    assert int(re.search(r"stopped: step (\d+):", line)[1]) < 4000, line   # by the signal
    f = history(tmp_path / "nan.nc")
    assert f["h"].shape[0] == 1 and np.isfinite(f["h"]).all() and np.isfinite(f["u"]).all()
    with netCDF4.Dataset(tmp_path / "nan.restart.nc") as ds:
        assert int(ds.step) == 0 and np.isfinite(ds["h"][:]).all() and np.isfinite(ds["u"][:]).all()


# -- a resume killed while it copies the history --------------------------------------------------

#: run_model.py with shutil.copyfile replaced by a copy that stops part way and SIGKILLs the process
#: (the history copy a resume makes is the only copyfile of a run).
KILLED_WHILE_COPYING = """
import os, runpy, shutil, signal, sys
def copyfile(src, dst, *args, **kwargs):
    data = open(src, "rb").read()
    with open(dst, "wb") as f:
        f.write(data[:int(len(data) * float(os.environ["COPIED_FRACTION"]))])
        f.flush()
        os.fsync(f.fileno())
    os.kill(os.getpid(), signal.SIGKILL)
shutil.copyfile = copyfile
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


@pytest.mark.parametrize("ranks", RANKS)
def test_a_resume_killed_while_copying_the_history_does_not_block_the_next(tmp_path, ranks):
    whole = make_config(tmp_path, "whole", time={"days": 4}, restart={"interval_hours": 24})
    ok(run_model(whole, ranks=ranks))
    path, hist, restart = first_run(tmp_path, "cut", ranks=ranks)
    before = snapshot(hist, restart)

    launcher = []
    if ranks > 1:
        from tests.test_mpi_ranks import _mpiexec

        launcher = [_mpiexec(), "-n", str(ranks)]
    killed = subprocess.run(
        launcher + [sys.executable, "-c", KILLED_WHILE_COPYING, str(RUN_MODEL), str(path),
                    "--no-progress", *RESUME, "--set", "time.days=4"],
        env={**env(tmp_path / "cache", ranks), "COPIED_FRACTION": str(random.uniform(0.1, 0.9))},
        capture_output=True, text=True, timeout=TIMEOUT_S)
    assert killed.returncode != 0 and "day 3.000" not in killed.stderr, killed.stderr
    assert snapshot(hist, restart) == before            # the history it copied: intact
    assert not (tmp_path / "cut.nc.partial").exists()   # no partial a resume would take as latest
    assert (tmp_path / "cut.nc.partial.copy").exists()  # only the incomplete copy

    ok(run_model(path, *RESUME, "--set", "time.days=4", ranks=ranks))
    assert_same(history(tmp_path / "whole.nc"), history(hist))   # bitwise the uninterrupted run
    assert leftovers(tmp_path, "cut") == [] and not (tmp_path / "cut.nc.partial.copy").exists()


def test_a_partial_history_that_cannot_be_read_names_the_file_to_remove(tmp_path):
    path, hist, restart = first_run(tmp_path, "bad")
    partial = tmp_path / "bad.nc.partial"
    partial.write_bytes(hist.read_bytes()[:hist.stat().st_size // 2])   # a run killed writing it
    before = snapshot(hist, restart, partial)
    out = run_model(path, *RESUME, "--set", "time.days=4")
    refused(out, 2, "output.path", str(partial), "did not write", "remove the file")
    assert snapshot(hist, restart, partial) == before


# -- a restart of the same cells in another order -------------------------------------------------

@pytest.mark.parametrize("ranks", RANKS)
def test_a_restart_in_another_cell_order_names_the_order(tmp_path, ranks):
    order = random.choice(["morton", "hilbert"])
    other = {"morton": "hilbert", "hilbert": "morton"}[order]
    path, hist, restart = first_run(tmp_path, "ord", ranks=ranks,
                                    mesh={"generate": {"level": 2, "order": order}})
    before = snapshot(hist, restart)
    out = run_model(path, *RESUME, "--set", "time.days=4", "--set",
                    f"mesh.generate.order={other}", ranks=ranks)
    line = refused(out, 2, "restart.path", "the same cells in another order",
                   f"mesh.generate.order = '{order}' in the restart, '{other}' in the config")
    assert "another mesh" not in line
    assert snapshot(hist, restart) == before
    assert leftovers(tmp_path, "ord") == []
