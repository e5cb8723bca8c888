"""The tracer's one term, forward, tangent-linear and adjoint side by side (MPAS names). The
tracer q on cells is carried by the normal wind u on edges in flux form,

    tend_q[c] = -flux_div_e2c(interp_c2e(q), u)[c]
              = -1/areaCell[c] sum_j edgeSignOnCell[c,j] dvEdge[e_j] u[e_j] (q[c0] + q[c1]) / 2,

(c0, c1) = cellsOnEdge[e_j]: every edge's flux leaves one cell and enters the other, so the mass
sum_c areaCell[c] q[c] is conserved to round-off. The term is linear in q and bilinear in (q, u):
its tangent with respect to (q, u) and its adjoint are exact (no limiter), the wind being the
control. The inner product of the adjoint is the Euclidean sum over owned rows.
"""
from __future__ import annotations

import meshops

#: The operator chain the term reads (its halo depth: `meshops.parallel.layers_needed`).
CHAINS = (("interp_c2e", "flux_div_e2c"),)


def tendency(mesh, q, u):
    """tend_q = -flux_div_e2c(interp_c2e(q), u): cell field q, edge field u -> cell field."""
    return -meshops.flux_div_e2c(mesh, meshops.interp_c2e(mesh, q), u)


def tendency_tl(mesh, q, u, dq, du=None):
    """d tend_q = -flux_div_e2c_tl(q_edge, u, interp_c2e(dq), du), q_edge = interp_c2e(q); du None:
    the wind held fixed, -flux_div_e2c(interp_c2e(dq), u)."""
    dq_edge = meshops.interp_c2e(mesh, dq)
    if du is None:
        return -meshops.flux_div_e2c(mesh, dq_edge, u)
    return -meshops.flux_div_e2c_tl(mesh, meshops.interp_c2e(mesh, q), u, dq_edge, du)


def tendency_adj(mesh, q, u, tend_adj, mode=None):
    """(q_adj, u_adj) = (d tend_q / d(q, u))^T tend_adj: (q_edge_adj, u_adj) =
    flux_div_e2c_adj(q_edge, u, -tend_adj), q_adj = interp_c2e_adj(q_edge_adj), so that
    <tendency_tl(dq, du), tend_adj> = <dq, q_adj> + <du, u_adj>."""
    q_edge_adj, u_adj = meshops.flux_div_e2c_adj(mesh, meshops.interp_c2e(mesh, q), u, -tend_adj,
                                                 mode=mode)
    return meshops.interp_c2e_adj(mesh, q_edge_adj, mode=mode), u_adj
