"""A shallow-water run from a config: the output files claimed, mesh (cached when generated), decomposition,
initial state (or the restart's), model, and the `framework.simulation.Simulation` with the config's
callbacks. `run_model.py` and `swm.run` are its entry points; the sensitivity and 4D-Var
applications build their runs with `setup`."""
from __future__ import annotations

import logging
import math
import time

import numpy as np

import meshops
from framework import stop
from framework.callbacks import Files, Run
from framework.collective import on_root
from framework.config import fixed_steps, step_counts
from framework.constants import DAY, GRAVITY
from framework.driver import (Setup, build_mesh, grid_reference, read_resumed, report_run,
                              step_through)
from framework.errors import ConfigError, WatchdogError
from framework.output import OutputError, claim, map_problem, provenance
from framework.mesh_files import (cells_fingerprint, mesh_fingerprint, mesh_settings,
                                  trajectory_settings)
from framework.history import AsyncWriter, check_clobber, check_resumed_history
from framework.schedules import IterationInterval
from framework.simulation import Simulation
from meshops.device.backend import to_host
from meshops.parallel.comm import is_serial
from swm import testcases
from swm.callbacks import CALLBACKS, Watchdog
from swm.config import Config
from swm.diagnostics import Diagnostics
from swm.distribution import distribute
from swm.files import history_maps
from swm.model import Model
from swm.output import CORE_NAME, History, mpas_namelist
from swm.tendencies import Physics
from swm.watchdog import StateCheck

log = logging.getLogger("swm")

def initial_state(config: Config, mesh) -> testcases.InitialState:
    case = config.case
    if case.name == "williamson2":
        return testcases.williamson2(mesh, case.alpha)
    if case.name == "galewsky":
        return testcases.galewsky(mesh, perturbed=case.perturbed)
    return testcases.CASES[case.name](mesh)


def time_step(config: Config, mesh, state) -> tuple[float, int, int]:
    """(dt, steps per output, total steps): time.dt (checked with the config:
    `framework.config.fixed_steps`), or with time.cfl the largest dt dividing the output interval under
    cfl * min(dcEdge) / max(|u| + sqrt(g h)), checked by `framework.config.step_counts`."""
    if config.time.dt is not None:
        return fixed_steps(config)
    interval = config.output.interval_hours * 3600.0
    speed = np.abs(state.u).max() + np.sqrt(GRAVITY * (state.h).max())
    per_output = math.ceil(interval / (config.time.cfl * mesh.dcEdge.min() / speed))
    return step_counts(config, per_output,
                       f"time.cfl = {config.time.cfl} on a mesh of smallest dcEdge "
                       f"{mesh.dcEdge.min():.4g} m (mesh.radius = {config.mesh.radius:.6g} m)")


