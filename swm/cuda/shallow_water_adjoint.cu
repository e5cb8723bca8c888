// The adjoint of the TRiSK shallow-water RK4 stage (swm/cuda/shallow_water.cu) in five fused
// gather passes, deterministic: each adjoint row sums its contributions in a fixed slot order
// through the transposed tables, no atomics (swm/fused_adjoint.py; the reference is
// adjoint/tendencies.py). From the stage's adjoint tendencies (hTendAdj on cells, uTendAdj on
// edges), with the stage's provisional state (h, u) and its forward fields pvVertex, pvEdge and
// flux = h_edge * u:
//
//   phi pass     phiAdj = -grad_c2e_adj(uTendAdj)                                 (cells)
//   edge pass    F_adj  = pv_flux's F-adjoint - div_e2c_adj(hTendAdj), with
//                T1 = sum_j w'_j uTendAdj_j, T2 = sum_j w'_j uTendAdj_j pvEdge_j over the TRiSK
//                stencil with its reverse weights w' (the transposed sums, on the same slots as
//                sum_j w_j flux_j): F_adj = (T2 + pvEdge T1) / 2; pvEdgeAdj = (uTendAdj sum_j w_j
//                flux_j + flux T1) / 2; hEdgeAdj = u F_adj; uAdjPart = h_edge F_adj +
//                ke_e2c_adj(u; phiAdj)
//   vertex pass  pvVertexAdj = interp_v2e_adj(pvEdgeAdj) (+ the APVM part), vortAdj =
//                pvVertexAdj / h_vertex, hVertexAdj = -vortAdj pvVertex                (vertices)
//   u pass       uAdj = uAdjPart + curl_e2v_adj(vortAdj) (+ APVM and viscosity parts)  (edges)
//   h pass       hAdj = gravity phiAdj + interp_c2e_adj(hEdgeAdj) + interp_c2v_adj(hVertexAdj),
//                bAdj = (accumulate ? bAdj : 0) + gravity phiAdj                       (cells)
//
// On one process the u and h passes also do the adjoint step's RK4 bookkeeping (adjoint_rk4), so
// the stage adjoints are never stored.
#include "rk4.cuh"
#include "stencil.cuh"

using meshops::adjoint_rk4;
using meshops::Lanes;
using meshops::load;
using meshops::stencil_gather;

namespace shallow_water_adjoint {

// What both edge passes read at an edge's two cells (c0, c1) = cellsOnEdge[e] (absent: no term):
// div_e2c_adj(hTendAdj), ke_e2c_adj's cell sum of phiAdj (times u outside) and h_edge.
template <typename T, int W>
struct EdgeCells {
    Lanes<T, W> divAdj, keAdj, hEdge;
};

template <typename T, int W>
__device__ __forceinline__ EdgeCells<T, W> edge_cells(const int* __restrict__ cellsOnEdge,
                                                      const T* __restrict__ divAdjCoef,
                                                      const T* __restrict__ keAdjCoef,
                                                      const Lanes<T, W>* __restrict__ hTendAdj,
                                                      const Lanes<T, W>* __restrict__ phiAdj,
                                                      const Lanes<T, W>* __restrict__ h, int e, int nlev,
                                                      int k)
{
    EdgeCells<T, W> out{meshops::splat<T, W>(0), meshops::splat<T, W>(0), meshops::splat<T, W>(0)};
#pragma unroll
    for (int s = 0; s < 2; ++s) {
        const int c = cellsOnEdge[2 * e + s];
        if (c < 0) continue;
        const meshops_offset ck = (meshops_offset)c * nlev + k;
        meshops::axpy(out.divAdj, divAdjCoef[2 * e + s], load(hTendAdj, ck));
        meshops::axpy(out.keAdj, keAdjCoef[2 * e + s], load(phiAdj, ck));
        out.hEdge += load(h, ck);
    }
    out.hEdge = (T)0.5 * out.hEdge;
    return out;
}

}  // namespace shallow_water_adjoint

