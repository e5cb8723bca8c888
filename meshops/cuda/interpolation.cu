// Interpolation between cells, edges and vertices and adjoints. Formulas: meshops/interpolation.py.
// Two-point means onto edges (`ends` = cellsOnEdge or verticesOnEdge) and kite-weighted stencils
// with precomputed coefficients (interp_c2v: cellsOnVertex, kite/areaTriangle; interp_v2c:
// verticesOnCell, kite/areaCell; the gather adjoints use the transposed stencils).
#include "stencil.cuh"

// out[e,k] = (x[ends[e,0],k] + x[ends[e,1],k]) / 2
template <typename T>
__global__ void mean_2e(const int* __restrict__ ends, const T* __restrict__ x, T* __restrict__ out,
                        int nEdges, int nlev)
{
    MESHOPS_GRID_STRIDE(i, (long long)nEdges * nlev) {
        const int e = meshops_entity(i, nlev), k = (int)(i - (long long)e * nlev);
        const int a = ends[2 * e], b = ends[2 * e + 1];
        T acc = 0;
        if (a >= 0) acc += x[(long long)a * nlev + k];
        if (b >= 0) acc += x[(long long)b * nlev + k];
        out[i] = (T)0.5 * acc;
    }
}
MESHOPS_INSTANTIATE(mean_2e)

// Scatter form of mean_2e: one thread per (edge, level) adds g/2 into both ends.
template <typename T>
__global__ void mean_2e_adj_atomic(const int* __restrict__ ends, const T* __restrict__ g,
                                   T* __restrict__ x_adj, int nEdges, int nlev)
{
    MESHOPS_GRID_STRIDE(i, (long long)nEdges * nlev) {
        const int e = meshops_entity(i, nlev), k = (int)(i - (long long)e * nlev);
        const int a = ends[2 * e], b = ends[2 * e + 1];
        const T half = (T)0.5 * g[i];
        if (a >= 0) atomicAdd(&x_adj[(long long)a * nlev + k], half);
        if (b >= 0) atomicAdd(&x_adj[(long long)b * nlev + k], half);
    }
}
MESHOPS_INSTANTIATE(mean_2e_adj_atomic)

// out[r,k] = sum_{m<W} coef[r,m] * x[idx[r,m],k]: kite-weighted forwards and every gather adjoint.
template <typename T>
__global__ void interp_gather(const int* __restrict__ idx, const T* __restrict__ coef,
                              const T* __restrict__ x, T* __restrict__ out, int W, int n, int nlev)
{
    MESHOPS_GRID_STRIDE(i, (long long)n * nlev) {
        const int r = meshops_entity(i, nlev), k = (int)(i - (long long)r * nlev);
        out[i] = stencil_gather(idx, coef, x, r, W, nlev, k);
    }
}
MESHOPS_INSTANTIATE(interp_gather)

// Scatter form of the kite-weighted forwards: one thread per (output, level) of the forward.
template <typename T>
__global__ void interp_scatter_atomic(const int* __restrict__ idx, const T* __restrict__ coef,
                                      const T* __restrict__ g, T* __restrict__ x_adj, int W, int n,
                                      int nlev)
{
    MESHOPS_GRID_STRIDE(i, (long long)n * nlev) {
        const int r = meshops_entity(i, nlev), k = (int)(i - (long long)r * nlev);
        stencil_scatter(idx, coef, g[i], x_adj, r, W, nlev, k);
    }
}
MESHOPS_INSTANTIATE(interp_scatter_atomic)
