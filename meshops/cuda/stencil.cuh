// Device helpers for padded stencils with precomputed coefficients (meshops/device/connectivity.py).
//
// A stencil row `row` of width S lists inputs idx[p] (-1: missing, contributes nothing) with
// coefficients coef[p], p = slot_index(row, m, S, slotStride): tables are row-major (slotStride 1)
// or slot-major (slotStride = the table's row count; coalesced when each thread owns a whole row).
// Fields are rows of nlev lanes (common.cuh), lane k.
#pragma once
#include "common.cuh"

namespace meshops {

__device__ __forceinline__ meshops_offset slot_index(int row, int m, int S, int slotStride)
{
    return slotStride == 1 ? (meshops_offset)row * S + m : (meshops_offset)m * slotStride + row;
}

// The stencil loop of every kernel: visit(p, t) for each slot m < S of `row` in slot order whose
// input t = idx[p] is present (t >= 0; -1 contributes nothing), p = slot_index(row, m, S,
// slotStride). The per-operator arithmetic is `visit` (a lambda, inlined: the same SASS as the loop
// written out).
template <typename Visit>
__device__ __forceinline__ void for_each_slot(const int* __restrict__ idx, int row, int S,
                                              int slotStride, Visit visit)
{
    for (int m = 0; m < S; ++m) {
        const meshops_offset p = slot_index(row, m, S, slotStride);
        const int t = idx[p];
        if (t >= 0) visit(p, t);
    }
}

// The same over a row-major table with 32-bit slot offsets p = row * S + m (tables hold far fewer
// than 2^31 slots): visit(p, t).
template <typename Visit>
__device__ __forceinline__ void for_each_row_slot(const int* __restrict__ idx, int row, int S,
                                                  Visit visit)
{
    for (int m = 0; m < S; ++m) {
        const int p = row * S + m;
        const int t = idx[p];
        if (t >= 0) visit(p, t);
    }
}

// sum_{m < S, idx >= 0} coef[row, m] * x[idx[row, m], k], in slot order (fixed summation order).
// x is read with one vector load per lane (`load`), or by reference (W scalar loads, fewer live
// registers) when VectorLoads is false. The loop is written out: through for_each_slot the same
// instructions compile in another order where pv_flux_e2e_adj_gather inlines it.
template <typename T, int W, bool VectorLoads = true>
__device__ __forceinline__ Lanes<T, W> stencil_gather(const int* __restrict__ idx,
                                                      const T* __restrict__ coef,
                                                      const Lanes<T, W>* __restrict__ x, int row,
                                                      int S, int nlev, int k, int slotStride = 1)
{
    Lanes<T, W> acc = splat<T, W>(0);
    for (int m = 0; m < S; ++m) {
        const meshops_offset p = slot_index(row, m, S, slotStride);
        const int t = idx[p];
        if constexpr (VectorLoads) {
            if (t >= 0) axpy(acc, coef[p], load(x, (meshops_offset)t * nlev + k));
        } else {
            if (t >= 0) axpy(acc, coef[p], x[(meshops_offset)t * nlev + k]);
        }
    }
    return acc;
}

// out[idx[row, m], k] += coef[row, m] * y for every m < S with idx >= 0 (atomicAdd).
template <typename T, int W>
__device__ __forceinline__ void stencil_scatter(const int* __restrict__ idx, const T* __restrict__ coef,
                                                const Lanes<T, W>& y, Lanes<T, W>* __restrict__ out,
                                                int row, int S, int nlev, int k)
{
    for_each_row_slot(idx, row, S, [&](int p, int t) {
        atomic_add(&out[(meshops_offset)t * nlev + k], coef[p] * y);
    });
}

}  // namespace meshops

// out[r,k] = sum_{m<S} coef[r,m] * x[idx[r,m],k] for output rows r in [first, last): the kernel of
// every linear one-table stencil (div_e2c, curl_e2v, the kite interpolations, tangential_e2e, the
// cell and vertex passes of vector_laplacian_e2e) and of their gather adjoints (transposed tables).
template <typename T, int W>
MESHOPS_FULL_OCCUPANCY
__global__ void stencil_gather_rows(const int* __restrict__ idx, const T* __restrict__ coef,
                                    const meshops::Lanes<T, W>* __restrict__ x,
                                    meshops::Lanes<T, W>* __restrict__ out, int S, int slotStride,
                                    int first, int last, int nlev)
{
    MESHOPS_ROWS(i, first, last, nlev) {
        MESHOPS_ROW_LANE(r, k, i, nlev);
        out[i] = meshops::stencil_gather(idx, coef, x, r, S, nlev, k, slotStride);
    }
}
MESHOPS_INSTANTIATE_WIDE(stencil_gather_rows)

// out[idx[r,m],k] += coef[r,m] * g[r,k] for rows r in [first, last) (atomicAdd; out zeroed by the
// caller): the scatter form of the adjoint of every linear one-table stencil (div_e2c, curl_e2v,
// the kite interpolations, tangential_e2e), one thread per (forward output row, level).
template <typename T, int W>
__global__ void stencil_scatter_atomic(const int* __restrict__ idx, const T* __restrict__ coef,
                                       const meshops::Lanes<T, W>* __restrict__ g,
                                       meshops::Lanes<T, W>* __restrict__ out, int S, int first,
                                       int last, int nlev)
{
    MESHOPS_ROWS(i, first, last, nlev) {
        MESHOPS_ROW_LANE(r, k, i, nlev);
        meshops::stencil_scatter(idx, coef, g[i], out, r, S, nlev, k);
    }
}
MESHOPS_INSTANTIATE(stencil_scatter_atomic)

// out[t,k] = sum_{m<ST, p>=0} coef[p] * x[p / S, k], p = pos[t, m]: the gather adjoint of a one-table
// stencil read through int32 positions p = row * S + slot into its row-major forward coefficient
// table (S slots per row), in place of a transposed copy of the coefficients (the "lean" tables of
// meshops.device.mesh.DeviceMesh); pos lists each input's (row, slot) pairs in increasing order,
// so the sums are bitwise those of stencil_gather_rows over the transposed table.
template <typename T, int W>
__global__ void stencil_gather_positions(const int* __restrict__ pos, const T* __restrict__ coef,
                                         const meshops::Lanes<T, W>* __restrict__ x,
                                         meshops::Lanes<T, W>* __restrict__ out, int S, int ST,
                                         int slotStride, int first, int last, int nlev)
{
    MESHOPS_ROWS(i, first, last, nlev) {
        MESHOPS_ROW_LANE(t, k, i, nlev);
        meshops::Lanes<T, W> acc = meshops::splat<T, W>(0);
        for (int m = 0; m < ST; ++m) {
            const int p = pos[meshops::slot_index(t, m, ST, slotStride)];
            if (p >= 0) {
                const int row = (int)((unsigned)p / (unsigned)S);
                meshops::axpy(acc, coef[p], meshops::load(x, (meshops_offset)row * nlev + k));
            }
        }
        out[i] = acc;
    }
}
MESHOPS_INSTANTIATE(stencil_gather_positions)