// phiAdj[c] = -sum_j gradCellCoefT[c, j] * uTendAdj[cellsOnEdgeT[c, j]].
template <typename T, int W>
__global__ void sw_adj_phi(const int* __restrict__ cellsOnEdgeT, const T* __restrict__ gradCoefT,
                           const Lanes<T, W>* __restrict__ uTendAdj, Lanes<T, W>* __restrict__ phiAdj,
                           int S, int slotStride, int first, int last, int nlev)
{
    MESHOPS_ROWS(i, first, last, nlev) {
        MESHOPS_ROW_LANE(c, k, i, nlev);
        phiAdj[i] = (T)-1 * stencil_gather(cellsOnEdgeT, gradCoefT, uTendAdj, c, S, nlev, k, slotStride);
    }
}
MESHOPS_INSTANTIATE(sw_adj_phi)

// The edge pass (file comment): edgesOnEdge with weightsOnEdge and weightsOnEdgeReverse (S2 slots,
// stride2), one loop over the stencil for the three sums; cellsOnEdge, divAdjCoef, keAdjCoef
// row-major (2 slots).
template <typename T, int W>
MESHOPS_FULL_OCCUPANCY_ONE_LANE
__global__ void sw_adj_edge(const int* __restrict__ edgesOnEdge, const T* __restrict__ weightsOnEdge,
                            const T* __restrict__ weightsOnEdgeReverse,
                            const int* __restrict__ cellsOnEdge, const T* __restrict__ divAdjCoef,
                            const T* __restrict__ keAdjCoef, const Lanes<T, W>* __restrict__ uTendAdj,
                            const Lanes<T, W>* __restrict__ hTendAdj,
                            const Lanes<T, W>* __restrict__ phiAdj, const Lanes<T, W>* __restrict__ flux,
                            const Lanes<T, W>* __restrict__ pvEdge, const Lanes<T, W>* __restrict__ h,
                            const Lanes<T, W>* __restrict__ u, Lanes<T, W>* __restrict__ uAdjPart,
                            Lanes<T, W>* __restrict__ hEdgeAdj, Lanes<T, W>* __restrict__ pvEdgeAdj,
                            int S2, int stride2, int first, int last, int nlev)
{
    MESHOPS_ROWS(i, first, last, nlev) {
        MESHOPS_ROW_LANE(e, k, i, nlev);
        Lanes<T, W> t1 = meshops::splat<T, W>(0), t2 = meshops::splat<T, W>(0);
        Lanes<T, W> fluxSum = meshops::splat<T, W>(0);
        meshops::for_each_slot(edgesOnEdge, e, S2, stride2, [&](meshops_offset p, int e2) {
            const meshops_offset e2k = (meshops_offset)e2 * nlev + k;
            const Lanes<T, W> g = load(uTendAdj, e2k);
            const T wr = weightsOnEdgeReverse[p];
            meshops::axpy(t1, wr, g);
            meshops::axpy(t2, wr, g * load(pvEdge, e2k));
            meshops::axpy(fluxSum, weightsOnEdge[p], load(flux, e2k));
        });
        const auto ends = shallow_water_adjoint::edge_cells(cellsOnEdge, divAdjCoef, keAdjCoef, hTendAdj,
                                                            phiAdj, h, e, nlev, k);
        const Lanes<T, W>& divAdj = ends.divAdj;
        const Lanes<T, W>& keAdj = ends.keAdj;
        const Lanes<T, W>& hEdge = ends.hEdge;
        const Lanes<T, W> q = load(pvEdge, i), F = load(flux, i), g = load(uTendAdj, i), ue = load(u, i);
        const Lanes<T, W> fluxAdj = (T)0.5 * (t2 + q * t1) - divAdj;
        pvEdgeAdj[i] = (T)0.5 * (g * fluxSum + F * t1);
        hEdgeAdj[i] = ue * fluxAdj;
        uAdjPart[i] = hEdge * fluxAdj + ue * keAdj;
    }
}
MESHOPS_INSTANTIATE(sw_adj_edge)

