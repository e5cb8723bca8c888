// Device helpers for padded stencils with precomputed coefficients (meshops/connectivity.py).
//
// A stencil row `row` of width S lists inputs idx[row*S + m] (-1: missing, contributes nothing)
// with coefficients coef[row*S + m]; fields are rows of nlev lanes (common.cuh), lane k.
#pragma once
#include "common.cuh"

namespace meshops {

// sum_{m < S, idx >= 0} coef[row, m] * x[idx[row, m], k], in slot order (fixed summation order).
template <typename T, int W>
__device__ __forceinline__ Lanes<T, W> stencil_gather(const int* __restrict__ idx,
                                                      const T* __restrict__ coef,
                                                      const Lanes<T, W>* __restrict__ x, int row,
                                                      int S, int nlev, int k)
{
    Lanes<T, W> acc = splat<T, W>(0);
    for (int m = 0; m < S; ++m) {
        const int t = idx[row * S + m];
        if (t >= 0) axpy(acc, coef[row * S + m], x[(long long)t * nlev + k]);
    }
    return acc;
}

// out[idx[row, m], k] += coef[row, m] * y for every m < S with idx >= 0 (atomicAdd).
template <typename T, int W>
__device__ __forceinline__ void stencil_scatter(const int* __restrict__ idx, const T* __restrict__ coef,
                                                const Lanes<T, W>& y, Lanes<T, W>* __restrict__ out,
                                                int row, int S, int nlev, int k)
{
    for (int m = 0; m < S; ++m) {
        const int t = idx[row * S + m];
        if (t >= 0) atomic_add(&out[(long long)t * nlev + k], coef[row * S + m] * y);
    }
}

}  // namespace meshops
