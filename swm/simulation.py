"""A Simulation: a model, its stop step, and callbacks that fire on schedules.

    sim = Simulation(model, stop_step, comm=comm)
    sim.callbacks["history"] = HistoryOutput(...)          # swm.callbacks
    sim.run()

The loop only steps the model and fires what is due (`schedule.due(step, time, dt)`); nothing in it
moves the state to the host. A callback with `checked = True` (writers) gets a state that the
watchdog has just passed: the watchdog runs on its own schedule and before any such callback.
`finish(sim, outcome)` of every callback runs when the run ends: outcome "finished", "watchdog"
(the model holds the last good state), "interrupted" (SIGTERM or SIGINT: the model holds the state
of the current step) or "error".
"""
from __future__ import annotations

import contextlib
import signal
import threading

from swm.constants import DAY


class Interrupted(RuntimeError):
    """The run was stopped by a signal; `signum` is its number."""

    def __init__(self, message: str, signum: int):
        super().__init__(message)
        self.signum = signum


class Simulation:
    """`model` (a `swm.model.Model`) stepped to `stop_step`; `callbacks` ordered by name;
    `watchdog` (a `swm.callbacks.Watchdog` or None); `comm` the run's communicator."""

    def __init__(self, model, stop_step: int, *, comm, callbacks=None, watchdog=None):
        self.model, self.stop_step, self.comm = model, int(stop_step), comm
        self.callbacks = dict(callbacks or {})
        self.watchdog = watchdog
        self.outcome = None

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

    def run(self) -> None:
        """Step to `stop_step`; raises `swm.watchdog.WatchdogError` or `Interrupted` after
        every callback has finished."""
        from swm.watchdog import WatchdogError

        for cb in self._all():
            if hasattr(cb, "start"):
                cb.start(self)
        outcome = "error"
        try:
            with stop_signals(self.comm) as stop:
                while self.step < self.stop_step:
                    self.model.step()
                    self._fire()
                    signum = stop.requested()
                    if signum:
                        outcome = "interrupted"
                        raise Interrupted(f"stopped by {signal.Signals(signum).name} at step "
                                          f"{self.step} (day {self.time / DAY:.4f})", signum)
            outcome = "finished"
        except WatchdogError:
            outcome = "watchdog"
            raise
        finally:
            self.outcome = outcome
            errors = []
            for cb in self._all():
                if hasattr(cb, "finish"):
                    try:
                        cb.finish(self, outcome)
                    except Exception as exc:  # noqa: BLE001 - every callback finishes
                        errors.append(exc)
            if errors and outcome in ("finished", "interrupted", "watchdog"):
                raise errors[0]

    def _all(self):
        return ([self.watchdog] if self.watchdog is not None else []) + list(self.callbacks.values())


class _StopFlag:
    def __init__(self, comm):
        self.comm, self.signum = comm, 0

    def requested(self) -> int:
        """The signal that stops the run (0: none), the same on every rank."""
        if self.comm.Get_size() == 1:
            return self.signum
        from mpi4py import MPI

        return self.comm.allreduce(self.signum, op=MPI.MAX)


@contextlib.contextmanager
def stop_signals(comm):
    """SIGTERM and SIGINT set a flag the loop reads after each step (main thread only)."""
    flag = _StopFlag(comm)
    if threading.current_thread() is not threading.main_thread():
        yield flag
        return

    def handler(signum, frame):
        flag.signum = signum

    previous = {s: signal.signal(s, handler) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield flag
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
