// TRiSK PV flux edge -> edge (pv_flux_e2e), its tangent-linear model and adjoints.
// Formulas: meshops/operators/pv_flux.py. edgesOnEdge/weightsOnEdge are (nEdges, maxEdges2), masked beyond
// nEdgesOnEdge (-1 / 0 pads); the transposed map edgesOnEdgeT/weightsOnEdgeT is (nEdges, maxT) with
// -1 / 0 pads. Every slot is visited; a pad contributes nothing. The forward, tangent and gather
// adjoint read the tables row- or slot-major (slotStride, stencil.cuh); the scatter row-major.
#include "stencil.cuh"

using meshops::Lanes;
using meshops::load;

// out[e,k] = 0.5 * sum_{j<maxEdges2} w_ej * F[eoe_j,k] * (q[e,k] + q[eoe_j,k])
template <typename T, int W>
__global__ void pv_flux_e2e(const int* __restrict__ edgesOnEdge, const T* __restrict__ weightsOnEdge,
                            const Lanes<T, W>* __restrict__ F, const Lanes<T, W>* __restrict__ q,
                            Lanes<T, W>* __restrict__ out, int maxEdges2, int slotStride, int first,
                            int last, int nlev)
{
    MESHOPS_ROWS(i, first, last, nlev) {
        MESHOPS_ROW_LANE(e, k, i, nlev);
        const Lanes<T, W> qe = load(q, i);
        Lanes<T, W> acc = meshops::splat<T, W>(0);
        meshops::for_each_slot(edgesOnEdge, e, maxEdges2, slotStride, [&](meshops_offset p, int e2) {
            const meshops_offset e2k = (meshops_offset)e2 * nlev + k;
            meshops::axpy(acc, weightsOnEdge[p], load(F, e2k) * (qe + load(q, e2k)));
        });
        out[i] = (T)0.5 * acc;
    }
}
MESHOPS_INSTANTIATE(pv_flux_e2e)

// dout[e,k] = 0.5 * sum_j w_ej * (dF[eoe_j,k] (q[e,k] + q[eoe_j,k]) + F[eoe_j,k] (dq[e,k] + dq[eoe_j,k]))
template <typename T, int W>
__global__ void pv_flux_e2e_tl(const int* __restrict__ edgesOnEdge,
                               const T* __restrict__ weightsOnEdge, const Lanes<T, W>* __restrict__ F,
                               const Lanes<T, W>* __restrict__ q, const Lanes<T, W>* __restrict__ dF,
                               const Lanes<T, W>* __restrict__ dq, Lanes<T, W>* __restrict__ dout,
                               int maxEdges2, int slotStride, int first, int last, int nlev)
{
    MESHOPS_ROWS(i, first, last, nlev) {
        MESHOPS_ROW_LANE(e, k, i, nlev);
        const Lanes<T, W> qe = load(q, i), dqe = load(dq, i);
        Lanes<T, W> acc = meshops::splat<T, W>(0);
        meshops::for_each_slot(edgesOnEdge, e, maxEdges2, slotStride, [&](meshops_offset p, int e2) {
            const meshops_offset e2k = (meshops_offset)e2 * nlev + k;
            meshops::axpy(acc, weightsOnEdge[p], load(dF, e2k) * (qe + load(q, e2k)) +
                                                     load(F, e2k) * (dqe + load(dq, e2k)));
        });
        dout[i] = (T)0.5 * acc;
    }
}
MESHOPS_INSTANTIATE(pv_flux_e2e_tl)

