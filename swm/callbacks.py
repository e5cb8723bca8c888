"""The shallow-water model's callbacks on `framework.simulation.Simulation`: the watchdog of
(h, u), the progress bar, the history records (fields, diagnostics, error norms) and the restarts
(`framework.callbacks` holds what every model's share).

A new callback is a class with `schedule` and `__call__(sim)`, and one entry in `CALLBACKS` (at the
bottom): its name and the function that builds it from the config and the run's pieces
(`framework.callbacks.Run`); `swm.driver.build_simulation` builds them all, in that order. The
run's files (`framework.callbacks.Files`) are not among them: the Simulation finishes them after
every callback (`Simulation.files`). A callback of one's own can also be added to a built
`sim.callbacks`.
"""
from __future__ import annotations

import logging

from framework import callbacks
from framework.callbacks import HistoryCallback, HostCopies, Progress, RestartOutput, Run, host
from framework.constants import DAY
from framework.schedules import IterationInterval, TimeInterval
from meshops.parallel.comm import is_serial
from swm.variables import FIELDS

log = logging.getLogger("swm")


class Watchdog(callbacks.Watchdog):
    """Checks (h, u) every `schedule` with `swm.watchdog.StateCheck` (`framework.callbacks.Watchdog`);
    the first state is checked by `swm.driver`."""

    fields = ("h", "u")

    def inspect(self, model, step: int) -> None:
        self.check.check(model.h, model.u, model.dt, step)


class HistoryOutput(HistoryCallback):
    """Output records of the history (`swm.output.History` on rank 0, None elsewhere): the
    fields of `variables` and the diagnostics (`swm.diagnostics.Diagnostics`) every `schedule`.
    A run resumed at `resumed_step` does not write that step again: the history holds it."""

    def __init__(self, history, distribution, variables, diagnostics, schedule, interval: float,
                 *, resumed_step: int | None = None):
        self.history, self.distribution = history, distribution
        self.variables, self.diagnostics = tuple(variables), diagnostics
        self.schedule, self.interval = schedule, interval
        self.copies = HostCopies()
        self.written_step = self.resumed_step = resumed_step
        self.last = {}

    def start(self, sim) -> None:
        if sim.step != self.resumed_step and (self.record(sim.time) * self.interval == sim.time
                                              or sim.step == 0):
            self(sim)

    def __call__(self, sim) -> None:
        model, dist = sim.model, self.distribution
        d = self.diagnostics()
        if not is_serial(dist.comm):
            # the step leaves the outer halo rows stale; the fields' stencils read them (as the
            # step's own first exchange would, so the trajectory does not change)
            dist.exchange(model.h, model.u)
        fields = {name: FIELDS[name].compute(model) for name in self.variables}
        if is_serial(dist.comm):
            fields, wait, release = self.copies.copy(fields)
        else:
            fields = {name: dist.gather(FIELDS[name].location, host(a)) for name, a in fields.items()}
            wait = release = lambda: None  # noqa: E731
        if self.history is not None:
            self.history.write(self.record(sim.time), sim.time, fields, d, wait=wait, done=release)
        else:
            release()
        self.written_step, self.last = sim.step, d
        log.info("day %.3f: %s", sim.time / DAY, ", ".join(f"{k} {v:.6g}" for k, v in d.items()))


#: The shallow-water state in a restart file: (name, location, variable attributes) of each field
#: of `swm.model.Model.state`, in its order.
STATE = (("h", "cell", FIELDS["h"].attributes()), ("u", "edge", FIELDS["u"].attributes()))


def _progress(config, run: Run) -> Progress:
    s = run.setup
    return Progress(s.total, s.start, run.progress and s.comm.Get_rank() == 0,
                    IterationInterval(config.watchdog.interval_steps))


def _history(config, run: Run) -> HistoryOutput:
    interval = config.output.interval_hours * 3600.0
    return HistoryOutput(run.history, run.setup.distribution, config.output.variables,
                         run.diagnostics, TimeInterval(interval), interval,
                         resumed_step=run.setup.start or None)


def _restart(config, run: Run) -> RestartOutput:
    s, hours = run.setup, config.restart.interval_hours
    return RestartOutput(config.restart.path, s.distribution, s.fingerprint, run.writer,
                         None if hours is None else TimeInterval(hours * 3600.0),
                         at_end=hours is not None, attributes=run.attributes,
                         saved_step=s.start or None, state=STATE)


#: The callbacks of a forward run, in the order they fire and finish: name -> build(config, run)
#: (None: not in this run). A new callback is one entry here.
CALLBACKS = {"progress": _progress, "history": _history, "restart": _restart}
