"""The hydrostatic core's callbacks on the shared `framework.simulation.Simulation`: the watchdog of its
state (`hydrostatic.watchdog`) and the history records (`hydrostatic.output.History`), each the
shared callback (`swm.callbacks`: Watchdog, HistoryCallback) with this model's fields; the
progress bar, the restarts and the run's files are `swm.callbacks`' (Progress, RestartOutput,
Files).

A new callback is a class with `schedule` and `__call__(sim)`, and one entry in `CALLBACKS` (at the
bottom): its name and the function that builds it from the config and the run's pieces
(`swm.callbacks.Run`); `hydrostatic.driver.build_simulation` builds them all, in that order."""
from __future__ import annotations

import logging

from meshops.device.backend import to_host
from swm import callbacks
from framework.constants import DAY
from framework.schedules import IterationInterval, TimeInterval

from hydrostatic.output import diagnostics_of, fields_of
from hydrostatic.variables import DIAGNOSTICS, FIELDS, STATE

log = logging.getLogger("hydrostatic")
LOCATION = {"nCells": "cell", "nEdges": "edge"}


class Watchdog(callbacks.Watchdog):
    """Checks (mass, theta_mass, u) every `schedule` with `hydrostatic.watchdog.StateCheck`, the
    first state too; a failure names the step, field, level, entity and place."""

    fields = ("mass", "theta_mass", "u")
    check_first = True
    advice = "; expected a smaller time.dt or more diffusion"

    def inspect(self, model, step: int) -> None:
        self.check.check(model.mass, model.theta_mass, model.u, step)


class HistoryRecords(callbacks.HistoryCallback):
    """Records of `history` (rank 0; None elsewhere) every `schedule`: the fields of `variables`
    gathered from the owned rows and the diagnostics (`swm.callbacks.HistoryCallback`: records,
    the end of the run). A run resumed at `resumed_step` does not write that step again: the
    history holds it."""

    def __init__(self, history, distribution, variables, schedule, interval: float, *,
                 resumed_step: int | None = None):
        self.history, self.distribution, self.variables = history, distribution, tuple(variables)
        self.schedule, self.interval = schedule, interval
        self.written_step = self.resumed_step = resumed_step
        self.last = {}

    def start(self, sim) -> None:
        if sim.step != self.resumed_step:
            self(sim)

    def __call__(self, sim) -> None:
        model, dist = sim.model, self.distribution
        if model.distribution is not None:      # the fields' stencils read the halo rows
            model.distribution.exchange(model.mass, model.theta_mass, model.u)
        fields = {name: dist.gather(LOCATION[FIELDS[name][0][0]], to_host(value))
                  for name, value in fields_of(model, self.variables).items()}
        d = diagnostics_of(model, dist)
        if self.history is not None:
            self.history.write(self.record(sim.time), sim.time, fields, d)
        self.written_step, self.last = sim.step, d
        log.info("day %.3f: %s", sim.time / DAY,
                 ", ".join(f"{k} {v:.12e} {DIAGNOSTICS[k].units}" for k, v in d.items()))


def _progress(config, run: callbacks.Run) -> callbacks.Progress:
    s = run.setup
    return callbacks.Progress(s.total, s.start, run.progress and s.distribution.comm.Get_rank() == 0,
                              IterationInterval(config.watchdog.interval_steps))


def _history(config, run: callbacks.Run) -> HistoryRecords:
    interval = config.output.interval_hours * 3600.0
    return HistoryRecords(run.history, run.setup.distribution, config.output.variables,
                          TimeInterval(interval), interval, resumed_step=run.setup.start or None)


def _restart(config, run: callbacks.Run) -> callbacks.RestartOutput:
    s, hours = run.setup, config.restart.interval_hours
    return callbacks.RestartOutput(config.restart.path, s.distribution, s.fingerprint, run.writer,
                                   None if hours is None else TimeInterval(hours * 3600.0),
                                   at_end=hours is not None, attributes=run.attributes,
                                   saved_step=s.start or None, state=STATE)


#: The callbacks of a hydrostatic run, in the order they fire and finish: name -> build(config,
#: run) (None: not in this run). A new callback is one entry here.
CALLBACKS = {"progress": _progress, "history": _history, "restart": _restart}
