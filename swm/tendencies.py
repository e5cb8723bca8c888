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

Tendencies, the sum of the terms of `swm.terms` (each with its tangent-linear and adjoint):

    tend_h = -flux_div_e2c(h_edge, u)
    tend_u = pv_flux_e2e(h_edge * u, pv_edge) - grad_c2e(ke + g * (h + b))
             + (visc2 * vector_laplacian_e2e(u) - visc4 * del4_e2e(u))

pv_flux_e2e is TRiSK's energy-conserving nonlinear Coriolis term, sum_j weightsOnEdge * F[eoe_j] *
(pv_edge[e] + pv_edge[eoe_j]) / 2. With APVM (anticipated potential vorticity method, Sadourny and
Basdevant 1985, as in MPAS) pv_edge -= apvm * dt * (u * grad_c2e(pv_cell) + v * grad_v2e(pv_vertex)),
v = tangential_e2e(u) and pv_cell = interp_v2c(pv_vertex).
"""
from __future__ import annotations

from dataclasses import dataclass

import meshops
from swm import terms
from framework.constants import GRAVITY


@dataclass(frozen=True)
class Physics:
    """Parameters of the tendencies: gravity, viscosities on u (m^2/s and m^4/s), the APVM factor
    (0: off; MPAS's default 0.5) with the time step it scales, and `extra_terms`: terms of one's
    own added to `swm.terms.TERMS` (objects with a term's attributes and methods, e.g.
    `swm.terms.Relaxation`)."""
    gravity: float = GRAVITY
    visc2: float = 0.0
    visc4: float = 0.0
    apvm: float = 0.0
    dt: float = 0.0
    extra_terms: tuple = ()


def diagnostics(mesh, h, u, f_vertex, physics: Physics) -> dict:
    """The diagnostic fields of (h, u): h_edge, vorticity, pv_vertex, pv_edge (with the active
    pv_edge corrections of `swm.terms`, APVM) and ke."""
    h_edge = meshops.interp_c2e(mesh, h)
    vorticity = meshops.curl_e2v(mesh, u)
    pv_vertex = (f_vertex + vorticity) / meshops.interp_c2v(mesh, h)
    d = dict(h_edge=h_edge, vorticity=vorticity, pv_vertex=pv_vertex,
             pv_edge=meshops.interp_v2e(mesh, pv_vertex))
    correction = terms.pv_correction(mesh, h, u, d, physics)
    if correction is not None:
        d["pv_edge"] = d["pv_edge"] - correction
    d["ke"] = meshops.ke_e2c(mesh, u)
    return d


def tendencies(mesh, h, u, b, f_vertex, physics: Physics):
    """(tend_h, tend_u) of the state (h, u) with topography b and Coriolis f_vertex: the sum of the
    active terms of `swm.terms`, those the fused kernels compute first, then the others of each
    target (`swm.terms.extra`), as the fused step sums them."""
    d = diagnostics(mesh, h, u, f_vertex, physics)
    tend = {"tend_h": None, "tend_u": None}
    for term in terms.active_terms(physics, fused=True):
        part = term.forward(mesh, h, u, b, d, physics)
        tend[term.target] = part if tend[term.target] is None else tend[term.target] + part
    for target in tend:
        extra = terms.extra(mesh, h, u, b, d, physics, target)
        if extra is not None:
            tend[target] = tend[target] + extra
    return tend["tend_h"], tend["tend_u"]


# -- tangent-linear and adjoint --------------------------------------------------------------------

def linearisation(mesh, h, u, f_vertex, physics: Physics) -> dict:
    """What the tangent-linear and adjoint read of the base state (h, u): u, h, h_edge, h_vertex,
    pv_vertex, pv_edge (corrected). A term's own base fields come from its hook
    (`swm.terms.base_of`) where it is used."""
    h_vertex = meshops.interp_c2v(mesh, h)
    pv_vertex = (f_vertex + meshops.curl_e2v(mesh, u)) / h_vertex
    base = dict(u=u, h=h, h_edge=meshops.interp_c2e(mesh, h), h_vertex=h_vertex, pv_vertex=pv_vertex,
                pv_edge=meshops.interp_v2e(mesh, pv_vertex))
    correction = terms.pv_correction(mesh, h, u, base, physics)
    if correction is not None:
        base["pv_edge"] = base["pv_edge"] - correction
    return base


def tendencies_tl(mesh, h, u, b, f_vertex, physics: Physics, dh, du, db):
    """Tangent-linear of `tendencies` about (h, u, b): (dh, du, db) -> (dtend_h on cells, dtend_u
    on edges), each term's tangent (`swm.terms`) summed as the forward sums the terms. `db` None:
    no perturbation of the topography (b enters linearly, so the base b is not read)."""
    base = linearisation(mesh, h, u, f_vertex, physics)
    dpv_vertex = (meshops.curl_e2v(mesh, du) - base["pv_vertex"] * meshops.interp_c2v(mesh, dh)) / base["h_vertex"]
    t = dict(dh=dh, du=du, db=db, dh_edge=meshops.interp_c2e(mesh, dh), dpv_vertex=dpv_vertex,
             dpv_edge=meshops.interp_v2e(mesh, dpv_vertex))
    correction = terms.tangent_sum(mesh, base, t, physics, target="pv_edge")
    if correction is not None:
        t["dpv_edge"] = t["dpv_edge"] - correction
    tend = {"tend_h": None, "tend_u": None}
    for term in terms.active_terms(physics, fused=True):
        part = term.tangent(mesh, base, t, physics)
        tend[term.target] = part if tend[term.target] is None else tend[term.target] + part
    for target in tend:
        extra = terms.tangent_sum(mesh, base, t, physics, target=target, fused=False)
        if extra is not None:
            tend[target] = tend[target] + extra
    return tend["tend_h"], tend["tend_u"]


def tendencies_adj(mesh, h, u, b, f_vertex, physics: Physics, tend_h_adj, tend_u_adj, *, mode=None):
    """Adjoint of `tendencies_tl` about (h, u, b): (tend_h_adj on cells, tend_u_adj on edges) ->
    (h_adj, u_adj, b_adj): the terms' adjoints (`swm.terms`), then the diagnostics' in reverse,

        pv_vertex_adj += interp_v2e_adj(pv_edge_adj)  (+ APVM's part),  w = pv_vertex_adj / h_vertex
        u_adj += curl_e2v_adj(w),  h_adj += interp_c2e_adj(h_edge_adj) - interp_c2v_adj(w pv_vertex)

    so that <dtend_h, tend_h_adj> + <dtend_u, tend_u_adj> = <dh, h_adj> + <du, u_adj> +
    <db, b_adj>. `mode`: the operators' adjoint mode (None: the meshops default). The fields are
    NumPy or CuPy arrays, `mesh` a mesh or a `meshops.DeviceMesh`; on a rank's local mesh, rows
    are valid where the forward's are."""
    base = linearisation(mesh, h, u, f_vertex, physics)
    a = dict(tend_h=tend_h_adj, tend_u=tend_u_adj, h=None, u=None, b=None, h_edge=None, pv_edge=None,
             pv_vertex=None)
    for term in terms.active_terms(physics, fused=True) + _extra_terms(physics):
        term.adjoint(mesh, terms.base_of(term, mesh, base, physics), a, physics, mode)
    pv_vertex_adj = meshops.interp_v2e_adj(mesh, a["pv_edge"], mode=mode)
    a["pv_vertex"] = pv_vertex_adj if a["pv_vertex"] is None else a["pv_vertex"] + pv_vertex_adj
    for term in terms.active_terms(physics, target="pv_edge"):
        term.adjoint(mesh, terms.base_of(term, mesh, base, physics), a, physics, mode)
    vorticity_adj = a["pv_vertex"] / base["h_vertex"]
    u_adj = a["u"] + meshops.curl_e2v_adj(mesh, vorticity_adj, mode=mode)
    h_adj = (a["h"] - meshops.interp_c2v_adj(mesh, vorticity_adj * base["pv_vertex"], mode=mode)
             + meshops.interp_c2e_adj(mesh, a["h_edge"], mode=mode))
    return h_adj, u_adj, a["b"]


def _extra_terms(physics) -> tuple:
    """The active terms of tend_h and tend_u the fused kernels do not compute, in the order the
    tendencies sum them."""
    return (terms.active_terms(physics, target="tend_h", fused=False)
            + terms.active_terms(physics, target="tend_u", fused=False))
