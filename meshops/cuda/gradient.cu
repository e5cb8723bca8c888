// Gradients onto edges (grad_c2e, grad_v2e) and their adjoints. Formulas: meshops/operators/gradient.py.
// `ends` is cellsOnEdge (grad_c2e) or verticesOnEdge (grad_v2e); invLength is 1/dcEdge or 1/dvEdge.
// The gather adjoint is stencil_gather_rows (stencil.cuh) on the transposed `ends` map.
#include "stencil.cuh"

using meshops::Lanes;
using meshops::load;

// grad[e,k] = (x[ends[e,1],k] - x[ends[e,0],k]) * invLength[e]. x is read by reference (W scalar
// loads), not with meshops::load, which made the two-point edge forwards (also mean_2e) slower.
template <typename T, int W>
__global__ void grad_2e(const int* __restrict__ ends, const T* __restrict__ invLength,
                        const Lanes<T, W>* __restrict__ x, Lanes<T, W>* __restrict__ grad, int first,
                        int last, int nlev)
{
    MESHOPS_ROWS(i, first, last, nlev) {
        MESHOPS_ROW_LANE(e, k, i, nlev);
        const int a = ends[2 * e], b = ends[2 * e + 1];
        Lanes<T, W> acc = meshops::splat<T, W>(0);
        if (b >= 0) acc += x[(meshops_offset)b * nlev + k];
        if (a >= 0) acc -= x[(meshops_offset)a * nlev + k];
        grad[i] = invLength[e] * acc;
    }
}
MESHOPS_INSTANTIATE(grad_2e)

// Scatter form: one thread per (edge, lane) adds +-g*invLength into its two ends.
template <typename T, int W>
__global__ void grad_2e_adj_atomic(const int* __restrict__ ends, const T* __restrict__ invLength,
                                   const Lanes<T, W>* __restrict__ g, Lanes<T, W>* __restrict__ x_adj,
                                   int first, int last, int nlev)
{
    MESHOPS_ROWS(i, first, last, nlev) {
        MESHOPS_ROW_LANE(e, k, i, nlev);
        const int a = ends[2 * e], b = ends[2 * e + 1];
        const T s = invLength[e];
        const Lanes<T, W> ge = load(g, i);
        if (b >= 0) meshops::atomic_add(&x_adj[(meshops_offset)b * nlev + k], s * ge);
        if (a >= 0) meshops::atomic_add(&x_adj[(meshops_offset)a * nlev + k], (-s) * ge);
    }
}
MESHOPS_INSTANTIATE(grad_2e_adj_atomic)
