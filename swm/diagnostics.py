"""Global diagnostics of a (possibly distributed) state, computed on the state's device and summed
over owned rows of every rank: total mass, total energy, potential enstrophy, the largest Courant
number, min/max h, and for Williamson case 2 the normalised l1, l2 and linf errors against the
analytic solution (Williamson et al. 1992, eq. 82-84). Each evaluation reads back one small vector
of partial results; nothing of global size leaves the device. Names and units: `swm.variables`.

    mass   = sum_c areaCell h                energy = sum_c areaCell (h ke + g ((h + b)^2 - b^2) / 2)
    enstrophy = sum_v areaTriangle h_v pv^2 / 2,   pv = (f_vertex + curl_e2v(u)) / interp_c2v(h)
    max_cfl = max_e (|u| + sqrt(g (h[c0] + h[c1]) / 2)) dt / dcEdge
"""
from __future__ import annotations

import numpy as np

import meshops
from meshops.device.backend import array_module, to_host
from meshops.parallel.comm import is_serial


def _allreduce(comm, values: np.ndarray, op: str) -> np.ndarray:
    if is_serial(comm):
        return values
    from mpi4py import MPI

    out = np.empty_like(values)
    comm.Allreduce(values, out, op={"sum": MPI.SUM, "max": MPI.MAX, "min": MPI.MIN}[op])
    return out


class Diagnostics:
    """The diagnostics of a model's state on `distribution`'s owned rows; with `exact_h` (a local
    cell field, Williamson case 2's steady solution) also the error norms of h."""

    def __init__(self, model, distribution, gravity: float, exact_h=None):
        self.model, self.comm, self.gravity = model, distribution.comm, gravity
        self.owned = distribution.owned
        xp = array_module(model.h)
        mesh, nc, ne, nv = model.mesh, *(distribution.owned[k] for k in ("cell", "edge", "vertex"))
        self.area_cell = xp.asarray(np.asarray(mesh.areaCell)[:nc], dtype=np.float64)
        self.area_triangle = xp.asarray(np.asarray(mesh.areaTriangle)[:nv], dtype=np.float64)
        self.dc_edge = xp.asarray(np.asarray(mesh.dcEdge)[:ne], dtype=np.float64)
        self.cells_on_edge = xp.asarray(np.maximum(np.asarray(mesh.cellsOnEdge)[:ne], 0))
        self.exact = None if exact_h is None else xp.asarray(np.asarray(exact_h)[:nc], np.float64)

    def names(self) -> tuple:
        base = ("mass", "energy", "potential_enstrophy", "max_cfl", "h_min", "h_max")
        return base + (("h_l1", "h_l2", "h_linf") if self.exact is not None else ())

    def __call__(self) -> dict:
        model, g = self.model, self.gravity
        xp = array_module(model.h)
        nc, ne, nv = self.owned["cell"], self.owned["edge"], self.owned["vertex"]
        f64 = lambda a: a.astype(np.float64, copy=False)  # noqa: E731
        h_all = f64(model.h)
        h, u, b = h_all[:nc].reshape(nc, -1), f64(model.u)[:ne].reshape(ne, -1), f64(model.b)[:nc].reshape(nc, -1)
        area = self.area_cell[:, None]
        ke = f64(meshops.ke_e2c(model.device_mesh, model.u))[:nc].reshape(nc, -1)
        h_vertex = f64(meshops.interp_c2v(model.device_mesh, model.h))[:nv].reshape(nv, -1)
        vorticity = f64(meshops.curl_e2v(model.device_mesh, model.u))[:nv].reshape(nv, -1)
        pv = (f64(model.f_vertex)[:nv].reshape(nv, -1) + vorticity) / h_vertex
        h_edge = 0.5 * h_all.reshape(h_all.shape[0], -1)[self.cells_on_edge].sum(axis=1)
        speed = xp.abs(u) + xp.sqrt(g * xp.maximum(h_edge, 0.0))
        sums = [xp.sum(area * h), xp.sum(area * (h * ke + 0.5 * g * ((h + b) ** 2 - b ** 2))),
                xp.sum(0.5 * self.area_triangle[:, None] * h_vertex * pv ** 2)]
        maxima = [xp.max(speed * model.dt / self.dc_edge[:, None]), xp.max(h), -xp.min(h)]
        if self.exact is not None:
            err = h[:, 0] - self.exact
            w = self.area_cell
            sums += [xp.sum(w * xp.abs(err)), xp.sum(w * xp.abs(self.exact)), xp.sum(w * err ** 2),
                     xp.sum(w * self.exact ** 2)]
            maxima += [xp.max(xp.abs(err)), xp.max(xp.abs(self.exact))]
        local = xp.stack(sums + maxima)
        local = to_host(local).astype(np.float64, copy=False)
        s = _allreduce(self.comm, local[:len(sums)].copy(), "sum")
        m = _allreduce(self.comm, local[len(sums):].copy(), "max")
        out = {"mass": s[0], "energy": s[1], "potential_enstrophy": s[2], "max_cfl": m[0],
               "h_min": -m[2], "h_max": m[1]}
        if self.exact is not None:
            out.update(h_l1=s[3] / s[4], h_l2=np.sqrt(s[5] / s[6]), h_linf=m[3] / m[4])
        return {k: float(v) for k, v in out.items()}