// Scatter form: one thread per (edge e, lane) of the forward output; F_adj and q_adj zeroed first.
// wg = 0.5 * w_ej * g[e,k] adds wg * (q[e,k] + q[eoe_j,k]) into F_adj[eoe_j] and wg * F[eoe_j,k]
// into q_adj[eoe_j] and q_adj[e].
template <typename T, int W>
__global__ void pv_flux_e2e_adj_atomic(const int* __restrict__ edgesOnEdge,
                                       const T* __restrict__ weightsOnEdge,
                                       const Lanes<T, W>* __restrict__ F,
                                       const Lanes<T, W>* __restrict__ q,
                                       const Lanes<T, W>* __restrict__ g,
                                       Lanes<T, W>* __restrict__ F_adj,
                                       Lanes<T, W>* __restrict__ q_adj, int maxEdges2, int first,
                                       int last, int nlev)
{
    MESHOPS_ROWS(i, first, last, nlev) {
        MESHOPS_ROW_LANE(e, k, i, nlev);
        const Lanes<T, W> ge = (T)0.5 * load(g, i), qe = load(q, i);
        Lanes<T, W> acc = meshops::splat<T, W>(0);
        meshops::for_each_row_slot(edgesOnEdge, e, maxEdges2, [&](int p, int e2) {
            const meshops_offset e2k = (meshops_offset)e2 * nlev + k;
            const Lanes<T, W> wg = weightsOnEdge[p] * ge;
            const Lanes<T, W> wgF = wg * load(F, e2k);
            meshops::atomic_add(&F_adj[e2k], wg * (qe + load(q, e2k)));
            meshops::atomic_add(&q_adj[e2k], wgF);
            acc += wgF;
        });
        meshops::atomic_add(&q_adj[i], acc);
    }
}
MESHOPS_INSTANTIATE(pv_flux_e2e_adj_atomic)

// Gather form: one thread per (edge e', lane) reads the forward stencil of e' and its transposed
// stencil (every e with edgesOnEdge[e, j] = e'); no atomics, fixed order.
// F_adj[e',k] = 0.5 * sum_s wT_e's * g[e,k] * (q[e,k] + q[e',k]),
// q_adj[e',k] = 0.5 * (g[e',k] * sum_j w_e'j * F[eoe_j,k] + F[e',k] * sum_s wT_e's * g[e,k]).
template <typename T, int W>
__global__ void pv_flux_e2e_adj_gather(const int* __restrict__ edgesOnEdge,
                                       const T* __restrict__ weightsOnEdge,
                                       const int* __restrict__ edgesOnEdgeT,
                                       const T* __restrict__ weightsOnEdgeT,
                                       const Lanes<T, W>* __restrict__ F,
                                       const Lanes<T, W>* __restrict__ q,
                                       const Lanes<T, W>* __restrict__ g,
                                       Lanes<T, W>* __restrict__ F_adj,
                                       Lanes<T, W>* __restrict__ q_adj, int maxEdges2, int maxT,
                                       int slotStride, int first, int last, int nlev)
{
    MESHOPS_ROWS(i, first, last, nlev) {
        MESHOPS_ROW_LANE(ep, k, i, nlev);
        const Lanes<T, W> qp = load(q, i);
        const Lanes<T, W> wF =
            meshops::stencil_gather(edgesOnEdge, weightsOnEdge, F, ep, maxEdges2, nlev, k,
                                    slotStride);
        // The transposed loop written out: through meshops::for_each_slot the same instructions
        // compile in another order in some instantiations (docs/decisions/0002-kernel-tuning.md).
        Lanes<T, W> accF = meshops::splat<T, W>(0), wg = meshops::splat<T, W>(0);
        for (int s = 0; s < maxT; ++s) {
            const meshops_offset p = meshops::slot_index(ep, s, maxT, slotStride);
            const int e = edgesOnEdgeT[p];
            if (e >= 0) {
                const meshops_offset ekk = (meshops_offset)e * nlev + k;
                const Lanes<T, W> w = weightsOnEdgeT[p] * load(g, ekk);
                accF += w * (load(q, ekk) + qp);
                wg += w;
            }
        }
        F_adj[i] = (T)0.5 * accF;
        q_adj[i] = (T)0.5 * (load(g, i) * wF + load(F, i) * wg);
    }
}
MESHOPS_INSTANTIATE(pv_flux_e2e_adj_gather)
