// The TRiSK shallow-water RK4 stage in four fused passes (swm/fused.py; the unfused reference is
// swm/tendencies.py with swm/timestepping.py). One stage of the provisional state (h, u):
//
//   vertex pass   pvVertex = (fVertex + curl_e2v(u)) / interp_c2v(h)
//   pv edge pass  pvEdge = (pvVertex[v0] + pvVertex[v1]) / 2 (- the APVM correction)
//   cell pass     h_edge = (h[c] + h[cellsAcross]) / 2 inline, flux = h_edge * u, tend_h = -div(flux),
//                 ke = ke_e2c(u), phi = ke + gravity * (h + b); the first present cell of each edge
//                 writes the edge's flux; the RK4 update of h
//   edge pass     tend_u = pv_flux_e2e(flux, pvEdge) - grad_c2e(phi) (+ diss2 - diss4); the RK4
//                 update of u
//
// RK4 update of a tendency k at one row: yNew = (accumulate ? yNew : yOld) + newCoef * k, and with
// `provisional` yNext = yOld + nextCoef * k (newCoef = b_j dt, nextCoef = a_j dt). The stencil sums
// are those of the operator kernels (same slot order, same multiply-adds); every product the
// unfused path forms as a separate elementwise operation is rounded on its own here (mul_rn), so
// that no multiply-add contracts it into the following sum.
//
// The vertex and cell passes wait on memory: where a row has at most VERTEX_BATCH or CELL_BATCH
// slots (a Voronoi mesh of hexagons and pentagons), they load every slot's table entries, then
// every gathered value, before using any, and sum in slot order; wider rows take the slot loop
// (docs/decisions/0008-fused-shallow-water-step.md).
#include "rk4.cuh"
#include "stencil.cuh"

using meshops::Lanes;
using meshops::load;

namespace shallow_water {

constexpr int VERTEX_BATCH = 3;
constexpr int CELL_BATCH = 6;

using meshops::mul_rn;
using meshops::rk4_update;

// (x[a] + x[b]) / 2 over the present ends a, b of a two-point stencil (interp_c2e, interp_v2e).
template <typename T, int W>
__device__ __forceinline__ Lanes<T, W> mean_of_ends(const Lanes<T, W>* __restrict__ x, int a, int b,
                                                    int nlev, int k)
{
    Lanes<T, W> acc = meshops::splat<T, W>(0);
    if (a >= 0) acc += load(x, (meshops_offset)a * nlev + k);
    if (b >= 0) acc += load(x, (meshops_offset)b * nlev + k);
    return (T)0.5 * acc;
}

// The edge pass; with Extra, tend_u + extra (the terms computed outside the fused kernels).
template <typename T, int W, bool Extra>
__device__ __forceinline__ void edge_pass(
    const int* __restrict__ edgesOnEdge, const T* __restrict__ weightsOnEdge,
    const int* __restrict__ cellsOnEdge, const T* __restrict__ invDcEdge,
    const Lanes<T, W>* __restrict__ flux, const Lanes<T, W>* __restrict__ pvEdge,
    const Lanes<T, W>* __restrict__ phi, const Lanes<T, W>* __restrict__ extra,
    const Lanes<T, W>* __restrict__ uOld,
    Lanes<T, W>* __restrict__ uNew, Lanes<T, W>* __restrict__ uNext, int maxEdges2, int slotStride,
    T newCoef, T nextCoef, int accumulate, int provisional, int first, int last, int nlev)
{
    MESHOPS_ROWS(i, first, last, nlev) {
        MESHOPS_ROW_LANE(e, k, i, nlev);
        const Lanes<T, W> qe = load(pvEdge, i);
        Lanes<T, W> acc = meshops::splat<T, W>(0);
        meshops::for_each_slot(edgesOnEdge, e, maxEdges2, slotStride, [&](meshops_offset p, int e2) {
            const meshops_offset e2k = (meshops_offset)e2 * nlev + k;
            meshops::axpy(acc, weightsOnEdge[p], load(flux, e2k) * (qe + load(pvEdge, e2k)));
        });
        const int c0 = cellsOnEdge[2 * e], c1 = cellsOnEdge[2 * e + 1];
        Lanes<T, W> dphi = meshops::splat<T, W>(0);
        if (c1 >= 0) dphi += load(phi, (meshops_offset)c1 * nlev + k);
        if (c0 >= 0) dphi -= load(phi, (meshops_offset)c0 * nlev + k);
        Lanes<T, W> tend = mul_rn((T)0.5, acc) - mul_rn(invDcEdge[e], dphi);
        if constexpr (Extra) tend = tend + load(extra, i);
        rk4_update(tend, uOld, uNew, uNext, newCoef, nextCoef, accumulate, provisional, i);
    }
}

}  // namespace shallow_water

