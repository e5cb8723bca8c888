// Fused Laplacians: scalar cell -> cell (laplacian_c2c) and vector edge -> edge
// (vector_laplacian_e2e), forward and gather adjoint, one pass each. Formulas: meshops/laplacian.py.
// Per stencil slot (c, j), j < S = maxEdges: nbr[c,j] the cell across edge j (-1: missing neighbour
// or pad), w[c,j] = dvEdge/dcEdge of that edge (0 on pads) and invAreaAcross[c,j] = 1/areaCell[nbr]
// (0 where nbr < 0).
#include "stencil.cuh"

using meshops::Lanes;

// lap[c,k] = invAreaCell[c] * sum_{j<S} w[c,j] * (phi[n_j,k] - phi[c,k]), n_j = nbr[c,j]; a missing
// neighbour (n_j < 0) reads phi = 0 and a pad has w = 0 (as grad_c2e then div_e2c treat them), so
// every slot is visited.
template <typename T, int W>
__global__ void laplacian_c2c(const int* __restrict__ nbr, const T* __restrict__ w,
                              const T* __restrict__ invAreaCell, const Lanes<T, W>* __restrict__ phi,
                              Lanes<T, W>* __restrict__ lap, int S, int first, int last, int nlev)
{
    MESHOPS_ROWS(i, first, last, nlev) {
        MESHOPS_ROW_LANE(c, k, i, nlev);
        const Lanes<T, W> pc = phi[i];
        Lanes<T, W> acc = meshops::splat<T, W>(0);
        for (int j = 0; j < S; ++j) {
            const int n = nbr[c * S + j];
            const Lanes<T, W> pn = n >= 0 ? phi[(long long)n * nlev + k] : meshops::splat<T, W>(0);
            meshops::axpy(acc, w[c * S + j], pn - pc);
        }
        lap[i] = invAreaCell[c] * acc;
    }
}
MESHOPS_INSTANTIATE(laplacian_c2c)

// Gather adjoint (the transpose; w is symmetric across an edge):
// phi_adj[c,k] = sum_j w[c,j] * (g[n_j,k] * invAreaAcross[c,j] - g[c,k] * invAreaCell[c]).
template <typename T, int W>
__global__ void laplacian_c2c_adj_gather(const int* __restrict__ nbr, const T* __restrict__ w,
                                         const T* __restrict__ invAreaAcross,
                                         const T* __restrict__ invAreaCell,
                                         const Lanes<T, W>* __restrict__ g,
                                         Lanes<T, W>* __restrict__ phi_adj, int S, int first, int last,
                                         int nlev)
{
    MESHOPS_ROWS(i, first, last, nlev) {
        MESHOPS_ROW_LANE(c, k, i, nlev);
        const Lanes<T, W> gc = invAreaCell[c] * g[i];
        Lanes<T, W> acc = meshops::splat<T, W>(0);
        for (int j = 0; j < S; ++j) {
            const int n = nbr[c * S + j];
            const Lanes<T, W> gn =
                n >= 0 ? invAreaAcross[c * S + j] * g[(long long)n * nlev + k] : meshops::splat<T, W>(0);
            meshops::axpy(acc, w[c * S + j], gn - gc);
        }
        phi_adj[i] = acc;
    }
}
MESHOPS_INSTANTIATE(laplacian_c2c_adj_gather)

// out[e,k] = a[e] * (C(c1) - C(c0)) - b[e] * (V(v1) - V(v0)) with (c0, c1) = cellsOnEdge[e],
// (v0, v1) = verticesOnEdge[e], C(c) = sum_j cellCoef[c,j] * x[edgesOnCell[c,j],k],
// V(v) = sum_i vertexCoef[v,i] * x[edgesOnVertex[v,i],k]; a missing cell or vertex gives 0.
// Forward: a = 1/dcEdge, b = 1/dvEdge, C = div_e2c, V = curl_e2v. Adjoint: a = dvEdge,
// b = dcEdge, cellCoef = edgeSignOnCell / (dcEdge * areaCell), vertexCoef = edgeSignOnVertex /
// (dvEdge * areaTriangle).
template <typename T, int W>
__global__ void vector_laplacian_e2e(const int* __restrict__ cellsOnEdge,
                                     const int* __restrict__ verticesOnEdge, const T* __restrict__ a,
                                     const T* __restrict__ b, const int* __restrict__ edgesOnCell,
                                     const T* __restrict__ cellCoef, const int* __restrict__ edgesOnVertex,
                                     const T* __restrict__ vertexCoef, const Lanes<T, W>* __restrict__ x,
                                     Lanes<T, W>* __restrict__ out, int maxEdges, int vertexDegree,
                                     int first, int last, int nlev)
{
    using meshops::stencil_gather;
    MESHOPS_ROWS(i, first, last, nlev) {
        MESHOPS_ROW_LANE(e, k, i, nlev);
        const int c0 = cellsOnEdge[2 * e], c1 = cellsOnEdge[2 * e + 1];
        const int v0 = verticesOnEdge[2 * e], v1 = verticesOnEdge[2 * e + 1];
        const Lanes<T, W> zero = meshops::splat<T, W>(0);
        const Lanes<T, W> C0 = c0 >= 0 ? stencil_gather(edgesOnCell, cellCoef, x, c0, maxEdges, nlev, k) : zero;
        const Lanes<T, W> C1 = c1 >= 0 ? stencil_gather(edgesOnCell, cellCoef, x, c1, maxEdges, nlev, k) : zero;
        const Lanes<T, W> V0 =
            v0 >= 0 ? stencil_gather(edgesOnVertex, vertexCoef, x, v0, vertexDegree, nlev, k) : zero;
        const Lanes<T, W> V1 =
            v1 >= 0 ? stencil_gather(edgesOnVertex, vertexCoef, x, v1, vertexDegree, nlev, k) : zero;
        out[i] = a[e] * (C1 - C0) - b[e] * (V1 - V0);
    }
}
MESHOPS_INSTANTIATE(vector_laplacian_e2e)
