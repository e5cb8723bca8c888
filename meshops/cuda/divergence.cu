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
        const int c = meshops_entity(i, nlev), k = (int)(i - (long long)c * nlev);
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
        const int c = meshops_entity(i, nlev), k = (int)(i - (long long)c * nlev);
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
        const int e = meshops_entity(i, nlev), k = (int)(i - (long long)e * nlev);
        const int c0 = cellsOnEdge[2 * e], c1 = cellsOnEdge[2 * e + 1];
        T acc = 0;
        if (c0 >= 0) acc += g[(long long)c0 * nlev + k] * invAreaCell[c0];
        if (c1 >= 0) acc -= g[(long long)c1 * nlev + k] * invAreaCell[c1];
        F_adj[i] = dvEdge[e] * acc;
    }
}
MESHOPS_INSTANTIATE(div_e2c_adj_gather)

// -- flux divergence of h*u, fused: h and u are read in the stencil pass (no h*u temporary) -----

// flux[c,k] = invAreaCell[c] * sum_j edgeSignOnCell[c,j] * dvEdge[e_j] * h[e_j,k] * u[e_j,k]
template <typename T>
__global__ void flux_div_e2c(const int* __restrict__ nEdgesOnCell, const int* __restrict__ edgesOnCell,
                             const T* __restrict__ edgeSignOnCell, const T* __restrict__ dvEdge,
                             const T* __restrict__ invAreaCell, const T* __restrict__ h,
                             const T* __restrict__ u, T* __restrict__ div, int maxEdges, int nCells,
                             int nlev)
{
    MESHOPS_GRID_STRIDE(i, (long long)nCells * nlev) {
        const int c = meshops_entity(i, nlev), k = (int)(i - (long long)c * nlev);
        T acc = 0;
        for (int j = 0; j < nEdgesOnCell[c]; ++j) {
            const int e = edgesOnCell[c * maxEdges + j];
            if (e >= 0) {
                const long long ek = (long long)e * nlev + k;
                acc += edgeSignOnCell[c * maxEdges + j] * dvEdge[e] * (h[ek] * u[ek]);
            }
        }
        div[i] = acc * invAreaCell[c];
    }
}
MESHOPS_INSTANTIATE(flux_div_e2c)

// Tangent: dflux[c,k] = invAreaCell[c] * sum_j edgeSignOnCell[c,j] * dvEdge[e_j] * (dh*u + h*du)[e_j,k]
template <typename T>
__global__ void flux_div_e2c_tl(const int* __restrict__ nEdgesOnCell, const int* __restrict__ edgesOnCell,
                                const T* __restrict__ edgeSignOnCell, const T* __restrict__ dvEdge,
                                const T* __restrict__ invAreaCell, const T* __restrict__ h,
                                const T* __restrict__ u, const T* __restrict__ dh,
                                const T* __restrict__ du, T* __restrict__ ddiv, int maxEdges,
                                int nCells, int nlev)
{
    MESHOPS_GRID_STRIDE(i, (long long)nCells * nlev) {
        const int c = meshops_entity(i, nlev), k = (int)(i - (long long)c * nlev);
        T acc = 0;
        for (int j = 0; j < nEdgesOnCell[c]; ++j) {
            const int e = edgesOnCell[c * maxEdges + j];
            if (e >= 0) {
                const long long ek = (long long)e * nlev + k;
                acc += edgeSignOnCell[c * maxEdges + j] * dvEdge[e] * (dh[ek] * u[ek] + h[ek] * du[ek]);
            }
        }
        ddiv[i] = acc * invAreaCell[c];
    }
}
MESHOPS_INSTANTIATE(flux_div_e2c_tl)

// Scatter form: one thread per (cell, level); w = edgeSignOnCell * dvEdge * g * invAreaCell adds
// w*u into h_adj and w*h into u_adj at each edge of the cell.
template <typename T>
__global__ void flux_div_e2c_adj_atomic(const int* __restrict__ nEdgesOnCell,
                                        const int* __restrict__ edgesOnCell,
                                        const T* __restrict__ edgeSignOnCell, const T* __restrict__ dvEdge,
                                        const T* __restrict__ invAreaCell, const T* __restrict__ h,
                                        const T* __restrict__ u, const T* __restrict__ g,
                                        T* __restrict__ h_adj, T* __restrict__ u_adj, int maxEdges,
                                        int nCells, int nlev)
{
    MESHOPS_GRID_STRIDE(i, (long long)nCells * nlev) {
        const int c = meshops_entity(i, nlev), k = (int)(i - (long long)c * nlev);
        const T gc = g[i] * invAreaCell[c];
        for (int j = 0; j < nEdgesOnCell[c]; ++j) {
            const int e = edgesOnCell[c * maxEdges + j];
            if (e >= 0) {
                const long long ek = (long long)e * nlev + k;
                const T w = edgeSignOnCell[c * maxEdges + j] * dvEdge[e] * gc;
                atomicAdd(&h_adj[ek], w * u[ek]);
                atomicAdd(&u_adj[ek], w * h[ek]);
            }
        }
    }
}
MESHOPS_INSTANTIATE(flux_div_e2c_adj_atomic)

// Gather form: F = dvEdge[e] * (g[c0,k] * invAreaCell[c0] - g[c1,k] * invAreaCell[c1]);
// h_adj[e,k] = u[e,k] * F, u_adj[e,k] = h[e,k] * F.
template <typename T>
__global__ void flux_div_e2c_adj_gather(const int* __restrict__ cellsOnEdge, const T* __restrict__ dvEdge,
                                        const T* __restrict__ invAreaCell, const T* __restrict__ h,
                                        const T* __restrict__ u, const T* __restrict__ g,
                                        T* __restrict__ h_adj, T* __restrict__ u_adj, int nEdges,
                                        int nlev)
{
    MESHOPS_GRID_STRIDE(i, (long long)nEdges * nlev) {
        const int e = meshops_entity(i, nlev), k = (int)(i - (long long)e * nlev);
        const int c0 = cellsOnEdge[2 * e], c1 = cellsOnEdge[2 * e + 1];
        T acc = 0;
        if (c0 >= 0) acc += g[(long long)c0 * nlev + k] * invAreaCell[c0];
        if (c1 >= 0) acc -= g[(long long)c1 * nlev + k] * invAreaCell[c1];
        const T F = dvEdge[e] * acc;
        h_adj[i] = u[i] * F;
        u_adj[i] = h[i] * F;
    }
}
MESHOPS_INSTANTIATE(flux_div_e2c_adj_gather)
