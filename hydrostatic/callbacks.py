"""The hydrostatic core's callbacks on the shared `swm.simulation.Simulation`: the watchdog of its
state (`hydrostatic.watchdog`) and the history records (`hydrostatic.output.History`); the progress
bar, the restarts and the run's files are `swm.callbacks`' (Progress, RestartOutput, Files)."""
from __future__ import annotations

import logging

from meshops.device.backend import to_host
from swm.constants import DAY
from swm.watchdog import WatchdogError

from hydrostatic.output import diagnostics_of, fields_of
from hydrostatic.variables import FIELDS

log = logging.getLogger("swm")
LOCATION = {"nCells": "cell", "nEdges": "edge"}


class Watchdog:
    """Checks the state every `schedule` and keeps the last state that passed (a reference: steps
    make new arrays); the first state is checked at `start`. On a failure the model is set back to
    that state and WatchdogError names the step, field, level, entity and place."""

    def __init__(self, check, schedule):
        self.check, self.schedule = check, schedule
        self.good = None

    def start(self, sim) -> None:
        m = sim.model
        try:
            self.check.check(m.mass, m.theta_mass, m.u, sim.step)
        except WatchdogError as exc:
            which = "the restart's state" if sim.step else "the initial state"
            raise WatchdogError(f"{exc}: {which} is out of range; expected a case within the "
                                "watchdog section's limits") from None
        self.good = (m.mass, m.theta_mass, m.u, sim.step)

    def __call__(self, sim) -> None:
        m = sim.model
        if self.good is not None and self.good[3] == sim.step:
            return
        try:
            self.check.check(m.mass, m.theta_mass, m.u, sim.step)
        except WatchdogError as exc:
            m.mass, m.theta_mass, m.u, m.step_count = self.good
            raise WatchdogError(f"{exc}; the last checked state (step {m.step_count}, day "
                                f"{m.time / DAY:.4f}) is kept; expected a smaller time.dt or more "
                                "diffusion") from None
        self.good = (m.mass, m.theta_mass, m.u, sim.step)


class HistoryRecords:
    """Records of `history` (rank 0; None elsewhere) every `schedule`: the fields of `variables`
    gathered from the owned rows and the diagnostics; record k = time / interval (a final state
    off that grid: the next record). The history ends under its final name when the run finished
    or the watchdog stopped it (holding the last good state), stays a partial file when a signal or
    an error stopped it (a resumed run continues it), and is removed when the run did not start.
    A run resumed at `resumed_step` does not write that step again: the history holds it."""

    checked = True

    def __init__(self, history, distribution, variables, schedule, interval: float, *,
                 resumed_step: int | None = None):
        self.history, self.distribution, self.variables = history, distribution, tuple(variables)
        self.schedule, self.interval = schedule, interval
        self.written_step = self.resumed_step = resumed_step
        self.last = {}

    def record(self, time: float) -> int:
        k = time / self.interval
        return int(round(k)) if abs(k - round(k)) < 1e-9 * max(k, 1.0) else int(k) + 1

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
        log.info("day %.3f: mass %.12e kg", sim.time / DAY, d["mass"])

    def finish(self, sim, outcome) -> None:
        try:
            if outcome not in ("error", "not started") and self.written_step != sim.step:
                self(sim)
        finally:
            if self.history is not None:
                self.history.close(finished=outcome in ("finished", "watchdog"),
                                   discard=outcome == "not started")
