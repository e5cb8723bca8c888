// Curl edge -> vertex (curl_e2v, circulation_e2v): the scatter adjoint. Formulas: meshops/curl.py.
// coef[v,i] = edgeSignOnVertex[v,i] * dcEdge[e_i] (/ areaTriangle[v] for the curl), precomputed;
// the forward and the gather adjoint (over the transposed table) are stencil_gather_rows
// (stencil.cuh).
#include "stencil.cuh"

using meshops::Lanes;

// Scatter form: one thread per (vertex, lane) adds coef[v,i] * g[v,k] into its edges.
template <typename T, int W>
__global__ void curl_e2v_adj_atomic(const int* __restrict__ edgesOnVertex, const T* __restrict__ coef,
                                    const Lanes<T, W>* __restrict__ g, Lanes<T, W>* __restrict__ u_adj,
                                    int vertexDegree, int first, int last, int nlev)
{
    MESHOPS_ROWS(i, first, last, nlev) {
        MESHOPS_ROW_LANE(v, k, i, nlev);
        meshops::stencil_scatter(edgesOnVertex, coef, g[i], u_adj, v, vertexDegree, nlev, k);
    }
}
MESHOPS_INSTANTIATE(curl_e2v_adj_atomic)
