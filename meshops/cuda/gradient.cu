// Gradients onto edges (grad_c2e, grad_v2e) and their adjoints. Formulas: meshops/gradient.py.
// `ends` is cellsOnEdge (grad_c2e) or verticesOnEdge (grad_v2e); invLength is 1/dcEdge or 1/dvEdge.
#include "stencil.cuh"

// grad[e,k] = (x[ends[e,1],k] - x[ends[e,0],k]) * invLength[e]
template <typename T>
__global__ void grad_2e(const int* __restrict__ ends, const T* __restrict__ invLength,
                        const T* __restrict__ x, T* __restrict__ grad, int nEdges, int nlev)
{
    MESHOPS_GRID_STRIDE(i, (long long)nEdges * nlev) {
        const int e = meshops_entity(i, nlev), k = (int)(i - (long long)e * nlev);
        const int a = ends[2 * e], b = ends[2 * e + 1];
        T acc = 0;
        if (b >= 0) acc += x[(long long)b * nlev + k];
        if (a >= 0) acc -= x[(long long)a * nlev + k];
        grad[i] = acc * invLength[e];
    }
}
MESHOPS_INSTANTIATE(grad_2e)

// Scatter form: one thread per (edge, level) adds +-g*invLength into its two ends.
template <typename T>
__global__ void grad_2e_adj_atomic(const int* __restrict__ ends, const T* __restrict__ invLength,
                                   const T* __restrict__ g, T* __restrict__ x_adj, int nEdges, int nlev)
{
    MESHOPS_GRID_STRIDE(i, (long long)nEdges * nlev) {
        const int e = meshops_entity(i, nlev), k = (int)(i - (long long)e * nlev);
        const int a = ends[2 * e], b = ends[2 * e + 1];
        const T ge = g[i] * invLength[e];
        if (b >= 0) atomicAdd(&x_adj[(long long)b * nlev + k], ge);
        if (a >= 0) atomicAdd(&x_adj[(long long)a * nlev + k], -ge);
    }
}
MESHOPS_INSTANTIATE(grad_2e_adj_atomic)

// Gather form: x_adj[t,k] = sum_m coefT[t,m] * g[edgesT[t,m],k], coefT = +-invLength of the edge
// (+ where t is its second end), over the transposed `ends` map in increasing edge order.
template <typename T>
__global__ void grad_2e_adj_gather(const int* __restrict__ edgesT, const T* __restrict__ coefT,
                                   const T* __restrict__ g, T* __restrict__ x_adj, int W, int n,
                                   int nlev)
{
    MESHOPS_GRID_STRIDE(i, (long long)n * nlev) {
        const int t = meshops_entity(i, nlev), k = (int)(i - (long long)t * nlev);
        x_adj[i] = stencil_gather(edgesT, coefT, g, t, W, nlev, k);
    }
}
MESHOPS_INSTANTIATE(grad_2e_adj_gather)
