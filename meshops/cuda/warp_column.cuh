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

}  // namespace meshops

// Loop over the columns c of [first, last), one warp each, a warp's lanes on the same column (the
// grid's threads are a multiple of the warp); declares the lane.
#define MESHOPS_WARP_COLUMNS(c, lane, first, last)                                                 \
    const int lane = (int)(threadIdx.x % meshops::kWarpLanes);                                     \
    for (int c = (first) + (int)(((meshops_offset)blockIdx.x * blockDim.x + threadIdx.x) /         \
                                 meshops::kWarpLanes);                                             \
         c < (last); c += (int)((meshops_offset)blockDim.x * gridDim.x / meshops::kWarpLanes))

// Levels in the chunk starting at `base` of a column of N levels (uniform across the warp).
#define MESHOPS_CHUNK_LEVELS(base, N) ((N) - (base) < meshops::kWarpLanes ? (N) - (base) : meshops::kWarpLanes)