// The vertex pass: verticesOnEdgeT (the edges of each vertex, SE slots, strideE; interp_v2e's
// coefficient 1/2 applied to the sum); hVertex is the forward's; with `extra`, pvVertexExtra (the
// APVM part of pvVertexAdj) is added.
template <typename T, int W>
MESHOPS_FULL_OCCUPANCY_ONE_LANE
__global__ void sw_adj_vertex(const int* __restrict__ verticesOnEdgeT,
                              const Lanes<T, W>* __restrict__ pvEdgeAdj,
                              const Lanes<T, W>* __restrict__ pvVertexExtra,
                              const Lanes<T, W>* __restrict__ pvVertex,
                              const Lanes<T, W>* __restrict__ hVertex, Lanes<T, W>* __restrict__ vortAdj,
                              Lanes<T, W>* __restrict__ hVertexAdj, int SE, int strideE, int extra,
                              int first, int last, int nlev)
{
    MESHOPS_ROWS(i, first, last, nlev) {
        MESHOPS_ROW_LANE(v, k, i, nlev);
        Lanes<T, W> pvAdj = meshops::splat<T, W>(0);
        meshops::for_each_slot(verticesOnEdgeT, v, SE, strideE, [&](meshops_offset, int e) {
            pvAdj += load(pvEdgeAdj, (meshops_offset)e * nlev + k);
        });
        pvAdj = (T)0.5 * pvAdj;
        if (extra) pvAdj += load(pvVertexExtra, i);
        const Lanes<T, W> hv = load(hVertex, i);
        Lanes<T, W> va;
#pragma unroll
        for (int w = 0; w < W; ++w) va.v[w] = pvAdj.v[w] / hv.v[w];
        vortAdj[i] = va;
        hVertexAdj[i] = (T)-1 * (va * load(pvVertex, i));
    }
}
MESHOPS_INSTANTIATE(sw_adj_vertex)

// The u pass: edgesOnVertexT/curlCoefT (S slots, slotStride); with `extra`, uExtra is added. With
// `rk`, the stage's u adjoint goes into the RK4 bookkeeping (adjoint_rk4) instead of uAdj.
template <typename T, int W>
__global__ void sw_adj_u(const int* __restrict__ edgesOnVertexT, const T* __restrict__ curlCoefT,
                         const Lanes<T, W>* __restrict__ uAdjPart, const Lanes<T, W>* __restrict__ vortAdj,
                         const Lanes<T, W>* __restrict__ uExtra, Lanes<T, W>* __restrict__ uAdj,
                         Lanes<T, W>* __restrict__ yAdj, const Lanes<T, W>* __restrict__ newAdj,
                         Lanes<T, W>* __restrict__ kAdj, int S, int slotStride, int extra, int rk,
                         T bCoef, T aCoef, int next, int first, int last, int nlev)
{
    MESHOPS_ROWS(i, first, last, nlev) {
        MESHOPS_ROW_LANE(e, k, i, nlev);
        Lanes<T, W> acc = load(uAdjPart, i) + stencil_gather(edgesOnVertexT, curlCoefT, vortAdj, e, S, nlev, k,
                                                             slotStride);
        if (extra) acc += load(uExtra, i);
        if (rk) {
            adjoint_rk4(acc, yAdj, newAdj, kAdj, bCoef, aCoef, next, rk, i);
        } else {
            uAdj[i] = acc;
        }
    }
}
MESHOPS_INSTANTIATE(sw_adj_u)

// The h pass: cellsOnEdgeT (the edges of each cell, SE slots, strideE; interp_c2e's coefficient
// 1/2 applied to the sum), verticesOnCell/c2vCoefT (SV slots, strideV). With `rk`, the stage's h
// adjoint goes into the RK4 bookkeeping (adjoint_rk4) instead of hAdj.
template <typename T, int W>
__global__ void sw_adj_h(const int* __restrict__ cellsOnEdgeT, const int* __restrict__ verticesOnCell,
                         const T* __restrict__ c2vCoefT, const Lanes<T, W>* __restrict__ phiAdj,
                         const Lanes<T, W>* __restrict__ hEdgeAdj,
                         const Lanes<T, W>* __restrict__ hVertexAdj, Lanes<T, W>* __restrict__ hAdj,
                         Lanes<T, W>* __restrict__ bAdj, Lanes<T, W>* __restrict__ yAdj,
                         const Lanes<T, W>* __restrict__ newAdj, Lanes<T, W>* __restrict__ kAdj, int SE,
                         int strideE, int SV, int strideV, T gravity, int accumulate, int rk, T bCoef,
                         T aCoef, int next, int first, int last, int nlev)
{
    MESHOPS_ROWS(i, first, last, nlev) {
        MESHOPS_ROW_LANE(c, k, i, nlev);
        const Lanes<T, W> gPhi = gravity * load(phiAdj, i);
        Lanes<T, W> edges = meshops::splat<T, W>(0);
        meshops::for_each_slot(cellsOnEdgeT, c, SE, strideE, [&](meshops_offset, int e) {
            edges += load(hEdgeAdj, (meshops_offset)e * nlev + k);
        });
        const Lanes<T, W> p = gPhi + (T)0.5 * edges +
                              stencil_gather(verticesOnCell, c2vCoefT, hVertexAdj, c, SV, nlev, k, strideV);
        if (rk) {
            adjoint_rk4(p, yAdj, newAdj, kAdj, bCoef, aCoef, next, rk, i);
        } else {
            hAdj[i] = p;
        }
        bAdj[i] = accumulate ? load<T, W>(bAdj, i) + gPhi : gPhi;
    }
}
MESHOPS_INSTANTIATE(sw_adj_h)

