"""A hydrostatic run from a config: output claimed, mesh (cached when generated), decomposition,
initial state, model, and the shared `swm.simulation.Simulation` loop with this core's callbacks
(`hydrostatic.callbacks`): the watchdog of the state, the progress bar, the history records, the
output's claim released last. Signals stop it as they stop a shallow-water run (`swm.stop`)."""
from __future__ import annotations

import logging
import time

import numpy as np

import meshops
from meshops.parallel.comm import is_serial
from swm import stop
from swm.callbacks import Files, Progress
from swm.collective import on_root
from swm.config import ConfigError
from swm.config import fixed_steps as steps
from swm.constants import DAY, GRAVITY
from swm.driver import build_mesh, grid_reference
from swm.output import claim, provenance, release
from swm.schedules import IterationInterval, TimeInterval
from swm.simulation import Simulation
from swm.watchdog import WatchdogError

from hydrostatic import levels, testcases
from hydrostatic.callbacks import HistoryRecords, Watchdog
from hydrostatic.distribution import distribute
from hydrostatic.dynamics import Physics
from hydrostatic.forcing import HeldSuarez
from hydrostatic.model import Model
from hydrostatic.watchdog import StateCheck
from hydrostatic.output import History

log = logging.getLogger("swm")


def array_module(config):
    if config.backend == "numpy":
        return np
    try:
        import cupy
    except ImportError as exc:
        raise ConfigError(f"backend = cupy: CuPy cannot be imported ({exc}); expected CuPy "
                          "installed or backend: numpy") from None
    return cupy


def setup(config, comm):
    """(model, distribution, global mesh on rank 0 or None, (A, B)) of `config` on every rank."""
    xp, dtype = array_module(config), np.dtype(config.dtype)
    if xp is not np:
        meshops.parallel.comm.select_device(comm)
    A, B = levels.coefficients(config.vertical.levels)
    root = {}

    def build():
        t0 = time.perf_counter()
        root["mesh"] = mesh = build_mesh(config)
        root["state"] = testcases.initial_state(mesh, config.case.name, A, B)
        log.info("mesh and initial state in %.2f s", time.perf_counter() - t0)
    on_root(comm, build)
    global_mesh, state = root.get("mesh"), root.get("state")
    distribution = distribute(config, comm, global_mesh, dtype, config.vertical.nVertLevels)
    mesh = distribution.mesh

    def local(location, name):
        field = None if state is None else np.asarray(getattr(state, name), dtype=dtype)
        return xp.asarray(distribution.scatter(location, field))

    diffusion = config.diffusion
    physics = Physics(p_top=float(A[-1]), dB=xp.asarray(B[:-1] - B[1:], dtype=dtype),
                      gravity=GRAVITY, visc2=diffusion.visc2, visc4=diffusion.visc4,
                      visc2_theta=diffusion.visc2_theta, visc4_theta=diffusion.visc4_theta,
                      forcing=HeldSuarez(xp.asarray(mesh.latCell, dtype=dtype))
                      if config.case.name == "held_suarez" else None)
    dt = steps(config)[0]
    model = Model(mesh, local("cell", "mass"), local("cell", "theta_mass"), local("edge", "u"),
                  local("cell", "phi_s"), local("vertex", "f_vertex"), dt, physics,
                  distribution=None if is_serial(comm) else distribution)
    return model, distribution, global_mesh, (A, B), (None if state is None else state.phi_s)


def run(config, *, progress: bool = True) -> dict:
    """Run `config` on one process or on every rank of the world communicator; returns the last
    diagnostics (every rank). Raises WatchdogError or `swm.stop.Interrupted` when the run stops
    early (the history keeps the records so far: `hydrostatic.callbacks.HistoryRecords`)."""
    t0 = time.perf_counter()
    sim, dist = build_simulation(config, progress=progress)
    try:
        sim.prepare()
        log.info("ready to step in %.2f s", time.perf_counter() - t0)
        sim.run()
    except WatchdogError:
        log.error("the state of step %d (day %.4f) was written to %s", sim.step, sim.time / DAY,
                  config.output.path)
        raise
    except BaseException:
        sim.abandon()                        # stopped before the loop's own finish
        raise
    steps, wall = sim.stop_step, sim.loop_seconds
    log.info("%d steps in %.2f s (%.1f simulated days per hour); output %s", steps, wall,
             steps * sim.model.dt / DAY / max(wall, 1e-9) * 3600.0, config.output.path)
    return sim.callbacks["history"].last


def build_simulation(config, *, progress: bool = True):
    """(the `swm.simulation.Simulation` of a run of `config`, its distribution): the watchdog,
    the progress bar and the history records, the claimed output finished last (`Files`)."""
    comm = meshops.parallel.world()
    t0 = time.perf_counter()
    files = claim(comm, [("output.path", config.output.path)])
    history = None
    try:
        model, dist, global_mesh, (A, B), phi_s = setup(config, comm)
        dt, per_output, total = steps(config)
        attributes = provenance(config)

        def make():
            grid = grid_reference(config, global_mesh, config.output.path, "output.path")
            return History(files[0], global_mesh, config.output.variables, config.dtype,
                           config.vertical.nVertLevels, A, B, phi_s / GRAVITY, attributes, grid)
        history = _on_root_keep(comm, make)
        log.info("mesh %s; %s; %d levels; backend %s %s; dt %g s, %d steps; set up in %.2f s",
                 "" if global_mesh is None else f"{global_mesh.nCells} cells", dist.describe(),
                 config.vertical.nVertLevels, config.backend, config.dtype, dt, total,
                 time.perf_counter() - t0)
        w, interval = config.watchdog, config.output.interval_hours * 3600.0
        sim = Simulation(model, total, comm=comm, resumable=False, files=Files(None, files),
                         watchdog=Watchdog(StateCheck(dist, w.max_wind, w.min_theta, w.max_theta),
                                           IterationInterval(w.interval_steps)))
        sim.callbacks["progress"] = Progress(total, 0, progress and comm.Get_rank() == 0,
                                             IterationInterval(w.interval_steps))
        sim.callbacks["history"] = HistoryRecords(history, dist, config.output.variables,
                                                  TimeInterval(interval), interval)
        return sim, dist
    except BaseException:            # nothing of the run is left: a new history is removed
        with stop.deferred():
            if history is not None:
                history.close(finished=False)
            release(files)
        raise


def _on_root_keep(comm, make):
    """make() on rank 0 (its object kept there, None elsewhere); an error raised on every rank."""
    kept = {}

    def work():
        kept["value"] = make()
    on_root(comm, work)
    return kept.get("value")
