// Column kernels with one warp per column (the fused stages' cell passes, hydrostatic/cuda): lane l
// of a column's warp holds level base + l of each chunk of kWarpLanes levels, so that the warp's
// loads of a column, whose levels are contiguous, coalesce. A vertical scan keeps the order of a
// one-thread scan: each lane puts its level's term in the warp's shared-memory scratch and every
// lane adds the terms up one after the other (the same sum, bitwise, in every lane), taking the
// partial sums at its own level. The host build of the tests (tests/meshops/host_harness.py) runs
// one lane per column (kWarpLanes 1): the same code, one level per chunk; its warp build
// (MESHOPS_HOST_WARP) runs a warp's 32 lanes as host threads, the warp syncs as their barrier.
#pragma once
#include "common.cuh"
#include "stencil.cuh"

namespace meshops {

#if defined(__CUDACC__) || defined(MESHOPS_HOST_WARP)
constexpr int kWarpLanes = 32;
#else
constexpr int kWarpLanes = 1;
#endif

// Scratch for the terms of S scans of one warp: each lane writes its level's term of each scan, the
// warp reads them all back in the scan's order (shared-memory loads, independent of the running
// sums, so that they pipeline, several scans' in one instruction stream).
#if defined(__CUDACC__) || defined(MESHOPS_HOST_WARP)
template <typename T, int S>
__device__ __forceinline__ T* warp_terms()
{
    __shared__ T terms[MESHOPS_BLOCK_SIZE / kWarpLanes][S][kWarpLanes];
    return &terms[threadIdx.x / kWarpLanes][0][0];
}
#define MESHOPS_SYNC_WARP() __syncwarp()
#else
template <typename T, int S>
inline T* warp_terms()
{
    static thread_local T terms[S][kWarpLanes];
    return &terms[0][0];
}
#define MESHOPS_SYNC_WARP()
#endif

// The lanes' terms of S sums in the warp's scratch, lane l's of sum s at terms[s * kWarpLanes +
// slot(l)] (lanes 0 .. levels-1), for every lane to read.
template <typename T, int S>
__device__ __forceinline__ const T* share_terms(const T (&term)[S], int levels, int lane, int slot)
{
    T* terms = warp_terms<T, S>();
    MESHOPS_SYNC_WARP();  // the warp's reads of the last terms done
    if (lane < levels)
        for (int s = 0; s < S; ++s) terms[s * kWarpLanes + slot] = term[s];
    MESHOPS_SYNC_WARP();
    return terms;
}

// S scans of a chunk's levels at once, from the surface up (Up: lanes 0 .. levels-1 in turn) or
// from the top down: sum[s] gains each lane's term[s], the same additions in every lane, in the
// one-thread scan's order; before[s] and after[s] get the running sums before and after the
// calling lane's own term (going up its lower and upper interface, going down its upper and lower).
// The terms sit in scratch in the order they are added, so that the unrolled loop's loads have
// constant offsets.
template <bool Up, typename T, int S>
__device__ __forceinline__ void scans(const T (&term)[S], int levels, int lane, T (&sum)[S],
                                      T (&before)[S], T (&after)[S])
{
    const int slot = Up ? lane : levels - 1 - lane;  // the lane's place in the order of addition
    const T* terms = share_terms(term, levels, lane, slot);
#pragma unroll
    for (int j = 0; j < kWarpLanes; ++j) {
        if (j < levels) {
            for (int s = 0; s < S; ++s) {
                const T next = sum[s] + terms[s * kWarpLanes + j];
                if (j == slot) {
                    before[s] = sum[s];
                    after[s] = next;
                }
                sum[s] = next;
            }
        }
    }
}

// The stencil row of a column (for_each_slot's) read once for the whole warp: lane m loads slot
// m's entry t = idx[p] and the K - 1 ints `load(p, t, more)` reads for it, and every lane reads
// them back from the warp's scratch, so that a visit's gathers wait on one load, not on the table
// loads before them. Rows wider than the warp (and the host build) read the tables in the visit.
template <int K, typename Load>
struct ColumnSlots {
    const int* entries;  // per slot m: t, then the ints of `load`, at m + j kWarpLanes; null: none
    const int* idx;
    Load load;
    int row, S, slotStride;
};

// Every lane of the warp calls it (the scratch is written between two warp syncs).
template <int K, typename Load>
__device__ __forceinline__ ColumnSlots<K, Load> column_slots(const int* __restrict__ idx, int row,
                                                             int S, int slotStride, int lane,
                                                             Load load)
{
    ColumnSlots<K, Load> slots{nullptr, idx, load, row, S, slotStride};
    if (kWarpLanes > 1 && S <= kWarpLanes) {
        int entry[K];
        entry[0] = -1;
        if (lane < S) {
            const meshops_offset p = slot_index(row, lane, S, slotStride);
            entry[0] = idx[p];
            int more[K - 1];
            if (entry[0] >= 0) load(p, entry[0], more);
            for (int j = 1; j < K; ++j) entry[j] = entry[0] >= 0 ? more[j - 1] : -1;
        }
        slots.entries = share_terms(entry, S, lane, lane);
    }
    return slots;
}

// visit(p, t, more) for each slot m < S in slot order whose entry t = idx[p] is present (t >= 0),
// `more` the K - 1 ints that `load` reads for it (for_each_slot's order and p).
template <int K, typename Load, typename Visit>
__device__ __forceinline__ void for_each_column_slot(const ColumnSlots<K, Load>& slots, Visit visit)
{
    for (int m = 0; m < slots.S; ++m) {
        const meshops_offset p = slot_index(slots.row, m, slots.S, slots.slotStride);
        const int t = slots.entries ? slots.entries[m] : slots.idx[p];
        if (t < 0) continue;
        int more[K - 1];
        if (slots.entries)
            for (int j = 1; j < K; ++j) more[j - 1] = slots.entries[j * kWarpLanes + m];
        else
            slots.load(p, t, more);
        visit(p, t, more);
    }
}

// A value of the sweep down kept for the sweep up, which starts with the chunk at base 0: that
// chunk's in the lane's register `kept`, the others' in memory at `i`.
template <typename T>
__device__ __forceinline__ void hold(int base, T value, T& kept, T* memory, meshops_offset i)
{
    if (base == 0) kept = value;
    else memory[i] = value;
}

// The value `hold` kept.
template <typename T>
__device__ __forceinline__ T held(int base, T kept, const T* memory, meshops_offset i)
{
    return base == 0 ? kept : memory[i];
}

}  // namespace meshops