// -- atomic mode ----------------------------------------------------------------------------------
// The same adjoint with every transposed sum done as atomicAdd scatters from the forward's rows
// through the forward tables (no transposed tables): the edge pass scatters phi's adjoint to the
// edge's cells and the PV-flux adjoint to its TRiSK stencil (fluxAcc, pvAcc); the finishing edge
// pass adds the thickness-flux adjoint, stores the edge's own part of u's adjoint in uAcc and
// scatters h_edge's and pv_edge's adjoints to cells and vertices (hAcc, pvVertexAcc); the vertex
// pass scatters the vorticity and h_vertex adjoints to edges and cells (uAcc, hAcc); the sum passes
// add what was scattered. The other accumulators start at zero.
//
// A block's scatters first go to shared-memory windows of the accumulators (BlockWindow): in the
// mesh's space-filling-curve order the targets of a block's consecutive rows lie close together, so
// each window entry reaches the global accumulator with one atomicAdd instead of one per
// contribution; targets outside the window are added to the accumulator directly.

namespace shallow_water_adjoint {

// Window sizes in scalars: edges seen from edges (the TRiSK stencil) or from vertices, cells and
// vertices seen from edges or vertices.
constexpr int kEdgeWindow = 1024;
constexpr int kCellWindow = 512;
constexpr int kVertexWindow = 512;

// Scalars [base, base + N) of the accumulator `global`, summed in the shared `tile` (zero between
// flushes) and added to `global` by flush(); offsets outside go to `global` directly.
template <typename T, int N>
struct BlockWindow {
    T* tile;
    T* global;
    meshops_offset base;

    template <int W>
    __device__ __forceinline__ void add(meshops_offset lane, const Lanes<T, W>& a) const
    {
#pragma unroll
        for (int w = 0; w < W; ++w) {
            const meshops_offset at = lane * W + w, d = at - base;
            if (d >= 0 && d < N) {
                atomicAdd(&tile[d], a.v[w]);
            } else {
                atomicAdd(&global[at], a.v[w]);
            }
        }
    }

    // By every thread of the block after a barrier: each nonzero entry into `global`, the tile zeroed.
    __device__ __forceinline__ void flush() const
    {
        for (int j = threadIdx.x; j < N; j += blockDim.x) {
            const T v = tile[j];
            if (v != (T)0) {
                atomicAdd(&global[base + j], v);
                tile[j] = (T)0;
            }
        }
    }
};

template <typename T>
__device__ __forceinline__ void zero_tile(T* tile, int n)
{
    for (int j = threadIdx.x; j < n; j += blockDim.x) tile[j] = (T)0;
}

// The first scalar of an N-wide window centred on the first present target in `idx` (S slots per
// row, row-major) of the block's middle logical thread among [chunk, end).
template <int N, int W>
__device__ __forceinline__ meshops_offset window_base(const int* __restrict__ idx, int S, meshops_offset chunk,
                                                      meshops_offset end, int nlev)
{
    meshops_offset mid = chunk + blockDim.x / 2;
    if (mid >= end) mid = end - 1;
    const int r = meshops_entity(mid, nlev), k = (int)(mid - (meshops_offset)r * nlev);
    for (int m = 0; m < S; ++m) {
        const int t = idx[r * S + m];
        if (t >= 0) return ((meshops_offset)t * nlev + k) * W - N / 2;
    }
    return 0;
}

}  // namespace shallow_water_adjoint

// The grid-stride loop of the windowed scatter passes, by blocks: every thread of a block takes
// each turn (so the block may synchronise), its logical thread chunk + threadIdx.x valid below end.
#define SW_ADJ_BLOCK_CHUNKS(chunk, end, first, last, nlev)                                         \
    MESHOPS_FIX_NLEV(nlev);                                                                     \
    const meshops_offset end = (meshops_offset)(last) * (nlev);                                 \
    for (meshops_offset chunk = (meshops_offset)(first) * (nlev) + (meshops_offset)blockIdx.x * blockDim.x; \
         chunk < end; chunk += (meshops_offset)blockDim.x * gridDim.x)

