// Vertical operators and their tangents and adjoints. Formulas: meshops/operators/vertical.py.
// Columns of N = nVertLevels layers and N + 1 interfaces, levels contiguous, counted from the
// surface up (interface k below layer k). Fields of one kernel hold different level counts, so
// these kernels run one level per thread (the launcher picks W = 1; the W template parameter only
// keeps the common signature): the scans (staged in shared memory) and the interpolation one thread
// per column (nlev = 1 lane per row), the two-level stencils one thread per (column, output
// level). The pointwise thermodynamics are ordinary kernels on fields of one shape, one thread per (row, lane).
#include "common.cuh"

#ifndef __CUDACC__
#include <cmath>  // the host build of the tests (tests/meshops/host_harness.py)
using std::log;
using std::pow;
#endif

using meshops::Lanes;
using meshops::load;

// -- scans: one thread per column, the columns staged in shared memory ---------------------------
// A thread reading its own column straight from global memory makes a warp touch 32 columns 26
// levels apart at each step (about a tenth of the copy bandwidth at 26 levels); a block instead
// loads its columns' contiguous chunk into shared memory with coalesced loads, each thread scans
// its column there, and the block stores the result chunk coalesced (most of the copy bandwidth:
// benchmarks/bench_vertical_layout.py). Sums run in the same order as the NumPy path.

namespace {

constexpr int kColumnTileBytes = 32768;

// y[k] = sum_{j >= k} x[j] (y[N] = 0): x N values, y N + 1.
struct FromTop {
    template <typename T>
    __device__ __forceinline__ static void scan(const T* x, T* y, int N)
    {
        T sum = 0;
        y[N] = sum;
        for (int k = N - 1; k >= 0; --k) {
            sum += x[k];
            y[k] = sum;
        }
    }
};

// x_adj[j] = sum_{k <= j} g[k]: g N + 1 values, x_adj N.
struct FromTopAdj {
    template <typename T>
    __device__ __forceinline__ static void scan(const T* g, T* x_adj, int N)
    {
        T sum = 0;
        for (int k = 0; k < N; ++k) {
            sum += g[k];
            x_adj[k] = sum;
        }
    }
};

// y[k] = sum_{j < k} x[j] (y[0] = 0): x N values, y N + 1.
struct FromBottom {
    template <typename T>
    __device__ __forceinline__ static void scan(const T* x, T* y, int N)
    {
        T sum = 0;
        y[0] = sum;
        for (int k = 0; k < N; ++k) {
            sum += x[k];
            y[k + 1] = sum;
        }
    }
};

// x_adj[j] = sum_{k > j} g[k]: g N + 1 values, x_adj N.
struct FromBottomAdj {
    template <typename T>
    __device__ __forceinline__ static void scan(const T* g, T* x_adj, int N)
    {
        T sum = 0;
        for (int k = N - 1; k >= 0; --k) {
            sum += g[k + 1];
            x_adj[k] = sum;
        }
    }
};

// Scan::scan of the columns [first, last) of x (nx values a column) into y (ny a column). A block
// takes `cols` columns at a time (as many as the tile holds, at most its threads); columns too
// tall for the tile are scanned in global memory, one thread each.
template <typename Scan, typename T>
__device__ __forceinline__ void scan_columns(const T* __restrict__ x, int nx, T* __restrict__ y,
                                             int ny, int N, int first, int last)
{
    alignas(16) __shared__ unsigned char raw[kColumnTileBytes];
    T* tile = reinterpret_cast<T*>(raw);
    const int stride = nx + ny, threads = (int)blockDim.x, t = (int)threadIdx.x;
    const int fit = kColumnTileBytes / ((int)sizeof(T) * stride);
    const int cols = fit < threads ? fit : threads;
    if (cols == 0) {
        for (meshops_offset c = (meshops_offset)first + (meshops_offset)blockIdx.x * threads + t;
             c < last; c += (meshops_offset)gridDim.x * threads)
            Scan::scan(x + c * nx, y + c * ny, N);
        return;
    }
    for (meshops_offset base = (meshops_offset)first + (meshops_offset)blockIdx.x * cols; base < last;
         base += (meshops_offset)gridDim.x * cols) {
        const int n = last - base < cols ? (int)(last - base) : cols;
        const T* xb = x + base * nx;
        for (int i = t; i < n * nx; i += threads) {
            const int c = i / nx;
            tile[c * stride + (i - c * nx)] = xb[i];
        }
        __syncthreads();
        if (t < n) Scan::scan(tile + t * stride, tile + t * stride + nx, N);
        __syncthreads();
        T* yb = y + base * ny;
        for (int i = t; i < n * ny; i += threads) {
            const int c = i / ny;
            yb[i] = tile[c * stride + nx + (i - c * ny)];
        }
        __syncthreads();
    }
}

}  // namespace

