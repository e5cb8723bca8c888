"""Tendencies of the hydrostatic primitive equations in a mass-based hybrid coordinate, TRiSK in the
horizontal and Lorenz staggering in the vertical (DYNAMICO: Dubos et al. 2015, GMD 8, 3131), from
meshops operators (NumPy or CuPy; fields of any float dtype, the mesh geometry in float64).

State (levels last, layers counted from the surface up): the layer mass `mass` (mu = dp / g,
kg m-2, cells x layers), the mass-weighted potential temperature `theta_mass` (mu theta, cells x
layers) and the normal velocity `u` (edges x layers). Fixed: the surface geopotential phi_s
(cells), the Coriolis parameter f (vertices) and the coordinate's share dB[k] = B[k] - B[k+1] of
the surface pressure in each layer. Diagnostics (g gravity, cp, R, p0 of `meshops.vertical`):

    p_i   = p_top + g * sum_layers_from_top_l2i(mass)        interface pressure (surface: p_s)
    p     = avg_i2l(p_i),  theta = theta_mass / mass          layer pressure, potential temperature
    pi    = cp * exner(p),  alpha = specific_volume(p, theta) Exner function (J kg-1 K-1), R T / p
    phi_i = phi_s + g * sum_layers_from_bottom_l2i(mass * alpha),  phi = avg_i2l(phi_i)
    F     = interp_c2e(mass) * u,  D = div_e2c(F),  theta_e = interp_c2e(theta)
    W     = sum_layers_from_bottom_l2i(dB * sum_k D - D)      upward mass flux at interfaces
    q_v   = (curl_e2v(u) + f) / interp_c2v(mass),  q_e = interp_v2e(q_v)

W is what keeps the layers on the coordinate: with it, d mass[k] / dt = -dB[k] sum_j D[j] =
dB[k] (d p_s / dt) / g, and W is 0 at the surface and (to round-off) at the top. Tendencies:

    tend_mass       = -D - div_vflux_i2l(W)
    tend_theta_mass = -div_e2c(theta_e F) - div_vflux_i2l(W * avg_l2i(theta))
                      + mass * (visc2_theta laplacian_c2c(theta) - visc4_theta del4_c2c(theta))
    tend_u = pv_flux_e2e(F, q_e) - grad_c2e(ke_e2c(u) + phi) - theta_e * grad_c2e(pi)
             - avg_i2l(interp_c2e(W) * diff_l2i(u)) / interp_c2e(mass)
             + visc2 vector_laplacian_e2e(u) - visc4 del4_e2e(u)

The centred vertical advection of u, 0.5 (W_e[k+1] (u[k+1] - u[k]) + W_e[k] (u[k] - u[k-1])) /
mass_e[k], is DYNAMICO's energy-consistent form; the theta flux and the pressure gradient share
theta_e (their energy exchange cancels), the PV flux is TRiSK's energy-neutral one. Every
operation is smooth (no limiter, no remap): the tangent-linear and adjoint of each are exact.
An optional forcing (`hydrostatic.forcing.HeldSuarez`) adds to tend_theta_mass and tend_u.
"""
from __future__ import annotations

from dataclasses import dataclass

import meshops
from meshops.operators.vertical import CP_DRY
from swm.constants import GRAVITY

#: The chains of operators from the exchanged state to the owned tendencies (the halo depth:
#: `meshops.parallel.layers_needed`); the vertical operators need no halo.
CHAINS = (("interp_c2e", "div_e2c", "interp_c2e"),          # W at edges for u's vertical advection
          ("curl_e2v", "interp_v2e", "pv_flux_e2e"),
          ("interp_c2v", "interp_v2e", "pv_flux_e2e"),
          ("interp_c2e", "pv_flux_e2e"),
          ("ke_e2c", "grad_c2e"),
          ("del4_e2e",), ("del4_c2c",))


@dataclass(frozen=True)
class Physics:
    """Parameters of the tendencies: gravity (m s-2), the model top's pressure p_top (Pa), the
    coordinate's dB (layers, on the fields' backend and dtype), viscosities on u (visc2 m2 s-1,
    visc4 m4 s-1) and on theta (visc2_theta, visc4_theta), and a forcing (None: none; else an
    object with `tendencies(mesh, diag, mass, u) -> (tend_theta_mass, tend_u)`)."""
    p_top: float
    dB: object
    gravity: float = GRAVITY
    visc2: float = 0.0
    visc4: float = 0.0
    visc2_theta: float = 0.0
    visc4_theta: float = 0.0
    forcing: object = None


