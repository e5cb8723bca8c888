"""TRiSK shallow-water tendencies (Ringler et al. 2010, J. Comput. Phys. 229), as MPAS's
shallow-water core computes them, from meshops operators.

State: thickness h on cells, normal velocity u on edges; bottom topography b on cells and the
Coriolis parameter f on vertices are fixed fields. Diagnostics (MPAS names):

    h_edge      = interp_c2e(h)                       mean of the two cells of an edge
    vorticity   = curl_e2v(u)                         circulation / areaTriangle
    h_vertex    = interp_c2v(h)                       kite-area weighted
    pv_vertex   = (f + vorticity) / h_vertex
    pv_edge     = interp_v2e(pv_vertex)               (APVM: - apvm * dt * u * grad_c2e... see below)
    ke          = ke_e2c(u)

Tendencies:

    tend_h = -flux_div_e2c(h_edge, u)
    tend_u = pv_flux_e2e(h_edge * u, pv_edge) - grad_c2e(ke + g * (h + b))
             + visc2 * vector_laplacian_e2e(u) - visc4 * del4_e2e(u)

pv_flux_e2e is TRiSK's energy-conserving nonlinear Coriolis term, sum_j weightsOnEdge * F[eoe_j] *
(pv_edge[e] + pv_edge[eoe_j]) / 2. With APVM (anticipated potential vorticity method, Sadourny and
Basdevant 1985, as in MPAS) pv_edge -= apvm * dt * (u * grad_c2e(pv_cell) + v * grad_v2e(pv_vertex)),
v = tangential_e2e(u) and pv_cell = interp_v2c(pv_vertex).
"""
from __future__ import annotations

from dataclasses import dataclass

import meshops
from swm.constants import GRAVITY


@dataclass(frozen=True)
class Physics:
    """Parameters of the tendencies: gravity, viscosities on u (m^2/s and m^4/s) and the APVM
    factor (0: off; MPAS's default 0.5) with the time step it scales."""
    gravity: float = GRAVITY
    visc2: float = 0.0
    visc4: float = 0.0
    apvm: float = 0.0
    dt: float = 0.0


def diagnostics(mesh, h, u, f_vertex, physics: Physics) -> dict:
    """The diagnostic fields of (h, u): h_edge, vorticity, pv_vertex, pv_edge and ke."""
    h_edge = meshops.interp_c2e(mesh, h)
    vorticity = meshops.curl_e2v(mesh, u)
    pv_vertex = (f_vertex + vorticity) / meshops.interp_c2v(mesh, h)
    pv_edge = meshops.interp_v2e(mesh, pv_vertex)
    if physics.apvm:
        pv_edge = pv_edge - apvm_correction(mesh, u, pv_vertex, physics)
    return dict(h_edge=h_edge, vorticity=vorticity, pv_vertex=pv_vertex, pv_edge=pv_edge,
                ke=meshops.ke_e2c(mesh, u))


def apvm_correction(mesh, u, pv_vertex, physics: Physics):
    """What APVM subtracts from pv_edge: apvm * dt * (u * grad_c2e(pv_cell) + v * grad_v2e(pv_vertex)),
    v = tangential_e2e(u), pv_cell = interp_v2c(pv_vertex)."""
    v = meshops.tangential_e2e(mesh, u)
    pv_cell = meshops.interp_v2c(mesh, pv_vertex)
    return physics.apvm * physics.dt * (
        u * meshops.grad_c2e(mesh, pv_cell) + v * meshops.grad_v2e(mesh, pv_vertex))


def dissipation(mesh, u, physics: Physics):
    """(visc2 * vector_laplacian_e2e(u), visc4 * del4_e2e(u)), None for a term that is off: tend_u
    adds the first and subtracts the second."""
    return (physics.visc2 * meshops.vector_laplacian_e2e(mesh, u) if physics.visc2 else None,
            physics.visc4 * meshops.del4_e2e(mesh, u) if physics.visc4 else None)


def tendencies(mesh, h, u, b, f_vertex, physics: Physics):
    """(tend_h, tend_u) of the state (h, u) with topography b and Coriolis f_vertex."""
    d = diagnostics(mesh, h, u, f_vertex, physics)
    tend_h = -meshops.flux_div_e2c(mesh, d["h_edge"], u)
    tend_u = (meshops.pv_flux_e2e(mesh, d["h_edge"] * u, d["pv_edge"])
              - meshops.grad_c2e(mesh, d["ke"] + physics.gravity * (h + b)))
    del2, del4 = dissipation(mesh, u, physics)
    if del2 is not None:
        tend_u = tend_u + del2
    if del4 is not None:
        tend_u = tend_u - del4
    return tend_h, tend_u
