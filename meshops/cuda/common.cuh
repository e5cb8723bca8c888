// Shared helpers for meshops kernels.
//
// Fields are (n, nlev) row-major with the level index last. A kernel template<T, W> reads them as
// rows of nlev/W lanes, a lane being W consecutive levels loaded and stored as one aligned vector
// (`Lanes<T, W>`, 16 bytes at the widest). It runs one logical thread per (row, lane) of its output
// rows [first, last): i = row * nlev + lane with nlev counted in lanes, so consecutive threads touch
// consecutive lanes and accesses coalesce. Connectivity is int32 with -1 for a missing neighbour,
// which contributes nothing.
#pragma once

// Element offsets into fields and tables, and the logical thread index: 32-bit when the launcher
// finds that every array of the launch and the grid-stride loop stay below 2^31
// (MESHOPS_OFFSET32, meshops/device/kernels.py), 64-bit otherwise.
#ifdef MESHOPS_OFFSET32
typedef int meshops_offset;
#else
typedef long long meshops_offset;
#endif

namespace meshops {

template <typename T, int W>
struct alignas(sizeof(T) * W) Lanes {
    T v[W];
};

#define MESHOPS_LANES_OP(op)                                                                   \
    template <typename T, int W>                                                               \
    __device__ __forceinline__ Lanes<T, W> operator op(Lanes<T, W> a, const Lanes<T, W>& b)    \
    {                                                                                          \
        _Pragma("unroll") for (int w = 0; w < W; ++w) a.v[w] op## = b.v[w];                    \
        return a;                                                                              \
    }                                                                                          \
    template <typename T, int W>                                                               \
    __device__ __forceinline__ Lanes<T, W>& operator op##=(Lanes<T, W>& a, const Lanes<T, W>& b) \
    {                                                                                          \
        _Pragma("unroll") for (int w = 0; w < W; ++w) a.v[w] op## = b.v[w];                    \
        return a;                                                                              \
    }
MESHOPS_LANES_OP(+)
MESHOPS_LANES_OP(-)
MESHOPS_LANES_OP(*)
#undef MESHOPS_LANES_OP

// Scalar times lanes, in that order (s * a[w], as the scalar kernels wrote it).
template <typename T, int W>
__device__ __forceinline__ Lanes<T, W> operator*(T s, Lanes<T, W> a)
{
#pragma unroll
    for (int w = 0; w < W; ++w) a.v[w] = s * a.v[w];
    return a;
}

template <typename T, int W>
__device__ __forceinline__ Lanes<T, W> splat(T s)
{
    Lanes<T, W> a;
#pragma unroll
    for (int w = 0; w < W; ++w) a.v[w] = s;
    return a;
}

// a = a + s * b lane by lane (the accumulation step of every stencil).
template <typename T, int W>
__device__ __forceinline__ void axpy(Lanes<T, W>& a, T s, const Lanes<T, W>& b)
{
#pragma unroll
    for (int w = 0; w < W; ++w) a.v[w] += s * b.v[w];
}

// The vector type of a lane of W > 1 levels: a Lanes<T, W> is read through it as one aligned load.
template <typename T, int W>
struct VectorOf;
template <>
struct VectorOf<float, 2> { typedef float2 type; };
template <>
struct VectorOf<float, 4> { typedef float4 type; };
template <>
struct VectorOf<double, 2> { typedef double2 type; };

// Lane i of the read-only field x as one vector load (LDG.E.128 for float32 at W = 4), or as
// 16-byte loads for a wider lane (32 bytes: two). Kernels read fields through it because a Lanes
// read by reference, or under a condition, compiles to W scalar loads (slower: docs/decisions/
// 0002-kernel-tuning.md). At W = 1 it is the plain read (the same SASS).
template <typename T, int W>
__device__ __forceinline__ Lanes<T, W> load(const Lanes<T, W>* __restrict__ x, meshops_offset i)
{
    if constexpr (W == 1) {
        return x[i];
    } else if constexpr (sizeof(T) * W > 16) {
        constexpr int H = 16 / sizeof(T);
        const Lanes<T, H>* parts = reinterpret_cast<const Lanes<T, H>*>(x + i);
        Lanes<T, W> value;
#pragma unroll
        for (int h = 0; h < W / H; ++h) {
            const Lanes<T, H> part = load(parts, h);
#pragma unroll
            for (int w = 0; w < H; ++w) value.v[h * H + w] = part.v[w];
        }
        return value;
    } else {
        typedef typename VectorOf<T, W>::type Vector;
        union {
            Vector vector;
            Lanes<T, W> lanes;
        } value;
        value.vector = *reinterpret_cast<const Vector*>(x + i);
        return value.lanes;
    }
}

template <typename T, int W>
__device__ __forceinline__ void atomic_add(Lanes<T, W>* p, const Lanes<T, W>& a)
{
#pragma unroll
    for (int w = 0; w < W; ++w) atomicAdd(&p->v[w], a.v[w]);
}

}  // namespace meshops