template <typename T, int W>
__global__ void sum_layers_from_top_l2i(const T* __restrict__ x, T* __restrict__ y, int nVertLevels,
                                        int first, int last, int nlev)
{
    scan_columns<FromTop>(x, nVertLevels, y, nVertLevels + 1, nVertLevels, first, last);
}
MESHOPS_INSTANTIATE(sum_layers_from_top_l2i)

template <typename T, int W>
__global__ void sum_layers_from_top_l2i_adj(const T* __restrict__ g, T* __restrict__ x_adj,
                                            int nVertLevels, int first, int last, int nlev)
{
    scan_columns<FromTopAdj>(g, nVertLevels + 1, x_adj, nVertLevels, nVertLevels, first, last);
}
MESHOPS_INSTANTIATE(sum_layers_from_top_l2i_adj)

template <typename T, int W>
__global__ void sum_layers_from_bottom_l2i(const T* __restrict__ x, T* __restrict__ y,
                                           int nVertLevels, int first, int last, int nlev)
{
    scan_columns<FromBottom>(x, nVertLevels, y, nVertLevels + 1, nVertLevels, first, last);
}
MESHOPS_INSTANTIATE(sum_layers_from_bottom_l2i)

template <typename T, int W>
__global__ void sum_layers_from_bottom_l2i_adj(const T* __restrict__ g, T* __restrict__ x_adj,
                                               int nVertLevels, int first, int last, int nlev)
{
    scan_columns<FromBottomAdj>(g, nVertLevels + 1, x_adj, nVertLevels, nVertLevels, first, last);
}
MESHOPS_INSTANTIATE(sum_layers_from_bottom_l2i_adj)

// -- two-level stencils: one thread per (column, output level) ------------------------------------
// coef[k] = (lower, upper) per output level k, the same in every column (the operator's table or
// its transpose: avg_l2i, diff_l2i, avg_i2l, diff_i2l, div_vflux_i2l and their adjoints).

// Layer -> interface: y[c,k] = coef[k,0] * x[c,k-1] + coef[k,1] * x[c,k], k = 0..N (a term whose
// layer is off the column is absent). nlev = N + 1 interfaces.
template <typename T, int W>
__global__ void pair_l2i(const T* __restrict__ coef, const T* __restrict__ x, T* __restrict__ y,
                         int nVertLevels, int first, int last, int nlev)
{
    MESHOPS_ROWS(i, first, last, nlev) {
        MESHOPS_ROW_LANE(c, k, i, nlev);
        const T* xc = x + (meshops_offset)c * nVertLevels;
        T acc = 0;
        if (k > 0) acc += coef[2 * k] * xc[k - 1];
        if (k < nVertLevels) acc += coef[2 * k + 1] * xc[k];
        y[i] = acc;
    }
}
MESHOPS_INSTANTIATE(pair_l2i)

// Interface -> layer: y[c,k] = coef[k,0] * x[c,k] + coef[k,1] * x[c,k+1], k = 0..N-1.
// nlev = N layers.
template <typename T, int W>
__global__ void pair_i2l(const T* __restrict__ coef, const T* __restrict__ x, T* __restrict__ y,
                         int nVertLevels, int first, int last, int nlev)
{
    MESHOPS_ROWS(i, first, last, nlev) {
        MESHOPS_ROW_LANE(c, k, i, nlev);
        const T* xc = x + (meshops_offset)c * (nVertLevels + 1);
        y[i] = coef[2 * k] * xc[k] + coef[2 * k + 1] * xc[k + 1];
    }
}
MESHOPS_INSTANTIATE(pair_i2l)

// -- interpolation to a pressure level: one thread per column ------------------------------------

