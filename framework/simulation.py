"""A Simulation: a model, its stop step, and callbacks that fire on schedules.

    sim = Simulation(model, stop_step, comm=comm)
    sim.callbacks["history"] = HistoryOutput(...)          # swm.callbacks
    sim.run()

The model has `step()`, `advance(*state)`, `state` (its prognostic fields), `step_count`, `time`
and `dt` (`swm.model.Model`, `hydrostatic.model.Model`). The loop only steps the model and fires
what is due (`schedule.due(step, time, dt)`); nothing in it moves the state to the host. A
callback with `checked = True` (writers) gets a state that the watchdog has just passed: the
watchdog runs on its own schedule and before any such callback.
`finish(sim, outcome)` of every callback runs when the run ends (the run's `files` last of all,
whatever was added after them): outcome "finished", "watchdog"
(the model holds the last good state), "interrupted" (SIGTERM or SIGINT: the model holds the state
of the current step, which the watchdog checks first: "watchdog" when it fails), "error", or "not
started" (`prepare` failed or was interrupted: the run's new files are removed). Signals:
`framework.stop` (the loop and the finish are deferred blocks).
"""
from __future__ import annotations

import time

import numpy as np

from framework import stop
from framework.constants import DAY
from framework.stop import Interrupted  # noqa: F401 - where callers have imported it from


def synchronize(array) -> None:
    """Wait for the device work on `array`'s device (nothing on NumPy)."""
    if hasattr(array, "device") and hasattr(array, "get"):
        array.device.synchronize()


class Simulation:
    """`model` (a `swm.model.Model`) stepped to `stop_step`; `callbacks` ordered by name;
    `watchdog` (a `framework.callbacks.Watchdog` or None); `comm` the run's communicator; `files` (a
    `framework.callbacks.Files` or None): finished after every callback, so that the writers' last
    records are queued before it closes the writer thread and the files; `resumable`: a run
    stopped by a signal wrote a restart to resume from (its message says so)."""

    def __init__(self, model, stop_step: int, *, comm, callbacks=None, watchdog=None, files=None,
                 resumable: bool = True):
        self.model, self.stop_step, self.comm = model, int(stop_step), comm
        self.resumable = resumable
        self.callbacks = dict(callbacks or {})
        self.watchdog, self.files = watchdog, files
        self.outcome = None
        self.loop_seconds = self.finish_seconds = 0.0
        self.first_step_seconds = self.first_records_seconds = 0.0
        self._prepared = False

    @property
    def step(self) -> int:
        return self.model.step_count

    @property
    def time(self) -> float:
        return self.model.time

    def _fire(self) -> None:
        step, time, dt = self.step, self.time, self.model.dt
        due = [cb for cb in self.callbacks.values() if cb.schedule.due(step, time, dt)]
        watchdog = self.watchdog
        if watchdog is not None and (watchdog.schedule.due(step, time, dt)
                                     or any(getattr(cb, "checked", False) for cb in due)
                                     or step == self.stop_step):
            watchdog(self)
        for cb in due:
            cb(self)

    def prepare(self) -> None:
        """Everything before the first step: one step computed and discarded (it builds the
        device tables and compiles the kernels the stepping uses, so the loop runs at the
        step's speed), then every callback's `start` (the first history record); their wall
        times in `first_step_seconds` (to the step's completion on the device) and
        `first_records_seconds`."""
        if self._prepared:
            return
        self._prepared = True
        try:
            t0 = time.perf_counter()
            with np.errstate(all="ignore"):
                self.model.advance(*self.model.state)
            synchronize(self.model.state[0])
            t1 = time.perf_counter()
            for cb in self._all():
                if hasattr(cb, "start"):
                    cb.start(self)
            self.first_step_seconds, self.first_records_seconds = t1 - t0, time.perf_counter() - t1
        except BaseException:
            self.abandon()
            raise

    def abandon(self) -> None:
        """Every callback's finish with outcome "not started", unless the run has finished
        (`run` finishes them itself): for a run stopped before its first step."""
        if self.outcome is None:
            self.outcome = "not started"
            with stop.deferred():
                self._finish("not started")

    def run(self) -> None:
        """Step to `stop_step`; raises `framework.errors.WatchdogError` or `Interrupted` after
        every callback has finished. `loop_seconds` is the stepping's wall time (to the last
        step's completion on the device), `finish_seconds` that of the callbacks' `finish`."""
        from framework.errors import WatchdogError

        self.prepare()
        outcome = "error"
        t0 = time.perf_counter()
        with stop.deferred():
            try:
                with np.errstate(all="ignore"):
                    while self.step < self.stop_step:
                        self.model.step()
                        self._fire()
                        signum = stop.requested(self.comm)
                        if signum and self.step < self.stop_step:   # (at the end: finish)
                            outcome = "interrupted"
                            if self.watchdog is not None:   # only a checked state is written
                                self.watchdog(self)
                            raise stop.interrupted(signum, f" at step {self.step} (day "
                                                   f"{self.time / DAY:.4f})", collective=True,
                                                   resume=self.resumable)
                    synchronize(self.model.state[0])
                outcome = "finished"
            except WatchdogError:
                outcome = "watchdog"
                raise
            finally:
                t1 = time.perf_counter()
                self.loop_seconds, self.outcome = t1 - t0, outcome
                errors = self._finish(outcome)
                self.finish_seconds = time.perf_counter() - t1
                if errors and outcome in ("finished", "interrupted", "watchdog"):
                    raise errors[0]
            stop.check(self.comm, " after the last step (the run's files are complete)")

    def _finish(self, outcome: str) -> list:
        """Every callback's finish(self, outcome); the errors they raised."""
        errors = []
        for cb in self._all():
            if hasattr(cb, "finish"):
                try:
                    cb.finish(self, outcome)
                except Exception as exc:  # noqa: BLE001 - every callback finishes
                    errors.append(exc)
        return errors

    def _all(self):
        return ([self.watchdog] if self.watchdog is not None else []) + list(self.callbacks.values()) \
            + ([self.files] if self.files is not None else [])