// Edge pass (scatter): phiAdj[c1] -= g / dc, phiAdj[c0] += g / dc; for each stencil slot j,
// fluxAcc[e_j] += w g (q + q_j) / 2 and pvAcc[e_j] += w g F_j / 2; pvAcc[e] += g sum_j w F_j / 2.
template <typename T, int W>
__global__ void sw_adj_edge_atomic(const int* __restrict__ edgesOnEdge, const T* __restrict__ weightsOnEdge,
                                   const int* __restrict__ cellsOnEdge, const T* __restrict__ invDcEdge,
                                   const Lanes<T, W>* __restrict__ uTendAdj,
                                   const Lanes<T, W>* __restrict__ flux, const Lanes<T, W>* __restrict__ pvEdge,
                                   Lanes<T, W>* __restrict__ phiAdj, Lanes<T, W>* __restrict__ fluxAcc,
                                   Lanes<T, W>* __restrict__ pvAcc, int S2, int first, int last, int nlev)
{
    using namespace shallow_water_adjoint;
    __shared__ T fluxTile[kEdgeWindow], pvTile[kEdgeWindow], phiTile[kCellWindow];
    __shared__ meshops_offset cellBase;
    zero_tile(fluxTile, kEdgeWindow);
    zero_tile(pvTile, kEdgeWindow);
    zero_tile(phiTile, kCellWindow);
    SW_ADJ_BLOCK_CHUNKS(chunk, end, first, last, nlev) {
        if (threadIdx.x == 0) cellBase = window_base<kCellWindow, W>(cellsOnEdge, 2, chunk, end, nlev);
        __syncthreads();
        const meshops_offset own = (chunk + blockDim.x / 2) * W - kEdgeWindow / 2;
        const BlockWindow<T, kEdgeWindow> fluxW{fluxTile, reinterpret_cast<T*>(fluxAcc), own};
        const BlockWindow<T, kEdgeWindow> pvW{pvTile, reinterpret_cast<T*>(pvAcc), own};
        const BlockWindow<T, kCellWindow> phiW{phiTile, reinterpret_cast<T*>(phiAdj), cellBase};
        const meshops_offset i = chunk + threadIdx.x;
        if (i < end) {
            MESHOPS_ROW_LANE(e, k, i, nlev);
            const Lanes<T, W> g = load(uTendAdj, i), q = load(pvEdge, i);
            const Lanes<T, W> gHalf = (T)0.5 * g;
            const Lanes<T, W> gDc = invDcEdge[e] * g;
            const int c0 = cellsOnEdge[2 * e], c1 = cellsOnEdge[2 * e + 1];
            if (c1 >= 0) phiW.add((meshops_offset)c1 * nlev + k, (T)-1 * gDc);
            if (c0 >= 0) phiW.add((meshops_offset)c0 * nlev + k, gDc);
            Lanes<T, W> fluxSum = meshops::splat<T, W>(0);
            meshops::for_each_row_slot(edgesOnEdge, e, S2, [&](int p, int e2) {
                const meshops_offset e2k = (meshops_offset)e2 * nlev + k;
                const Lanes<T, W> F2 = load(flux, e2k);
                meshops::axpy(fluxSum, weightsOnEdge[p], F2);
                const Lanes<T, W> wg = weightsOnEdge[p] * gHalf;
                fluxW.add(e2k, wg * (q + load(pvEdge, e2k)));
                pvW.add(e2k, wg * F2);
            });
            pvW.add(i, gHalf * fluxSum);
        }
        __syncthreads();
        fluxW.flush();
        pvW.flush();
        phiW.flush();
    }
}
MESHOPS_INSTANTIATE(sw_adj_edge_atomic)

