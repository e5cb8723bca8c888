"""Global diagnostics of a (possibly distributed) state, computed on the state's device and summed
over owned rows of every rank: total mass, total energy, potential enstrophy, the largest Courant
number, min/max h, and for Williamson case 2 the normalised l1, l2 and linf errors against the
analytic solution (Williamson et al. 1992, eq. 82-84). Each evaluation reads back one small vector
of partial results; nothing of global size leaves the device. What each diagnostic is (name, units,
its partial reductions) is its entry in `swm.variables.DIAGNOSTICS`; the fields they are made of
are `Local`'s, each computed once per evaluation.

    mass   = sum_c areaCell h                energy = sum_c areaCell (h ke + g ((h + b)^2 - b^2) / 2)
    enstrophy = sum_v areaTriangle h_v pv^2 / 2,   pv = (f_vertex + curl_e2v(u)) / interp_c2v(h)
    max_cfl = max_e (|u| + sqrt(g (h[c0] + h[c1]) / 2)) dt / dcEdge
"""
from __future__ import annotations

from functools import cached_property

import numpy as np

import meshops
from meshops.device.backend import array_module, to_host
from meshops.parallel.comm import is_serial
from swm.variables import DIAGNOSTICS


def _allreduce(comm, values: np.ndarray, op: str) -> np.ndarray:
    if is_serial(comm):
        return values
    from mpi4py import MPI

    out = np.empty_like(values)
    comm.Allreduce(values, out, op={"sum": MPI.SUM, "max": MPI.MAX, "min": MPI.MIN}[op])
    return out


class Diagnostics:
    """The diagnostics (`swm.variables.DIAGNOSTICS`) of a model's state on `distribution`'s owned
    rows; with `exact_h` (a local cell field, Williamson case 2's steady solution) also those made
    of it (the error norms of h)."""

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
        return tuple(name for name, d in DIAGNOSTICS.items() if not d.exact or self.exact is not None)

    def __call__(self) -> dict:
        local = Local(self)
        chosen = [DIAGNOSTICS[name] for name in self.names()]
        partials = [d.partials(local) for d in chosen]
        sums = [v for p in partials for op, v in p if op == "sum"]
        maxima = [v if op == "max" else -v for p in partials for op, v in p if op != "sum"]
        stacked = to_host(local.xp.stack(sums + maxima)).astype(np.float64, copy=False)
        s = iter(_allreduce(self.comm, stacked[:len(sums)].copy(), "sum"))
        m = iter(_allreduce(self.comm, stacked[len(sums):].copy(), "max"))
        out = {}
        for d, p in zip(chosen, partials):
            reduced = [next(s) if op == "sum" else next(m) if op == "max" else -next(m) for op, _ in p]
            out[d.name] = float(d.value(reduced))
        return out


class Local:
    """The owned rows of a model's state and the fields the diagnostics are made of, as float64
    (rows, nlev) arrays on the state's device, each computed on first use: h, u, b, area (areaCell
    as a column), area_cell, area_triangle, dc_edge, ke, h_vertex, vorticity, pv, speed (|u| +
    sqrt(g h_edge)), error (h - exact, Williamson case 2) and g, dt, xp."""

    def __init__(self, diagnostics: Diagnostics):
        self._d = diagnostics
        model = self.model = diagnostics.model
        self.xp, self.g, self.dt = array_module(model.h), diagnostics.gravity, model.dt
        self.nc, self.ne, self.nv = (diagnostics.owned[k] for k in ("cell", "edge", "vertex"))
        self.area_cell, self.area_triangle = diagnostics.area_cell, diagnostics.area_triangle
        self.dc_edge, self.exact = diagnostics.dc_edge, diagnostics.exact
        self.area = self.area_cell[:, None]

    @staticmethod
    def _f64(a):
        return a.astype(np.float64, copy=False)

    @cached_property
    def h_all(self):
        return self._f64(self.model.h)

    @cached_property
    def h(self):
        return self.h_all[:self.nc].reshape(self.nc, -1)

    @cached_property
    def u(self):
        return self._f64(self.model.u)[:self.ne].reshape(self.ne, -1)

    @cached_property
    def b(self):
        return self._f64(self.model.b)[:self.nc].reshape(self.nc, -1)

    @cached_property
    def ke(self):
        model = self.model
        return self._f64(meshops.ke_e2c(model.device_mesh, model.u))[:self.nc].reshape(self.nc, -1)

    @cached_property
    def h_vertex(self):
        model, nv = self.model, self.nv
        return self._f64(meshops.interp_c2v(model.device_mesh, model.h))[:nv].reshape(nv, -1)

    @cached_property
    def vorticity(self):
        model, nv = self.model, self.nv
        return self._f64(meshops.curl_e2v(model.device_mesh, model.u))[:nv].reshape(nv, -1)

    @cached_property
    def pv(self):
        nv = self.nv
        return (self._f64(self.model.f_vertex)[:nv].reshape(nv, -1) + self.vorticity) / self.h_vertex

    @cached_property
    def speed(self):
        h_all = self.h_all
        h_edge = 0.5 * h_all.reshape(h_all.shape[0], -1)[self._d.cells_on_edge].sum(axis=1)
        return self.xp.abs(self.u) + self.xp.sqrt(self.g * self.xp.maximum(h_edge, 0.0))

    @cached_property
    def error(self):
        return self.h[:, 0] - self.exact