// pvVertex[v,k] = (fVertex[v,k] + sum_i curlCoef[v,i] * u[e_i,k]) / sum_i c2vCoef[v,i] * h[c_i,k],
// e_i = edgesOnVertex[v,i], c_i = cellsOnVertex[v,i] (both tables in one layout, slotStride); with
// `record`, the denominator h_vertex is written to hVertexOut too (the adjoint reads it).
template <typename T, int W>
__global__ void sw_pv_vertex(const int* __restrict__ edgesOnVertex, const T* __restrict__ curlCoef,
                             const int* __restrict__ cellsOnVertex, const T* __restrict__ c2vCoef,
                             const Lanes<T, W>* __restrict__ u, const Lanes<T, W>* __restrict__ h,
                             const Lanes<T, W>* __restrict__ fVertex,
                             Lanes<T, W>* __restrict__ pvVertex, Lanes<T, W>* __restrict__ hVertexOut,
                             int vertexDegree, int slotStride, int record, int first, int last,
                             int nlev)
{
    using shallow_water::VERTEX_BATCH;
    MESHOPS_ROWS(i, first, last, nlev) {
        MESHOPS_ROW_LANE(v, k, i, nlev);
        Lanes<T, W> vorticity = meshops::splat<T, W>(0), hVertex = meshops::splat<T, W>(0);
        if (vertexDegree == VERTEX_BATCH) {
            int e[VERTEX_BATCH], c[VERTEX_BATCH];
            T curl[VERTEX_BATCH], kite[VERTEX_BATCH];
            Lanes<T, W> ue[VERTEX_BATCH], hc[VERTEX_BATCH];
#pragma unroll
            for (int m = 0; m < VERTEX_BATCH; ++m) {
                const meshops_offset p = meshops::slot_index(v, m, VERTEX_BATCH, slotStride);
                e[m] = edgesOnVertex[p];
                c[m] = cellsOnVertex[p];
                curl[m] = curlCoef[p];
                kite[m] = c2vCoef[p];
            }
#pragma unroll
            for (int m = 0; m < VERTEX_BATCH; ++m) {
                ue[m] = e[m] >= 0 ? load(u, (meshops_offset)e[m] * nlev + k) : meshops::splat<T, W>(0);
                hc[m] = c[m] >= 0 ? load(h, (meshops_offset)c[m] * nlev + k) : meshops::splat<T, W>(0);
            }
            // the sums of stencil_gather (curl_e2v, interp_c2v), slot by slot
#pragma unroll
            for (int m = 0; m < VERTEX_BATCH; ++m) {
                if (e[m] >= 0) meshops::axpy(vorticity, curl[m], ue[m]);
            }
#pragma unroll
            for (int m = 0; m < VERTEX_BATCH; ++m) {
                if (c[m] >= 0) meshops::axpy(hVertex, kite[m], hc[m]);
            }
        } else {
            vorticity = meshops::stencil_gather(edgesOnVertex, curlCoef, u, v, vertexDegree, nlev, k,
                                                slotStride);
            hVertex = meshops::stencil_gather(cellsOnVertex, c2vCoef, h, v, vertexDegree, nlev, k,
                                              slotStride);
        }
        Lanes<T, W> pv = load(fVertex, i) + vorticity;
#pragma unroll
        for (int w = 0; w < W; ++w) pv.v[w] = pv.v[w] / hVertex.v[w];
        pvVertex[i] = pv;
        if (record) hVertexOut[i] = hVertex;
    }
}
MESHOPS_INSTANTIATE(sw_pv_vertex)

