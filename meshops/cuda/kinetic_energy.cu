// Kinetic energy edge -> cell (ke_e2c), its tangent-linear model and adjoints.
// Formulas: meshops/kinetic_energy.py; kw[e] = 0.25 * dcEdge[e] * dvEdge[e].
#include "common.cuh"

// ke[c,k] = invAreaCell[c] * sum_{j<nEdgesOnCell[c]} kw[e_j] * u[e_j,k]^2
template <typename T>
__global__ void ke_e2c(const int* __restrict__ nEdgesOnCell, const int* __restrict__ edgesOnCell,
                       const T* __restrict__ kw, const T* __restrict__ invAreaCell,
                       const T* __restrict__ u, T* __restrict__ ke, int maxEdges, int nCells, int nlev)
{
    MESHOPS_GRID_STRIDE(i, (long long)nCells * nlev) {
        const int c = meshops_entity(i, nlev), k = (int)(i - (long long)c * nlev);
        T acc = 0;
        for (int j = 0; j < nEdgesOnCell[c]; ++j) {
            const int e = edgesOnCell[c * maxEdges + j];
            if (e >= 0) {
                const T ue = u[(long long)e * nlev + k];
                acc += kw[e] * ue * ue;
            }
        }
        ke[i] = acc * invAreaCell[c];
    }
}
MESHOPS_INSTANTIATE(ke_e2c)

// dke[c,k] = invAreaCell[c] * sum_j 2 * kw[e_j] * u[e_j,k] * du[e_j,k]
template <typename T>
__global__ void ke_e2c_tl(const int* __restrict__ nEdgesOnCell, const int* __restrict__ edgesOnCell,
                          const T* __restrict__ kw, const T* __restrict__ invAreaCell,
                          const T* __restrict__ u, const T* __restrict__ du, T* __restrict__ dke,
                          int maxEdges, int nCells, int nlev)
{
    MESHOPS_GRID_STRIDE(i, (long long)nCells * nlev) {
        const int c = meshops_entity(i, nlev), k = (int)(i - (long long)c * nlev);
        T acc = 0;
        for (int j = 0; j < nEdgesOnCell[c]; ++j) {
            const int e = edgesOnCell[c * maxEdges + j];
            if (e >= 0) {
                const long long ek = (long long)e * nlev + k;
                acc += kw[e] * u[ek] * du[ek];
            }
        }
        dke[i] = 2 * acc * invAreaCell[c];
    }
}
MESHOPS_INSTANTIATE(ke_e2c_tl)

// Scatter form: one thread per (cell, level) adds 2 kw[e] u[e,k] g[c,k] / areaCell[c] into its edges.
template <typename T>
__global__ void ke_e2c_adj_atomic(const int* __restrict__ nEdgesOnCell,
                                  const int* __restrict__ edgesOnCell, const T* __restrict__ kw,
                                  const T* __restrict__ invAreaCell, const T* __restrict__ u,
                                  const T* __restrict__ g, T* __restrict__ u_adj, int maxEdges,
                                  int nCells, int nlev)
{
    MESHOPS_GRID_STRIDE(i, (long long)nCells * nlev) {
        const int c = meshops_entity(i, nlev), k = (int)(i - (long long)c * nlev);
        const T gc = 2 * g[i] * invAreaCell[c];
        for (int j = 0; j < nEdgesOnCell[c]; ++j) {
            const int e = edgesOnCell[c * maxEdges + j];
            if (e >= 0) {
                const long long ek = (long long)e * nlev + k;
                atomicAdd(&u_adj[ek], kw[e] * u[ek] * gc);
            }
        }
    }
}
MESHOPS_INSTANTIATE(ke_e2c_adj_atomic)

// Gather form: u_adj[e,k] = 2 kw[e] u[e,k] (g[c0,k] invAreaCell[c0] + g[c1,k] invAreaCell[c1]).
template <typename T>
__global__ void ke_e2c_adj_gather(const int* __restrict__ cellsOnEdge, const T* __restrict__ kw,
                                  const T* __restrict__ invAreaCell, const T* __restrict__ u,
                                  const T* __restrict__ g, T* __restrict__ u_adj, int nEdges, int nlev)
{
    MESHOPS_GRID_STRIDE(i, (long long)nEdges * nlev) {
        const int e = meshops_entity(i, nlev), k = (int)(i - (long long)e * nlev);
        const int c0 = cellsOnEdge[2 * e], c1 = cellsOnEdge[2 * e + 1];
        T acc = 0;
        if (c0 >= 0) acc += g[(long long)c0 * nlev + k] * invAreaCell[c0];
        if (c1 >= 0) acc += g[(long long)c1 * nlev + k] * invAreaCell[c1];
        u_adj[i] = 2 * kw[e] * u[i] * acc;
    }
}
MESHOPS_INSTANTIATE(ke_e2c_adj_gather)