def setup(config: Config) -> Setup:
    """Mesh, decomposition, initial state (or the restart's) and model of `config` on every rank
    of the world communicator."""
    comm = meshops.parallel.world()
    xp = np
    if config.backend == "cupy":
        try:
            import cupy as xp
        except ImportError as exc:
            raise ConfigError(f"backend = cupy: CuPy cannot be imported ({exc}); expected CuPy "
                              "installed (pip install \".[gpu]\" or cupy-cuda13x) or backend: "
                              "numpy") from None
        meshops.parallel.comm.select_device(comm)
    dtype = np.dtype(config.dtype)
    root = {}                                     # the global mesh and state, on rank 0 only

    def build():
        t0 = time.perf_counter()
        mesh = root["mesh"] = build_mesh(config)
        root["state"] = initial_state(config, mesh)
        dt, per_output, total = time_step(config, mesh, root["state"])
        fingerprint = {"mesh": mesh_fingerprint(mesh), "settings": trajectory_settings(config, dt),
                       "cells": cells_fingerprint(mesh), "mesh_settings": mesh_settings(config)}
        start = 0
        if config.restart.resume:
            state, start = read_resumed(config, mesh, {"h": "cell", "u": "edge"}, dtype,
                                        fingerprint, total, dt)
            root["state"].h, root["state"].u = state["h"], state["u"]
        log.info("mesh and initial state in %.2f s", time.perf_counter() - t0)
        return dt, per_output, total, fingerprint, start

    dt, per_output, total, fingerprint, start = on_root(comm, build)
    global_mesh, state = root.get("mesh"), root.get("state")
    physics = Physics(gravity=GRAVITY, visc2=config.diffusion.visc2, visc4=config.diffusion.visc4,
                      apvm=config.diffusion.apvm)             # dt: the model's (`Model.dt`)
    distribution = distribute(config, comm, global_mesh, physics, dtype)
    mesh = distribution.mesh
    if start:
        log.info("resumed from %s at step %d (day %.4g)", config.restart.path, start, start * dt / DAY)
    log.info("mesh %d cells, %d edges, %d vertices; %s; backend %s %s; dt %.3f s, %d steps",
             *(global_mesh.nCells, global_mesh.nEdges, global_mesh.nVertices)
             if comm.Get_rank() == 0 else (0, 0, 0),
             distribution.describe(), config.backend, config.dtype, dt, total)
    if config.backend == "cupy" and not is_serial(comm):
        log.info("halo transport: %s", distribution.state_exchange.transport_summary(xp))

    def local(location, name):
        field = distribution.scatter(location, None if state is None else
                                     np.asarray(getattr(state, name), dtype=dtype))
        return xp.asarray(field)

    model = Model(mesh, local("cell", "h"), local("edge", "u"), local("cell", "b"),
                  local("vertex", "f_vertex"), dt, physics, distribution=distribution)
    model.step_count = start
    return Setup(comm, xp, dtype, distribution, mesh, model, dt, per_output, total, global_mesh,
                 start, fingerprint)


def state_check(config: Config, s: Setup) -> StateCheck:
    """The watchdog's device-side check of the run's state."""
    return StateCheck(s.model, s.distribution, GRAVITY, config.watchdog.cfl_limit)


def state_checker(config: Config, s: Setup):
    """check(state, step) of a state (h, u) of the run at its dt (`state_check`): the watchdog
    of its gradients (`adjoint.gradient.watchdog`)."""
    check = state_check(config, s)
    return lambda state, step: check.check(*state, s.dt, step)


def check_first_state(config: Config, s: Setup) -> None:
    """The watchdog's check of the state the run starts from (the case's, or the restart's),
    before the first step: a Courant number above watchdog.cfl_limit stops the run with the
    watchdog's message and the key that sets dt (otherwise the scheme blows up and the first
    check finds NaN)."""
    try:
        state_check(config, s).check(s.model.h, s.model.u, s.dt, s.start)
    except WatchdogError as exc:
        which = "the restart's state" if s.start else "the initial state"
        key = f"time.dt = {config.time.dt}" if config.time.dt is not None else \
            f"time.cfl = {config.time.cfl} (dt = {s.dt:.6g} s)"
        raise WatchdogError(f"{exc}: {which} is out of range at {key}; expected a smaller "
                            f"{key.split(' ')[0]}") from None


def build_simulation(config: Config, *, progress: bool = True,
                     plot: bool = False) -> tuple[Simulation, Setup]:
    """The Simulation of a forward run of `config`: watchdog, progress bar, history (fields,
    diagnostics, case-2 error norms) and restarts, as the config says; its files claimed before
    any work, with `plot` the PNGs of run_model.py --plot too (`plots_ok`)."""
    comm = meshops.parallel.world()
    def check():
        check_clobber(config)
        if config.restart.resume:
            check_resumed_history(config)
        if plot:
            plots_ok(config)

    files = claim(comm, [("output.path", config.output.path, True),   # [history, restart] on
                         ("restart.path", config.restart.path)],      # rank 0, [] elsewhere
                  check)
    writer, made = None, {}
    try:
        writer = AsyncWriter() if comm.Get_rank() == 0 else None
        attributes = provenance(config, CORE_NAME)
        s = setup(config)
        check_first_state(config, s)
        attributes.update(mpas_namelist(config, s.dt, s.total))
        diagnostics = _diagnostics(config, s)
        _history(config, s, files, writer, attributes, made, diagnostics.names())
        return _simulation(config, s, Run(s, made.get("history"), writer, diagnostics, attributes,
                                          progress), files), s
    except BaseException:            # nothing of the run is left: a new history is removed
        with stop.deferred():
            if made.get("history") is not None:
                made["history"].close(finished=False, discard=True)
            Files(writer, files).finish(None, "error")
        raise


