"""A tracer run from a config: the global mesh, wind and bell on rank 0, the decomposition, the
model, and the framework's Simulation loop with the history callback (`tracer.output`)."""
from __future__ import annotations

import logging
import math

import numpy as np

import meshops
from meshops.parallel.comm import is_serial
from framework.collective import on_root
from framework.constants import DAY
from framework.errors import ConfigError
from framework.schedules import IterationInterval
from framework.simulation import Simulation

from tracer.cases import bell, wind
from tracer.distribution import distribute
from tracer.model import Model
from tracer.output import History
from tracer.shared import build_mesh, fixed_steps

log = logging.getLogger("tracer")


def build_simulation(config, comm):
    """The `Simulation` of `config` on every rank of `comm`. Refused on rank 0 before any step,
    naming the key: a history already at output.path (output.clobber: never_modify), a time.dt
    whose Courant number max |u| dt / dcEdge is above max_courant."""
    if config.backend == "cupy":
        import cupy as xp
    else:
        xp = np
    dtype = np.dtype(config.dtype)
    dt, per_output, total = fixed_steps(config)
    case = config.case
    u0 = 2 * math.pi * config.mesh.radius / (case.revolution_days * DAY)
    root = {}

    def build():
        path = config.output.path
        if path.exists() and config.output.clobber == "never_modify":
            raise ConfigError(f"output.path = {str(path)!r}: the file exists and output.clobber "
                              "is never_modify; expected another path or output.clobber: overwrite")
        root["mesh"] = mesh = build_mesh(config)
        root["edge"], root["cell"] = wind(mesh, u0, case.alpha), bell(mesh, u0, case.alpha)
        courant = float(np.max(np.abs(root["edge"]) * dt / mesh.dcEdge))
        if courant > config.max_courant:
            raise ConfigError(f"time.dt = {dt:g}: Courant number {courant:.3g} on this mesh; "
                              f"expected at most max_courant = {config.max_courant} "
                              f"(time.dt <= {dt * config.max_courant / courant:.4g} s)")
    on_root(comm, build)
    global_mesh = root.get("mesh")
    distribution = distribute(config, comm, global_mesh, dtype)

    def local(location):
        field = root[location].astype(dtype) if root else None
        return xp.asarray(distribution.scatter(location, field))
    model = Model(distribution.mesh, local("cell"), local("edge"), dt,
                  distribution=None if is_serial(comm) else distribution)
    log.info("%s; %s; backend %s %s; dt %g s, %d steps", "" if global_mesh is None else
             f"{global_mesh.nCells} cells", distribution.describe(), config.backend, config.dtype,
             dt, total)
    history = History(config, distribution, global_mesh, u0, IterationInterval(per_output))
    return Simulation(model, total, comm=comm, callbacks={"history": history}, resumable=False)


def run(config, *, progress: bool = False) -> None:
    """Run `config` on one process or on every rank of the world communicator."""
    sim = build_simulation(config, meshops.parallel.world())
    sim.run()
    log.info("%d steps in %.2f s; output %s", sim.step, sim.loop_seconds, config.output.path)
