"""TRiSK potential-vorticity flux edge -> edge: `pv_flux_e2e`, its tangent-linear model and adjoint.

The nonlinear Coriolis term of the momentum equation (Thuburn et al. 2009, Ringler et al. 2010; MPAS
core_sw compute_tend: q = q + weightsOnEdge * u(eoe) * workpv * h_edge(eoe), workpv = 0.5 * (pv_edge(e)
+ pv_edge(eoe)), added to tend_u with a plus sign). With eoe_j = edgesOnEdge[e, j], j < nEdgesOnEdge[e],
w_ej = weightsOnEdge[e, j], F = h_edge * u the thickness flux and q the potential vorticity on edges:

    pv_flux_e2e(F, q)[e] = sum_j w_ej * F[eoe_j] * 0.5 * (q[e] + q[eoe_j])

Energy neutrality: the weights satisfy dcEdge[e] * w_ee' = -dcEdge[e'] * w_e'e * dvEdge[e'] / dvEdge[e]
(MPAS convention of `grids.geometry`), so sum_e dcEdge[e] * dvEdge[e] * F[e] * pv_flux_e2e(F, q)[e] = 0
for every F and q. The operator is bilinear:

    pv_flux_e2e_tl(F, q; dF, dq)[e] = sum_j w_ej * (dF[eoe_j] * 0.5 * (q[e] + q[eoe_j])
                                                    + F[eoe_j] * 0.5 * (dq[e] + dq[eoe_j]))
    pv_flux_e2e_adj(F, q; g) = (F_adj, q_adj) with, over the transposed pairs (e, j) with eoe_j = e',
        F_adj[e'] = sum_{(e, j)} w_ej * 0.5 * (q[e] + q[e']) * g[e]
        q_adj[e'] = 0.5 * g[e'] * sum_j w_e'j * F[eoe_j]  +  0.5 * F[e'] * sum_{(e, j)} w_ej * g[e]

so that sum_e pv_flux_e2e_tl(F, q; dF, dq)[e] g[e] = sum_e (dF[e] F_adj[e] + dq[e] q_adj[e]) (plain
Euclidean inner product over entries and levels). Adjoint mode `atomic` scatters from each edge e
through edgesOnEdge (atomicAdd on the GPU); `deterministic` gathers into each edge e' through the
transposed map (edgesOnEdgeT, weightsOnEdgeT: the e and w_ej of every pair with eoe_j = e', in
increasing (e, j) order; `meshops.operators.trisk`, the tables tangential_e2e reads too), which is bitwise
reproducible. Both backends read edgesOnEdge masked beyond nEdgesOnEdge (-1, weights 0 in pads).
NumPy evaluates the sums as products with the weights matrix W (W[e, eoe_j] = w_ej):
out = 0.5 * (q * (W F) + W (F q)), and the adjoint with W^T likewise.
"""
from __future__ import annotations

import numpy as np

from meshops.device import stencil
from meshops.operators import trisk
from meshops.device.backend import array_module
from meshops.device.kernels import Family, Kernel
from meshops.device.mesh import check_field, for_fields
from meshops.modes import resolve_mode
from meshops.registry import register

_KERNELS = Family("pv_flux", (
    Kernel("pv_flux_e2e",
           "idx:edgesOnEdge coef:weightsOnEdge in:F in:q out:out int:maxEdges2 int:slotStride"),
    Kernel("pv_flux_e2e_tl", "idx:edgesOnEdge coef:weightsOnEdge in:F in:q in:dF in:dq out:dout "
                             "int:maxEdges2 int:slotStride"),
    Kernel("pv_flux_e2e_adj_atomic",
           "idx:edgesOnEdge coef:weightsOnEdge in:F in:q in:g out:F_adj out:q_adj int:maxEdges2"),
    Kernel("pv_flux_e2e_adj_gather", "idx:edgesOnEdge coef:weightsOnEdge idx:edgesOnEdgeT "
                                     "coef:weightsOnEdgeT in:F in:q in:g out:F_adj out:q_adj "
                                     "int:maxEdges2 int:maxT int:slotStride")))


def _check(mesh, name, x, like=None):
    x = check_field(x, mesh, name, "edge")
    if like is not None and x.shape != like.shape:
        raise ValueError(f"{name}: expected shape {tuple(like.shape)} (as F), got {tuple(x.shape)}")
    if like is not None and x.dtype != like.dtype:
        raise TypeError(f"{name}: expected dtype {like.dtype} (as F), got {x.dtype}")
    return x


def _weights(m, x, rows=None):
    """y -> (W y)[e] = sum_j weightsOnEdge[e, j] * y[edgesOnEdge[e, j]] (NumPy, `meshops.device.stencil`;
    rows [first, last) only when `rows` is given)."""
    idx, w = (m.table(n, x.dtype) for n in trisk.FORWARD)
    return lambda y: stencil.gather_sum(idx, None, w, y, rows)


def _weights_transposed(m, x, mode):
    """y -> (W^T y)[e'] = sum over (e, j) with edgesOnEdge[e, j] = e' of weightsOnEdge[e, j] * y[e]:
    scattered through edgesOnEdge (`atomic`) or gathered through edgesOnEdgeT (`deterministic`)."""
    if mode == "atomic":
        idx, w = (m.table(n, x.dtype) for n in trisk.FORWARD)
        return lambda y: stencil.scatter_sum(idx, None, w, y, m.nEdges)
    idx, w = (m.table(n, x.dtype) for n in trisk.TRANSPOSED)
    return lambda y: stencil.gather_sum(idx, None, w, y)


