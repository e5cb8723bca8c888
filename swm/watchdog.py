"""The watchdog: is the state still in the scheme's range? A device-side reduction over owned rows,

    worst = max_e (|u_e| + sqrt(g max(h_edge, 0))) dt / dcEdge_e,   h_edge = (h[c0] + h[c1]) / 2,

with any non-finite h or u making `worst` infinite; one scalar per rank is read back (and
reduced over ranks). Only when a check fails does the host look for the first bad entity, to name
the step, the field, the entity (its id counted from 1, as MPAS files and tools count: ONE_BASED)
and its latitude/longitude.
"""
from __future__ import annotations

import numpy as np

from meshops.device.backend import array_module, to_host
from meshops.parallel.comm import is_serial

from framework.errors import ONE_BASED, WatchdogError  # noqa: F401 - raised here, caught by the Simulation


class StateCheck:
    """The watchdog's reduction for one model on one distribution, with the device copies of the
    mesh rows it reads (made once)."""

    def __init__(self, model, distribution, gravity: float, cfl_limit: float):
        self.distribution, self.gravity, self.cfl_limit = distribution, gravity, cfl_limit
        xp = array_module(model.h)
        ne = distribution.owned["edge"]
        mesh = model.mesh
        self.inv_dc_edge = xp.asarray(1.0 / np.asarray(mesh.dcEdge, dtype=np.float64)[:ne])
        self.cells_on_edge = xp.asarray(np.maximum(np.asarray(mesh.cellsOnEdge)[:ne], 0))
        self.nc, self.ne = distribution.owned["cell"], ne

    def worst(self, h, u, dt: float):
        """The largest Courant number of (h, u) on this rank's owned rows as a device scalar
        (inf where a value is not finite)."""
        xp = array_module(h)
        h2 = h.reshape(h.shape[0], -1)
        u2 = u[:self.ne].reshape(self.ne, -1)
        h_edge = 0.5 * (h2[self.cells_on_edge[:, 0]] + h2[self.cells_on_edge[:, 1]])
        cfl = (xp.abs(u2) + xp.sqrt(self.gravity * xp.maximum(h_edge, 0.0))) * (dt * self.inv_dc_edge[:, None])
        finite = xp.isfinite(h2[:self.nc]).all() & xp.isfinite(cfl).all()
        return xp.where(finite, cfl.max(), xp.inf)

    def check(self, h, u, dt: float, step: int) -> None:
        """Raise WatchdogError (on every rank together) when (h, u) is out of range."""
        local = float(to_host(self.worst(h, u, dt)))
        comm = self.distribution.comm
        worst = local if is_serial(comm) else comm.allreduce(local, op=_max_op())
        if worst <= self.cfl_limit:
            return
        problem = problem_of(self.distribution, h, u, dt, step, self.gravity, self.cfl_limit) \
            if not local <= self.cfl_limit else None
        found = [(local, problem)] if is_serial(comm) else comm.allgather((local, problem))
        # the rank with the worst value names it (the same entity on any number of ranks)
        raise WatchdogError(max((w, p) for w, p in found if p)[1])


def _max_op():
    from mpi4py import MPI

    return MPI.MAX


def problem_of(distribution, h, u, dt, step, gravity, cfl_limit) -> str | None:
    """The first problem of (h, u) on this rank's owned rows, as a message naming the step, the
    field, the entity (global index) and its lat/lon; None when there is none."""
    with np.errstate(all="ignore"):
        return _first_problem(distribution, h, u, dt, step, gravity, cfl_limit)


def _first_problem(distribution, h, u, dt, step, gravity, cfl_limit) -> str | None:
    owned, mesh = distribution.owned, distribution.mesh
    for name, field, loc, lat, lon in (("h", h, "cell", mesh.latCell, mesh.lonCell),
                                       ("u", u, "edge", mesh.latEdge, mesh.lonEdge)):
        values = to_host(field)[:owned[loc]]
        bad = np.flatnonzero(~np.isfinite(values.reshape(values.shape[0], -1)).all(axis=1))
        if bad.size:
            i = int(bad[0])
            return (f"step {step}: {name} = {values[i]} at {loc} "
                    f"{distribution.global_index(loc, i) + 1} ({ONE_BASED}; lat "
                    f"{np.degrees(lat[i]):.2f}, lon {np.degrees(lon[i]):.2f} deg): not finite")
    hh, ne = to_host(h), owned["edge"]
    uu = to_host(u)[:ne]
    cells = mesh.cellsOnEdge[:ne]
    h_edge = 0.5 * (hh[cells[:, 0]] + hh[cells[:, 1]])
    speed = np.abs(uu) + np.sqrt(gravity * np.maximum(h_edge, 0.0))
    cfl = (speed * dt / np.reshape(mesh.dcEdge[:ne], (-1,) + (1,) * (speed.ndim - 1))).reshape(ne, -1).max(axis=1)
    worst = int(np.argmax(cfl))
    if cfl[worst] > cfl_limit:
        return (f"step {step}: Courant number {cfl[worst]:.4g} at edge "
                f"{distribution.global_index('edge', worst) + 1} ({ONE_BASED}; lat "
                f"{np.degrees(mesh.latEdge[worst]):.2f}, "
                f"lon {np.degrees(mesh.lonEdge[worst]):.2f} deg) above the limit {cfl_limit} "
                "(watchdog.cfl_limit)")
    return None
