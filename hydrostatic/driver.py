"""A hydrostatic run from a config: output claimed, mesh (cached when generated), decomposition,
initial state, model, and the loop: one RK4 step at a time, a record every output interval (the
state checked finite on every rank first), the history renamed to its final name at the end."""
from __future__ import annotations

import logging
import time

import numpy as np

import meshops
from meshops.device.backend import to_host
from meshops.parallel.comm import is_serial
from swm.collective import on_root
from swm.config import ConfigError
from swm.constants import DAY, GRAVITY
from swm.driver import build_mesh, grid_reference
from swm.output import claim, provenance, release
from swm.watchdog import WatchdogError

from hydrostatic import levels, testcases
from hydrostatic.config import steps
from hydrostatic.distribution import distribute
from hydrostatic.dynamics import Physics
from hydrostatic.forcing import HeldSuarez
from hydrostatic.model import Model
from hydrostatic.output import History, diagnostics_of, fields_of
from hydrostatic.variables import FIELDS

log = logging.getLogger("swm")
LOCATION = {"nCells": "cell", "nEdges": "edge"}


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
    diagnostics (every rank)."""
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
        log.info("mesh %s; %s; %d levels; backend %s %s; dt %g s, %d steps; ready in %.2f s",
                 "" if global_mesh is None else f"{global_mesh.nCells} cells", dist.describe(),
                 config.vertical.nVertLevels, config.backend, config.dtype, dt, total,
                 time.perf_counter() - t0)
        last = _record(model, dist, history, 0, config.output.variables)
        t1 = time.perf_counter()
        while model.step_count < total:
            model.step()
            if model.step_count % per_output == 0 or model.step_count == total:
                record = -(-model.step_count // per_output)
                last = _record(model, dist, history, record, config.output.variables)
                if progress:
                    log.info("day %.3f: mass %.12e kg (%.1f s)", model.time / DAY, last["mass"],
                             time.perf_counter() - t1)
        wall = time.perf_counter() - t1
        log.info("%d steps in %.2f s (%.1f simulated days per hour); output %s", total, wall,
                 total * dt / DAY / max(wall, 1e-9) * 3600.0, config.output.path)
        if history is not None:
            history.close(finished=True)
            history = None
        return last
    finally:
        if history is not None:
            history.close(finished=False)
        release(files)


def _on_root_keep(comm, make):
    """make() on rank 0 (its object kept there, None elsewhere); an error raised on every rank."""
    kept = {}

    def work():
        kept["value"] = make()
    on_root(comm, work)
    return kept.get("value")


def _record(model, dist, history, record: int, variables) -> dict:
    """Check the state finite on every rank, then write output record `record` (rank 0) from the
    gathered owned rows; returns the diagnostics."""
    owned = [to_host(f[:dist.owned[loc]]) for f, loc in
             ((model.mass, "cell"), (model.theta_mass, "cell"), (model.u, "edge"))]
    bad = sum(int(not np.isfinite(f).all()) for f in owned)
    if meshops.parallel.comm.allreduce_sum(dist.comm)(bad):
        raise WatchdogError(f"the state is not finite at step {model.step_count} (day "
                            f"{model.time / DAY:.4f}); expected a smaller time.dt or more "
                            "diffusion")
    if model.distribution is not None:
        model.distribution.exchange(model.mass, model.theta_mass, model.u)
    fields = fields_of(model, variables)
    gathered = {name: dist.gather(LOCATION[FIELDS[name][0][0]], to_host(value))
                for name, value in fields.items()}
    diagnostics = diagnostics_of(model, dist)
    if history is not None:
        history.write(record, model.time, gathered, diagnostics)
    return diagnostics
