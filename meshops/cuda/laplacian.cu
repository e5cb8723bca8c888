// Fused Laplacians: scalar cell -> cell (laplacian_c2c) and vector edge -> edge
// (vector_laplacian_e2e), forward and gather adjoint, one pass each. Formulas: meshops/laplacian.py.
#include "stencil.cuh"

// lap[c,k] = invAreaCell[c] * sum_{j<W} w[c,j] * (phi[n_j,k] - phi[c,k]), n_j = nbr[c,j] the cell
// across edge j (w = dvEdge/dcEdge of that edge); a missing neighbour (n_j < 0) reads phi = 0 and an
// absent edge has w = 0 (as grad_c2e then div_e2c treat them).
template <typename T>
__global__ void laplacian_c2c(const int* __restrict__ nbr, const T* __restrict__ w,
                              const T* __restrict__ invAreaCell, const T* __restrict__ phi,
                              T* __restrict__ lap, int W, int nCells, int nlev)
{
    MESHOPS_GRID_STRIDE(i, (long long)nCells * nlev) {
        const int c = meshops_entity(i, nlev), k = (int)(i - (long long)c * nlev);
        const T pc = phi[i];
        T acc = 0;
        for (int j = 0; j < W; ++j) {
            const int n = nbr[c * W + j];
            const T pn = n >= 0 ? phi[(long long)n * nlev + k] : (T)0;
            acc += w[c * W + j] * (pn - pc);
        }
        lap[i] = acc * invAreaCell[c];
    }
}
MESHOPS_INSTANTIATE(laplacian_c2c)

// Gather adjoint (the transpose; w is symmetric across an edge):
// phi_adj[c,k] = sum_j w[c,j] * (g[n_j,k] * invAreaCell[n_j] - g[c,k] * invAreaCell[c]).
template <typename T>
__global__ void laplacian_c2c_adj_gather(const int* __restrict__ nbr, const T* __restrict__ w,
                                         const T* __restrict__ invAreaCell, const T* __restrict__ g,
                                         T* __restrict__ phi_adj, int W, int nCells, int nlev)
{
    MESHOPS_GRID_STRIDE(i, (long long)nCells * nlev) {
        const int c = meshops_entity(i, nlev), k = (int)(i - (long long)c * nlev);
        const T gc = g[i] * invAreaCell[c];
        T acc = 0;
        for (int j = 0; j < W; ++j) {
            const int n = nbr[c * W + j];
            const T gn = n >= 0 ? g[(long long)n * nlev + k] * invAreaCell[n] : (T)0;
            acc += w[c * W + j] * (gn - gc);
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
template <typename T>
__global__ void vector_laplacian_e2e(const int* __restrict__ cellsOnEdge,
                                     const int* __restrict__ verticesOnEdge, const T* __restrict__ a,
                                     const T* __restrict__ b, const int* __restrict__ edgesOnCell,
                                     const T* __restrict__ cellCoef, const int* __restrict__ edgesOnVertex,
                                     const T* __restrict__ vertexCoef, const T* __restrict__ x,
                                     T* __restrict__ out, int maxEdges, int vertexDegree, int nEdges,
                                     int nlev)
{
    MESHOPS_GRID_STRIDE(i, (long long)nEdges * nlev) {
        const int e = meshops_entity(i, nlev), k = (int)(i - (long long)e * nlev);
        const int c0 = cellsOnEdge[2 * e], c1 = cellsOnEdge[2 * e + 1];
        const int v0 = verticesOnEdge[2 * e], v1 = verticesOnEdge[2 * e + 1];
        const T C0 = c0 >= 0 ? stencil_gather(edgesOnCell, cellCoef, x, c0, maxEdges, nlev, k) : (T)0;
        const T C1 = c1 >= 0 ? stencil_gather(edgesOnCell, cellCoef, x, c1, maxEdges, nlev, k) : (T)0;
        const T V0 = v0 >= 0 ? stencil_gather(edgesOnVertex, vertexCoef, x, v0, vertexDegree, nlev, k) : (T)0;
        const T V1 = v1 >= 0 ? stencil_gather(edgesOnVertex, vertexCoef, x, v1, vertexDegree, nlev, k) : (T)0;
        out[i] = a[e] * (C1 - C0) - b[e] * (V1 - V0);
    }
}
MESHOPS_INSTANTIATE(vector_laplacian_e2e)
