"""Tangent-linear and adjoint of the TRiSK shallow-water tendencies (`swm.tendencies`).

Linearised about the state (h, u) with topography b, for a perturbation (dh, du, db); every line
is the tangent of a line of the forward (MPAS names, c = apvm * dt, g = gravity):

    dh_edge     = interp_c2e(dh)
    dvorticity  = curl_e2v(du)
    dh_vertex   = interp_c2v(dh)
    dpv_vertex  = (dvorticity - pv_vertex * dh_vertex) / h_vertex,   pv_vertex = (f + vorticity) / h_vertex
    dpv_edge    = interp_v2e(dpv_vertex)
      APVM:       - c * (du * grad_c2e(pv_cell) + u * grad_c2e(interp_v2c(dpv_vertex))
                         + dv * grad_v2e(pv_vertex) + v * grad_v2e(dpv_vertex)),   dv = tangential_e2e(du)
    dke         = ke_e2c_tl(u; du)
    dtend_h     = -flux_div_e2c_tl(h_edge, u; dh_edge, du)
    dtend_u     = pv_flux_e2e_tl(h_edge * u, pv_edge; dh_edge * u + h_edge * du, dpv_edge)
                  - grad_c2e(dke + g * (dh + db)) + visc2 * vector_laplacian_e2e(du) - visc4 * del4_e2e(du)

The adjoint runs these lines in reverse with each operator's `_adj` (transposes in the plain
Euclidean inner product over entries and levels), from (tend_h_adj, tend_u_adj):

    (h_edge_adj, u_adj)  = flux_div_e2c_adj(h_edge, u; -tend_h_adj)
    (F_adj, pv_edge_adj) = pv_flux_e2e_adj(h_edge * u, pv_edge; tend_u_adj)
    h_edge_adj += u * F_adj,  u_adj += h_edge * F_adj
    phi_adj     = -grad_c2e_adj(tend_u_adj)                            (phi = ke + g * (h + b))
    u_adj      += ke_e2c_adj(u; phi_adj) + visc2 * vector_laplacian_e2e_adj(tend_u_adj)
                  - visc4 * del4_e2e_adj(tend_u_adj)
    h_adj       = g * phi_adj,  b_adj = g * phi_adj
      APVM, s = -c * pv_edge_adj:
                  u_adj += s * grad_c2e(pv_cell) + tangential_e2e_adj(s * grad_v2e(pv_vertex))
                  pv_vertex_adj = interp_v2c_adj(grad_c2e_adj(s * u)) + grad_v2e_adj(s * v)
    pv_vertex_adj += interp_v2e_adj(pv_edge_adj)
    u_adj      += curl_e2v_adj(pv_vertex_adj / h_vertex)
    h_adj      += interp_c2v_adj(-pv_vertex_adj * pv_vertex / h_vertex) + interp_c2e_adj(h_edge_adj)

so that <dtend_h, tend_h_adj> + <dtend_u, tend_u_adj> = <dh, h_adj> + <du, u_adj> + <db, b_adj>.
The fields are NumPy or CuPy arrays (pointwise products run on their backend); `mesh` is a mesh or
a `meshops.DeviceMesh`. On a local (per-rank) mesh, rows are valid where the forward's are.
"""
from __future__ import annotations

import meshops
from swm.tendencies import Physics


def linearisation(mesh, h, u, f_vertex, physics: Physics) -> dict:
    """The diagnostics of (h, u) the tangent-linear and adjoint read: h_edge, h_vertex, pv_vertex,
    pv_edge and, with APVM, v = tangential_e2e(u), pv_cell, grad_c2e(pv_cell), grad_v2e(pv_vertex)."""
    h_edge = meshops.interp_c2e(mesh, h)
    h_vertex = meshops.interp_c2v(mesh, h)
    pv_vertex = (f_vertex + meshops.curl_e2v(mesh, u)) / h_vertex
    pv_edge = meshops.interp_v2e(mesh, pv_vertex)
    base = dict(h_edge=h_edge, h_vertex=h_vertex, pv_vertex=pv_vertex)
    if physics.apvm:
        c = physics.apvm * physics.dt
        v = meshops.tangential_e2e(mesh, u)
        pv_cell = meshops.interp_v2c(mesh, pv_vertex)
        grad_pv_cell = meshops.grad_c2e(mesh, pv_cell)
        grad_pv_vertex = meshops.grad_v2e(mesh, pv_vertex)
        pv_edge = pv_edge - c * (u * grad_pv_cell + v * grad_pv_vertex)
        base.update(v=v, grad_pv_cell=grad_pv_cell, grad_pv_vertex=grad_pv_vertex)
    base["pv_edge"] = pv_edge
    return base


