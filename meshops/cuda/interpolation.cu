// Interpolation between cells, edges and vertices and adjoints. Formulas: meshops/operators/interpolation.py.
// Two-point means onto edges (`ends` = cellsOnEdge or verticesOnEdge; gather adjoint over the
// transposed `ends`, the edges of each cell or vertex, with the constant 1/2) and kite-weighted
// stencils with precomputed coefficients (interp_c2v: cellsOnVertex, kite/areaTriangle; interp_v2c:
// verticesOnCell, kite/areaCell; the gather adjoints use the transposed stencils), the latter and
// every gather adjoint being stencil_gather_rows (stencil.cuh), their scatter adjoints
// stencil_scatter_atomic.
#include "stencil.cuh"

using meshops::Lanes;
using meshops::load;

// out[e,k] = (x[ends[e,0],k] + x[ends[e,1],k]) / 2 (x read by reference, as in grad_2e)
template <typename T, int W>
__global__ void mean_2e(const int* __restrict__ ends, const Lanes<T, W>* __restrict__ x,
                        Lanes<T, W>* __restrict__ out, int first, int last, int nlev)
{
    MESHOPS_ROWS(i, first, last, nlev) {
        MESHOPS_ROW_LANE(e, k, i, nlev);
        const int a = ends[2 * e], b = ends[2 * e + 1];
        Lanes<T, W> acc = meshops::splat<T, W>(0);
        if (a >= 0) acc += x[(meshops_offset)a * nlev + k];
        if (b >= 0) acc += x[(meshops_offset)b * nlev + k];
        out[i] = (T)0.5 * acc;
    }
}
MESHOPS_INSTANTIATE(mean_2e)

// Scatter form of mean_2e: one thread per (edge, lane) adds g/2 into both ends.
template <typename T, int W>
__global__ void mean_2e_adj_atomic(const int* __restrict__ ends, const Lanes<T, W>* __restrict__ g,
                                   Lanes<T, W>* __restrict__ x_adj, int first, int last, int nlev)
{
    MESHOPS_ROWS(i, first, last, nlev) {
        MESHOPS_ROW_LANE(e, k, i, nlev);
        const int a = ends[2 * e], b = ends[2 * e + 1];
        const Lanes<T, W> half = (T)0.5 * load(g, i);
        if (a >= 0) meshops::atomic_add(&x_adj[(meshops_offset)a * nlev + k], half);
        if (b >= 0) meshops::atomic_add(&x_adj[(meshops_offset)b * nlev + k], half);
    }
}
MESHOPS_INSTANTIATE(mean_2e_adj_atomic)

// Gather form of mean_2e's adjoint: x_adj[r,k] = 1/2 sum_{m<S, edges[r,m]>=0} g[edges[r,m],k],
// edges the transposed `ends` map. The constant weight needs no coefficient table (the table-driven
// stencil_gather_rows read 12 more bytes per row and took 1.69x the forward at nlev 1, float64).
template <typename T, int W>
__global__ void mean_2e_adj_gather(const int* __restrict__ edges, const Lanes<T, W>* __restrict__ g,
                                   Lanes<T, W>* __restrict__ x_adj, int S, int first, int last,
                                   int nlev)
{
    MESHOPS_ROWS(i, first, last, nlev) {
        MESHOPS_ROW_LANE(r, k, i, nlev);
        Lanes<T, W> acc = meshops::splat<T, W>(0);
        meshops::for_each_row_slot(edges, r, S, [&](int, int e) {
            acc += load(g, (meshops_offset)e * nlev + k);
        });
        x_adj[i] = (T)0.5 * acc;
    }
}
MESHOPS_INSTANTIATE(mean_2e_adj_gather)
