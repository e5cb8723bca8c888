// Shared helpers for meshops kernels.
//
// Fields are (n, nlev) row-major with the level index last; a kernel runs one logical thread per
// (entity, level) pair, i = entity * nlev + level, so consecutive threads touch consecutive levels
// and loads coalesce. Connectivity is int32 with -1 for a missing neighbour, which contributes
// nothing.
#pragma once

#if defined(MESHOPS_INTERLEAVED)
#define MESHOPS_GRID_STRIDE(i, n)                                                        \
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < (n);        \
         i += (long long)blockDim.x * gridDim.x)
#else
// Each block walks its own contiguous range of logical threads, blockDim at a time: entities
// close in mesh order (cells on a space-filling curve, edges and vertices following them) run on
// the same multiprocessor, so the neighbours their stencils share are read from its L1 cache.
#define MESHOPS_GRID_STRIDE(i, n)                                                                \
    for (long long i##_n = (n),                                                                  \
                   i##_chunk = (i##_n + (long long)gridDim.x * blockDim.x - 1) /                 \
                               ((long long)gridDim.x * blockDim.x) * blockDim.x,                 \
                   i##_end = ((long long)blockIdx.x + 1) * i##_chunk < i##_n                     \
                                 ? ((long long)blockIdx.x + 1) * i##_chunk : i##_n,              \
                   i = (long long)blockIdx.x * i##_chunk + threadIdx.x;                          \
         i < i##_end; i += blockDim.x)
#endif

// The entity of logical thread i = entity * nlev + level: 32-bit division whenever i fits (the
// 64-bit division is a long software sequence, paid by every thread).
__device__ __forceinline__ int meshops_entity(long long i, int nlev)
{
    return i <= 0xffffffffLL ? (int)((unsigned)i / (unsigned)nlev) : (int)(i / nlev);
}

// Instantiate kernels for both float types when the file is compiled on its own with nvcc
// (CI's syntax and type check); NVRTC instantiates through CuPy's name expressions instead.
#if defined(MESHOPS_NVCC_CHECK)
#define MESHOPS_INSTANTIATE(kernel) \
    void* meshops_instance_##kernel[] = {(void*)&kernel<float>, (void*)&kernel<double>};
#else
#define MESHOPS_INSTANTIATE(kernel)
#endif