// Threads per block of every launch and resident threads per multiprocessor of the device
// (meshops/device/kernels.py passes both; the defaults are those of sm_80 and sm_90).
#ifndef MESHOPS_BLOCK_SIZE
#define MESHOPS_BLOCK_SIZE 256
#endif
#ifndef MESHOPS_THREADS_PER_SM
#define MESHOPS_THREADS_PER_SM 2048
#endif

// Kernels marked MESHOPS_FULL_OCCUPANCY are compiled for the most resident threads per
// multiprocessor (on sm_80 and sm_90: 2048, i.e. at most 32 registers per thread): a gather waits
// on memory, and more threads in flight hide more of it. The mark sits on the gathers that took
// 34-40 registers without it and ran faster under the cap (docs/decisions/0002-kernel-tuning.md);
// the test of the CUDA sources checks that no kernel spills and that marked kernels stay within 32
// registers.
#define MESHOPS_FULL_OCCUPANCY \
    __launch_bounds__(MESHOPS_BLOCK_SIZE, MESHOPS_THREADS_PER_SM / MESHOPS_BLOCK_SIZE)

// The same cap for one-level rows only (nlev 1 compiled in, W == 1) with 32-bit offsets: for kernels
// whose values fit in 32 registers there (the shallow-water model's) and would spill otherwise. For
// kernels templated on <typename T, int W>.
#ifdef MESHOPS_OFFSET32
#define MESHOPS_FULL_OCCUPANCY_ONE_LANE                                                         \
    __launch_bounds__(MESHOPS_BLOCK_SIZE,                                                      \
                      W == 1 && MESHOPS_NLEV == 1 ? MESHOPS_THREADS_PER_SM / MESHOPS_BLOCK_SIZE : 1)
#else
#define MESHOPS_FULL_OCCUPANCY_ONE_LANE
#endif

// Lanes per row when fixed at compile time (meshops/device/kernels.py compiles a module per level count,
// so the row/lane split and the field offsets become constant arithmetic); 0: the kernel's nlev
// argument decides.
#ifndef MESHOPS_NLEV
#define MESHOPS_NLEV 0
#endif
#define MESHOPS_FIX_NLEV(nlev) \
    if (MESHOPS_NLEV > 0) nlev = MESHOPS_NLEV

#define MESHOPS_ROW_LOOP(i, first, last, nlev)                                                  \
    for (meshops_offset i = (meshops_offset)(first) * (nlev) +                                 \
                            (meshops_offset)blockIdx.x * blockDim.x + threadIdx.x;             \
         i < (meshops_offset)(last) * (nlev); i += (meshops_offset)blockDim.x * gridDim.x)

// Loop over the logical threads i of output rows [first, last), nlev lanes per row.
#define MESHOPS_ROWS(i, first, last, nlev) \
    MESHOPS_FIX_NLEV(nlev);                \
    MESHOPS_ROW_LOOP(i, first, last, nlev)

// The same loop, not unrolled: for a kernel whose unrolled loop would spill under
// MESHOPS_FULL_OCCUPANCY once nlev is a constant.
#define MESHOPS_ROWS_NOT_UNROLLED(i, first, last, nlev) \
    MESHOPS_FIX_NLEV(nlev);                             \
    _Pragma("unroll 1") MESHOPS_ROW_LOOP(i, first, last, nlev)

// The row of logical thread i = row * nlev + lane: unsigned 32-bit division whenever i fits (the
// 64-bit division is a long software sequence, paid by every thread; signed division is longer).
__device__ __forceinline__ int meshops_entity(meshops_offset i, int nlev)
{
    return (long long)i <= 0xffffffffLL ? (int)((unsigned)i / (unsigned)nlev) : (int)(i / nlev);
}

// Row r and lane k of logical thread i (declares both).
#define MESHOPS_ROW_LANE(r, k, i, nlev) \
    const int r = meshops_entity(i, nlev), k = (int)((i) - (meshops_offset)r * (nlev))

// Instantiate a kernel for every (T, W) the launcher uses when the file is compiled on its own with
// nvcc (CI's syntax and type check); NVRTC instantiates through CuPy's name expressions instead.
// MESHOPS_INSTANTIATE_WIDE: also the 32-byte lanes of the kernels that run with them (meshops/
// kernels.py, with 32-bit offsets only: with 64-bit ones the gather spills under its register cap).
#if defined(MESHOPS_NVCC_CHECK)
#define MESHOPS_INSTANTIATE(kernel)                                                            \
    void* meshops_instance_##kernel[] = {(void*)&kernel<float, 1>, (void*)&kernel<float, 2>,   \
                                         (void*)&kernel<float, 4>, (void*)&kernel<double, 1>,  \
                                         (void*)&kernel<double, 2>};
#if defined(MESHOPS_OFFSET32)
#define MESHOPS_INSTANTIATE_WIDE(kernel) \
    MESHOPS_INSTANTIATE(kernel)          \
    void* meshops_wide_instance_##kernel[] = {(void*)&kernel<float, 8>, (void*)&kernel<double, 4>};
#else
#define MESHOPS_INSTANTIATE_WIDE(kernel) MESHOPS_INSTANTIATE(kernel)
#endif
#else
#define MESHOPS_INSTANTIATE(kernel)
#define MESHOPS_INSTANTIATE_WIDE(kernel)
#endif
