// TRiSK tangential velocity edge -> edge: the scatter adjoint. Formulas: meshops/tangential.py.
// edgesOnEdge / weightsOnEdge are masked beyond nEdgesOnEdge (-1, 0) when prepared; the forward and
// the gather adjoint are stencil_gather_rows (stencil.cuh) on them and on the transposed tables,
// row- or slot-major (slotStride).
#include "stencil.cuh"

using meshops::Lanes;

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
