// TRiSK PV flux edge -> edge (pv_flux_e2e), its tangent-linear model and adjoints.
// Formulas: meshops/pv_flux.py. edgesOnEdge/weightsOnEdge are (nEdges, maxEdges2); the transposed
// map edgesOnEdgeT/weightsOnEdgeT is (nEdges, maxT) with nEdgesOnEdgeT valid slots per edge.
#include "common.cuh"

// out[e,k] = sum_{j<nEdgesOnEdge[e]} w_ej * F[eoe_j,k] * 0.5 * (q[e,k] + q[eoe_j,k])
template <typename T>
__global__ void pv_flux_e2e(const int* __restrict__ nEdgesOnEdge, const int* __restrict__ edgesOnEdge,
                            const T* __restrict__ weightsOnEdge, const T* __restrict__ F,
                            const T* __restrict__ q, T* __restrict__ out, int maxEdges2, int nEdges,
                            int nlev)
{
    MESHOPS_GRID_STRIDE(i, (long long)nEdges * nlev) {
        const int e = meshops_entity(i, nlev), k = (int)(i - (long long)e * nlev);
        const T qe = q[i];
        T acc = 0;
        for (int j = 0; j < nEdgesOnEdge[e]; ++j) {
            const int e2 = edgesOnEdge[e * maxEdges2 + j];
            if (e2 >= 0) {
                const long long e2k = (long long)e2 * nlev + k;
                acc += weightsOnEdge[e * maxEdges2 + j] * F[e2k] * (qe + q[e2k]);
            }
        }
        out[i] = (T)0.5 * acc;
    }
}
MESHOPS_INSTANTIATE(pv_flux_e2e)

// dout[e,k] = sum_j w_ej * 0.5 * (dF[eoe_j,k] (q[e,k] + q[eoe_j,k]) + F[eoe_j,k] (dq[e,k] + dq[eoe_j,k]))
template <typename T>
__global__ void pv_flux_e2e_tl(const int* __restrict__ nEdgesOnEdge,
                               const int* __restrict__ edgesOnEdge, const T* __restrict__ weightsOnEdge,
                               const T* __restrict__ F, const T* __restrict__ q,
                               const T* __restrict__ dF, const T* __restrict__ dq, T* __restrict__ dout,
                               int maxEdges2, int nEdges, int nlev)
{
    MESHOPS_GRID_STRIDE(i, (long long)nEdges * nlev) {
        const int e = meshops_entity(i, nlev), k = (int)(i - (long long)e * nlev);
        const T qe = q[i], dqe = dq[i];
        T acc = 0;
        for (int j = 0; j < nEdgesOnEdge[e]; ++j) {
            const int e2 = edgesOnEdge[e * maxEdges2 + j];
            if (e2 >= 0) {
                const long long e2k = (long long)e2 * nlev + k;
                acc += weightsOnEdge[e * maxEdges2 + j] *
                       (dF[e2k] * (qe + q[e2k]) + F[e2k] * (dqe + dq[e2k]));
            }
        }
        dout[i] = (T)0.5 * acc;
    }
}
MESHOPS_INSTANTIATE(pv_flux_e2e_tl)

// Scatter form: one thread per (edge e, level) of the forward output; F_adj and q_adj zeroed first.
template <typename T>
__global__ void pv_flux_e2e_adj_atomic(const int* __restrict__ nEdgesOnEdge,
                                       const int* __restrict__ edgesOnEdge,
                                       const T* __restrict__ weightsOnEdge, const T* __restrict__ F,
                                       const T* __restrict__ q, const T* __restrict__ g,
                                       T* __restrict__ F_adj, T* __restrict__ q_adj, int maxEdges2,
                                       int nEdges, int nlev)
{
    MESHOPS_GRID_STRIDE(i, (long long)nEdges * nlev) {
        const int e = meshops_entity(i, nlev), k = (int)(i - (long long)e * nlev);
        const T ge = (T)0.5 * g[i], qe = q[i];
        T acc = 0;
        for (int j = 0; j < nEdgesOnEdge[e]; ++j) {
            const int e2 = edgesOnEdge[e * maxEdges2 + j];
            if (e2 >= 0) {
                const long long e2k = (long long)e2 * nlev + k;
                const T wg = weightsOnEdge[e * maxEdges2 + j] * ge;
                const T wgF = wg * F[e2k];
                atomicAdd(&F_adj[e2k], wg * (qe + q[e2k]));
                atomicAdd(&q_adj[e2k], wgF);
                acc += wgF;
            }
        }
        atomicAdd(&q_adj[i], acc);
    }
}
MESHOPS_INSTANTIATE(pv_flux_e2e_adj_atomic)

// Gather form: one thread per (edge e', level) reads the forward stencil of e' and its transposed
// stencil (every e with edgesOnEdge[e, j] = e'); no atomics, fixed order.
template <typename T>
__global__ void pv_flux_e2e_adj_gather(const int* __restrict__ nEdgesOnEdge,
                                       const int* __restrict__ edgesOnEdge,
                                       const T* __restrict__ weightsOnEdge,
                                       const int* __restrict__ nEdgesOnEdgeT,
                                       const int* __restrict__ edgesOnEdgeT,
                                       const T* __restrict__ weightsOnEdgeT, const T* __restrict__ F,
                                       const T* __restrict__ q, const T* __restrict__ g,
                                       T* __restrict__ F_adj, T* __restrict__ q_adj, int maxEdges2,
                                       int maxT, int nEdges, int nlev)
{
    MESHOPS_GRID_STRIDE(i, (long long)nEdges * nlev) {
        const int ep = meshops_entity(i, nlev), k = (int)(i - (long long)ep * nlev);
        const T qp = q[i];
        T wF = 0;
        for (int j = 0; j < nEdgesOnEdge[ep]; ++j) {
            const int e2 = edgesOnEdge[ep * maxEdges2 + j];
            if (e2 >= 0) wF += weightsOnEdge[ep * maxEdges2 + j] * F[(long long)e2 * nlev + k];
        }
        T accF = 0, wg = 0;
        for (int s = 0; s < nEdgesOnEdgeT[ep]; ++s) {
            const int e = edgesOnEdgeT[ep * maxT + s];
            if (e >= 0) {
                const long long ekk = (long long)e * nlev + k;
                const T w = weightsOnEdgeT[ep * maxT + s] * g[ekk];
                accF += w * (q[ekk] + qp);
                wg += w;
            }
        }
        F_adj[i] = (T)0.5 * accF;
        q_adj[i] = (T)0.5 * (g[i] * wF + F[i] * wg);
    }
}
MESHOPS_INSTANTIATE(pv_flux_e2e_adj_gather)
