// Shared helpers for meshops kernels.
//
// Fields are (n, nlev) row-major with the level index last; a kernel runs one logical thread per
// (entity, level) pair, i = entity * nlev + level, so consecutive threads touch consecutive levels
// and loads coalesce. Connectivity is int32 with -1 for a missing neighbour, which contributes
// nothing.
#pragma once

#define MESHOPS_GRID_STRIDE(i, n)                                                        \
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < (n);        \
         i += (long long)blockDim.x * gridDim.x)

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
