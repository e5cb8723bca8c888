"""The hydrostatic model: local mesh, state (mass, theta_mass, u), fixed fields (phi_s, f_vertex),
physics, and its RK4 step: the shared stepper (`framework.stepper`) with this model's tendencies, their
tangent-linear and adjoint (`hydrostatic.dynamics`) as its stages (on CuPy the forward,
tangent-linear and adjoint stages in fused kernels: `hydrostatic.fused`), one state exchange per stage;
`framework.stepper.rk4_step_tl` / `rk4_step_adj` take the model, with the surface geopotential phi_s as
its control."""
from __future__ import annotations

import numpy as np

import meshops
from meshops.device.backend import array_module
from framework import stepper

from hydrostatic.dynamics import Physics, tendencies, tendencies_adj, tendencies_tl
from hydrostatic.fused import TABLES as FUSED_TABLES
from hydrostatic.fused_stages import FusedStages


class Model:
    """State and stepping on `mesh` (a rank's local mesh in a distributed run): the fields are
    NumPy or CuPy arrays, the operators run on the `meshops.DeviceMesh` of the mesh on their
    backend. `distribution` (`hydrostatic.distribution`) brings the halo rows of the provisional
    state up to date before each RK4 stage (with `exchange_tl`, the perturbations and adjoint
    tendencies of the tangent-linear and adjoint steps); None: one process. `fused` runs the
    forward, tangent-linear and adjoint stages (and the stage records) through the fused kernels
    of `hydrostatic.fused`, `hydrostatic.fused_tangent` and `hydrostatic.fused_adjoint` (CuPy
    only; default: on CuPy fields), otherwise through the operators."""

    #: The locations of the state (mass, theta_mass, u) and of the controls (phi_s: the fixed field
    #: the tangent-linear and adjoint steps perturb), in `framework.stepper`'s order.
    state_locations = ("cell", "cell", "edge")
    control_locations = ("cell",)
    #: Their names (the model's attributes of them).
    state_names = ("mass", "theta_mass", "u")
    control_names = ("phi_s",)

    def __init__(self, mesh, mass, theta_mass, u, phi_s, f_vertex, dt: float, physics: Physics,
                 distribution=None, device_mesh=None, fused: bool | None = None):
        if not dt > 0:
            raise ValueError(f"dt: expected a positive time step in seconds, got {dt}")
        self.mesh, self.mass, self.theta_mass, self.u = mesh, mass, theta_mass, u
        self.phi_s, self.f_vertex, self.dt, self.physics = phi_s, f_vertex, float(dt), physics
        self.distribution, self.step_count = distribution, 0
        xp = array_module(mass)
        self.device_mesh = device_mesh or meshops.device_mesh(mesh, xp)
        self.fused = xp is not np if fused is None else bool(fused)
        if self.fused and xp is np:
            raise ValueError("fused: the fused RK4 kernels run on CuPy fields, got NumPy arrays; "
                             "expected fused=False or None on NumPy")
        operator_stages = stepper.TendencyStages(
            lambda p: self.tendencies(*p),
            lambda p, dp, dc: tendencies_tl(self.device_mesh, *p, *self._fixed(), *dp, *(dc or (None,))),
            lambda p, k_adj, mode: tendencies_adj(self.device_mesh, *p, *self._fixed(), *k_adj,
                                                  mode=mode))
        self.stages = FusedStages(self, operator_stages) if self.fused else operator_stages
        if self.fused:      # with the composed vector Laplacian's stencil where del2 / del4 reads it
            diffusion = (("edgesOnEdgeDel2",) if (physics.visc2 or physics.visc4)
                         and self.device_mesh.policy == "fast" else ())
            self.device_mesh.prebuild(FUSED_TABLES + diffusion)

    def _fixed(self) -> tuple:
        return self.phi_s, self.f_vertex, self.physics

    def tendencies(self, mass, theta_mass, u):
        """(tend_mass, tend_theta_mass, tend_u) of a state whose halo rows are valid."""
        return tendencies(self.device_mesh, mass, theta_mass, u, self.phi_s, self.f_vertex,
                          self.physics)

    def advance(self, mass, theta_mass, u):
        """The state one RK4 step later, as new arrays (halo rows of the inputs exchanged in
        place)."""
        exchange = None if self.distribution is None else self.distribution.exchange
        return stepper.step(self.stages, (mass, theta_mass, u), self.dt, exchange)

    def step(self) -> None:
        self.mass, self.theta_mass, self.u = self.advance(self.mass, self.theta_mass, self.u)
        self.step_count += 1

    @property
    def state(self) -> tuple:
        """The prognostic fields, in the order `advance` takes them."""
        return self.mass, self.theta_mass, self.u

    @property
    def controls(self) -> tuple:
        """The fixed fields a gradient is taken with respect to, in `control_locations` order:
        (phi_s,)."""
        return (self.phi_s,)

    @controls.setter
    def controls(self, values) -> None:
        (self.phi_s,) = values

    @property
    def time(self) -> float:
        return self.step_count * self.dt
