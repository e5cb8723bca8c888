"""The shallow-water model: mesh, state (h on cells, u on edges), fixed fields (b, f_vertex),
physics, and the RK4 step of the TRiSK tendencies."""
from __future__ import annotations

from dataclasses import replace

import numpy as np

import meshops
from meshops.device.backend import array_module

from swm.fused import FusedRK4
from swm.tendencies import Physics, tendencies
from swm.timestepping import rk4_step


class Model:
    """State and stepping. `mesh` is the (local, in a distributed run) mesh; the fields are NumPy
    or CuPy arrays, and the operators run on `device_mesh` (default: the `meshops.DeviceMesh` of
    the mesh on the fields' backend), held beside the state. `exchange`, when given, brings the
    halo rows of (h, u) up to date in place before each RK stage's tendencies (one state exchange
    per stage). `exchange_tl(dh, du[, db])` and `exchange_adjoint(h_adj, u_adj[, b_adj])` are the
    exchanges of the tangent-linear and adjoint steps (`adjoint.model`; the distribution's methods
    of the same names); the forward step does not use them. `fused` steps through the fused kernels
    of `swm.fused` (CuPy only; default: on CuPy fields), otherwise through the operators
    (`swm.tendencies`, `swm.timestepping`): the same arithmetic. A term of one's own goes into the
    physics (`Physics(extra_terms=...)`, `swm.terms`), which every path then sums."""

    def __init__(self, mesh, h, u, b, f_vertex, dt: float, physics: Physics | None = None,
                 exchange=None, device_mesh=None, exchange_tl=None, exchange_adjoint=None,
                 fused: bool | None = None):
        if not dt > 0:
            raise ValueError(f"dt: expected a positive time step in seconds, got {dt}")
        self.mesh, self.h, self.u, self.b, self.f_vertex = mesh, h, u, b, f_vertex
        self.dt = float(dt)
        self.physics = physics or Physics()
        if self.physics.apvm and self.physics.dt != self.dt:
            self.physics = replace(self.physics, dt=self.dt)
        self.step_count = 0
        self.exchange = exchange
        self.exchange_tl, self.exchange_adjoint = exchange_tl, exchange_adjoint
        xp = array_module(h)
        self.device_mesh = device_mesh or meshops.device_mesh(mesh, xp)
        self.fused = xp is not np if fused is None else bool(fused)
        if self.fused and xp is np:
            raise ValueError("fused: the fused RK4 kernels run on CuPy fields, got NumPy arrays; "
                             "expected fused=False or None on NumPy")
        self._fused = FusedRK4(self.device_mesh) if self.fused else None

    def tendency(self, fields):
        h, u = fields
        if self.exchange is not None:
            self.exchange(h, u)
        return tendencies(self.device_mesh, h, u, self.b, self.f_vertex, self.physics)

    def advance(self, h, u):
        """(h, u) one RK4 step later, as new arrays (the halo rows of (h, u) are exchanged in
        place)."""
        if self._fused is not None:
            return self._fused.step(h, u, self.b, self.f_vertex, self.dt, self.physics,
                                    self.exchange)
        return tuple(rk4_step(self.tendency, (h, u), self.dt))

    def step(self) -> None:
        self.h, self.u = self.advance(self.h, self.u)
        self.step_count += 1

    @property
    def time(self) -> float:
        return self.step_count * self.dt
