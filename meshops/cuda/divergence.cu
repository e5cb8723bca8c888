// Divergence edge -> cell (div_e2c) and its adjoints. Formulas: meshops/divergence.py.
#include "common.cuh"

// div[c,k] = invAreaCell[c] * sum_{j<nEdgesOnCell[c]} edgeSignOnCell[c,j] * dvEdge[e_j] * F[e_j,k]
template <typename T>
__global__ void div_e2c(const int* __restrict__ nEdgesOnCell, const int* __restrict__ edgesOnCell,
                        const T* __restrict__ edgeSignOnCell, const T* __restrict__ dvEdge,
                        const T* __restrict__ invAreaCell, const T* __restrict__ F,
                        T* __restrict__ div, int maxEdges, int nCells, int nlev)
{
    MESHOPS_GRID_STRIDE(i, (long long)nCells * nlev) {
        const int c = (int)(i / nlev), k = (int)(i - (long long)c * nlev);
        T acc = 0;
        for (int j = 0; j < nEdgesOnCell[c]; ++j) {
            const int e = edgesOnCell[c * maxEdges + j];
            if (e >= 0) acc += edgeSignOnCell[c * maxEdges + j] * dvEdge[e] * F[(long long)e * nlev + k];
        }
        div[i] = acc * invAreaCell[c];
    }
}
MESHOPS_INSTANTIATE(div_e2c)

// Scatter form: one thread per (cell, level) of the forward output adds into its edges.
template <typename T>
__global__ void div_e2c_adj_atomic(const int* __restrict__ nEdgesOnCell,
                                   const int* __restrict__ edgesOnCell,
                                   const T* __restrict__ edgeSignOnCell, const T* __restrict__ dvEdge,
                                   const T* __restrict__ invAreaCell, const T* __restrict__ g,
                                   T* __restrict__ F_adj, int maxEdges, int nCells, int nlev)
{
    MESHOPS_GRID_STRIDE(i, (long long)nCells * nlev) {
        const int c = (int)(i / nlev), k = (int)(i - (long long)c * nlev);
        const T gc = g[i] * invAreaCell[c];
        for (int j = 0; j < nEdgesOnCell[c]; ++j) {
            const int e = edgesOnCell[c * maxEdges + j];
            if (e >= 0) atomicAdd(&F_adj[(long long)e * nlev + k], edgeSignOnCell[c * maxEdges + j] * dvEdge[e] * gc);
        }
    }
}
MESHOPS_INSTANTIATE(div_e2c_adj_atomic)

// Gather form: F_adj[e,k] = dvEdge[e] * (g[c0,k] * invAreaCell[c0] - g[c1,k] * invAreaCell[c1]).
template <typename T>
__global__ void div_e2c_adj_gather(const int* __restrict__ cellsOnEdge, const T* __restrict__ dvEdge,
                                   const T* __restrict__ invAreaCell, const T* __restrict__ g,
                                   T* __restrict__ F_adj, int nEdges, int nlev)
{
    MESHOPS_GRID_STRIDE(i, (long long)nEdges * nlev) {
        const int e = (int)(i / nlev), k = (int)(i - (long long)e * nlev);
        const int c0 = cellsOnEdge[2 * e], c1 = cellsOnEdge[2 * e + 1];
        T acc = 0;
        if (c0 >= 0) acc += g[(long long)c0 * nlev + k] * invAreaCell[c0];
        if (c1 >= 0) acc -= g[(long long)c1 * nlev + k] * invAreaCell[c1];
        F_adj[i] = dvEdge[e] * acc;
    }
}
MESHOPS_INSTANTIATE(div_e2c_adj_gather)
