// Device helpers for padded stencils with precomputed coefficients (meshops/connectivity.py).
//
// A stencil row `row` of width W lists inputs idx[row*W + m] (-1: missing, contributes nothing)
// with coefficients coef[row*W + m]; fields are (n, nlev) with the level index k fastest.
#pragma once
#include "common.cuh"

// sum_{m < W, idx >= 0} coef[row, m] * x[idx[row, m], k], in slot order (fixed summation order).
template <typename T>
__device__ __forceinline__ T stencil_gather(const int* __restrict__ idx, const T* __restrict__ coef,
                                            const T* __restrict__ x, int row, int W, int nlev, int k)
{
    T acc = 0;
    for (int m = 0; m < W; ++m) {
        const int t = idx[row * W + m];
        if (t >= 0) acc += coef[row * W + m] * x[(long long)t * nlev + k];
    }
    return acc;
}

// out[idx[row, m], k] += coef[row, m] * y for every m < W with idx >= 0 (atomicAdd).
template <typename T>
__device__ __forceinline__ void stencil_scatter(const int* __restrict__ idx, const T* __restrict__ coef,
                                                T y, T* __restrict__ out, int row, int W, int nlev, int k)
{
    for (int m = 0; m < W; ++m) {
        const int t = idx[row * W + m];
        if (t >= 0) atomicAdd(&out[(long long)t * nlev + k], coef[row * W + m] * y);
    }
}
