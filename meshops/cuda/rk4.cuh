// The RK4 bookkeeping of the fused stage kernels (swm/cuda, hydrostatic/cuda; the scheme is
// framework/timestepping.py's), on lanes of W levels (`Lanes<T, W>`, common.cuh) or on single
// entries (T):
//
//   rk4_update   forward stages and the hydrostatic tangent-linear ones: yNew = (accumulate ? yNew :
//                yOld) + newCoef * k, and with `provisional` yNext = yOld + nextCoef * k (newCoef =
//                b_j dt, nextCoef = a_j dt), each product rounded on its own (mul_rn); the shallow-
//                water tangent-linear stage keeps its own, contracted (swm/cuda/shallow_water_tl.cu)
//   adjoint_rk4  adjoint stages: yAdj = (rk == 2 ? newAdj : yAdj) + p (rk == 2: the step's last
//                stage), and with `next` kAdj = bCoef * newAdj + aCoef * p (b_{j-1} dt, a_{j-1} dt)
#pragma once
#include "common.cuh"

namespace meshops {

// a * b rounded on its own (never contracted into a multiply-add).
template <typename T>
__device__ __forceinline__ T mul_rn(T a, T b)
{
#if defined(__CUDA_ARCH__)
    if constexpr (sizeof(T) == 8) {
        return __dmul_rn(a, b);
    } else {
        return __fmul_rn(a, b);
    }
#else
    return a * b;
#endif
}

template <typename T, int W>
__device__ __forceinline__ Lanes<T, W> mul_rn(T s, Lanes<T, W> a)
{
#pragma unroll
    for (int w = 0; w < W; ++w) a.v[w] = mul_rn(s, a.v[w]);
    return a;
}

// Entry i of x: a lane through `load`, a single value as the plain read.
template <typename T, int W>
__device__ __forceinline__ Lanes<T, W> read_entry(const Lanes<T, W>* __restrict__ x, meshops_offset i)
{
    return load(x, i);
}

template <typename T>
__device__ __forceinline__ T read_entry(const T* __restrict__ x, meshops_offset i)
{
    return x[i];
}

// The RK4 update of entry i from its tendency k (file comment).
template <typename V, typename T>
__device__ __forceinline__ void rk4_update(const V& k, const V* __restrict__ yOld, V* __restrict__ yNew,
                                           V* __restrict__ yNext, T newCoef, T nextCoef, int accumulate,
                                           int provisional, meshops_offset i)
{
    const V old = read_entry(yOld, i);
    yNew[i] = (accumulate ? read_entry(static_cast<const V*>(yNew), i) : old) + mul_rn(newCoef, k);
    if (provisional) yNext[i] = old + mul_rn(nextCoef, k);
}

// The stage's adjoint p at entry i into the adjoint step's RK4 bookkeeping (file comment), instead
// of storing it.
template <typename V, typename T>
__device__ __forceinline__ void adjoint_rk4(const V& p, V* __restrict__ yAdj, const V* __restrict__ newAdj,
                                            V* __restrict__ kAdj, T bCoef, T aCoef, int next, int rk,
                                            meshops_offset i)
{
    yAdj[i] = (rk == 2 ? read_entry(newAdj, i) : read_entry(static_cast<const V*>(yAdj), i)) + p;
    if (next) kAdj[i] = bCoef * read_entry(newAdj, i) + aCoef * p;
}

}  // namespace meshops
