// Curl edge -> vertex (curl_e2v, circulation_e2v) and adjoints. Formulas: meshops/curl.py.
// coef[v,i] = edgeSignOnVertex[v,i] * dcEdge[e_i] (/ areaTriangle[v] for the curl), precomputed.
#include "stencil.cuh"

using meshops::Lanes;

// curl[v,k] = sum_{i<vertexDegree} coef[v,i] * u[edgesOnVertex[v,i],k]
template <typename T, int W>
MESHOPS_FULL_OCCUPANCY
__global__ void curl_e2v(const int* __restrict__ edgesOnVertex, const T* __restrict__ coef,
                         const Lanes<T, W>* __restrict__ u, Lanes<T, W>* __restrict__ curl,
                         int vertexDegree, int first, int last, int nlev)
{
    MESHOPS_ROWS(i, first, last, nlev) {
        MESHOPS_ROW_LANE(v, k, i, nlev);
        curl[i] = meshops::stencil_gather(edgesOnVertex, coef, u, v, vertexDegree, nlev, k);
    }
}
MESHOPS_INSTANTIATE(curl_e2v)

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

// Gather form: u_adj[e,k] = sum_{m<S} coefT[e,m] * g[verticesT[e,m],k] over the transposed
// edgesOnVertex map (the two vertices of e, in increasing vertex order).
template <typename T, int W>
MESHOPS_FULL_OCCUPANCY
__global__ void curl_e2v_adj_gather(const int* __restrict__ verticesT, const T* __restrict__ coefT,
                                    const Lanes<T, W>* __restrict__ g, Lanes<T, W>* __restrict__ u_adj,
                                    int S, int first, int last, int nlev)
{
    MESHOPS_ROWS(i, first, last, nlev) {
        MESHOPS_ROW_LANE(e, k, i, nlev);
        u_adj[i] = meshops::stencil_gather(verticesT, coefT, g, e, S, nlev, k);
    }
}
MESHOPS_INSTANTIATE(curl_e2v_adj_gather)
