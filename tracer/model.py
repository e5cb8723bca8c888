"""The tracer model: local mesh, state (q on cells), control (the normal wind u on edges), dt,
and its stages for the one stepper (`framework.stepper`): the tendency of `tracer.terms`, its
tangent-linear and adjoint. `framework.stepper.rk4_step_tl(model, q, dq, du)` and
`rk4_step_adj(model, q, q_adj)` -> (q_adj, u_adj) then take the model as they take the others."""
from __future__ import annotations

import meshops
from meshops.device.backend import array_module
from framework.stepper import TendencyStages, rk4_step

from tracer.terms import tendency, tendency_adj, tendency_tl


class Model:
    """q and u (NumPy or CuPy) on `mesh` (a rank's local mesh in a distributed run), the operators
    on its `meshops.DeviceMesh`; `distribution` (`tracer.distribution.Distributed`) exchanges the
    halo rows before each RK stage; None: one process."""

    state_locations, control_locations = ("cell",), ("edge",)
    state_names, control_names = ("q",), ("u",)

    def __init__(self, mesh, q, u, dt: float, distribution=None, device_mesh=None):
        if not dt > 0:
            raise ValueError(f"dt: expected a positive time step in seconds, got {dt}")
        self.mesh, self.q, self.u, self.dt = mesh, q, u, float(dt)
        self.distribution, self.step_count = distribution, 0
        self.device_mesh = device_mesh or meshops.device_mesh(mesh, array_module(q))
        self.stages = TendencyStages(
            lambda p: (tendency(self.device_mesh, *p, self.u),),
            lambda p, dp, dc: (tendency_tl(self.device_mesh, *p, self.u, *dp, *dc),),
            lambda p, k_adj, mode: tendency_adj(self.device_mesh, *p, self.u, *k_adj, mode=mode))

    def advance(self, q):
        """(q,) one RK4 step later, as a new array (the halo rows of q exchanged in place)."""
        return rk4_step(self, q)

    def step(self) -> None:
        (self.q,) = self.advance(self.q)
        self.step_count += 1

    @property
    def state(self) -> tuple:
        return (self.q,)

    @property
    def controls(self) -> tuple:
        return (self.u,)

    @property
    def time(self) -> float:
        return self.step_count * self.dt
