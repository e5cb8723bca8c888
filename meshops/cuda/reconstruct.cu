// Perot reconstruction of cell-centre vectors from edge-normal velocities, and its adjoints.
// Formulas: meshops/reconstruct.py. NC components: 3 (X, Y, Z) or 2 (zonal, meridional).
// coeffs is (nCells, maxEdges, NC); coeffsOnEdge is (nEdges, 2, NC), the coefficient of edge e in
// the stencil of cellsOnEdge[e, i].
#include "common.cuh"

// out_d[c,k] = sum_{j<nEdgesOnCell[c]} coeffs[c,j,d] * u[e_j,k]
template <typename T, int NC>
__device__ void reconstruct_body(const int* __restrict__ nEdgesOnCell, const int* __restrict__ edgesOnCell,
                                 const T* __restrict__ coeffs, const T* __restrict__ u, T* const* out,
                                 int maxEdges, int nCells, int nlev)
{
    MESHOPS_GRID_STRIDE(i, (long long)nCells * nlev) {
        const int c = meshops_entity(i, nlev), k = (int)(i - (long long)c * nlev);
        T acc[NC];
        #pragma unroll
        for (int d = 0; d < NC; ++d) acc[d] = 0;
        for (int j = 0; j < nEdgesOnCell[c]; ++j) {
            const int e = edgesOnCell[c * maxEdges + j];
            if (e >= 0) {
                const T ue = u[(long long)e * nlev + k];
                const T* w = coeffs + ((long long)c * maxEdges + j) * NC;
                #pragma unroll
                for (int d = 0; d < NC; ++d) acc[d] += w[d] * ue;
            }
        }
        #pragma unroll
        for (int d = 0; d < NC; ++d) out[d][i] = acc[d];
    }
}

// Scatter form: one thread per (cell, level) adds sum_d coeffs[c,j,d] * g_d[c,k] into each edge.
template <typename T, int NC>
__device__ void reconstruct_adj_atomic_body(const int* __restrict__ nEdgesOnCell,
                                            const int* __restrict__ edgesOnCell,
                                            const T* __restrict__ coeffs, const T* const* g,
                                            T* __restrict__ u_adj, int maxEdges, int nCells, int nlev)
{
    MESHOPS_GRID_STRIDE(i, (long long)nCells * nlev) {
        const int c = meshops_entity(i, nlev), k = (int)(i - (long long)c * nlev);
        T gc[NC];
        #pragma unroll
        for (int d = 0; d < NC; ++d) gc[d] = g[d][i];
        for (int j = 0; j < nEdgesOnCell[c]; ++j) {
            const int e = edgesOnCell[c * maxEdges + j];
            if (e >= 0) {
                const T* w = coeffs + ((long long)c * maxEdges + j) * NC;
                T acc = 0;
                #pragma unroll
                for (int d = 0; d < NC; ++d) acc += w[d] * gc[d];
                atomicAdd(&u_adj[(long long)e * nlev + k], acc);
            }
        }
    }
}

// Gather form: u_adj[e,k] = sum_{i<2, c_i>=0} sum_d coeffsOnEdge[e,i,d] * g_d[c_i,k].
template <typename T, int NC>
__device__ void reconstruct_adj_gather_body(const int* __restrict__ cellsOnEdge,
                                            const T* __restrict__ coeffsOnEdge, const T* const* g,
                                            T* __restrict__ u_adj, int nEdges, int nlev)
{
    MESHOPS_GRID_STRIDE(i, (long long)nEdges * nlev) {
        const int e = meshops_entity(i, nlev), k = (int)(i - (long long)e * nlev);
        T acc = 0;
        #pragma unroll
        for (int s = 0; s < 2; ++s) {
            const int c = cellsOnEdge[2 * e + s];
            if (c >= 0) {
                const long long ck = (long long)c * nlev + k;
                const T* w = coeffsOnEdge + ((long long)e * 2 + s) * NC;
                #pragma unroll
                for (int d = 0; d < NC; ++d) acc += w[d] * g[d][ck];
            }
        }
        u_adj[i] = acc;
    }
}