// pvEdge[e,k] = (pvVertex[v0,k] + pvVertex[v1,k]) / 2, (v0, v1) = verticesOnEdge[e] (interp_v2e).
template <typename T, int W>
__global__ void sw_pv_edge(const int* __restrict__ verticesOnEdge,
                           const Lanes<T, W>* __restrict__ pvVertex, Lanes<T, W>* __restrict__ pvEdge,
                           int first, int last, int nlev)
{
    MESHOPS_ROWS(i, first, last, nlev) {
        MESHOPS_ROW_LANE(e, k, i, nlev);
        pvEdge[i] = shallow_water::mean_of_ends(pvVertex, verticesOnEdge[2 * e],
                                                verticesOnEdge[2 * e + 1], nlev, k);
    }
}
MESHOPS_INSTANTIATE(sw_pv_edge)

// With APVM: pvEdge less pvCorrection (an edge field, swm.terms.APVM.forward).
template <typename T, int W>
__global__ void sw_pv_edge_apvm(const int* __restrict__ verticesOnEdge,
                                const Lanes<T, W>* __restrict__ pvVertex,
                                const Lanes<T, W>* __restrict__ pvCorrection,
                                Lanes<T, W>* __restrict__ pvEdge, int first, int last, int nlev)
{
    MESHOPS_ROWS(i, first, last, nlev) {
        MESHOPS_ROW_LANE(e, k, i, nlev);
        pvEdge[i] = shallow_water::mean_of_ends(pvVertex, verticesOnEdge[2 * e],
                                                verticesOnEdge[2 * e + 1], nlev, k) -
                    load(pvCorrection, i);
    }
}
MESHOPS_INSTANTIATE(sw_pv_edge_apvm)

// The cell pass (file comment) over cells [first, last): edgesOnCell, cellsAcross, divCoef and
// keCoef in one layout (slotStride); flux is an edge field. cellsAcross[c, j] is the other cell of
// edge e_j = edgesOnCell[c, j] (-1: none), stored as -2 - that cell where c is the edge's first
// present cell, the one that writes the edge's flux.
template <typename T, int W>
__global__ void sw_cell_stage(const int* __restrict__ edgesOnCell, const int* __restrict__ cellsAcross,
                              const T* __restrict__ divCoef, const T* __restrict__ keCoef,
                              const Lanes<T, W>* __restrict__ h, const Lanes<T, W>* __restrict__ u,
                              const Lanes<T, W>* __restrict__ b, const Lanes<T, W>* __restrict__ hOld,
                              Lanes<T, W>* __restrict__ hNew, Lanes<T, W>* __restrict__ hNext,
                              Lanes<T, W>* __restrict__ phi, Lanes<T, W>* __restrict__ flux,
                              int maxEdges, int slotStride, T gravity, T newCoef, T nextCoef,
                              int accumulate, int provisional, int first, int last, int nlev)
{
    using shallow_water::CELL_BATCH;
    MESHOPS_ROWS(i, first, last, nlev) {
        MESHOPS_ROW_LANE(c, k, i, nlev);
        const Lanes<T, W> hc = load(h, i);
        Lanes<T, W> div = meshops::splat<T, W>(0), ke = meshops::splat<T, W>(0);
        // slot m of edge e: h_edge = (h[c0] + h[c1]) / 2 as interp_c2e, its flux into div and
        // flux, u^2 into ke
        auto slot = [&](int e, int across, T dc, T kc, const Lanes<T, W>& ue,
                        const Lanes<T, W>& hOther) {
            Lanes<T, W> hEdge = hc;
            if (across != -1) hEdge += hOther;      // the other cell is there (-1: none, a flux owner)
            const Lanes<T, W> F = ((T)0.5 * hEdge) * ue;
            meshops::axpy(div, dc, F);
            meshops::axpy(ke, kc, ue * ue);
            if (across < 0) flux[(meshops_offset)e * nlev + k] = F;
        };
        if (maxEdges <= CELL_BATCH) {
            int e[CELL_BATCH], across[CELL_BATCH];
            T dc[CELL_BATCH], kc[CELL_BATCH];
            Lanes<T, W> ue[CELL_BATCH], hOther[CELL_BATCH];
#pragma unroll
            for (int m = 0; m < CELL_BATCH; ++m) {
                const meshops_offset p = meshops::slot_index(c, m, maxEdges, slotStride);
                e[m] = m < maxEdges ? edgesOnCell[p] : -1;
                across[m] = m < maxEdges ? cellsAcross[p] : -1;
                dc[m] = m < maxEdges ? divCoef[p] : (T)0;
                kc[m] = m < maxEdges ? keCoef[p] : (T)0;
            }
#pragma unroll
            for (int m = 0; m < CELL_BATCH; ++m) {
                const int other = across[m] < 0 ? -2 - across[m] : across[m];
                ue[m] = e[m] >= 0 ? load(u, (meshops_offset)e[m] * nlev + k) : meshops::splat<T, W>(0);
                hOther[m] = e[m] >= 0 && other >= 0 ? load(h, (meshops_offset)other * nlev + k)
                                                    : meshops::splat<T, W>(0);
            }
#pragma unroll
            for (int m = 0; m < CELL_BATCH; ++m) {
                if (e[m] >= 0) slot(e[m], across[m], dc[m], kc[m], ue[m], hOther[m]);
            }
        } else {
            meshops::for_each_slot(edgesOnCell, c, maxEdges, slotStride, [&](meshops_offset p, int e) {
                const int am = cellsAcross[p], other = am < 0 ? -2 - am : am;
                slot(e, am, divCoef[p], keCoef[p], load(u, (meshops_offset)e * nlev + k),
                     other >= 0 ? load(h, (meshops_offset)other * nlev + k) : meshops::splat<T, W>(0));
            });
        }
        phi[i] = ke + shallow_water::mul_rn(gravity, hc + load(b, i));
        shallow_water::rk4_update((T)-1 * div, hOld, hNew, hNext, newCoef, nextCoef, accumulate,
                                  provisional, i);
    }
}
MESHOPS_INSTANTIATE(sw_cell_stage)