def tendencies_tl(mesh, h, u, b, f_vertex, physics: Physics, dh, du, db):
    """Tangent-linear of `swm.tendencies.tendencies` about (h, u, b): (dh, du, db) ->
    (dtend_h on cells, dtend_u on edges); see the module doc for the formulas. `db` None: no
    perturbation of the topography. (The base b enters the tendencies linearly, so it is not read.)"""
    base = linearisation(mesh, h, u, f_vertex, physics)
    h_edge, h_vertex, pv_vertex = base["h_edge"], base["h_vertex"], base["pv_vertex"]
    dh_edge = meshops.interp_c2e(mesh, dh)
    dpv_vertex = (meshops.curl_e2v(mesh, du) - pv_vertex * meshops.interp_c2v(mesh, dh)) / h_vertex
    dpv_edge = meshops.interp_v2e(mesh, dpv_vertex)
    if physics.apvm:
        c = physics.apvm * physics.dt
        dv = meshops.tangential_e2e(mesh, du)
        dpv_cell = meshops.interp_v2c(mesh, dpv_vertex)
        dpv_edge = dpv_edge - c * (du * base["grad_pv_cell"] + u * meshops.grad_c2e(mesh, dpv_cell)
                                   + dv * base["grad_pv_vertex"]
                                   + base["v"] * meshops.grad_v2e(mesh, dpv_vertex))
    dtend_h = -meshops.flux_div_e2c_tl(mesh, h_edge, u, dh_edge, du)
    dphi = meshops.ke_e2c_tl(mesh, u, du) + physics.gravity * (dh if db is None else dh + db)
    dtend_u = (meshops.pv_flux_e2e_tl(mesh, h_edge * u, base["pv_edge"], dh_edge * u + h_edge * du,
                                      dpv_edge)
               - meshops.grad_c2e(mesh, dphi))
    if physics.visc2:
        dtend_u = dtend_u + physics.visc2 * meshops.vector_laplacian_e2e(mesh, du)
    if physics.visc4:
        dtend_u = dtend_u - physics.visc4 * meshops.del4_e2e(mesh, du)
    return dtend_h, dtend_u


def tendencies_adj(mesh, h, u, b, f_vertex, physics: Physics, tend_h_adj, tend_u_adj, *, mode=None):
    """Adjoint of `tendencies_tl` about (h, u, b): (tend_h_adj on cells, tend_u_adj on edges) ->
    (h_adj, u_adj, b_adj); see the module doc. `mode`: the operators' adjoint mode (None: the
    global default, `meshops.set_adjoint_mode`)."""
    base = linearisation(mesh, h, u, f_vertex, physics)
    h_edge, h_vertex, pv_vertex = base["h_edge"], base["h_vertex"], base["pv_vertex"]
    h_edge_adj, u_adj = meshops.flux_div_e2c_adj(mesh, h_edge, u, -tend_h_adj, mode=mode)
    F_adj, pv_edge_adj = meshops.pv_flux_e2e_adj(mesh, h_edge * u, base["pv_edge"], tend_u_adj,
                                                 mode=mode)
    h_edge_adj = h_edge_adj + u * F_adj
    u_adj = u_adj + h_edge * F_adj
    phi_adj = -meshops.grad_c2e_adj(mesh, tend_u_adj, mode=mode)
    u_adj = u_adj + meshops.ke_e2c_adj(mesh, u, phi_adj, mode=mode)
    if physics.visc2:
        u_adj = u_adj + physics.visc2 * meshops.vector_laplacian_e2e_adj(mesh, tend_u_adj, mode=mode)
    if physics.visc4:
        u_adj = u_adj - physics.visc4 * meshops.del4_e2e_adj(mesh, tend_u_adj, mode=mode)
    b_adj = physics.gravity * phi_adj
    h_adj = b_adj.copy()
    pv_vertex_adj = meshops.interp_v2e_adj(mesh, pv_edge_adj, mode=mode)
    if physics.apvm:
        s = (-physics.apvm * physics.dt) * pv_edge_adj
        u_adj = u_adj + s * base["grad_pv_cell"] + meshops.tangential_e2e_adj(
            mesh, s * base["grad_pv_vertex"], mode=mode)
        pv_cell_adj = meshops.grad_c2e_adj(mesh, s * u, mode=mode)
        pv_vertex_adj = (pv_vertex_adj + meshops.interp_v2c_adj(mesh, pv_cell_adj, mode=mode)
                         + meshops.grad_v2e_adj(mesh, s * base["v"], mode=mode))
    vorticity_adj = pv_vertex_adj / h_vertex
    u_adj = u_adj + meshops.curl_e2v_adj(mesh, vorticity_adj, mode=mode)
    h_adj = (h_adj - meshops.interp_c2v_adj(mesh, vorticity_adj * pv_vertex, mode=mode)
             + meshops.interp_c2e_adj(mesh, h_edge_adj, mode=mode))
    return h_adj, u_adj, b_adj
