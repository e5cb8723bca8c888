// TRiSK tangential velocity edge -> edge and adjoints. Formulas: meshops/tangential.py.
// edgesOnEdge / weightsOnEdge are masked beyond nEdgesOnEdge (-1, 0) when prepared; the gather
// kernels read them (and the transposed tables) row- or slot-major (slotStride, stencil.cuh).
#include "stencil.cuh"

using meshops::Lanes;

// v[e,k] = sum_{j<maxEdges2} weightsOnEdge[e,j] * u[edgesOnEdge[e,j],k]
template <typename T, int W>
MESHOPS_FULL_OCCUPANCY
__global__ void tangential_e2e(const int* __restrict__ edgesOnEdge, const T* __restrict__ weightsOnEdge,
                               const Lanes<T, W>* __restrict__ u, Lanes<T, W>* __restrict__ v,
                               int maxEdges2, int slotStride, int first, int last, int nlev)
{
    MESHOPS_ROWS(i, first, last, nlev) {
        MESHOPS_ROW_LANE(e, k, i, nlev);
        v[i] = meshops::stencil_gather(edgesOnEdge, weightsOnEdge, u, e, maxEdges2, nlev, k, slotStride);
    }
}
MESHOPS_INSTANTIATE(tangential_e2e)

// Scatter form: one thread per (edge, lane) adds weightsOnEdge[e,j] * g[e,k] into edgesOnEdge[e,j].
template <typename T, int W>
__global__ void tangential_e2e_adj_atomic(const int* __restrict__ edgesOnEdge,
                                          const T* __restrict__ weightsOnEdge,
                                          const Lanes<T, W>* __restrict__ g,
                                          Lanes<T, W>* __restrict__ u_adj, int maxEdges2, int first,
                                          int last, int nlev)
{
    MESHOPS_ROWS(i, first, last, nlev) {
        MESHOPS_ROW_LANE(e, k, i, nlev);
        meshops::stencil_scatter(edgesOnEdge, weightsOnEdge, g[i], u_adj, e, maxEdges2, nlev, k);
    }
}
MESHOPS_INSTANTIATE(tangential_e2e_adj_atomic)

// Gather form: u_adj[e',k] = sum_{m<S} weightsT[e',m] * g[edgesT[e',m],k] over the transposed
// edgesOnEdge map (the (e, j) with edgesOnEdge[e,j] = e', in increasing (e, j) order).
template <typename T, int W>
MESHOPS_FULL_OCCUPANCY
__global__ void tangential_e2e_adj_gather(const int* __restrict__ edgesT, const T* __restrict__ weightsT,
                                          const Lanes<T, W>* __restrict__ g,
                                          Lanes<T, W>* __restrict__ u_adj, int S, int slotStride,
                                          int first, int last, int nlev)
{
    MESHOPS_ROWS(i, first, last, nlev) {
        MESHOPS_ROW_LANE(e, k, i, nlev);
        u_adj[i] = meshops::stencil_gather(edgesT, weightsT, g, e, S, nlev, k, slotStride);
    }
}
MESHOPS_INSTANTIATE(tangential_e2e_adj_gather)
