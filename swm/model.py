"""The shallow-water model: mesh, state (h on cells, u on edges), fixed fields (b, f_vertex),
physics, and the RK4 step of the TRiSK tendencies."""
from __future__ import annotations

from dataclasses import replace

from swm.tendencies import Physics, tendencies
from swm.timestepping import rk4_step


class Model:
    """State and stepping. `mesh` is what meshops operators take (a rank's local mesh in a
    distributed run); the fields are NumPy or CuPy arrays (the backend follows them). `exchange`,
    when given, brings the halo rows of (h, u) up to date in place before each RK stage's
    tendencies (one state exchange per stage)."""

    def __init__(self, mesh, h, u, b, f_vertex, dt: float, physics: Physics | None = None,
                 exchange=None):
        if not dt > 0:
            raise ValueError(f"dt: expected a positive time step in seconds, got {dt}")
        self.mesh, self.h, self.u, self.b, self.f_vertex = mesh, h, u, b, f_vertex
        self.dt = float(dt)
        self.physics = physics or Physics()
        if self.physics.apvm and self.physics.dt != self.dt:
            self.physics = replace(self.physics, dt=self.dt)
        self.step_count = 0
        self.exchange = exchange

    def tendency(self, fields):
        h, u = fields
        if self.exchange is not None:
            self.exchange(h, u)
        return tendencies(self.mesh, h, u, self.b, self.f_vertex, self.physics)

    def step(self) -> None:
        self.h, self.u = rk4_step(self.tendency, (self.h, self.u), self.dt)
        self.step_count += 1

    @property
    def time(self) -> float:
        return self.step_count * self.dt
