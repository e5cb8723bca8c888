"""Global diagnostics of a (possibly distributed) state, summed over owned rows of every rank:
total mass, total energy, potential enstrophy, the largest Courant number, min/max h, and for
Williamson case 2 the normalised l1, l2 and linf errors against the analytic solution."""
from __future__ import annotations

import numpy as np

import meshops


def _reduce(comm, value: float, op: str) -> float:
    if comm.Get_size() == 1:
        return float(value)
    from mpi4py import MPI

    return float(comm.allreduce(float(value), op={"sum": MPI.SUM, "max": MPI.MAX, "min": MPI.MIN}[op]))


def _host(x):
    return x.get() if hasattr(x, "get") else np.asarray(x)


def diagnostics(model, comm, owned: dict, gravity: float) -> dict:
    """Diagnostics of `model` (`swm.model.Model`); owned = {"cell": n, "edge": n, "vertex": n}."""
    mesh = model.mesh
    nc, ne, nv = owned["cell"], owned["edge"], owned["vertex"]
    h, u, b = _host(model.h)[:nc], _host(model.u)[:ne], _host(model.b)[:nc]
    area = np.asarray(mesh.areaCell)[:nc]
    ke = _host(meshops.ke_e2c(model.device_mesh, model.u))[:nc]
    h_vertex = _host(meshops.interp_c2v(model.device_mesh, model.h))[:nv]
    vorticity = _host(meshops.curl_e2v(model.device_mesh, model.u))[:nv]
    pv = (_host(model.f_vertex)[:nv] + vorticity) / h_vertex
    h_edge = 0.5 * (_host(model.h)[np.maximum(mesh.cellsOnEdge[:ne], 0)].sum(axis=1))
    speed = np.abs(u) + np.sqrt(gravity * h_edge)
    return {
        "mass": _reduce(comm, np.sum(area * h), "sum"),
        "energy": _reduce(comm, np.sum(area * h * ke) + 0.5 * gravity * np.sum(area * ((h + b) ** 2 - b ** 2)), "sum"),
        "potential_enstrophy": _reduce(comm, 0.5 * np.sum(np.asarray(mesh.areaTriangle)[:nv] * h_vertex * pv ** 2), "sum"),
        "max_cfl": _reduce(comm, np.max(speed * model.dt / np.asarray(mesh.dcEdge)[:ne]), "max"),
        "h_min": _reduce(comm, h.min(), "min"),
        "h_max": _reduce(comm, h.max(), "max"),
    }


def error_norms(comm, value, exact, weight) -> dict:
    """Normalised l1, l2, linf errors (Williamson et al. 1992, eq. 82-84) over owned rows."""
    value, exact, weight = (np.asarray(a, dtype=np.float64) for a in (value, exact, weight))
    err = value - exact
    l1 = _reduce(comm, np.sum(weight * np.abs(err)), "sum") / _reduce(comm, np.sum(weight * np.abs(exact)), "sum")
    l2 = np.sqrt(_reduce(comm, np.sum(weight * err ** 2), "sum") / _reduce(comm, np.sum(weight * exact ** 2), "sum"))
    linf = _reduce(comm, np.abs(err).max(), "max") / _reduce(comm, np.abs(exact).max(), "max")
    return {"l1": l1, "l2": float(l2), "linf": linf}
