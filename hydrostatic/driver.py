"""A hydrostatic run from a config: output claimed, mesh (cached when generated), decomposition,
initial state (or the restart's: `restart.resume`), model, and the shared
`framework.simulation.Simulation` loop with this core's callbacks (`hydrostatic.callbacks`): the
watchdog of the state, the progress bar, the history records, the restarts
(`framework.callbacks.RestartOutput`), the writer thread and the output's claim released last.
Signals stop it as they stop a shallow-water run (`framework.stop`), with a restart to resume
from."""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass

import numpy as np

import meshops
from meshops.parallel.comm import is_serial
from framework import stop
from framework.callbacks import Files, Run
from framework.collective import on_root
from framework.errors import ConfigError
from framework.config import fixed_steps
from framework.constants import DAY, GRAVITY
from framework.driver import build_mesh, grid_reference, read_resumed, report_run, step_through
from framework.dates import MPAS_CALENDAR
from framework.output import claim, provenance
from framework.history import AsyncWriter, check_clobber, check_resumed_history
from framework.schedules import IterationInterval
from framework.simulation import Simulation

from hydrostatic import testcases
from hydrostatic.callbacks import CALLBACKS, Watchdog
from hydrostatic.distribution import distribute
from hydrostatic.dynamics import Physics
from hydrostatic.forcing import HeldSuarez
from hydrostatic.model import Model
from hydrostatic.output import CORE_NAME, History, fingerprint
from hydrostatic.stability import assess, report
from hydrostatic.variables import STATE
from hydrostatic.watchdog import StateCheck

log = logging.getLogger("hydrostatic")


def array_module(config):
    if config.backend == "numpy":
        return np
    try:
        import cupy
    except ImportError as exc:
        raise ConfigError(f"backend = cupy: CuPy cannot be imported ({exc}); expected CuPy "
                          "installed or backend: numpy") from None
    return cupy


@dataclass
class Setup:
    """A run's pieces on this rank: the model, where its fields live, on rank 0 the global mesh
    and surface geopotential (None elsewhere), the hybrid coefficients (A, B), the run's
    fingerprint (`hydrostatic.output.fingerprint`), its first step (a restart's), steps per
    output and in all."""
    model: Model
    distribution: object
    global_mesh: object
    coefficients: tuple
    phi_s: object
    fingerprint: dict
    start: int
    per_output: int
    total: int


def setup(config, comm) -> Setup:
    """Mesh, decomposition, initial state (or the restart's) and model of `config` on every rank."""
    xp, dtype = array_module(config), np.dtype(config.dtype)
    if xp is not np:
        meshops.parallel.comm.select_device(comm)
    A, B = config.vertical.coefficients()
    dt, per_output, total = fixed_steps(config)
    root = {}

    def build():
        t0 = time.perf_counter()
        root["mesh"] = mesh = build_mesh(config)
        root["rows"] = rows = testcases.row_factors(mesh, config.case.name, config.case.rotation)
        found, start = fingerprint(config, mesh, dt), 0
        if config.restart.resume:
            root["saved"], start = read_resumed(config, mesh, {name: loc for name, loc, _ in STATE},
                                                dtype, found, total, dt,
                                                levels=config.vertical.nVertLevels)
        log.info("mesh and initial state in %.2f s", time.perf_counter() - t0)
        present = {loc: tuple(name for name, v in fields.items() if v is not None)
                   for loc, fields in rows.items()}
        return found, start, present
    found, start, present = on_root(comm, build)
    global_mesh, rows, saved = root.get("mesh"), root.get("rows"), root.get("saved")
    distribution = distribute(config, comm, global_mesh, dtype, config.vertical.nVertLevels)
    mesh = distribution.mesh
    if start:
        log.info("resumed from %s at step %d (day %.4g)", config.restart.path, start,
                 start * dt / DAY)
    if start:           # a restart's state is read: of the rows, only the fixed fields are used
        present = {"cell": ("phi_s",), "vertex": ("f_vertex",)}
    local_rows = {loc: {name: distribution.scatter(loc, None if rows is None else rows[loc][name])
                        for name in names} for loc, names in present.items()}
    if start:           # the restart's state, scattered as read
        state = {name: xp.asarray(distribution.scatter(
                     loc, None if saved is None else np.asarray(saved[name], dtype=dtype)))
                 for name, loc, _ in STATE}
    else:   # formed on this rank's device from its rows' factors: the global state's rows bitwise
        layers = testcases.layer_factors(A, B, mesh.sphere_radius)
        initial = testcases.state_fields(local_rows, layers, mesh.dvEdge, xp)
        state = {name: getattr(initial, name).astype(dtype, copy=False) for name, _, _ in STATE}
        del initial
        if xp is not np:            # its float64 temporaries are not kept in CuPy's pool
            xp.get_default_memory_pool().free_all_blocks()
    phi_s = xp.asarray(local_rows["cell"]["phi_s"], dtype=dtype)
    f_vertex = xp.asarray(local_rows["vertex"]["f_vertex"], dtype=dtype)

    diffusion = config.diffusion
    physics = Physics(p_top=float(A[-1]), dB=xp.asarray(B[:-1] - B[1:], dtype=dtype),
                      gravity=GRAVITY, visc2=diffusion.visc2, visc4=diffusion.visc4,
                      visc2_theta=diffusion.visc2_theta, visc4_theta=diffusion.visc4_theta,
                      kinetic_energy=config.dynamics.kinetic_energy,
                      forcing=HeldSuarez(xp.asarray(mesh.latCell, dtype=dtype))
                      if config.case.name == "held_suarez" else None)
    model = Model(mesh, state["mass"], state["theta_mass"], state["u"], phi_s, f_vertex, dt, physics,
                  distribution=None if is_serial(comm) else distribution,
                  fused=config.dynamics.fused)
    model.step_count = start
    return Setup(model, distribution, global_mesh, (A, B),
                 None if rows is None else rows["cell"]["phi_s"], found, start, per_output, total)


