// Perot reconstruction of cell-centre vectors from edge-normal velocities, and its adjoints.
// Formulas: meshops/operators/reconstruct.py. NC components: 3 (X, Y, Z) or 2 (zonal, meridional).
// coeffs is (nCells, maxEdges, NC) on edgesOnCell (masked beyond nEdgesOnCell: -1 and 0 in pads);
// coeffsOnEdge is (nEdges, 2, NC), the coefficient of edge e in the stencil of cellsOnEdge[e, i].
#include "stencil.cuh"

using meshops::Lanes;
using meshops::load;

// out_d[c,k] = sum_{j<maxEdges, e_j>=0} coeffs[c,j,d] * u[e_j,k]
template <typename T, int W, int NC>
__device__ __forceinline__ void reconstruct_body(const int* __restrict__ edgesOnCell,
                                                 const T* __restrict__ coeffs,
                                                 const Lanes<T, W>* __restrict__ u,
                                                 Lanes<T, W>* const* out, int maxEdges, int first,
                                                 int last, int nlev)
{
    MESHOPS_ROWS(i, first, last, nlev) {
        MESHOPS_ROW_LANE(c, k, i, nlev);
        Lanes<T, W> acc[NC];
#pragma unroll
        for (int d = 0; d < NC; ++d) acc[d] = meshops::splat<T, W>(0);
        // The loop written out: through meshops::for_each_row_slot it compiles to other
        // instructions (docs/decisions/0002-kernel-tuning.md).
        for (int j = 0; j < maxEdges; ++j) {
            const int e = edgesOnCell[c * maxEdges + j];
            if (e >= 0) {
                const Lanes<T, W> ue = load(u, (meshops_offset)e * nlev + k);
                const T* w = coeffs + ((meshops_offset)c * maxEdges + j) * NC;
#pragma unroll
                for (int d = 0; d < NC; ++d) meshops::axpy(acc[d], w[d], ue);
            }
        }
#pragma unroll
        for (int d = 0; d < NC; ++d) out[d][i] = acc[d];
    }
}

// Scatter form: one thread per (cell, lane) adds sum_d coeffs[c,j,d] * g_d[c,k] into each edge.
template <typename T, int W, int NC>
__device__ __forceinline__ void reconstruct_adj_atomic_body(const int* __restrict__ edgesOnCell,
                                                            const T* __restrict__ coeffs,
                                                            const Lanes<T, W>* const* g,
                                                            Lanes<T, W>* __restrict__ u_adj,
                                                            int maxEdges, int first, int last, int nlev)
{
    MESHOPS_ROWS(i, first, last, nlev) {
        MESHOPS_ROW_LANE(c, k, i, nlev);
        Lanes<T, W> gc[NC];
#pragma unroll
        for (int d = 0; d < NC; ++d) gc[d] = load(g[d], i);
        meshops::for_each_row_slot(edgesOnCell, c, maxEdges, [&](int p, int e) {
            const int j = p - c * maxEdges;
            const T* w = coeffs + ((meshops_offset)c * maxEdges + j) * NC;
            Lanes<T, W> acc = meshops::splat<T, W>(0);
#pragma unroll
            for (int d = 0; d < NC; ++d) meshops::axpy(acc, w[d], gc[d]);
            meshops::atomic_add(&u_adj[(meshops_offset)e * nlev + k], acc);
        });
    }
}

// Gather form: u_adj[e,k] = sum_{i<2, c_i>=0} sum_d coeffsOnEdge[e,i,d] * g_d[c_i,k].
template <typename T, int W, int NC>
__device__ __forceinline__ void reconstruct_adj_gather_body(const int* __restrict__ cellsOnEdge,
                                                            const T* __restrict__ coeffsOnEdge,
                                                            const Lanes<T, W>* const* g,
                                                            Lanes<T, W>* __restrict__ u_adj, int first,
                                                            int last, int nlev)
{
    MESHOPS_ROWS(i, first, last, nlev) {
        MESHOPS_ROW_LANE(e, k, i, nlev);
        Lanes<T, W> acc = meshops::splat<T, W>(0);
#pragma unroll
        for (int s = 0; s < 2; ++s) {
            const int c = cellsOnEdge[2 * e + s];
            if (c >= 0) {
                const meshops_offset ck = (meshops_offset)c * nlev + k;
                const T* w = coeffsOnEdge + ((meshops_offset)e * 2 + s) * NC;
#pragma unroll
                for (int d = 0; d < NC; ++d) meshops::axpy(acc, w[d], load(g[d], ck));
            }
        }
        u_adj[i] = acc;
    }
}