def _diagnostics(config: Config, s: Setup) -> Diagnostics:
    """The run's global diagnostics (`swm.variables.DIAGNOSTICS`), the error norms of h against
    the analytic solution for Williamson case 2."""
    exact = None
    if config.case.name == "williamson2":
        mesh = s.mesh
        exact = testcases.williamson2_height(mesh.latCell, mesh.lonCell, mesh.sphere_radius,
                                             config.case.alpha)
    return Diagnostics(s.model, s.distribution, GRAVITY, exact)


def _simulation(config: Config, s: Setup, run: Run, files: list) -> Simulation:
    """The Simulation of the run: the watchdog, the callbacks of `swm.callbacks.CALLBACKS` in
    their order, and the run's files (finished after every callback)."""
    sim = Simulation(s.model, s.total, comm=s.comm,
                     watchdog=Watchdog(state_check(config, s),
                                       IterationInterval(config.watchdog.interval_steps)),
                     files=Files(run.writer, files))
    for name, build in CALLBACKS.items():
        callback = build(config, run)
        if callback is not None:
            sim.callbacks[name] = callback
    return sim


def plots_ok(config: Config) -> None:
    """Refuse (OutputError) a PNG of run_model.py --plot (`swm.files.history_maps`) that cannot be
    written: its folder, or a file there that this model did not write."""
    for png in history_maps(config):
        problem = map_problem(png)
        if problem is not None:
            raise OutputError(f"--plot: the map {str(png)!r} of output.path = "
                              f"{str(config.output.path)!r} {problem}")


def _history(config: Config, s: Setup, files: list, writer, attributes: dict, made: dict,
             diag: tuple):
    """made["history"]: the History on rank 0 (none elsewhere) of the diagnostics `diag`: a new
    file (with the topography h_s, the global `attributes`, and the mesh or its grid file's
    reference: `grid_reference`), or the resumed run's history."""
    b = s.model.b
    topography = s.distribution.gather("cell", to_host(b))

    def make():
        resume_time = None
        if s.start:
            resume_time = (s.start // s.per_output) * s.per_output * s.dt
        grid = None if resume_time is not None else grid_reference(
            config, s.global_mesh, config.output.path, "output.path")
        made["history"] = History(files[0], writer, s.global_mesh, s.dtype,
                                  config.output.variables, diag, fingerprint=s.fingerprint,
                                  resume_time=resume_time, topography=topography,
                                  attributes=attributes, grid=grid)
        made["history"].restart = config.restart.path
    on_root(s.comm, make)


def run(config: Config, *, progress: bool = True, plot: bool = False) -> dict:
    """Run `config` on one process or on every rank of the world communicator; returns the last
    diagnostics (every rank); `plot`: the PNGs of run_model.py --plot are claimed too. Raises
    WatchdogError or `framework.simulation.Interrupted` when the run stops early (its state written to
    the history and the restart file)."""
    t0 = time.perf_counter()
    sim, s = build_simulation(config, progress=progress, plot=plot)
    s.global_mesh = None                     # written to the history; not needed any more
    step_through(sim, config, t0)
    report_run(sim, s.total - s.start, s.dt, config.output.path)
    return sim.callbacks["history"].last
