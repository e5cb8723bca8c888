"""The hydrostatic core's callbacks on the shared `framework.simulation.Simulation`: the watchdog of
its state (`hydrostatic.watchdog`) and the history records (`hydrostatic.output.History`), each the
shared callback (`framework.callbacks`: Watchdog, HistoryCallback) with this model's fields; the
progress bar, the restarts and the run's files are `framework.callbacks`' (Progress,
RestartOutput, Files).

A new callback is a class with `schedule` and `__call__(sim)`, and one entry in `CALLBACKS` (at the
bottom): its name and the function that builds it from the config and the run's pieces
(`framework.callbacks.Run`); `hydrostatic.driver.build_simulation` builds them all, in that
order."""
from __future__ import annotations

import logging

from meshops.device.backend import to_host
from framework import callbacks
from framework.constants import DAY
from framework.schedules import IterationInterval, TimeInterval

from hydrostatic.output import diagnostics_of, fields_of
from hydrostatic.variables import DIAGNOSTICS, FIELDS, STATE

log = logging.getLogger("hydrostatic")
LOCATION = {"nCells": "cell", "nEdges": "edge"}


class Watchdog(callbacks.Watchdog):
    """Checks (mass, theta_mass, u) every `schedule` with `hydrostatic.watchdog.StateCheck`, the
    first state too; a failure names the step, field, level, entity and place, then what to
    change (`advice`: from the run's `hydrostatic.stability.Stability` when given)."""

    fields = ("mass", "theta_mass", "u")
    check_first = True

    def __init__(self, check, schedule, stability=None):
        super().__init__(check, schedule)
        self.advice = advice(stability)

    def inspect(self, model, step: int) -> None:
        self.check.check(model.mass, model.theta_mass, model.u, step)


def advice(stability) -> str:
    """What a watchdog stop tells the user to change: a diffusion above its stable limit (named,
    with the largest stable value: more of it would not help), else a time.dt above the Courant
    limit (with the suggested dt), else a smaller time.dt or more diffusion."""
    if stability is None:
        return "; expected a smaller time.dt or more diffusion"
    too_much = stability.too_much_diffusion()
    if too_much:
        return "; " + "; ".join(d.describe() for d in too_much)
    if stability.warnings():
        return "; " + stability.warnings()[0]
    return (f"; expected a smaller time.dt (suggested: <= {stability.suggested_dt:g} s) or more "
            "diffusion")


class DailyLog:
    """A log line at the start and every simulated day: the smallest surface pressure (hPa), the
    largest |u| (m/s), the total energy (J) and the total mass (kg) (`daily_summary`: device
    reductions, read back once a day, not every step)."""

    def __init__(self, distribution):
        self.distribution = distribution
        self.schedule = TimeInterval(DAY)

    def start(self, sim) -> None:
        self(sim)

    def __call__(self, sim) -> None:
        ps, wind, energy, mass = daily_summary(sim.model, self.distribution)
        log.info("day %g: min p_s %.2f hPa, max |u| %.2f m/s, total energy %.10e J, total mass "
                 "%.10e kg", round(sim.time / DAY, 4), ps / 100.0, wind, energy, mass)


def daily_summary(model, distribution) -> tuple[float, float, float, float]:
    """(min p_s (Pa), max |u| (m/s), total energy (J), total mass (kg)) over the owned rows of
    every rank: the energy sum_i areaCell (sum_k mass (cp T + K) + p_s phi_s / g), K the cell
    kinetic energy (ke_e2c), the mass sum_i areaCell sum_k mass. Four device scalars read back
    once, reduced over the ranks."""
    import meshops
    from meshops.device.backend import array_module
    from meshops.operators.vertical import CP_DRY
    from meshops.parallel.comm import is_serial

    from hydrostatic.dynamics import column_diagnostics

    m, physics = model.device_mesh, model.physics
    nc, ne = distribution.owned["cell"], distribution.owned["edge"]
    if model.distribution is not None:      # the diagnostics' stencils read the halo rows
        model.distribution.exchange(model.mass, model.theta_mass, model.u)
    xp = array_module(model.mass)
    d = column_diagnostics(m, model.mass, model.theta_mass, model.phi_s, physics)
    temperature = d["theta"] * meshops.exner(m, d["p"])
    mass, p_s = model.mass[:nc], d["p_i"][:nc, 0]
    area = xp.asarray(distribution.mesh.areaCell[:nc], dtype=xp.float64)
    column = (mass * (CP_DRY * temperature[:nc] + meshops.ke_e2c(m, model.u)[:nc])).sum(axis=1)
    energy = (area * (column + p_s * model.phi_s[:nc] / physics.gravity)).sum()
    values = to_host(xp.stack([p_s.min(), xp.abs(model.u[:ne]).max(), energy,
                               (area * mass.sum(axis=1)).sum()]).astype(xp.float64))
    low, wind, energy, total = (float(v) for v in values)
    comm = distribution.comm
    if is_serial(comm):
        return low, wind, energy, total
    from mpi4py import MPI

    return (comm.allreduce(low, op=MPI.MIN), comm.allreduce(wind, op=MPI.MAX),
            comm.allreduce(energy, op=MPI.SUM), comm.allreduce(total, op=MPI.SUM))


class HistoryRecords(callbacks.HistoryCallback):
    """Records of `history` (rank 0; None elsewhere) every `schedule`: the fields of `variables`
    gathered from the owned rows and the diagnostics (`framework.callbacks.HistoryCallback`:
    records, the end of the run). A run resumed at `resumed_step` does not write that step again:
    the history holds it."""

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
                                   saved_step=s.start or None, state=STATE,
                                   start_date=config.time.start)


def _daily(config, run: callbacks.Run) -> DailyLog:
    return DailyLog(run.setup.distribution)


#: The callbacks of a hydrostatic run, in the order they fire and finish: name -> build(config,
#: run) (None: not in this run). A new callback is one entry here.
CALLBACKS = {"progress": _progress, "daily": _daily, "history": _history, "restart": _restart}
