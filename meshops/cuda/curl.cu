// Curl edge -> vertex (curl_e2v, circulation_e2v) and adjoints. Formulas: meshops/curl.py.
// coef[v,i] = edgeSignOnVertex[v,i] * dcEdge[e_i] (/ areaTriangle[v] for the curl), precomputed.
#include "stencil.cuh"

// curl[v,k] = sum_{i<vertexDegree} coef[v,i] * u[edgesOnVertex[v,i],k]
template <typename T>
__global__ void curl_e2v(const int* __restrict__ edgesOnVertex, const T* __restrict__ coef,
                         const T* __restrict__ u, T* __restrict__ curl, int vertexDegree,
                         int nVertices, int nlev)
{
    MESHOPS_GRID_STRIDE(i, (long long)nVertices * nlev) {
        const int v = meshops_entity(i, nlev), k = (int)(i - (long long)v * nlev);
        curl[i] = stencil_gather(edgesOnVertex, coef, u, v, vertexDegree, nlev, k);
    }
}
MESHOPS_INSTANTIATE(curl_e2v)

// Scatter form: one thread per (vertex, level) adds coef[v,i] * g[v,k] into its edges.
template <typename T>
__global__ void curl_e2v_adj_atomic(const int* __restrict__ edgesOnVertex, const T* __restrict__ coef,
                                    const T* __restrict__ g, T* __restrict__ u_adj, int vertexDegree,
                                    int nVertices, int nlev)
{
    MESHOPS_GRID_STRIDE(i, (long long)nVertices * nlev) {
        const int v = meshops_entity(i, nlev), k = (int)(i - (long long)v * nlev);
        stencil_scatter(edgesOnVertex, coef, g[i], u_adj, v, vertexDegree, nlev, k);
    }
}
MESHOPS_INSTANTIATE(curl_e2v_adj_atomic)

// Gather form: u_adj[e,k] = sum_m coefT[e,m] * g[verticesT[e,m],k] over the transposed
// edgesOnVertex map (the two vertices of e, in increasing vertex order).
template <typename T>
__global__ void curl_e2v_adj_gather(const int* __restrict__ verticesT, const T* __restrict__ coefT,
                                    const T* __restrict__ g, T* __restrict__ u_adj, int W, int nEdges,
                                    int nlev)
{
    MESHOPS_GRID_STRIDE(i, (long long)nEdges * nlev) {
        const int e = meshops_entity(i, nlev), k = (int)(i - (long long)e * nlev);
        u_adj[i] = stencil_gather(verticesT, coefT, g, e, W, nlev, k);
    }
}
MESHOPS_INSTANTIATE(curl_e2v_adj_gather)
