"""The Simulation's pieces on a real level-2 model: schedules, a callback added by a user, the
writer thread's errors, the record index of a time, and the device-side watchdog's check."""
import math

import numpy as np
import pytest

from swm.callbacks import HistoryOutput
from swm.config import load_config
from swm.driver import build_simulation
from framework.history import AsyncWriter
from framework.schedules import IterationInterval, TimeInterval
from framework.errors import WatchdogError
from tests.swm.test_driver import config


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("MESHOPS_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("MESHOPS_NO_MPI", "1")


def test_schedules_fire_on_steps_and_on_times_crossed(rng):
    n = int(rng.integers(2, 9))
    every = IterationInterval(n)
    assert [s for s in range(1, 30) if every.due(s, s * 1.0, 1.0)] == list(range(n, 30, n))
    dt = float(rng.uniform(100.0, 900.0))
    period = 3600.0
    fired = [s for s in range(1, 200) if TimeInterval(period).due(s, s * dt, dt)]
    # the first step at or past each multiple of the period
    assert fired == [math.ceil(k * period / dt) for k in range(1, int(199 * dt / period) + 1)]
    assert TimeInterval(1800.0).due(3, 1800.0, 600.0) and not TimeInterval(1800.0).due(4, 2400.0, 600.0)
    for bad in (lambda: IterationInterval(0), lambda: TimeInterval(float("nan"))):
        with pytest.raises(ValueError):
            bad()


def test_record_index_is_the_time_over_the_interval():
    out = HistoryOutput(None, None, (), None, TimeInterval(86400.0), 86400.0)
    assert [out.record(t * 86400.0) for t in (0, 1, 1.5, 2, 2.25)] == [0, 1, 2, 2, 3]


def test_a_writer_error_reaches_the_caller_and_later_jobs_still_run():
    writer = AsyncWriter()
    released = []

    def failing():
        try:
            raise OSError(28, "No space left on device")
        finally:
            released.append("first")
    writer.submit(failing)
    writer.submit(lambda: released.append("second"))
    with pytest.raises(OSError, match="No space left"):
        writer.close()
    assert released == ["first", "second"]


def test_a_callback_of_ones_own_fires_on_its_schedule(tmp_path, cache):
    path = config(tmp_path, "own", time={"days": 1, "dt": 3600},
                  mesh={"generate": {"level": 2}}, output={"interval_hours": 6})
    sim, s = build_simulation(load_config(path), progress=False)
    seen = []

    class MaxSpeed:
        schedule = IterationInterval(5)

        def __call__(self, sim):
            seen.append((sim.step, float(np.abs(sim.model.u).max())))
    sim.callbacks["max_speed"] = MaxSpeed()
    sim.run()
    assert [step for step, _ in seen] == [5, 10, 15, 20] and all(0 < v < 100 for _, v in seen)
    assert sim.outcome == "finished" and (tmp_path / "own.nc").exists()


def test_the_watchdog_check_finds_a_bad_value_on_the_device(tmp_path, cache, rng):
    from swm.driver import setup, state_check

    cfg = load_config(config(tmp_path, "check", mesh={"generate": {"level": 2}}))
    s = setup(cfg)
    check = state_check(cfg, s)
    check.check(s.model.h, s.model.u, s.dt, 0)              # the initial state passes
    h = s.model.h.copy()
    cell = int(rng.integers(h.shape[0]))
    h[cell] = np.nan
    with pytest.raises(WatchdogError, match=f"step 7: h = nan at cell {cell + 1} \\(1-based as in MPAS; .*not finite"):
        check.check(h, s.model.u, s.dt, 7)
    with pytest.raises(WatchdogError, match="Courant number .* above the limit"):
        check.check(s.model.h, s.model.u, 50 * s.dt, 8)