def column_diagnostics(mesh, mass, theta_mass, phi_s, physics: Physics) -> dict:
    """The column diagnostics of (mass, theta_mass) (module doc): interface pressure p_i, layer
    pressure p, theta, Exner function pi (times cp), specific volume alpha, interface and layer
    geopotential phi_i and phi."""
    g = physics.gravity
    p_i = physics.p_top + g * meshops.sum_layers_from_top_l2i(mesh, mass)
    p = meshops.avg_i2l(mesh, p_i)
    theta = theta_mass / mass
    alpha = meshops.specific_volume(mesh, p, theta)
    phi_i = phi_s[:, None] + g * meshops.sum_layers_from_bottom_l2i(mesh, mass * alpha)
    return dict(p_i=p_i, p=p, theta=theta, pi=CP_DRY * meshops.exner(mesh, p), alpha=alpha,
                phi_i=phi_i, phi=meshops.avg_i2l(mesh, phi_i))


def vertical_mass_flux(mesh, div, dB):
    """W = sum_layers_from_bottom_l2i(dB * sum_k div - div): the upward mass flux at interfaces
    (kg m-2 s-1) that keeps the layer masses on the hybrid coordinate (module doc)."""
    total = meshops.sum_layers_from_top_l2i(mesh, div)[:, :1]
    return meshops.sum_layers_from_bottom_l2i(mesh, dB * total - div)


def tendencies(mesh, mass, theta_mass, u, phi_s, f_vertex, physics: Physics):
    """(tend_mass, tend_theta_mass, tend_u) of the state (module doc); `mesh` a mesh or a
    `meshops.DeviceMesh`. On a rank's local mesh, owned rows are right when the state is valid
    to the halo depth of `CHAINS`."""
    d = column_diagnostics(mesh, mass, theta_mass, phi_s, physics)
    mass_e = meshops.interp_c2e(mesh, mass)
    F = mass_e * u
    div = meshops.div_e2c(mesh, F)
    theta_e = meshops.interp_c2e(mesh, d["theta"])
    W = vertical_mass_flux(mesh, div, physics.dB)

    tend_mass = -div - meshops.div_vflux_i2l(mesh, W)
    tend_theta_mass = (-meshops.div_e2c(mesh, theta_e * F)
                       - meshops.div_vflux_i2l(mesh, W * meshops.avg_l2i(mesh, d["theta"])))

    q_vertex = (meshops.curl_e2v(mesh, u) + f_vertex[:, None]) / meshops.interp_c2v(mesh, mass)
    q_edge = meshops.interp_v2e(mesh, q_vertex)
    tend_u = (meshops.pv_flux_e2e(mesh, F, q_edge)
              - meshops.grad_c2e(mesh, meshops.ke_e2c(mesh, u) + d["phi"])
              - theta_e * meshops.grad_c2e(mesh, d["pi"])
              - meshops.avg_i2l(mesh, meshops.interp_c2e(mesh, W) * meshops.diff_l2i(mesh, u)) / mass_e)

    if physics.visc2:
        tend_u = tend_u + physics.visc2 * meshops.vector_laplacian_e2e(mesh, u)
    if physics.visc4:
        tend_u = tend_u - physics.visc4 * meshops.del4_e2e(mesh, u)
    if physics.visc2_theta:
        tend_theta_mass = tend_theta_mass + physics.visc2_theta * mass * meshops.laplacian_c2c(mesh, d["theta"])
    if physics.visc4_theta:
        tend_theta_mass = tend_theta_mass - physics.visc4_theta * mass * meshops.del4_c2c(mesh, d["theta"])
    if physics.forcing is not None:
        forced_theta_mass, forced_u = physics.forcing.tendencies(mesh, d, mass, u)
        tend_theta_mass = tend_theta_mass + forced_theta_mass
        tend_u = tend_u + forced_u
    return tend_mass, tend_theta_mass, tend_u