def run(config, *, progress: bool = True) -> dict:
    """Run `config` on one process or on every rank of the world communicator; returns the last
    diagnostics (every rank). Raises WatchdogError or `framework.stop.Interrupted` when the run
    stops early (its state written to the history and the restart file: a resume continues them)."""
    t0 = time.perf_counter()
    sim, s = build_simulation(config, progress=progress)
    step_through(sim, config, t0)
    report_run(sim, s.total - s.start, sim.model.dt, config.output.path)
    return sim.callbacks["history"].last


def build_simulation(config, *, progress: bool = True):
    """(the `framework.simulation.Simulation` of a run of `config`, its `Setup`): the watchdog, the
    progress bar, the history records and the restarts; the writer thread and the claimed
    outputs finished last (`Files`). A resume with another output.interval_hours or
    output.variables than the history's is refused before any work
    (`framework.history.check_resumed_history`)."""
    comm = meshops.parallel.world()
    t0 = time.perf_counter()
    files = claim(comm, [("output.path", config.output.path, True),   # [history, restart] on
                         ("restart.path", config.restart.path)],      # rank 0, [] elsewhere
                  lambda: check_outputs(config))
    writer, history = None, None
    try:
        writer = AsyncWriter() if comm.Get_rank() == 0 else None
        s = setup(config, comm)
        dt, per_output, total = s.model.dt, s.per_output, s.total
        attributes = {**provenance(config, CORE_NAME),
                      "config_start_time": config.time.start,
                      "config_calendar_type": MPAS_CALENDAR}

        def make():
            resume_time = (s.start // per_output) * per_output * dt if s.start else None
            grid = None if resume_time is not None else grid_reference(
                config, s.global_mesh, config.output.path, "output.path")
            history = History(files[0], writer, s.global_mesh, config.dtype,
                              config.output.variables, config.vertical.nVertLevels, s.coefficients,
                              None if s.phi_s is None else s.phi_s / GRAVITY,
                              fingerprint=s.fingerprint, attributes=attributes, grid=grid,
                              resume_time=resume_time, start=config.time.start)
            history.restart = config.restart.path
            return history
        history = _on_root_keep(comm, make)
        dist, global_mesh = s.distribution, s.global_mesh
        log.info("mesh %s; %s; %d levels; backend %s %s, %s; dt %g s, %d steps; set up in %.2f s",
                 "" if global_mesh is None else f"{global_mesh.nCells} cells", dist.describe(),
                 config.vertical.nVertLevels, config.backend, config.dtype,
                 "fused stages" if s.model.fused else "operator path", dt, total,
                 time.perf_counter() - t0)
        t1 = time.perf_counter()
        found = assess(config, s.model, dist)
        if comm.Get_rank() == 0:
            report(found)
            log.info("time step and diffusion limits estimated in %.2f s", time.perf_counter() - t1)
        w = config.watchdog
        sim = Simulation(s.model, total, comm=comm, files=Files(writer, files),
                         watchdog=Watchdog(StateCheck(dist, w.max_wind, w.min_theta, w.max_theta),
                                           IterationInterval(w.interval_steps), found))
        run = Run(s, history, writer, None, attributes, progress)
        for name, build in CALLBACKS.items():
            callback = build(config, run)
            if callback is not None:
                sim.callbacks[name] = callback
        return sim, s
    except BaseException:            # nothing of the run is left: a new history is removed
        with stop.deferred():
            if history is not None:
                history.close(finished=False, discard=True)
            Files(writer, files).finish(None, "error")
        raise


def check_outputs(config) -> None:
    """The claim's checks on rank 0: output.clobber against the files there
    (`framework.history.check_clobber`), and a resumed history's settings
    (`framework.history.check_resumed_history`)."""
    check_clobber(config)
    if config.restart.resume:
        check_resumed_history(config)


def _on_root_keep(comm, make):
    """make() on rank 0 (its object kept there, None elsewhere); an error raised on every rank."""
    kept = {}

    def work():
        kept["value"] = make()
    on_root(comm, work)
    return kept.get("value")