// Column passes compiled for `threads` resident threads a multiprocessor (768: 3 blocks of 256, at
// most 80 registers; 1024: at most 64), not the fewer that their registers would allow: more warps
// in flight hide more of their scans' and loads' waits (decision 0032, measured on an H200).
// MESHOPS_COLUMN_OCCUPANCY: 768. With 32-bit offsets only (64-bit ones would spill under the cap).
#ifdef MESHOPS_OFFSET32
#define MESHOPS_COLUMN_RESIDENT(threads)   \
    __launch_bounds__(MESHOPS_BLOCK_SIZE, \
                      (threads) / MESHOPS_BLOCK_SIZE > 0 ? (threads) / MESHOPS_BLOCK_SIZE : 1)
#else
#define MESHOPS_COLUMN_RESIDENT(threads)
#endif
#define MESHOPS_COLUMN_OCCUPANCY MESHOPS_COLUMN_RESIDENT(768)

// Loop over the columns c of [first, last), one warp each, a warp's lanes on the same column (the
// grid's threads are a multiple of the warp); declares the lane.
#define MESHOPS_WARP_COLUMNS(c, lane, first, last)                                                 \
    const int lane = (int)(threadIdx.x % meshops::kWarpLanes);                                     \
    for (int c = (first) + (int)(((meshops_offset)blockIdx.x * blockDim.x + threadIdx.x) /         \
                                 meshops::kWarpLanes);                                             \
         c < (last); c += (int)((meshops_offset)blockDim.x * gridDim.x / meshops::kWarpLanes))

// Levels in the chunk starting at `base` of a column of N levels (uniform across the warp).
#define MESHOPS_CHUNK_LEVELS(base, N) ((N) - (base) < meshops::kWarpLanes ? (N) - (base) : meshops::kWarpLanes)
