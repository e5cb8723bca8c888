"""The shallow-water model: mesh, state (h on cells, u on edges), fixed fields (b, f_vertex),
physics, and its stages (fused kernels or the TRiSK tendencies' operators) for the stepper
(`framework.stepper`)."""
from __future__ import annotations

from dataclasses import replace

import numpy as np

import meshops
from meshops.device.backend import array_module

from swm.fused import TABLES as FUSED_TABLES
from swm.fused_stages import FusedStages
from framework.stepper import TendencyStages, rk4_step
from swm.tendencies import Physics, tendencies, tendencies_adj, tendencies_tl


class Model:
    """State and stepping. `mesh` is the (local, in a distributed run) mesh; the fields are NumPy
    or CuPy arrays, and the operators run on `device_mesh` (default: the `meshops.DeviceMesh` of
    the mesh on the fields' backend), held beside the state. `distribution` (a rank's
    `swm.distribution.Distributed`, or anything with its `exchange` and `exchange_tl`) brings
    halo rows up to date before each RK stage of the step, its
    tangent-linear and its adjoint (`framework.stepper`); None: one process. `fused` steps through the
    fused kernels of `swm.fused` (CuPy only; default: on CuPy fields), otherwise through the
    operators (`swm.tendencies`, `framework.timestepping`): the same arithmetic. A term of one's own
    goes into the physics (`Physics(extra_terms=...)`, `swm.terms`), which every path sums.
    `stages` is the path (`framework.stepper.Stages`), chosen here once.

    `dt` is the one time step of the run: `physics` is the physics given with the model's dt
    (the step APVM scales); a physics given with a dt of its own that differs is refused, and
    setting `dt` sets the physics' too."""

    #: The locations of the state (h, u) and of the controls (b: the topography, the fixed field
    #: the tangent-linear and adjoint steps perturb), in `framework.stepper`'s order.
    state_locations = ("cell", "edge")
    control_locations = ("cell",)
    #: Their names (the model's attributes of them).
    state_names = ("h", "u")
    control_names = ("b",)

    def __init__(self, mesh, h, u, b, f_vertex, dt: float, physics: Physics | None = None,
                 distribution=None, device_mesh=None, fused: bool | None = None):
        self.mesh, self.h, self.u, self.b, self.f_vertex = mesh, h, u, b, f_vertex
        physics = physics or Physics()
        if physics.dt and physics.dt != dt:
            raise ValueError(f"physics.dt = {physics.dt}: differs from the model's dt = {dt}; "
                             "expected a Physics without dt (the model's dt is the one APVM scales)")
        self._physics, self.dt = physics, dt
        self.step_count = 0
        self.distribution = distribution
        xp = array_module(h)
        self.device_mesh = device_mesh or meshops.device_mesh(mesh, xp)
        self.fused = xp is not np if fused is None else bool(fused)
        if self.fused and xp is np:
            raise ValueError("fused: the fused RK4 kernels run on CuPy fields, got NumPy arrays; "
                             "expected fused=False or None on NumPy")
        self.stages = FusedStages(self) if self.fused else operator_stages(self)
        if self.fused:
            self.device_mesh.prebuild(FUSED_TABLES)

    def advance(self, h, u):
        """(h, u) one RK4 step later, as new arrays (the halo rows of (h, u) are exchanged in
        place)."""
        return rk4_step(self, h, u)

    def step(self) -> None:
        self.h, self.u = self.advance(self.h, self.u)
        self.step_count += 1

    @property
    def state(self) -> tuple:
        """The prognostic fields, in the order `advance` takes them."""
        return self.h, self.u

    @property
    def controls(self) -> tuple:
        """The fixed fields a gradient is taken with respect to, in `control_locations` order:
        (b,)."""
        return (self.b,)

    @controls.setter
    def controls(self, values) -> None:
        (self.b,) = values

    @property
    def dt(self) -> float:
        """The time step (s): the one place of it (`physics.dt` follows it)."""
        return self._dt

    @dt.setter
    def dt(self, value: float) -> None:
        if not value > 0:
            raise ValueError(f"dt: expected a positive time step in seconds, got {value}")
        self._dt = float(value)
        self._physics = replace(self._physics, dt=self._dt)

    @property
    def physics(self) -> Physics:
        """The physics of the tendencies, with the model's dt."""
        return self._physics

    @property
    def time(self) -> float:
        return self.step_count * self.dt


def operator_stages(model) -> TendencyStages:
    """The operator path's stages of `model` (`swm.tendencies` on its device_mesh, b, f_vertex and
    physics, read at each call); the control perturbation is db."""
    def fixed():
        return model.b, model.f_vertex, model.physics

    return TendencyStages(
        lambda p: tendencies(model.device_mesh, *p, *fixed()),
        lambda p, dp, dc: tendencies_tl(model.device_mesh, *p, *fixed(), *dp, *(dc or (None,))),
        lambda p, k_adj, mode: tendencies_adj(model.device_mesh, *p, *fixed(), *k_adj, mode=mode))
