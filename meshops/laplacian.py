"""Laplacians as compositions: scalar `laplacian_c2c`, vector `vector_laplacian_e2e` and their squares.

    laplacian_c2c(phi)      = div_e2c(grad_c2e(phi))
        [c] = 1/areaCell[c] * sum_j edgeSignOnCell[c,j] * dvEdge[e_j] * (phi[c1] - phi[c0]) / dcEdge[e_j]
    vector_laplacian_e2e(u) = grad_c2e(div_e2c(u)) - grad_v2e(curl_e2v(u))
        [e] = (divergence[c1] - divergence[c0]) / dcEdge[e] - (vorticity[v1] - vorticity[v0]) / dvEdge[e]
    del4_c2c(phi) = laplacian_c2c(laplacian_c2c(phi)),  del4_e2e(u) = vector_laplacian_e2e(vector_laplacian_e2e(u))

with (c0, c1) = cellsOnEdge[e], (v0, v1) = verticesOnEdge[e]. `vector_laplacian_e2e` is MPAS's del2 of
the normal velocity (core_sw compute_tend, delsq_u): the normal component of
grad(div u) + k x grad(vorticity), whose normal part n . (k x grad zeta) = -t . grad zeta (t = k x n,
from v0 to v1) is the minus sign above. MPAS's del4 dissipation is tend_u -= nu4 * del4_e2e(u).

Adjoints compose the adjoints in reverse order; they are NOT assumed equal to the forwards: these
Laplacians are symmetric only in the area-weighted inner products (areaCell; dcEdge*dvEdge), while
every adjoint here is in the plain Euclidean inner product over entries and levels:

    laplacian_c2c_adj(g)        = grad_c2e_adj(div_e2c_adj(g))
    vector_laplacian_e2e_adj(g) = div_e2c_adj(grad_c2e_adj(g)) - curl_e2v_adj(grad_v2e_adj(g))
    del4_c2c_adj = laplacian_c2c_adj o laplacian_c2c_adj,  del4_e2e_adj likewise.

The adjoint `mode` ("atomic" / "deterministic") is passed to every composed adjoint. No fused
kernels: each step runs the CUDA kernels of its own family on CuPy arrays.
"""
from __future__ import annotations

from meshops.curl import curl_e2v, curl_e2v_adj
from meshops.divergence import div_e2c, div_e2c_adj
from meshops.gradient import grad_c2e, grad_c2e_adj, grad_v2e, grad_v2e_adj
from meshops.registry import register


def laplacian_c2c(mesh, phi):
    """Scalar Laplacian on cells: (nCells[, nlev]) -> (nCells[, nlev]); div_e2c(grad_c2e(phi)).

    lap[c] = 1/areaCell[c] * sum_j edgeSignOnCell[c,j] * dvEdge[e_j] / dcEdge[e_j]
             * (phi[cellsOnEdge[e_j,1]] - phi[cellsOnEdge[e_j,0]]). Adjoint: `laplacian_c2c_adj`.
    """
    return div_e2c(mesh, grad_c2e(mesh, phi))


def laplacian_c2c_adj(mesh, g, *, mode=None):
    """Adjoint of `laplacian_c2c` (Euclidean): grad_c2e_adj(div_e2c_adj(g)), cells -> cells."""
    return grad_c2e_adj(mesh, div_e2c_adj(mesh, g, mode=mode), mode=mode)


def vector_laplacian_e2e(mesh, u):
    """Vector Laplacian of the normal velocity (MPAS del2): (nEdges[, nlev]) -> (nEdges[, nlev]).

    del2u[e] = (div[c1] - div[c0]) / dcEdge[e] - (vort[v1] - vort[v0]) / dvEdge[e], div = div_e2c(u),
    vort = curl_e2v(u). Adjoint: `vector_laplacian_e2e_adj`.
    """
    return grad_c2e(mesh, div_e2c(mesh, u)) - grad_v2e(mesh, curl_e2v(mesh, u))


def vector_laplacian_e2e_adj(mesh, g, *, mode=None):
    """Adjoint of `vector_laplacian_e2e` (Euclidean), edges -> edges:
    div_e2c_adj(grad_c2e_adj(g)) - curl_e2v_adj(grad_v2e_adj(g))."""
    return (div_e2c_adj(mesh, grad_c2e_adj(mesh, g, mode=mode), mode=mode)
            - curl_e2v_adj(mesh, grad_v2e_adj(mesh, g, mode=mode), mode=mode))


def del4_c2c(mesh, phi):
    """Biharmonic operator on cells: laplacian_c2c applied twice, (nCells[, nlev]) -> same."""
    return laplacian_c2c(mesh, laplacian_c2c(mesh, phi))


def del4_c2c_adj(mesh, g, *, mode=None):
    """Adjoint of `del4_c2c` (Euclidean): laplacian_c2c_adj applied twice."""
    return laplacian_c2c_adj(mesh, laplacian_c2c_adj(mesh, g, mode=mode), mode=mode)


def del4_e2e(mesh, u):
    """Biharmonic operator on normal velocities (MPAS del4): vector_laplacian_e2e applied twice."""
    return vector_laplacian_e2e(mesh, vector_laplacian_e2e(mesh, u))


def del4_e2e_adj(mesh, g, *, mode=None):
    """Adjoint of `del4_e2e` (Euclidean): vector_laplacian_e2e_adj applied twice."""
    return vector_laplacian_e2e_adj(mesh, vector_laplacian_e2e_adj(mesh, g, mode=mode), mode=mode)


register("laplacian_c2c", forward=laplacian_c2c, adjoint=laplacian_c2c_adj, domain="cell",
         range="cell", halo_depth=1)
register("vector_laplacian_e2e", forward=vector_laplacian_e2e, adjoint=vector_laplacian_e2e_adj,
         domain="edge", range="edge", halo_depth=1)
register("del4_c2c", forward=del4_c2c, adjoint=del4_c2c_adj, domain="cell", range="cell",
         halo_depth=2)
register("del4_e2e", forward=del4_e2e, adjoint=del4_e2e_adj, domain="edge", range="edge",
         halo_depth=2)