template <typename T>
__global__ void reconstruct_xyz_e2c(const int* __restrict__ nEdgesOnCell, const int* __restrict__ edgesOnCell,
                                    const T* __restrict__ coeffs, const T* __restrict__ u, T* outX,
                                    T* outY, T* outZ, int maxEdges, int nCells, int nlev)
{
    T* const out[3] = {outX, outY, outZ};
    reconstruct_body<T, 3>(nEdgesOnCell, edgesOnCell, coeffs, u, out, maxEdges, nCells, nlev);
}
MESHOPS_INSTANTIATE(reconstruct_xyz_e2c)

template <typename T>
__global__ void reconstruct_xyz_e2c_adj_atomic(const int* __restrict__ nEdgesOnCell,
                                               const int* __restrict__ edgesOnCell,
                                               const T* __restrict__ coeffs, const T* gX, const T* gY,
                                               const T* gZ, T* __restrict__ u_adj, int maxEdges,
                                               int nCells, int nlev)
{
    const T* const g[3] = {gX, gY, gZ};
    reconstruct_adj_atomic_body<T, 3>(nEdgesOnCell, edgesOnCell, coeffs, g, u_adj, maxEdges, nCells, nlev);
}
MESHOPS_INSTANTIATE(reconstruct_xyz_e2c_adj_atomic)

template <typename T>
__global__ void reconstruct_xyz_e2c_adj_gather(const int* __restrict__ cellsOnEdge,
                                               const T* __restrict__ coeffsOnEdge, const T* gX,
                                               const T* gY, const T* gZ, T* __restrict__ u_adj,
                                               int nEdges, int nlev)
{
    const T* const g[3] = {gX, gY, gZ};
    reconstruct_adj_gather_body<T, 3>(cellsOnEdge, coeffsOnEdge, g, u_adj, nEdges, nlev);
}
MESHOPS_INSTANTIATE(reconstruct_xyz_e2c_adj_gather)

template <typename T>
__global__ void reconstruct_zm_e2c(const int* __restrict__ nEdgesOnCell, const int* __restrict__ edgesOnCell,
                                   const T* __restrict__ coeffs, const T* __restrict__ u, T* outZonal,
                                   T* outMeridional, int maxEdges, int nCells, int nlev)
{
    T* const out[2] = {outZonal, outMeridional};
    reconstruct_body<T, 2>(nEdgesOnCell, edgesOnCell, coeffs, u, out, maxEdges, nCells, nlev);
}
MESHOPS_INSTANTIATE(reconstruct_zm_e2c)

template <typename T>
__global__ void reconstruct_zm_e2c_adj_atomic(const int* __restrict__ nEdgesOnCell,
                                              const int* __restrict__ edgesOnCell,
                                              const T* __restrict__ coeffs, const T* gZonal,
                                              const T* gMeridional, T* __restrict__ u_adj, int maxEdges,
                                              int nCells, int nlev)
{
    const T* const g[2] = {gZonal, gMeridional};
    reconstruct_adj_atomic_body<T, 2>(nEdgesOnCell, edgesOnCell, coeffs, g, u_adj, maxEdges, nCells, nlev);
}
MESHOPS_INSTANTIATE(reconstruct_zm_e2c_adj_atomic)

template <typename T>
__global__ void reconstruct_zm_e2c_adj_gather(const int* __restrict__ cellsOnEdge,
                                              const T* __restrict__ coeffsOnEdge, const T* gZonal,
                                              const T* gMeridional, T* __restrict__ u_adj, int nEdges,
                                              int nlev)
{
    const T* const g[2] = {gZonal, gMeridional};
    reconstruct_adj_gather_body<T, 2>(cellsOnEdge, coeffsOnEdge, g, u_adj, nEdges, nlev);
}
MESHOPS_INSTANTIATE(reconstruct_zm_e2c_adj_gather)
