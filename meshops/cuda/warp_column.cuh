// Column kernels with one warp per column (the fused stages' cell passes, hydrostatic/cuda): lane l
// of a column's warp holds level base + l of each chunk of kWarpLanes levels, so that the warp's
// loads of a column, whose levels are contiguous, coalesce. A vertical scan keeps the order of a
// one-thread scan: each lane broadcasts its level's term and every lane adds the terms up one after
// the other (the same sum, bitwise, in every lane), taking the partial sums at its own level. The
// host build of the tests (tests/meshops/host_harness.py) runs one lane per column (kWarpLanes 1):
// the same code, one level per chunk.
#pragma once
#include "common.cuh"

namespace meshops {

#ifdef __CUDACC__
constexpr int kWarpLanes = 32;

// Lane `source`'s v, in every lane of the warp (all of whose lanes take part).
template <typename T>
__device__ __forceinline__ T broadcast(T v, int source)
{
    return __shfl_sync(0xffffffffu, v, source);
}
#else
constexpr int kWarpLanes = 1;

template <typename T>
inline T broadcast(T v, int)
{
    return v;
}
#endif

// The scan of a chunk's levels from the surface up (lanes 0 .. levels-1 in turn): `sum` gains
// each lane's `term`, the same additions in every lane; `below` and `above` get the running sums
// before and after the calling lane's own term (its lower and upper interface).
template <typename T>
__device__ __forceinline__ void scan_up(T term, int levels, int lane, T& sum, T& below, T& above)
{
    for (int j = 0; j < levels; ++j) {
        const T next = sum + broadcast(term, j);
        if (j == lane) {
            below = sum;
            above = next;
        }
        sum = next;
    }
}

// The same from the top down (lanes levels-1 .. 0): `above` and `below` get the running sums before
// and after the calling lane's term (its upper and lower interface).
template <typename T>
__device__ __forceinline__ void scan_down(T term, int levels, int lane, T& sum, T& above, T& below)
{
    for (int j = levels - 1; j >= 0; --j) {
        const T next = sum + broadcast(term, j);
        if (j == lane) {
            above = sum;
            below = next;
        }
        sum = next;
    }
}

// The sum alone of a chunk's terms, added from the top down as scan_down adds them.
template <typename T>
__device__ __forceinline__ void add_down(T term, int levels, T& sum)
{
    for (int j = levels - 1; j >= 0; --j) sum = sum + broadcast(term, j);
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

// Column passes compiled for 3 resident blocks of 256 threads a multiprocessor (768 threads: at
// most 80 registers), not the 2 that their registers would allow: their scans wait on shuffles,
// and more warps in flight hide more of it (decision 0032, measured on an H200). With 32-bit
// offsets only (64-bit ones would spill under the cap).
#ifdef MESHOPS_OFFSET32
#define MESHOPS_COLUMN_OCCUPANCY \
    __launch_bounds__(MESHOPS_BLOCK_SIZE, 768 / MESHOPS_BLOCK_SIZE > 0 ? 768 / MESHOPS_BLOCK_SIZE : 1)
#else
#define MESHOPS_COLUMN_OCCUPANCY
#endif

// Loop over the columns c of [first, last), one warp each, a warp's lanes on the same column (the
// grid's threads are a multiple of the warp); declares the lane.
#define MESHOPS_WARP_COLUMNS(c, lane, first, last)                                                 \
    const int lane = (int)(threadIdx.x % meshops::kWarpLanes);                                     \
    for (int c = (first) + (int)(((meshops_offset)blockIdx.x * blockDim.x + threadIdx.x) /         \
                                 meshops::kWarpLanes);                                             \
         c < (last); c += (int)((meshops_offset)blockDim.x * gridDim.x / meshops::kWarpLanes))

// Levels in the chunk starting at `base` of a column of N levels (uniform across the warp).
#define MESHOPS_CHUNK_LEVELS(base, N) ((N) - (base) < meshops::kWarpLanes ? (N) - (base) : meshops::kWarpLanes)