template <typename T, int W>
__global__ void reconstruct_xyz_e2c(const int* __restrict__ edgesOnCell, const T* __restrict__ coeffs,
                                    const Lanes<T, W>* __restrict__ u, Lanes<T, W>* __restrict__ outX,
                                    Lanes<T, W>* __restrict__ outY, Lanes<T, W>* __restrict__ outZ,
                                    int maxEdges, int first, int last, int nlev)
{
    Lanes<T, W>* const out[3] = {outX, outY, outZ};
    reconstruct_body<T, W, 3>(edgesOnCell, coeffs, u, out, maxEdges, first, last, nlev);
}
MESHOPS_INSTANTIATE(reconstruct_xyz_e2c)

template <typename T, int W>
__global__ void reconstruct_xyz_e2c_adj_atomic(const int* __restrict__ edgesOnCell,
                                               const T* __restrict__ coeffs,
                                               const Lanes<T, W>* __restrict__ gX,
                                               const Lanes<T, W>* __restrict__ gY,
                                               const Lanes<T, W>* __restrict__ gZ,
                                               Lanes<T, W>* __restrict__ u_adj, int maxEdges, int first,
                                               int last, int nlev)
{
    const Lanes<T, W>* const g[3] = {gX, gY, gZ};
    reconstruct_adj_atomic_body<T, W, 3>(edgesOnCell, coeffs, g, u_adj, maxEdges, first, last, nlev);
}
MESHOPS_INSTANTIATE(reconstruct_xyz_e2c_adj_atomic)

template <typename T, int W>
__global__ void reconstruct_xyz_e2c_adj_gather(const int* __restrict__ cellsOnEdge,
                                               const T* __restrict__ coeffsOnEdge,
                                               const Lanes<T, W>* __restrict__ gX,
                                               const Lanes<T, W>* __restrict__ gY,
                                               const Lanes<T, W>* __restrict__ gZ,
                                               Lanes<T, W>* __restrict__ u_adj, int first, int last,
                                               int nlev)
{
    const Lanes<T, W>* const g[3] = {gX, gY, gZ};
    reconstruct_adj_gather_body<T, W, 3>(cellsOnEdge, coeffsOnEdge, g, u_adj, first, last, nlev);
}
MESHOPS_INSTANTIATE(reconstruct_xyz_e2c_adj_gather)

template <typename T, int W>
MESHOPS_FULL_OCCUPANCY
__global__ void reconstruct_zm_e2c(const int* __restrict__ edgesOnCell, const T* __restrict__ coeffs,
                                   const Lanes<T, W>* __restrict__ u, Lanes<T, W>* __restrict__ outZonal,
                                   Lanes<T, W>* __restrict__ outMeridional, int maxEdges, int first,
                                   int last, int nlev)
{
    Lanes<T, W>* const out[2] = {outZonal, outMeridional};
    reconstruct_body<T, W, 2>(edgesOnCell, coeffs, u, out, maxEdges, first, last, nlev);
}
MESHOPS_INSTANTIATE(reconstruct_zm_e2c)

template <typename T, int W>
__global__ void reconstruct_zm_e2c_adj_atomic(const int* __restrict__ edgesOnCell,
                                              const T* __restrict__ coeffs,
                                              const Lanes<T, W>* __restrict__ gZonal,
                                              const Lanes<T, W>* __restrict__ gMeridional,
                                              Lanes<T, W>* __restrict__ u_adj, int maxEdges, int first,
                                              int last, int nlev)
{
    const Lanes<T, W>* const g[2] = {gZonal, gMeridional};
    reconstruct_adj_atomic_body<T, W, 2>(edgesOnCell, coeffs, g, u_adj, maxEdges, first, last, nlev);
}
MESHOPS_INSTANTIATE(reconstruct_zm_e2c_adj_atomic)

template <typename T, int W>
__global__ void reconstruct_zm_e2c_adj_gather(const int* __restrict__ cellsOnEdge,
                                              const T* __restrict__ coeffsOnEdge,
                                              const Lanes<T, W>* __restrict__ gZonal,
                                              const Lanes<T, W>* __restrict__ gMeridional,
                                              Lanes<T, W>* __restrict__ u_adj, int first, int last,
                                              int nlev)
{
    const Lanes<T, W>* const g[2] = {gZonal, gMeridional};
    reconstruct_adj_gather_body<T, W, 2>(cellsOnEdge, coeffsOnEdge, g, u_adj, first, last, nlev);
}
MESHOPS_INSTANTIATE(reconstruct_zm_e2c_adj_gather)