// Finishing edge pass: F_adj = fluxAcc - div_e2c_adj(hTendAdj); uAcc = h_edge F_adj +
// ke_e2c_adj(u; phiAdj) (stored: the vertex pass adds to it); hAcc[c] += u F_adj / 2 for the edge's cells; pvVertexAcc[v] += pvAcc / 2
// for its vertices (interp_v2e's adjoint).
template <typename T, int W>
__global__ void sw_adj_edge_finish_atomic(const int* __restrict__ cellsOnEdge, const int* __restrict__ verticesOnEdge,
                                          const T* __restrict__ divAdjCoef, const T* __restrict__ keAdjCoef,
                                          const Lanes<T, W>* __restrict__ hTendAdj,
                                          const Lanes<T, W>* __restrict__ phiAdj,
                                          const Lanes<T, W>* __restrict__ fluxAcc,
                                          const Lanes<T, W>* __restrict__ pvAcc, const Lanes<T, W>* __restrict__ h,
                                          const Lanes<T, W>* __restrict__ u, Lanes<T, W>* __restrict__ uAcc,
                                          Lanes<T, W>* __restrict__ hAcc, Lanes<T, W>* __restrict__ pvVertexAcc,
                                          int first, int last, int nlev)
{
    using namespace shallow_water_adjoint;
    __shared__ T hTile[kCellWindow], pvTile[kVertexWindow];
    __shared__ meshops_offset cellBase, vertexBase;
    zero_tile(hTile, kCellWindow);
    zero_tile(pvTile, kVertexWindow);
    SW_ADJ_BLOCK_CHUNKS(chunk, end, first, last, nlev) {
        if (threadIdx.x == 0) {
            cellBase = window_base<kCellWindow, W>(cellsOnEdge, 2, chunk, end, nlev);
            vertexBase = window_base<kVertexWindow, W>(verticesOnEdge, 2, chunk, end, nlev);
        }
        __syncthreads();
        const BlockWindow<T, kCellWindow> hW{hTile, reinterpret_cast<T*>(hAcc), cellBase};
        const BlockWindow<T, kVertexWindow> pvW{pvTile, reinterpret_cast<T*>(pvVertexAcc), vertexBase};
        const meshops_offset i = chunk + threadIdx.x;
        if (i < end) {
            MESHOPS_ROW_LANE(e, k, i, nlev);
            const auto ends = edge_cells(cellsOnEdge, divAdjCoef, keAdjCoef, hTendAdj, phiAdj, h, e, nlev, k);
            const Lanes<T, W> ue = load(u, i);
            const Lanes<T, W> fluxAdj = load(fluxAcc, i) - ends.divAdj;
            uAcc[i] = ends.hEdge * fluxAdj + ue * ends.keAdj;
            const Lanes<T, W> hHalf = (T)0.5 * (ue * fluxAdj);
#pragma unroll
            for (int s = 0; s < 2; ++s) {
                const int c = cellsOnEdge[2 * e + s];
                if (c >= 0) hW.add((meshops_offset)c * nlev + k, hHalf);
            }
            const Lanes<T, W> pvHalf = (T)0.5 * load(pvAcc, i);
#pragma unroll
            for (int s = 0; s < 2; ++s) {
                const int v = verticesOnEdge[2 * e + s];
                if (v >= 0) pvW.add((meshops_offset)v * nlev + k, pvHalf);
            }
        }
        __syncthreads();
        hW.flush();
        pvW.flush();
    }
}
MESHOPS_INSTANTIATE(sw_adj_edge_finish_atomic)