// The edge pass (file comment) over edges [first, last): edgesOnEdge and weightsOnEdge in one
// layout (slotStride), cellsOnEdge row-major.
template <typename T, int W>
__global__ void sw_edge_stage(const int* __restrict__ edgesOnEdge, const T* __restrict__ weightsOnEdge,
                              const int* __restrict__ cellsOnEdge, const T* __restrict__ invDcEdge,
                              const Lanes<T, W>* __restrict__ flux,
                              const Lanes<T, W>* __restrict__ pvEdge,
                              const Lanes<T, W>* __restrict__ phi, const Lanes<T, W>* __restrict__ uOld,
                              Lanes<T, W>* __restrict__ uNew, Lanes<T, W>* __restrict__ uNext,
                              int maxEdges2, int slotStride, T newCoef, T nextCoef, int accumulate,
                              int provisional, int first, int last, int nlev)
{
    shallow_water::edge_pass<T, W, false>(edgesOnEdge, weightsOnEdge, cellsOnEdge, invDcEdge, flux,
                                          pvEdge, phi, nullptr, uOld, uNew, uNext,
                                          maxEdges2, slotStride, newCoef, nextCoef, accumulate,
                                          provisional, first, last, nlev);
}
MESHOPS_INSTANTIATE(sw_edge_stage)

// The edge pass with the u part of the terms the fused kernels do not compute: tend_u + extra (an
// edge field, swm.terms.extra_u: del2 and del4).
template <typename T, int W>
__global__ void sw_edge_stage_extra(const int* __restrict__ edgesOnEdge,
                                    const T* __restrict__ weightsOnEdge,
                                    const int* __restrict__ cellsOnEdge, const T* __restrict__ invDcEdge,
                                    const Lanes<T, W>* __restrict__ flux,
                                    const Lanes<T, W>* __restrict__ pvEdge,
                                    const Lanes<T, W>* __restrict__ phi,
                                    const Lanes<T, W>* __restrict__ extra,
                                    const Lanes<T, W>* __restrict__ uOld, Lanes<T, W>* __restrict__ uNew,
                                    Lanes<T, W>* __restrict__ uNext, int maxEdges2, int slotStride,
                                    T newCoef, T nextCoef, int accumulate, int provisional, int first,
                                    int last, int nlev)
{
    shallow_water::edge_pass<T, W, true>(edgesOnEdge, weightsOnEdge, cellsOnEdge, invDcEdge, flux,
                                         pvEdge, phi, extra, uOld, uNew, uNext, maxEdges2, slotStride,
                                         newCoef, nextCoef, accumulate, provisional, first, last, nlev);
}
MESHOPS_INSTANTIATE(sw_edge_stage_extra)
