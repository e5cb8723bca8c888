// Divergence edge -> cell (div_e2c), the flux divergence of h*u (flux_div_e2c) and their tangent
// and adjoints. Formulas: meshops/operators/divergence.py. The coefficients are precomputed per stencil slot:
// cellCoef[c,j] = edgeSignOnCell[c,j] * dvEdge[e_j] / areaCell[c] on edgesOnCell (masked beyond
// nEdgesOnCell), edgeCoef[e,i] = (+1, -1)[i] * dvEdge[e] / areaCell[c_i] on cellsOnEdge.
// div_e2c and its gather adjoint are stencil_gather_rows (stencil.cuh) on those tables, its
// scatter adjoint stencil_scatter_atomic.
#include "stencil.cuh"

using meshops::Lanes;
using meshops::load;

// -- flux divergence of h*u, fused: h and u are read in the stencil pass (no h*u temporary) -----

// flux[c,k] = sum_j cellCoef[c,j] * (h[e_j,k] * u[e_j,k]). h and u are read by reference, not with
// meshops::load, which ran slower here (docs/decisions/0002-kernel-tuning.md).
template <typename T, int W>
__global__ void flux_div_e2c(const int* __restrict__ edgesOnCell, const T* __restrict__ cellCoef,
                             const Lanes<T, W>* __restrict__ h, const Lanes<T, W>* __restrict__ u,
                             Lanes<T, W>* __restrict__ div, int maxEdges, int first, int last, int nlev)
{
    MESHOPS_ROWS(i, first, last, nlev) {
        MESHOPS_ROW_LANE(c, k, i, nlev);
        Lanes<T, W> acc = meshops::splat<T, W>(0);
        meshops::for_each_row_slot(edgesOnCell, c, maxEdges, [&](int p, int e) {
            const meshops_offset ek = (meshops_offset)e * nlev + k;
            meshops::axpy(acc, cellCoef[p], h[ek] * u[ek]);
        });
        div[i] = acc;
    }
}
MESHOPS_INSTANTIATE(flux_div_e2c)

// Tangent: dflux[c,k] = sum_j cellCoef[c,j] * (dh*u + h*du)[e_j,k]
template <typename T, int W>
__global__ void flux_div_e2c_tl(const int* __restrict__ edgesOnCell, const T* __restrict__ cellCoef,
                                const Lanes<T, W>* __restrict__ h, const Lanes<T, W>* __restrict__ u,
                                const Lanes<T, W>* __restrict__ dh, const Lanes<T, W>* __restrict__ du,
                                Lanes<T, W>* __restrict__ ddiv, int maxEdges, int first, int last,
                                int nlev)
{
    MESHOPS_ROWS(i, first, last, nlev) {
        MESHOPS_ROW_LANE(c, k, i, nlev);
        Lanes<T, W> acc = meshops::splat<T, W>(0);
        meshops::for_each_row_slot(edgesOnCell, c, maxEdges, [&](int p, int e) {
            const meshops_offset ek = (meshops_offset)e * nlev + k;
            meshops::axpy(acc, cellCoef[p], load(dh, ek) * load(u, ek) + load(h, ek) * load(du, ek));
        });
        ddiv[i] = acc;
    }
}
MESHOPS_INSTANTIATE(flux_div_e2c_tl)

// Scatter form: one thread per (cell, lane); w = cellCoef[c,j] * g[c,k] adds w*u into h_adj and
// w*h into u_adj at each edge of the cell.
template <typename T, int W>
__global__ void flux_div_e2c_adj_atomic(const int* __restrict__ edgesOnCell,
                                        const T* __restrict__ cellCoef,
                                        const Lanes<T, W>* __restrict__ h,
                                        const Lanes<T, W>* __restrict__ u,
                                        const Lanes<T, W>* __restrict__ g,
                                        Lanes<T, W>* __restrict__ h_adj,
                                        Lanes<T, W>* __restrict__ u_adj, int maxEdges, int first,
                                        int last, int nlev)
{
    MESHOPS_ROWS(i, first, last, nlev) {
        MESHOPS_ROW_LANE(c, k, i, nlev);
        const Lanes<T, W> gc = load(g, i);
        meshops::for_each_row_slot(edgesOnCell, c, maxEdges, [&](int p, int e) {
            const meshops_offset ek = (meshops_offset)e * nlev + k;
            const Lanes<T, W> w = cellCoef[p] * gc;
            meshops::atomic_add(&h_adj[ek], w * load(u, ek));
            meshops::atomic_add(&u_adj[ek], w * load(h, ek));
        });
    }
}
MESHOPS_INSTANTIATE(flux_div_e2c_adj_atomic)

// Gather form: F = edgeCoef[e,0] * g[c0,k] + edgeCoef[e,1] * g[c1,k];
// h_adj[e,k] = u[e,k] * F, u_adj[e,k] = h[e,k] * F. g is read by reference: with vector loads the
// kernel spills under the register cap (float32, 4 levels per lane, 64-bit offsets), no faster.
template <typename T, int W>
MESHOPS_FULL_OCCUPANCY
__global__ void flux_div_e2c_adj_gather(const int* __restrict__ cellsOnEdge,
                                        const T* __restrict__ edgeCoef,
                                        const Lanes<T, W>* __restrict__ h,
                                        const Lanes<T, W>* __restrict__ u,
                                        const Lanes<T, W>* __restrict__ g,
                                        Lanes<T, W>* __restrict__ h_adj,
                                        Lanes<T, W>* __restrict__ u_adj, int first, int last, int nlev)
{
    MESHOPS_ROWS_NOT_UNROLLED(i, first, last, nlev) {
        MESHOPS_ROW_LANE(e, k, i, nlev);
        const Lanes<T, W> F = meshops::stencil_gather<T, W, /*VectorLoads=*/false>(
            cellsOnEdge, edgeCoef, g, e, 2, nlev, k);
        h_adj[i] = u[i] * F;
        u_adj[i] = h[i] * F;
    }
}
MESHOPS_INSTANTIATE(flux_div_e2c_adj_gather)