// Vertex pass (scatter): vortAdj = (pvVertexAcc + pvVertexExtra) / hVertex; uAcc[e_i] += curlCoef[v, i]
// vortAdj (curl_e2v's adjoint); hAcc[c_i] -= c2vCoef[v, i] vortAdj pvVertex (interp_c2v's). Row-major
// edgesOnVertex/curlCoef and cellsOnVertex/c2vCoef (S slots).
template <typename T, int W>
__global__ void sw_adj_vertex_atomic(const int* __restrict__ edgesOnVertex, const T* __restrict__ curlCoef,
                                     const int* __restrict__ cellsOnVertex, const T* __restrict__ c2vCoef,
                                     const Lanes<T, W>* __restrict__ pvVertexAcc,
                                     const Lanes<T, W>* __restrict__ pvVertexExtra,
                                     const Lanes<T, W>* __restrict__ pvVertex,
                                     const Lanes<T, W>* __restrict__ hVertex, Lanes<T, W>* __restrict__ uAcc,
                                     Lanes<T, W>* __restrict__ hAcc, int S, int extra, int first, int last,
                                     int nlev)
{
    using namespace shallow_water_adjoint;
    __shared__ T uTile[kEdgeWindow], hTile[kCellWindow];
    __shared__ meshops_offset edgeBase, cellBase;
    zero_tile(uTile, kEdgeWindow);
    zero_tile(hTile, kCellWindow);
    SW_ADJ_BLOCK_CHUNKS(chunk, end, first, last, nlev) {
        if (threadIdx.x == 0) {
            edgeBase = window_base<kEdgeWindow, W>(edgesOnVertex, S, chunk, end, nlev);
            cellBase = window_base<kCellWindow, W>(cellsOnVertex, S, chunk, end, nlev);
        }
        __syncthreads();
        const BlockWindow<T, kEdgeWindow> uW{uTile, reinterpret_cast<T*>(uAcc), edgeBase};
        const BlockWindow<T, kCellWindow> hW{hTile, reinterpret_cast<T*>(hAcc), cellBase};
        const meshops_offset i = chunk + threadIdx.x;
        if (i < end) {
            MESHOPS_ROW_LANE(v, k, i, nlev);
            Lanes<T, W> pvAdj = load(pvVertexAcc, i);
            if (extra) pvAdj += load(pvVertexExtra, i);
            const Lanes<T, W> hv = load(hVertex, i);
            Lanes<T, W> va;
#pragma unroll
            for (int w = 0; w < W; ++w) va.v[w] = pvAdj.v[w] / hv.v[w];
            const Lanes<T, W> hva = (T)-1 * (va * load(pvVertex, i));
            meshops::for_each_row_slot(edgesOnVertex, v, S, [&](int p, int t) {
                uW.add((meshops_offset)t * nlev + k, curlCoef[p] * va);
            });
            meshops::for_each_row_slot(cellsOnVertex, v, S, [&](int p, int t) {
                hW.add((meshops_offset)t * nlev + k, c2vCoef[p] * hva);
            });
        }
        __syncthreads();
        uW.flush();
        hW.flush();
    }
}
MESHOPS_INSTANTIATE(sw_adj_vertex_atomic)

// u's adjoint: uAcc (+ uExtra), stored or into the RK4 bookkeeping.
template <typename T, int W>
__global__ void sw_adj_u_sum(const Lanes<T, W>* __restrict__ uAcc,
                             const Lanes<T, W>* __restrict__ uExtra, Lanes<T, W>* __restrict__ uAdj,
                             Lanes<T, W>* __restrict__ yAdj, const Lanes<T, W>* __restrict__ newAdj,
                             Lanes<T, W>* __restrict__ kAdj, int extra, int rk, T bCoef, T aCoef, int next,
                             int first, int last, int nlev)
{
    MESHOPS_ROWS(i, first, last, nlev) {
        Lanes<T, W> acc = load(uAcc, i);
        if (extra) acc += load(uExtra, i);
        if (rk) {
            adjoint_rk4(acc, yAdj, newAdj, kAdj, bCoef, aCoef, next, rk, i);
        } else {
            uAdj[i] = acc;
        }
    }
}
MESHOPS_INSTANTIATE(sw_adj_u_sum)

// h's adjoint: gravity phiAdj + hAcc, stored or into the RK4 bookkeeping; bAdj as sw_adj_h.
template <typename T, int W>
__global__ void sw_adj_h_sum(const Lanes<T, W>* __restrict__ phiAdj, const Lanes<T, W>* __restrict__ hAcc,
                             Lanes<T, W>* __restrict__ hAdj, Lanes<T, W>* __restrict__ bAdj,
                             Lanes<T, W>* __restrict__ yAdj, const Lanes<T, W>* __restrict__ newAdj,
                             Lanes<T, W>* __restrict__ kAdj, T gravity, int accumulate, int rk, T bCoef,
                             T aCoef, int next, int first, int last, int nlev)
{
    MESHOPS_ROWS(i, first, last, nlev) {
        const Lanes<T, W> gPhi = gravity * load(phiAdj, i);
        const Lanes<T, W> p = gPhi + load(hAcc, i);
        if (rk) {
            adjoint_rk4(p, yAdj, newAdj, kAdj, bCoef, aCoef, next, rk, i);
        } else {
            hAdj[i] = p;
        }
        bAdj[i] = accumulate ? load<T, W>(bAdj, i) + gPhi : gPhi;
    }
}
MESHOPS_INSTANTIATE(sw_adj_h_sum)
