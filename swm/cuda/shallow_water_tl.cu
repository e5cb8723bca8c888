// The tangent-linear of the TRiSK shallow-water RK4 stage (swm/cuda/shallow_water.cu) in fused
// passes (swm/fused_tangent.py; the reference is swm/tendencies.py's tendencies_tl). About the
// stage's provisional state (h, u) with its forward record (pvVertex, hVertex, pvEdge, flux), for
// the tangent (dh, du, db):
//
//   vertex pass  dPvVertex = (curl_e2v(du) - pvVertex interp_c2v(dh)) / hVertex
//   pv edge pass dPvEdge = interp_v2e(dPvVertex) (- the tangent of the pv_edge corrections): the
//                forward's sw_pv_edge / sw_pv_edge_apvm kernels on the tangent fields
//   cell pass    dh_edge inline, dF = dh_edge u + h_edge du, dtend_h = -div(dF), dke = 2 keCoef u
//                du summed, dphi = dke + gravity (dh + db); the first present cell of each edge
//                writes dF; the RK4 update of dh
//   edge pass    dtend_u = sum_j w (dF_j (q + q_j) + F_j (dq + dq_j)) / 2 - grad_c2e(dphi) (+ extra,
//                the tangent of the terms outside the fused kernels); the RK4 update of du
#include "stencil.cuh"

using meshops::Lanes;
using meshops::load;
using meshops::stencil_gather;

namespace shallow_water_tl {

template <typename T, int W>
__device__ __forceinline__ void rk4_update(const Lanes<T, W>& k, const Lanes<T, W>* __restrict__ yOld,
                                           Lanes<T, W>* __restrict__ yNew, Lanes<T, W>* __restrict__ yNext,
                                           T newCoef, T nextCoef, int accumulate, int provisional,
                                           meshops_offset i)
{
    const Lanes<T, W> old = load(yOld, i);
    yNew[i] = (accumulate ? load<T, W>(yNew, i) : old) + newCoef * k;
    if (provisional) yNext[i] = old + nextCoef * k;
}

}  // namespace shallow_water_tl

// dPvVertex[v] = (sum_i curlCoef[v,i] du[e_i] - pvVertex[v] sum_i c2vCoef[v,i] dh[c_i]) / hVertex[v].
template <typename T, int W>
__global__ void sw_tl_vertex(const int* __restrict__ edgesOnVertex, const T* __restrict__ curlCoef,
                             const int* __restrict__ cellsOnVertex, const T* __restrict__ c2vCoef,
                             const Lanes<T, W>* __restrict__ du, const Lanes<T, W>* __restrict__ dh,
                             const Lanes<T, W>* __restrict__ pvVertex, const Lanes<T, W>* __restrict__ hVertex,
                             Lanes<T, W>* __restrict__ dPvVertex, int vertexDegree, int slotStride,
                             int first, int last, int nlev)
{
    MESHOPS_ROWS(i, first, last, nlev) {
        MESHOPS_ROW_LANE(v, k, i, nlev);
        const Lanes<T, W> dVort = stencil_gather(edgesOnVertex, curlCoef, du, v, vertexDegree, nlev, k, slotStride);
        const Lanes<T, W> dhv = stencil_gather(cellsOnVertex, c2vCoef, dh, v, vertexDegree, nlev, k, slotStride);
        const Lanes<T, W> num = dVort - load(pvVertex, i) * dhv, hv = load(hVertex, i);
        Lanes<T, W> out;
#pragma unroll
        for (int w = 0; w < W; ++w) out.v[w] = num.v[w] / hv.v[w];
        dPvVertex[i] = out;
    }
}
MESHOPS_INSTANTIATE(sw_tl_vertex)