def pv_flux_e2e(mesh, F, q, *, rows=None):
    """TRiSK PV flux on edges: edge fields F (thickness flux), q (PV) -> edge field.

    out[e] = sum_{j < nEdgesOnEdge[e]} weightsOnEdge[e,j] * F[eoe_j] * 0.5 * (q[e] + q[eoe_j]),
    eoe_j = edgesOnEdge[e, j]. Shapes (nEdges[, nlev]). Tangent: `pv_flux_e2e_tl`; adjoint:
    `pv_flux_e2e_adj`. `rows=(first, last)`: only edges [first, last) are computed (the others are
    left unspecified).
    """
    F = _check(mesh, "F", F)
    q = _check(mesh, "q", q, F)
    xp, m = array_module(F, q), for_fields(mesh, F, q)
    if xp is np:  # sum_j w F[eoe_j] (q[e] + q[eoe_j]) = q W F + W (F q), W the weights matrix
        W = _weights(m, F, rows)
        return 0.5 * (q * W(F) + W(F * q))
    out = xp.empty_like(F)
    (idx, w), stride = m.stencil(trisk.FORWARD, (F, q, out))
    _KERNELS.launch("pv_flux_e2e", m.nEdges, edgesOnEdge=idx, weightsOnEdge=w, F=F, q=q, out=out,
                    maxEdges2=trisk.width(idx, stride), slotStride=stride, rows=rows)
    return out


def pv_flux_e2e_tl(mesh, F, q, dF, dq, *, rows=None):
    """Tangent-linear of `pv_flux_e2e` about (F, q): edge fields -> edge field.

    dout[e] = sum_j weightsOnEdge[e,j] * 0.5 * (dF[eoe_j] * (q[e] + q[eoe_j])
                                                + F[eoe_j] * (dq[e] + dq[eoe_j])).
    `rows`: as for `pv_flux_e2e`.
    """
    F = _check(mesh, "F", F)
    q, dF, dq = (_check(mesh, n, x, F) for n, x in (("q", q), ("dF", dF), ("dq", dq)))
    xp, m = array_module(F, q, dF, dq), for_fields(mesh, F, q, dF, dq)
    if xp is np:
        W = _weights(m, F, rows)
        return 0.5 * (q * W(dF) + W(dF * q) + dq * W(F) + W(F * dq))
    out = xp.empty_like(F)
    (idx, w), stride = m.stencil(trisk.FORWARD, (F, q, dF, dq, out))
    _KERNELS.launch("pv_flux_e2e_tl", m.nEdges, edgesOnEdge=idx, weightsOnEdge=w, F=F, q=q, dF=dF,
                    dq=dq, dout=out, maxEdges2=trisk.width(idx, stride), slotStride=stride,
                    rows=rows)
    return out


def pv_flux_e2e_adj(mesh, F, q, g, *, mode=None):
    """Adjoint of `pv_flux_e2e_tl` about (F, q): edge field g -> (F_adj, q_adj) on edges.

    Over the pairs (e, j) with edgesOnEdge[e, j] = e' (w_ej = weightsOnEdge[e, j]):
    F_adj[e'] = sum w_ej * 0.5 * (q[e] + q[e']) * g[e];
    q_adj[e'] = 0.5 * g[e'] * sum_j weightsOnEdge[e',j] * F[eoe_j] + 0.5 * F[e'] * sum w_ej * g[e];
    so that <pv_flux_e2e_tl(F, q; dF, dq), g> = <dF, F_adj> + <dq, q_adj>.
    """
    F = _check(mesh, "F", F)
    q, g = (_check(mesh, n, x, F) for n, x in (("q", q), ("g", g)))
    mode = resolve_mode(mode)
    xp, m = array_module(F, q, g), for_fields(mesh, F, q, g)
    if xp is np:  # WT: the transpose of W, W.T (atomic) or the transposed table (deterministic)
        W, WT = _weights(m, F), _weights_transposed(m, F, mode)
        wg = WT(g)
        return 0.5 * (WT(g * q) + q * wg), 0.5 * (g * W(F) + F * wg)
    if mode == "atomic":
        idx, w = (m.table(n, F.dtype) for n in trisk.FORWARD)
        F_adj, q_adj = xp.zeros_like(F), xp.zeros_like(F)
        _KERNELS.launch("pv_flux_e2e_adj_atomic", m.nEdges, edgesOnEdge=idx, weightsOnEdge=w, F=F,
                        q=q, g=g, F_adj=F_adj, q_adj=q_adj, maxEdges2=idx.shape[1])
    else:
        F_adj, q_adj = xp.empty_like(F), xp.empty_like(F)
        (idx, w, idx_t, w_t), stride = m.stencil(trisk.FORWARD + trisk.TRANSPOSED,
                                                  (F, q, g, F_adj, q_adj))
        _KERNELS.launch("pv_flux_e2e_adj_gather", m.nEdges, edgesOnEdge=idx, weightsOnEdge=w,
                        edgesOnEdgeT=idx_t, weightsOnEdgeT=w_t, F=F, q=q, g=g, F_adj=F_adj,
                        q_adj=q_adj, maxEdges2=trisk.width(idx, stride),
                        maxT=trisk.width(idx_t, stride), slotStride=stride)
    return F_adj, q_adj


register("pv_flux_e2e", forward=pv_flux_e2e, tangent=pv_flux_e2e_tl, adjoint=pv_flux_e2e_adj,
         domain=("edge", "edge"), range="edge", quadratic=True)
