// TRiSK tangential velocity edge -> edge and adjoints. Formulas: meshops/tangential.py.
// edgesOnEdge / weightsOnEdge are masked beyond nEdgesOnEdge (-1, 0) when prepared.
#include "stencil.cuh"

// v[e,k] = sum_{j<maxEdges2} weightsOnEdge[e,j] * u[edgesOnEdge[e,j],k]
template <typename T>
__global__ void tangential_e2e(const int* __restrict__ edgesOnEdge, const T* __restrict__ weightsOnEdge,
                               const T* __restrict__ u, T* __restrict__ v, int maxEdges2, int nEdges,
                               int nlev)
{
    MESHOPS_GRID_STRIDE(i, (long long)nEdges * nlev) {
        const int e = meshops_entity(i, nlev), k = (int)(i - (long long)e * nlev);
        v[i] = stencil_gather(edgesOnEdge, weightsOnEdge, u, e, maxEdges2, nlev, k);
    }
}
MESHOPS_INSTANTIATE(tangential_e2e)

// Scatter form: one thread per (edge, level) adds weightsOnEdge[e,j] * g[e,k] into edgesOnEdge[e,j].
template <typename T>
__global__ void tangential_e2e_adj_atomic(const int* __restrict__ edgesOnEdge,
                                          const T* __restrict__ weightsOnEdge, const T* __restrict__ g,
                                          T* __restrict__ u_adj, int maxEdges2, int nEdges, int nlev)
{
    MESHOPS_GRID_STRIDE(i, (long long)nEdges * nlev) {
        const int e = meshops_entity(i, nlev), k = (int)(i - (long long)e * nlev);
        stencil_scatter(edgesOnEdge, weightsOnEdge, g[i], u_adj, e, maxEdges2, nlev, k);
    }
}
MESHOPS_INSTANTIATE(tangential_e2e_adj_atomic)

// Gather form: u_adj[e',k] = sum_m weightsT[e',m] * g[edgesT[e',m],k] over the transposed
// edgesOnEdge map (the (e, j) with edgesOnEdge[e,j] = e', in increasing (e, j) order).
template <typename T>
__global__ void tangential_e2e_adj_gather(const int* __restrict__ edgesT, const T* __restrict__ weightsT,
                                          const T* __restrict__ g, T* __restrict__ u_adj, int W,
                                          int nEdges, int nlev)
{
    MESHOPS_GRID_STRIDE(i, (long long)nEdges * nlev) {
        const int e = meshops_entity(i, nlev), k = (int)(i - (long long)e * nlev);
        u_adj[i] = stencil_gather(edgesT, weightsT, g, e, W, nlev, k);
    }
}
MESHOPS_INSTANTIATE(tangential_e2e_adj_gather)