// The cell pass over cells (edgesOnCell, cellsAcrossOnCell, divCoef, keCoef in one layout): see the
// file comment; db is read when `hasDb`.
template <typename T, int W>
__global__ void sw_tl_cell(const int* __restrict__ edgesOnCell, const int* __restrict__ cellsAcross,
                           const T* __restrict__ divCoef, const T* __restrict__ keCoef,
                           const Lanes<T, W>* __restrict__ h, const Lanes<T, W>* __restrict__ u,
                           const Lanes<T, W>* __restrict__ dh, const Lanes<T, W>* __restrict__ du,
                           const Lanes<T, W>* __restrict__ db, const Lanes<T, W>* __restrict__ dhOld,
                           Lanes<T, W>* __restrict__ dhNew, Lanes<T, W>* __restrict__ dhNext,
                           Lanes<T, W>* __restrict__ dPhi, Lanes<T, W>* __restrict__ dFlux, int maxEdges,
                           int slotStride, T gravity, int hasDb, T newCoef, T nextCoef, int accumulate,
                           int provisional, int first, int last, int nlev)
{
    MESHOPS_ROWS(i, first, last, nlev) {
        MESHOPS_ROW_LANE(c, k, i, nlev);
        const Lanes<T, W> hc = load(h, i), dhc = load(dh, i);
        Lanes<T, W> div = meshops::splat<T, W>(0), dke = meshops::splat<T, W>(0);
        meshops::for_each_slot(edgesOnCell, c, maxEdges, slotStride, [&](meshops_offset p, int e) {
            const int am = cellsAcross[p], other = am < 0 ? -2 - am : am;
            const meshops_offset ek = (meshops_offset)e * nlev + k;
            Lanes<T, W> hEdge = hc, dhEdge = dhc;
            if (other >= 0) {
                const meshops_offset ok = (meshops_offset)other * nlev + k;
                hEdge += load(h, ok);
                dhEdge += load(dh, ok);
            }
            const Lanes<T, W> ue = load(u, ek), due = load(du, ek);
            const Lanes<T, W> dF = ((T)0.5 * dhEdge) * ue + ((T)0.5 * hEdge) * due;
            meshops::axpy(div, divCoef[p], dF);
            meshops::axpy(dke, keCoef[p], (T)2 * (ue * due));
            if (am < 0) dFlux[ek] = dF;
        });
        Lanes<T, W> dSurface = dhc;
        if (hasDb) dSurface += load(db, i);
        dPhi[i] = dke + gravity * dSurface;
        shallow_water_tl::rk4_update((T)-1 * div, dhOld, dhNew, dhNext, newCoef, nextCoef, accumulate,
                                     provisional, i);
    }
}
MESHOPS_INSTANTIATE(sw_tl_cell)

// The edge pass over edges (edgesOnEdge/weightsOnEdge in one layout, cellsOnEdge row-major): see
// the file comment; extra is added when `hasExtra`.
template <typename T, int W>
__global__ void sw_tl_edge(const int* __restrict__ edgesOnEdge, const T* __restrict__ weightsOnEdge,
                           const int* __restrict__ cellsOnEdge, const T* __restrict__ invDcEdge,
                           const Lanes<T, W>* __restrict__ flux, const Lanes<T, W>* __restrict__ pvEdge,
                           const Lanes<T, W>* __restrict__ dFlux, const Lanes<T, W>* __restrict__ dPvEdge,
                           const Lanes<T, W>* __restrict__ dPhi, const Lanes<T, W>* __restrict__ extra,
                           const Lanes<T, W>* __restrict__ duOld, Lanes<T, W>* __restrict__ duNew,
                           Lanes<T, W>* __restrict__ duNext, int maxEdges2, int slotStride, int hasExtra,
                           T newCoef, T nextCoef, int accumulate, int provisional, int first, int last,
                           int nlev)
{
    MESHOPS_ROWS(i, first, last, nlev) {
        MESHOPS_ROW_LANE(e, k, i, nlev);
        const Lanes<T, W> q = load(pvEdge, i), dq = load(dPvEdge, i);
        Lanes<T, W> acc = meshops::splat<T, W>(0);
        meshops::for_each_slot(edgesOnEdge, e, maxEdges2, slotStride, [&](meshops_offset p, int e2) {
            const meshops_offset e2k = (meshops_offset)e2 * nlev + k;
            meshops::axpy(acc, weightsOnEdge[p],
                          load(dFlux, e2k) * (q + load(pvEdge, e2k)) + load(flux, e2k) * (dq + load(dPvEdge, e2k)));
        });
        const int c0 = cellsOnEdge[2 * e], c1 = cellsOnEdge[2 * e + 1];
        Lanes<T, W> dGrad = meshops::splat<T, W>(0);
        if (c1 >= 0) dGrad += load(dPhi, (meshops_offset)c1 * nlev + k);
        if (c0 >= 0) dGrad -= load(dPhi, (meshops_offset)c0 * nlev + k);
        Lanes<T, W> tend = (T)0.5 * acc - invDcEdge[e] * dGrad;
        if (hasExtra) tend += load(extra, i);
        shallow_water_tl::rk4_update(tend, duOld, duNew, duNext, newCoef, nextCoef, accumulate, provisional, i);
    }
}
MESHOPS_INSTANTIATE(sw_tl_edge)