namespace {

// The bracket of pLevel in column p (N layers, decreasing upward): k0, k1, the weight w of k1 in
// log p, and whether pLevel lies between layers; beyond the ends k0 = k1 - 1 (k1 = k0 for one
// layer) with w = 0 (below the lowest layer) or 1 (above the top), as _bracket in vertical.py.
template <typename T>
struct Bracket {
    int k0, k1;
    T w, D;
    bool inside;
};

template <typename T>
__device__ __forceinline__ Bracket<T> bracket(const T* __restrict__ p, int N, T pLevel)
{
    int below = 0;
    for (int k = 0; k < N; ++k) below += p[k] >= pLevel;
    Bracket<T> b;
    b.inside = below > 0 && below < N;
    b.k0 = below - 1 < 0 ? 0 : (below - 1 > N - 2 ? (N - 2 > 0 ? N - 2 : 0) : below - 1);
    b.k1 = b.k0 + 1 < N - 1 ? b.k0 + 1 : N - 1;
    const T L0 = log(p[b.k0]), L1 = log(p[b.k1]);
    b.D = b.inside ? L0 - L1 : T(1);
    b.w = b.inside ? (L0 - log(pLevel)) / b.D : (below == 0 ? T(0) : T(1));
    return b;
}

}  // namespace

// y[c] = x[k0] + w * (x[k1] - x[k0])
template <typename T, int W>
__global__ void interp_level_l2p(const T* __restrict__ p, const T* __restrict__ x, T* __restrict__ y,
                                 int nVertLevels, T pLevel, int first, int last, int nlev)
{
    MESHOPS_ROWS(i, first, last, nlev) {
        const int c = meshops_entity(i, nlev);
        const meshops_offset col = (meshops_offset)c * nVertLevels;
        const Bracket<T> b = bracket(p + col, nVertLevels, pLevel);
        const T x0 = x[col + b.k0], x1 = x[col + b.k1];
        y[c] = x0 + b.w * (x1 - x0);
    }
}
MESHOPS_INSTANTIATE(interp_level_l2p)

// dy = (1 - w) dx[k0] + w dx[k1] + s * ((1 - w) dp[k0] / p[k0] + w dp[k1] / p[k1]),
// s = (x[k1] - x[k0]) / D between layers, 0 beyond the ends.
template <typename T, int W>
__global__ void interp_level_l2p_tl(const T* __restrict__ p, const T* __restrict__ x,
                                    const T* __restrict__ dp, const T* __restrict__ dx,
                                    T* __restrict__ dy, int nVertLevels, T pLevel, int first, int last,
                                    int nlev)
{
    MESHOPS_ROWS(i, first, last, nlev) {
        const int c = meshops_entity(i, nlev);
        const meshops_offset col = (meshops_offset)c * nVertLevels;
        const Bracket<T> b = bracket(p + col, nVertLevels, pLevel);
        const meshops_offset i0 = col + b.k0, i1 = col + b.k1;
        const T s = b.inside ? (x[i1] - x[i0]) / b.D : T(0);
        dy[c] = (1 - b.w) * dx[i0] + b.w * dx[i1] + s * ((1 - b.w) * dp[i0] / p[i0] + b.w * dp[i1] / p[i1]);
    }
}
MESHOPS_INSTANTIATE(interp_level_l2p_tl)

// Adjoint: the thread of column c writes all of it: zeros, then x_adj[k0] += (1 - w) g,
// x_adj[k1] += w g, p_adj[k0] += s (1 - w) g / p[k0], p_adj[k1] += s w g / p[k1].
template <typename T, int W>
__global__ void interp_level_l2p_adj(const T* __restrict__ p, const T* __restrict__ x,
                                     const T* __restrict__ g, T* __restrict__ p_adj,
                                     T* __restrict__ x_adj, int nVertLevels, T pLevel, int first,
                                     int last, int nlev)
{
    MESHOPS_ROWS(i, first, last, nlev) {
        const int c = meshops_entity(i, nlev);
        const meshops_offset col = (meshops_offset)c * nVertLevels;
        for (int k = 0; k < nVertLevels; ++k) p_adj[col + k] = x_adj[col + k] = 0;
        const Bracket<T> b = bracket(p + col, nVertLevels, pLevel);
        const meshops_offset i0 = col + b.k0, i1 = col + b.k1;
        const T gc = g[c];
        const T s = (b.inside ? (x[i1] - x[i0]) / b.D : T(0)) * gc;
        x_adj[i0] += (1 - b.w) * gc;
        x_adj[i1] += b.w * gc;
        p_adj[i0] += s * (1 - b.w) / p[i0];
        p_adj[i1] += s * b.w / p[i1];
    }
}
MESHOPS_INSTANTIATE(interp_level_l2p_adj)

// -- pointwise thermodynamics: one thread per (row, lane) -----------------------------------------

// pi = (p / p0)^kappa
template <typename T, int W>
__global__ void exner(const Lanes<T, W>* __restrict__ p, Lanes<T, W>* __restrict__ pi, T p0, T kappa,
                      int first, int last, int nlev)
{
    MESHOPS_ROWS(i, first, last, nlev) {
        Lanes<T, W> v = load(p, i);
#pragma unroll
        for (int w = 0; w < W; ++w) v.v[w] = pow(v.v[w] / p0, kappa);
        pi[i] = v;
    }
}
MESHOPS_INSTANTIATE(exner)

