"""The hydrostatic core's callbacks on the shared `swm.simulation.Simulation`: the watchdog of its
state (`hydrostatic.watchdog`) and the history records (`hydrostatic.output.History`), each the
shared callback (`swm.callbacks`: Watchdog, HistoryCallback) with this model's fields; the
progress bar and the run's files are `swm.callbacks`' (Progress, Files)."""
from __future__ import annotations

import logging

from meshops.device.backend import to_host
from swm import callbacks
from swm.constants import DAY

from hydrostatic.output import diagnostics_of, fields_of
from hydrostatic.variables import DIAGNOSTICS, FIELDS

log = logging.getLogger("swm")
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
    gathered from the owned rows and the diagnostics."""

    def __init__(self, history, distribution, variables, schedule, interval: float):
        self.history, self.distribution, self.variables = history, distribution, tuple(variables)
        self.schedule, self.interval = schedule, interval
        self.written_step, self.last = None, {}

    def start(self, sim) -> None:
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