// w = kappa * pi(p) / p * v: the tangent (v = dp) and the adjoint (v = g) of exner.
template <typename T, int W>
__global__ void exner_derivative(const Lanes<T, W>* __restrict__ p, const Lanes<T, W>* __restrict__ v,
                                 Lanes<T, W>* __restrict__ w, T p0, T kappa, int first, int last,
                                 int nlev)
{
    MESHOPS_ROWS(i, first, last, nlev) {
        const Lanes<T, W> pl = load(p, i), vl = load(v, i);
        Lanes<T, W> out;
#pragma unroll
        for (int l = 0; l < W; ++l) out.v[l] = kappa * pow(pl.v[l] / p0, kappa) / pl.v[l] * vl.v[l];
        w[i] = out;
    }
}
MESHOPS_INSTANTIATE(exner_derivative)

// alpha = R * theta * pi(p) / p
template <typename T, int W>
__global__ void specific_volume(const Lanes<T, W>* __restrict__ p, const Lanes<T, W>* __restrict__ theta,
                                Lanes<T, W>* __restrict__ alpha, T p0, T kappa, T R, int first, int last,
                                int nlev)
{
    MESHOPS_ROWS(i, first, last, nlev) {
        const Lanes<T, W> pl = load(p, i), tl = load(theta, i);
        Lanes<T, W> out;
#pragma unroll
        for (int l = 0; l < W; ++l) out.v[l] = R * tl.v[l] * pow(pl.v[l] / p0, kappa) / pl.v[l];
        alpha[i] = out;
    }
}
MESHOPS_INSTANTIATE(specific_volume)

// The partials of alpha at one level: a_p = (kappa - 1) * a * theta / p, a_theta = a = R * pi / p.
template <typename T>
__device__ __forceinline__ void specific_volume_partials(T p, T theta, T p0, T kappa, T R, T& a_p,
                                                         T& a_theta)
{
    a_theta = R * pow(p / p0, kappa) / p;
    a_p = (kappa - 1) * a_theta * theta / p;
}

// dalpha = a_p * dp + a_theta * dtheta
template <typename T, int W>
__global__ void specific_volume_tl(const Lanes<T, W>* __restrict__ p, const Lanes<T, W>* __restrict__ theta,
                                   const Lanes<T, W>* __restrict__ dp,
                                   const Lanes<T, W>* __restrict__ dtheta,
                                   Lanes<T, W>* __restrict__ dalpha, T p0, T kappa, T R, int first,
                                   int last, int nlev)
{
    MESHOPS_ROWS(i, first, last, nlev) {
        const Lanes<T, W> pl = load(p, i), tl = load(theta, i), dpl = load(dp, i), dtl = load(dtheta, i);
        Lanes<T, W> out;
#pragma unroll
        for (int l = 0; l < W; ++l) {
            T a_p, a_theta;
            specific_volume_partials(pl.v[l], tl.v[l], p0, kappa, R, a_p, a_theta);
            out.v[l] = a_p * dpl.v[l] + a_theta * dtl.v[l];
        }
        dalpha[i] = out;
    }
}
MESHOPS_INSTANTIATE(specific_volume_tl)

// Adjoint: p_adj = a_p * g, theta_adj = a_theta * g
template <typename T, int W>
__global__ void specific_volume_adj(const Lanes<T, W>* __restrict__ p, const Lanes<T, W>* __restrict__ theta,
                                    const Lanes<T, W>* __restrict__ g, Lanes<T, W>* __restrict__ p_adj,
                                    Lanes<T, W>* __restrict__ theta_adj, T p0, T kappa, T R, int first,
                                    int last, int nlev)
{
    MESHOPS_ROWS(i, first, last, nlev) {
        const Lanes<T, W> pl = load(p, i), tl = load(theta, i), gl = load(g, i);
        Lanes<T, W> pa, ta;
#pragma unroll
        for (int l = 0; l < W; ++l) {
            T a_p, a_theta;
            specific_volume_partials(pl.v[l], tl.v[l], p0, kappa, R, a_p, a_theta);
            pa.v[l] = a_p * gl.v[l];
            ta.v[l] = a_theta * gl.v[l];
        }
        p_adj[i] = pa;
        theta_adj[i] = ta;
    }
}
MESHOPS_INSTANTIATE(specific_volume_adj)
