// The hydrostatic core's RK4 stage in four fused passes (hydrostatic/fused.py; the unfused reference
// is hydrostatic/dynamics.py with framework/timestepping.py). One stage of the provisional state
// (mass, thetaMass, u), N = nVertLevels layers, interfaces 0..N (0 the surface):
//
//   vertex pass  qVertex = (curl_e2v(u) + fVertex) / interp_c2v(mass)          (vertex, layer)
//   q edge pass  qEdge = interp_v2e(qVertex)                                   (edge, layer)
//   cell pass    one warp per column: F = interp_c2e(mass) u (written by each edge's first
//                present cell), D = div_e2c(F), div_e2c(theta_e F), K = ke_e2c(u) (or given);
//                p_i, p, pi = cp exner(p), alpha, phi_i, phi, B = K + phi, W; the tendencies of
//                mass and thetaMass and their RK4 update                       (cell, column)
//   edge pass    tend_u = pv_flux_e2e(F, qEdge) - grad_c2e(B) - theta_e grad_c2e(pi)
//                - avg_i2l(interp_c2e(W) diff_l2i(u)) / interp_c2e(mass); its RK4 update (edge, layer)
//
// RK4 update of a tendency k at one entry: yNew = (accumulate ? yNew : yOld) + newCoef * k, and
// with `provisional` yNext = yOld + nextCoef * k. Terms computed outside (diffusion, forcing) come
// as `nExtra` fields of `extraStride` entries each, added to k one after the other; the edge
// passes take them times extraScale (a lone del2 / del4 term's coefficient, its product rounded
// on its own as the operator path's elementwise one; 1 otherwise). Where the vector Laplacian is
// one gather over its composed stencil (meshops/operators/laplacian.py), the edge passes apply a
// lone term's last vector Laplacian themselves (del2In: u for del2, the first Laplacian for del4;
// del2Width > 0), the gather of the operator kernel.
//
// Same arithmetic as the operator path: the stencil sums of the operator kernels in the same slot
// order, the vertical sums in the scans' order, the vertical two-level stencils with their exact
// coefficients (0, +-1, 1/2: every product exact), and every product the operator path forms as an
// elementwise operation rounded on its own (mul_rn), so that no multiply-add contracts it.
//
// Every field here holds levels of one column contiguous; the vertex, q edge and edge passes run
// one level per thread, the cell passes one warp per column (warp_column.cuh) (W = 1; the template
// parameter keeps the common signature).
#include "rk4.cuh"
#include "stencil.cuh"
#include "warp_column.cuh"

#ifndef __CUDACC__
#include <cmath>  // the host build of the tests (tests/meshops/host_harness.py)
using std::pow;
#endif

namespace hydrostatic {

using meshops::adjoint_rk4;
using meshops::mul_rn;
using meshops::rk4_update;

// (x[a] + x[b]) / 2 over the present ends a, b of a two-point stencil at level k of columns of
// `levels` values (mean_2e).
template <typename T>
__device__ __forceinline__ T mean_of_ends(const T* __restrict__ x, int a, int b, int levels, int k)
{
    T acc = 0;
    if (a >= 0) acc += x[(meshops_offset)a * levels + k];
    if (b >= 0) acc += x[(meshops_offset)b * levels + k];
    return (T)0.5 * acc;
}

// (x[b] - x[a]) * invLength at level k (grad_2e), the product rounded on its own.
template <typename T>
__device__ __forceinline__ T difference_of_ends(const T* __restrict__ x, int a, int b, T invLength,
                                                int levels, int k)
{
    T acc = 0;
    if (b >= 0) acc += x[(meshops_offset)b * levels + k];
    if (a >= 0) acc -= x[(meshops_offset)a * levels + k];
    return mul_rn(invLength, acc);
}

// The two-level layer -> interface stencil y[i] = c0 x[i-1] + c1 x[i] (pair_l2i; terms off the
// column absent) of avg_l2i (c = (0, 1) at i = 0, (1, 0) at i = N, else (1/2, 1/2)).
template <typename T>
__device__ __forceinline__ T avg_l2i(T below, T above, int i, int N)
{
    T acc = 0;
    if (i > 0) acc += (i == N ? (T)1 : (T)0.5) * below;
    if (i < N) acc += (i == 0 ? (T)1 : (T)0.5) * above;
    return acc;
}

// The same of diff_l2i (c = (0, 0) at i = 0 and N, else (-1, 1)).
template <typename T>
__device__ __forceinline__ T diff_l2i(T below, T above, int i, int N)
{
    const bool end = i == 0 || i == N;
    T acc = 0;
    if (i > 0) acc += (end ? (T)0 : (T)-1) * below;
    if (i < N) acc += (end ? (T)0 : (T)1) * above;
    return acc;
}

// The interface -> layer stencil y[k] = c0 F[k] + c1 F[k+1] (pair_i2l) of div_vflux_i2l (c0 = 0 at
// k = 0, c1 = 0 at k = N - 1: no flux through the surface and the top, else (-1, 1)).
template <typename T>
__device__ __forceinline__ T div_vflux(T lower, T upper, int k, int N)
{
    return (k == 0 ? (T)0 : (T)-1) * lower + (k == N - 1 ? (T)0 : (T)1) * upper;
}

// ... and of avg_i2l (c = (1/2, 1/2)).
template <typename T>
__device__ __forceinline__ T avg_i2l(T lower, T upper)
{
    return (T)0.5 * lower + (T)0.5 * upper;
}

// k plus the extra tendencies at entry i, in order (each times `scale`: file comment).
template <typename T>
__device__ __forceinline__ T with_extra(T k, const T* __restrict__ extra, int nExtra, int extraStride,
                                        meshops_offset i, T scale = T(1))
{
    for (int x = 0; x < nExtra; ++x) k = k + mul_rn(scale, extra[(meshops_offset)x * extraStride + i]);
    return k;
}

// k plus `scale` times the composed vector Laplacian of x at (e, k): over the stencil (idx, coef)
// of vector_laplacian_e2e's one-gather form, the operator kernel's own sum (meshops::stencil_gather);
// without it (width 0), with_extra.
template <typename T>
__device__ __forceinline__ T with_extra_or_laplacian(T k, const T* __restrict__ extra, int nExtra,
                                                     int extraStride, meshops_offset i, T scale,
                                                     const int* __restrict__ idx,
                                                     const T* __restrict__ coef,
                                                     const T* __restrict__ x, int e, int width,
                                                     int slotStride, int N, int level)
{
    if (width == 0) return with_extra(k, extra, nExtra, extraStride, i, scale);
    const meshops::Lanes<T, 1> laplacian = meshops::stencil_gather<T, 1, false>(
        idx, coef, reinterpret_cast<const meshops::Lanes<T, 1>*>(x), e, width, N, level, slotStride);
    return k + mul_rn(scale, laplacian.v[0]);
}

}  // namespace hydrostatic

// qVertex[v,k] = (sum_i curlCoef[v,i] u[e_i,k] + fVertex[v]) / sum_i c2vCoef[v,i] mass[c_i,k], e_i =
// edgesOnVertex[v,i], c_i = cellsOnVertex[v,i] (both tables in one layout, slotStride).
template <typename T, int W>
__global__ void hs_pv_vertex(const int* __restrict__ edgesOnVertex, const T* __restrict__ curlCoef,
                             const int* __restrict__ cellsOnVertex, const T* __restrict__ c2vCoef,
                             const T* __restrict__ u, const T* __restrict__ mass,
                             const T* __restrict__ fVertex, T* __restrict__ qVertex, int vertexDegree,
                             int slotStride, int nVertLevels, int first, int last, int nlev)
{
    MESHOPS_ROWS(i, first, last, nlev) {
        MESHOPS_ROW_LANE(v, k, i, nlev);
        T vorticity = 0, massVertex = 0;
        meshops::for_each_slot(edgesOnVertex, v, vertexDegree, slotStride, [&](meshops_offset p, int e) {
            vorticity += curlCoef[p] * u[(meshops_offset)e * nlev + k];
        });
        meshops::for_each_slot(cellsOnVertex, v, vertexDegree, slotStride, [&](meshops_offset p, int c) {
            massVertex += c2vCoef[p] * mass[(meshops_offset)c * nlev + k];
        });
        qVertex[i] = (vorticity + fVertex[v]) / massVertex;
    }
}
MESHOPS_INSTANTIATE(hs_pv_vertex)

// qEdge[e,k] = (qVertex[v0,k] + qVertex[v1,k]) / 2, (v0, v1) = verticesOnEdge[e] (interp_v2e).
template <typename T, int W>
__global__ void hs_pv_edge(const int* __restrict__ verticesOnEdge, const T* __restrict__ qVertex,
                           T* __restrict__ qEdge, int nVertLevels, int first, int last, int nlev)
{
    MESHOPS_ROWS(i, first, last, nlev) {
        MESHOPS_ROW_LANE(e, k, i, nlev);
        qEdge[i] = hydrostatic::mean_of_ends(qVertex, verticesOnEdge[2 * e], verticesOnEdge[2 * e + 1],
                                             nlev, k);
    }
}
MESHOPS_INSTANTIATE(hs_pv_edge)

// The cell pass (file comment), one warp per column c of cells [first, last) (warp_column.cuh);
// edgesOnCell, cellsAcross, divCoef and keCoef in one layout (slotStride); cellsAcross as in
// swm/cuda/shallow_water.cu (-2 - the other cell where c writes the edge's flux F). Two sweeps over
// the column's chunks of levels, each lane at its level k:
//   down (chunks from the top): the horizontal sums at layer k (D, div_e2c(theta_e F), K when
//     keInline); the scans from the top, in the order k = N-1..0: p_i[k] = pTop + g sum_{j>=k}
//     mass[j], p[k] = avg_i2l(p_i), the column total of D; p, D, div_e2c(theta_e F) and K are
//     held in pi, wFlux[k], thetaFluxDiv and bernoulli (the lowest chunk's in the lane's registers,
//     the chunk the sweep up starts with: with N <= 32 layers nothing goes through memory) until
//   up (chunks from the surface) reads them: alpha = R theta exner(p) / p, pi = cp exner(p); the
//     scans from the surface, k = 0..N-1: phi_i[k+1] = phiS + g sum_{j<=k} mass alpha,
//     W[k+1] = W[k] + (dB[k] total - D[k]); B = K + avg_i2l(phi_i) and the tendencies
//     tend_mass = -D - div_vflux(W), tend_thetaMass = -div_e2c(theta_e F) - div_vflux(W avg_l2i(theta)).
// Without keInline, K is the field ke.
// The cell pass's gathers at level k of column c (F at the edges whose first present cell c is,
// D = div_e2c(F), div_e2c(theta_e F) and TRiSK's K = ke_e2c(u) when keInline), each column slot's
// entry by `visit`'s (p, e, across): for_each_slot's or for_each_column_slot's.
template <typename T, typename Slots>
__device__ __forceinline__ void cell_fluxes(Slots for_slots, const T* __restrict__ divCoef,
                                            const T* __restrict__ keCoef, const T* __restrict__ mass,
                                            const T* __restrict__ thetaMass, const T* __restrict__ u,
                                            T* __restrict__ F, T mc, T thc, int keInline, int N, int k,
                                            T& div, T& divTheta, T& kinetic)
{
    using hydrostatic::mul_rn;
    for_slots([&](meshops_offset p, int e, int across) {
        const int other = across < 0 ? -2 - across : across;
        const meshops_offset ek = (meshops_offset)e * N + k, ok = (meshops_offset)other * N + k;
        const T ue = u[ek];
        const T massEdge = (T)0.5 * (other >= 0 ? mc + mass[ok] : mc);
        const T thetaEdge = (T)0.5 * (other >= 0 ? thc + thetaMass[ok] / mass[ok] : thc);
        const T flux = mul_rn(massEdge, ue);
        if (across < 0) F[ek] = flux;
        div += divCoef[p] * flux;
        divTheta += divCoef[p] * mul_rn(thetaEdge, flux);
        if (keInline) kinetic += keCoef[p] * (ue * ue);
    });
}

// The cell pass (file comment) over columns [first, last), one warp each. Gather: the pass's own
// gathers down the column; otherwise hs_cell_flux's, read from wFlux (D at layer k), thetaFluxDiv
// and bernoulli (K when keInline).
template <typename T, bool Gather>
__device__ __forceinline__ void cell_stage(
    const int* __restrict__ edgesOnCell, const int* __restrict__ cellsAcross,
    const T* __restrict__ divCoef, const T* __restrict__ keCoef, const T* __restrict__ dB,
    const T* __restrict__ mass, const T* __restrict__ thetaMass, const T* __restrict__ u,
    const T* __restrict__ phiS, const T* __restrict__ ke, const T* __restrict__ extra,
    const T* __restrict__ massOld, T* __restrict__ massNew, T* __restrict__ massNext,
    const T* __restrict__ thetaMassOld, T* __restrict__ thetaMassNew, T* __restrict__ thetaMassNext,
    T* __restrict__ pi, T* __restrict__ bernoulli, T* __restrict__ wFlux,
    T* __restrict__ thetaFluxDiv, T* __restrict__ F, int maxEdges, int slotStride, int keInline,
    int nExtra, int extraStride, int nVertLevels, T gravity, T pTop, T p0, T kappa, T R, T cp,
    T newCoef, T nextCoef, int accumulate, int provisional, int first, int last)
{
    using hydrostatic::mul_rn;
    const int N = nVertLevels;
    MESHOPS_WARP_COLUMNS(c, lane, first, last) {
        const meshops_offset col = (meshops_offset)c * N, coli = (meshops_offset)c * (N + 1);
        T massAbove = 0, divAbove = 0;
        T heldP = 0, heldDiv = 0, heldDivTheta = 0, heldKinetic = 0;  // the lowest chunk's
        [[maybe_unused]] const auto slots = [&] {
            if constexpr (Gather)
                return meshops::column_slots<2>(
                    edgesOnCell, c, maxEdges, slotStride, lane,
                    [&](meshops_offset p, int, int (&more)[1]) { more[0] = cellsAcross[p]; });
            else
                return 0;
        }();
        for (int base = (N - 1) / meshops::kWarpLanes * meshops::kWarpLanes; base >= 0;
             base -= meshops::kWarpLanes) {
            const int k = base + lane, levels = MESHOPS_CHUNK_LEVELS(base, N);
            T mc = 0, div = 0;
            if (lane < levels) {
                mc = mass[col + k];
                if constexpr (Gather) {
                    T divTheta = 0, kinetic = 0;
                    cell_fluxes(
                        [&](auto visit) {
                            meshops::for_each_column_slot(
                                slots, [&](meshops_offset p, int e, const int (&more)[1]) {
                                    visit(p, e, more[0]);
                                });
                        },
                        divCoef, keCoef, mass, thetaMass, u, F, mc, thetaMass[col + k] / mc, keInline, N,
                        k, div, divTheta, kinetic);
                    meshops::hold(base, div, heldDiv, wFlux, coli + k);
                    meshops::hold(base, divTheta, heldDivTheta, thetaFluxDiv, col + k);
                    if (keInline) meshops::hold(base, kinetic, heldKinetic, bernoulli, col + k);
                } else {
                    div = wFlux[coli + k];
                }
            }
            T down[2] = {mc, div}, sums[2] = {massAbove, divAbove}, upper[2] = {}, lower[2] = {};
            meshops::scans<false>(down, levels, lane, sums, upper, lower);
            massAbove = sums[0];
            divAbove = sums[1];
            const T massUpper = upper[0], massLower = lower[0];
            if (lane < levels) {
                const T p = hydrostatic::avg_i2l(pTop + mul_rn(gravity, massLower),
                                                 pTop + mul_rn(gravity, massUpper));
                meshops::hold(base, p, heldP, pi, col + k);
                if constexpr (!Gather)
                    if (base == 0) heldDiv = div;  // the others stay in memory
            }
        }
        const T total = divAbove, phiSurface = phiS[c];
        T w = 0, massAlpha = 0;
        for (int base = 0; base < N; base += meshops::kWarpLanes) {
            const int k = base + lane, levels = MESHOPS_CHUNK_LEVELS(base, N);
            const meshops_offset ck = col + k;
            T theta = 0, massAlphaLayer = 0, rise = 0, div = 0;
            if (lane < levels) {
                const T p = meshops::held(base, heldP, pi, ck), exner = pow(p / p0, kappa);
                theta = thetaMass[ck] / mass[ck];
                const T alpha = R * theta * exner / p;
                pi[ck] = cp * exner;
                massAlphaLayer = mul_rn(mass[ck], alpha);
                div = meshops::held(base, heldDiv, wFlux, coli + k);
                rise = mul_rn(dB[k], total) - div;
            }
            T up[2] = {massAlphaLayer, rise}, sums[2] = {massAlpha, w}, lower[2] = {}, upper[2] = {};
            meshops::scans<true>(up, levels, lane, sums, lower, upper);
            massAlpha = sums[0];
            w = sums[1];
            const T massAlphaLower = lower[0], massAlphaUpper = upper[0], wLower = lower[1], wUpper = upper[1];
            if (lane < levels) {
                const T phiLower = phiSurface + mul_rn(gravity, massAlphaLower);
                const T phiUpper = phiSurface + mul_rn(gravity, massAlphaUpper);
                const T kinetic = !keInline ? ke[ck]
                                  : Gather ? meshops::held(base, heldKinetic, bernoulli, ck)
                                           : bernoulli[ck];
                bernoulli[ck] = kinetic + hydrostatic::avg_i2l(phiLower, phiUpper);
                wFlux[coli + k] = wLower;
                const T thetaBelow = k > 0 ? thetaMass[ck - 1] / mass[ck - 1] : theta;
                const T thetaAbove = k + 1 < N ? thetaMass[ck + 1] / mass[ck + 1] : (T)0;
                const T wTheta = mul_rn(wLower, hydrostatic::avg_l2i(thetaBelow, theta, k, N));
                const T wThetaAbove = mul_rn(wUpper, hydrostatic::avg_l2i(theta, thetaAbove, k + 1, N));
                const T tendMass = -div - hydrostatic::div_vflux(wLower, wUpper, k, N);
                const T divTheta = Gather ? meshops::held(base, heldDivTheta, thetaFluxDiv, ck)
                                          : thetaFluxDiv[ck];
                const T tendTheta = hydrostatic::with_extra(
                    -divTheta - hydrostatic::div_vflux(wTheta, wThetaAbove, k, N), extra, nExtra,
                    extraStride, ck);
                hydrostatic::rk4_update(tendMass, massOld, massNew, massNext, newCoef, nextCoef, accumulate,
                                        provisional, ck);
                hydrostatic::rk4_update(tendTheta, thetaMassOld, thetaMassNew, thetaMassNext, newCoef,
                                        nextCoef, accumulate, provisional, ck);
            }
        }
        if (lane == 0) wFlux[coli + N] = w;
    }
}

template <typename T, int W>
MESHOPS_COLUMN_OCCUPANCY
__global__ void hs_cell_stage(
    const int* __restrict__ edgesOnCell, const int* __restrict__ cellsAcross,
    const T* __restrict__ divCoef, const T* __restrict__ keCoef, const T* __restrict__ dB,
    const T* __restrict__ mass, const T* __restrict__ thetaMass, const T* __restrict__ u,
    const T* __restrict__ phiS, const T* __restrict__ ke, const T* __restrict__ extra,
    const T* __restrict__ massOld, T* __restrict__ massNew, T* __restrict__ massNext,
    const T* __restrict__ thetaMassOld, T* __restrict__ thetaMassNew, T* __restrict__ thetaMassNext,
    T* __restrict__ pi, T* __restrict__ bernoulli, T* __restrict__ wFlux,
    T* __restrict__ thetaFluxDiv, T* __restrict__ F, int maxEdges, int slotStride, int keInline,
    int nExtra, int extraStride, int nVertLevels, T gravity, T pTop, T p0, T kappa, T R, T cp,
    T newCoef, T nextCoef, int accumulate, int provisional, int first, int last, int nlev)
{
    cell_stage<T, true>(edgesOnCell, cellsAcross, divCoef, keCoef, dB, mass, thetaMass, u, phiS, ke,
                        extra, massOld, massNew, massNext, thetaMassOld, thetaMassNew, thetaMassNext,
                        pi, bernoulli, wFlux, thetaFluxDiv, F, maxEdges, slotStride, keInline, nExtra,
                        extraStride, nVertLevels, gravity, pTop, p0, kappa, R, cp, newCoef, nextCoef,
                        accumulate, provisional, first, last);
}
MESHOPS_INSTANTIATE(hs_cell_stage)

// The cell pass in two kernels: hs_cell_flux's gathers over (cell, layer), one level per thread,
// into wFlux (D at layer k), thetaFluxDiv and bernoulli (K when keInline), then hs_cell_column's
// scans and updates, one warp per column (cell_stage without Gather). The same values, bitwise.
template <typename T, int W>
__global__ void hs_cell_flux(
    const int* __restrict__ edgesOnCell, const int* __restrict__ cellsAcross,
    const T* __restrict__ divCoef, const T* __restrict__ keCoef, const T* __restrict__ mass,
    const T* __restrict__ thetaMass, const T* __restrict__ u, T* __restrict__ thetaFluxDiv,
    T* __restrict__ wFlux, T* __restrict__ bernoulli, T* __restrict__ F, int maxEdges,
    int slotStride, int keInline, int nVertLevels, int first, int last, int nlev)
{
    const int N = nVertLevels;
    MESHOPS_ROWS(i, first, last, nlev) {
        MESHOPS_ROW_LANE(c, k, i, nlev);
        const T mc = mass[i];
        T div = 0, divTheta = 0, kinetic = 0;
        cell_fluxes(
            [&](auto visit) {
                meshops::for_each_slot(edgesOnCell, c, maxEdges, slotStride,
                                       [&](meshops_offset p, int e) { visit(p, e, cellsAcross[p]); });
            },
            divCoef, keCoef, mass, thetaMass, u, F, mc, thetaMass[i] / mc, keInline, N, k, div,
            divTheta, kinetic);
        wFlux[(meshops_offset)c * (N + 1) + k] = div;
        thetaFluxDiv[i] = divTheta;
        if (keInline) bernoulli[i] = kinetic;
    }
}
MESHOPS_INSTANTIATE(hs_cell_flux)

template <typename T, int W>
MESHOPS_COLUMN_RESIDENT(1024)
__global__ void hs_cell_column(
    const T* __restrict__ dB, const T* __restrict__ mass, const T* __restrict__ thetaMass,
    const T* __restrict__ phiS, const T* __restrict__ ke, const T* __restrict__ extra,
    const T* __restrict__ massOld, T* __restrict__ massNew, T* __restrict__ massNext,
    const T* __restrict__ thetaMassOld, T* __restrict__ thetaMassNew, T* __restrict__ thetaMassNext,
    T* __restrict__ pi, T* __restrict__ bernoulli, T* __restrict__ wFlux,
    const T* __restrict__ thetaFluxDiv, int keInline, int nExtra, int extraStride, int nVertLevels,
    T gravity, T pTop, T p0, T kappa, T R, T cp, T newCoef, T nextCoef, int accumulate,
    int provisional, int first, int last, int nlev)
{
    cell_stage<T, false>(nullptr, nullptr, nullptr, nullptr, dB, mass, thetaMass, nullptr, phiS, ke,
                         extra, massOld, massNew, massNext, thetaMassOld, thetaMassNew, thetaMassNext,
                         pi, bernoulli, wFlux, const_cast<T*>(thetaFluxDiv), nullptr, 0, 0, keInline,
                         nExtra, extraStride, nVertLevels, gravity, pTop, p0, kappa, R, cp, newCoef,
                         nextCoef, accumulate, provisional, first, last);
}
MESHOPS_INSTANTIATE(hs_cell_column)

// The edge pass (file comment) over (edge, layer) of edges [first, last): edgesOnEdge and
// weightsOnEdge in one layout (slotStride), cellsOnEdge row-major; wFlux on interfaces.
template <typename T, int W>
__global__ void hs_edge_stage(
    const int* __restrict__ edgesOnEdge, const T* __restrict__ weightsOnEdge,
    const int* __restrict__ cellsOnEdge, const T* __restrict__ invDcEdge, const T* __restrict__ F,
    const T* __restrict__ qEdge, const T* __restrict__ bernoulli, const T* __restrict__ pi,
    const T* __restrict__ mass, const T* __restrict__ thetaMass, const T* __restrict__ wFlux,
    const T* __restrict__ u, const T* __restrict__ extra, const int* __restrict__ edgesOnEdgeDel2,
    const T* __restrict__ coefDel2, const T* __restrict__ del2In, const T* __restrict__ uOld,
    T* __restrict__ uNew, T* __restrict__ uNext, int maxEdges2, int slotStride, int nExtra,
    int extraStride, T extraScale, int del2Width, int del2SlotStride, int nVertLevels, T newCoef,
    T nextCoef, int accumulate, int provisional, int first, int last, int nlev)
{
    using hydrostatic::mul_rn;
    const int N = nVertLevels;
    MESHOPS_ROWS(i, first, last, nlev) {
        MESHOPS_ROW_LANE(e, k, i, nlev);
        const T qe = qEdge[i];
        T acc = 0;
        meshops::for_each_slot(edgesOnEdge, e, maxEdges2, slotStride, [&](meshops_offset p, int e2) {
            const meshops_offset e2k = (meshops_offset)e2 * N + k;
            acc += weightsOnEdge[p] * (F[e2k] * (qe + qEdge[e2k]));
        });
        const int c0 = cellsOnEdge[2 * e], c1 = cellsOnEdge[2 * e + 1];
        const T invDc = invDcEdge[e];
        // theta_e = interp_c2e(theta_mass / mass)
        T thetaSum = 0;
        if (c0 >= 0) thetaSum += thetaMass[(meshops_offset)c0 * N + k] / mass[(meshops_offset)c0 * N + k];
        if (c1 >= 0) thetaSum += thetaMass[(meshops_offset)c1 * N + k] / mass[(meshops_offset)c1 * N + k];
        const T thetaEdge = (T)0.5 * thetaSum;
        const T massEdge = hydrostatic::mean_of_ends(mass, c0, c1, N, k);
        const T gradB = hydrostatic::difference_of_ends(bernoulli, c0, c1, invDc, N, k);
        const T gradPi = hydrostatic::difference_of_ends(pi, c0, c1, invDc, N, k);
        // avg_i2l(interp_c2e(W) diff_l2i(u)) at layer k, from interfaces k and k + 1
        const T* ue = u + (meshops_offset)e * N;
        const T below = mul_rn(hydrostatic::mean_of_ends(wFlux, c0, c1, N + 1, k),
                               hydrostatic::diff_l2i(k > 0 ? ue[k - 1] : (T)0, ue[k], k, N));
        const T above = mul_rn(hydrostatic::mean_of_ends(wFlux, c0, c1, N + 1, k + 1),
                               hydrostatic::diff_l2i(ue[k], k + 1 < N ? ue[k + 1] : (T)0, k + 1, N));
        const T tend = mul_rn((T)0.5, acc) - gradB - mul_rn(thetaEdge, gradPi) -
                       hydrostatic::avg_i2l(below, above) / massEdge;
        hydrostatic::rk4_update(hydrostatic::with_extra_or_laplacian(
                                    tend, extra, nExtra, extraStride, i, extraScale, edgesOnEdgeDel2,
                                    coefDel2, del2In, e, del2Width, del2SlotStride, N, k),
                                uOld, uNew, uNext, newCoef, nextCoef, accumulate, provisional, i);
    }
}
MESHOPS_INSTANTIATE(hs_edge_stage)

// -- tangent-linear: the stage of hydrostatic.dynamics.tendencies_tl about the provisional state
// (mass, thetaMass, u) for its perturbation (dMass, dThetaMass, dU) and, with perturbPhiS, dPhiS;
// the same four passes, each computing the base fields it needs beside their tangents, in the
// operator path's order (hydrostatic/dynamics.py, hydrostatic/terms.py tangent methods).

// qVertex as hs_pv_vertex and dqVertex = (curl_e2v(dU) - qVertex interp_c2v(dMass)) / interp_c2v(mass).
template <typename T, int W>
__global__ void hs_pv_vertex_tl(const int* __restrict__ edgesOnVertex, const T* __restrict__ curlCoef,
                                const int* __restrict__ cellsOnVertex, const T* __restrict__ c2vCoef,
                                const T* __restrict__ u, const T* __restrict__ mass,
                                const T* __restrict__ dU, const T* __restrict__ dMass,
                                const T* __restrict__ fVertex, T* __restrict__ qVertex,
                                T* __restrict__ dqVertex, int vertexDegree, int slotStride,
                                int nVertLevels, int first, int last, int nlev)
{
    MESHOPS_ROWS(i, first, last, nlev) {
        MESHOPS_ROW_LANE(v, k, i, nlev);
        T vorticity = 0, dVorticity = 0, massVertex = 0, dMassVertex = 0;
        meshops::for_each_slot(edgesOnVertex, v, vertexDegree, slotStride, [&](meshops_offset p, int e) {
            vorticity += curlCoef[p] * u[(meshops_offset)e * nlev + k];
            dVorticity += curlCoef[p] * dU[(meshops_offset)e * nlev + k];
        });
        meshops::for_each_slot(cellsOnVertex, v, vertexDegree, slotStride, [&](meshops_offset p, int c) {
            massVertex += c2vCoef[p] * mass[(meshops_offset)c * nlev + k];
            dMassVertex += c2vCoef[p] * dMass[(meshops_offset)c * nlev + k];
        });
        const T q = (vorticity + fVertex[v]) / massVertex;
        qVertex[i] = q;
        dqVertex[i] = (dVorticity - hydrostatic::mul_rn(q, dMassVertex)) / massVertex;
    }
}
MESHOPS_INSTANTIATE(hs_pv_vertex_tl)

// qEdge and dqEdge = interp_v2e of qVertex and dqVertex.
template <typename T, int W>
__global__ void hs_pv_edge_tl(const int* __restrict__ verticesOnEdge, const T* __restrict__ qVertex,
                              const T* __restrict__ dqVertex, T* __restrict__ qEdge,
                              T* __restrict__ dqEdge, int nVertLevels, int first, int last, int nlev)
{
    MESHOPS_ROWS(i, first, last, nlev) {
        MESHOPS_ROW_LANE(e, k, i, nlev);
        const int a = verticesOnEdge[2 * e], b = verticesOnEdge[2 * e + 1];
        qEdge[i] = hydrostatic::mean_of_ends(qVertex, a, b, nlev, k);
        dqEdge[i] = hydrostatic::mean_of_ends(dqVertex, a, b, nlev, k);
    }
}
MESHOPS_INSTANTIATE(hs_pv_edge_tl)

// The tangent-linear cell pass's gathers at level k of column c (cell_fluxes' with their tangents:
// F and dF where c is the edge's first present cell, D, dD, div_e2c(dtheta_e F + theta_e dF), dK;
// when Advance the forward's div_e2c(theta_e F) and K), each slot through for_slots' visit(p, e,
// across).
template <typename T, bool Advance, typename Slots>
__device__ __forceinline__ void cell_fluxes_tl(
    Slots for_slots, const T* __restrict__ divCoef, const T* __restrict__ keCoef2,
    const T* __restrict__ keCoef, const T* __restrict__ mass, const T* __restrict__ thetaMass,
    const T* __restrict__ u, const T* __restrict__ dMass, const T* __restrict__ dThetaMass,
    const T* __restrict__ dU, T* __restrict__ F, T* __restrict__ dF, T mc, T dmc, T thc, T dthc,
    int keInline, int N, int k, T& div, T& dDiv, T& dDivTheta, T& dKinetic, T& divTheta, T& kinetic)
{
    using hydrostatic::mul_rn;
    for_slots([&](meshops_offset p, int e, int across) {
        const int other = across < 0 ? -2 - across : across;
        const meshops_offset ek = (meshops_offset)e * N + k, ok = (meshops_offset)other * N + k;
        const T ue = u[ek], due = dU[ek];
        T massSum = mc, dMassSum = dmc, thetaSum = thc, dThetaSum = dthc;
        if (other >= 0) {
            const T mo = mass[ok], dmo = dMass[ok], tho = thetaMass[ok] / mo;
            massSum += mo;
            dMassSum += dmo;
            thetaSum += tho;
            dThetaSum += (dThetaMass[ok] - mul_rn(tho, dmo)) / mo;
        }
        const T massEdge = (T)0.5 * massSum, dMassEdge = (T)0.5 * dMassSum;
        const T thetaEdge = (T)0.5 * thetaSum, dThetaEdge = (T)0.5 * dThetaSum;
        const T flux = mul_rn(massEdge, ue);
        const T dFlux = mul_rn(dMassEdge, ue) + mul_rn(massEdge, due);
        if (across < 0) {
            F[ek] = flux;
            dF[ek] = dFlux;
        }
        div += divCoef[p] * flux;
        dDiv += divCoef[p] * dFlux;
        dDivTheta += divCoef[p] * (mul_rn(dThetaEdge, flux) + mul_rn(thetaEdge, dFlux));
        if (keInline) dKinetic += keCoef2[p] * (ue * due);
        if constexpr (Advance) {
            divTheta += divCoef[p] * mul_rn(thetaEdge, flux);
            if (keInline) kinetic += keCoef[p] * (ue * ue);
        }
    });
}

// The tangent-linear cell pass: as hs_cell_stage (one warp per column, the same sweeps and scans),
// with theta = thetaMass / mass and dtheta = (dThetaMass - theta dMass) / mass:
//   down: F = mass_e u, dF = dmass_e u + mass_e dU (each edge's first present cell writes both),
//     D, dD = div_e2c(dF), div_e2c(dtheta_e F + theta_e dF), dK = ke_e2c_tl (keCoef2 sum of u dU)
//     when keInline; p and dp = avg_i2l(g sum_layers_from_top_l2i(dMass)), the totals of D and dD;
//     held in pi, dPi, wFlux, dWFlux, thetaFluxDiv and dBernoulli (the lowest chunk's in the
//     lane's registers, as the forward's)
//   up: alpha, dalpha = a_p dp + a_theta dtheta (specific_volume_tl), dpi = cp kappa exner / p dp,
//     dphi_i = g sum_layers_from_bottom_l2i(dMass alpha + mass dalpha) (+ dPhiS), dB = dK +
//     avg_i2l(dphi_i), W and dW, pi = cp exner(p), and
//     dtend_mass = -dD - div_vflux(dW),
//     dtend_thetaMass = -div_e2c(dtheta_e F + theta_e dF) - div_vflux(dW avg_l2i(theta) + W avg_l2i(dtheta)).
template <typename T, bool Advance, bool Gather = true>
__device__ __forceinline__ void cell_stage_tl(
    const int* __restrict__ edgesOnCell, const int* __restrict__ cellsAcross,
    const T* __restrict__ divCoef, const T* __restrict__ keCoef2, const T* __restrict__ dB,
    const T* __restrict__ mass, const T* __restrict__ thetaMass, const T* __restrict__ u,
    const T* __restrict__ dMass, const T* __restrict__ dThetaMass, const T* __restrict__ dU,
    const T* __restrict__ dPhiS, const T* __restrict__ dKe, const T* __restrict__ extra,
    const T* __restrict__ dMassOld, T* __restrict__ dMassNew, T* __restrict__ dMassNext,
    const T* __restrict__ dThetaMassOld, T* __restrict__ dThetaMassNew,
    T* __restrict__ dThetaMassNext, T* __restrict__ pi, T* __restrict__ dPi,
    T* __restrict__ dBernoulli, T* __restrict__ wFlux, T* __restrict__ dWFlux,
    T* __restrict__ thetaFluxDiv, T* __restrict__ F, T* __restrict__ dF, int maxEdges,
    int slotStride, int keInline, int perturbPhiS, int nExtra, int extraStride, int nVertLevels,
    T gravity, T pTop, T p0, T kappa, T R, T cp, T newCoef, T nextCoef, int accumulate,
    int provisional, int first, int last, int nlev, const T* __restrict__ keCoef,
    const T* __restrict__ phiS, const T* __restrict__ ke, const T* __restrict__ extraF, int nExtraF,
    int extraStrideF, const T* __restrict__ massOld, T* __restrict__ massNew,
    T* __restrict__ massNext, const T* __restrict__ thetaMassOld, T* __restrict__ thetaMassNew,
    T* __restrict__ thetaMassNext, T* __restrict__ bernoulli, T* __restrict__ thetaFluxDivF)
{
    using hydrostatic::mul_rn;
    const int N = nVertLevels;
    // theta and dtheta at layer k of the column at col
    auto thetas = [&](meshops_offset ck, T& theta, T& dTheta) {
        theta = thetaMass[ck] / mass[ck];
        dTheta = (dThetaMass[ck] - mul_rn(theta, dMass[ck])) / mass[ck];
    };
    MESHOPS_WARP_COLUMNS(c, lane, first, last) {
        const meshops_offset col = (meshops_offset)c * N, coli = (meshops_offset)c * (N + 1);
        T massAbove = 0, dMassAbove = 0, divAbove = 0, dDivAbove = 0;
        // the lowest chunk's p, dp, D, dD, div_e2c(dtheta_e F + theta_e dF) and dK
        T heldP = 0, heldDp = 0, heldDiv = 0, heldDDiv = 0, heldDDivTheta = 0, heldDKinetic = 0;
        T heldDivTheta = 0, heldKinetic = 0;  // (Advance) the forward's div_e2c(theta_e F) and K
        [[maybe_unused]] const auto slots = [&] {
            if constexpr (Gather)
                return meshops::column_slots<2>(
                    edgesOnCell, c, maxEdges, slotStride, lane,
                    [&](meshops_offset p, int, int (&more)[1]) { more[0] = cellsAcross[p]; });
            else
                return 0;
        }();
        // a value the gathers held (Gather) or hs_cell_flux_ftl wrote to `memory` at i
        const auto gathered = [&](int base, T kept, const T* memory, meshops_offset i) {
            return Gather ? meshops::held(base, kept, memory, i) : memory[i];
        };
        for (int base = (N - 1) / meshops::kWarpLanes * meshops::kWarpLanes; base >= 0;
             base -= meshops::kWarpLanes) {
            const int k = base + lane, levels = MESHOPS_CHUNK_LEVELS(base, N);
            T mc = 0, dmc = 0, div = 0, dDiv = 0;
            if (lane < levels) {
                mc = mass[col + k];
                dmc = dMass[col + k];
                if constexpr (Gather) {
                    const T thc = thetaMass[col + k] / mc;
                    const T dthc = (dThetaMass[col + k] - mul_rn(thc, dmc)) / mc;
                    T dDivTheta = 0, dKinetic = 0, divTheta = 0, kinetic = 0;
                    cell_fluxes_tl<T, Advance>(
                        [&](auto visit) {
                            meshops::for_each_column_slot(
                                slots, [&](meshops_offset p, int e, const int (&more)[1]) {
                                    visit(p, e, more[0]);
                                });
                        },
                        divCoef, keCoef2, keCoef, mass, thetaMass, u, dMass, dThetaMass, dU, F, dF, mc,
                        dmc, thc, dthc, keInline, N, k, div, dDiv, dDivTheta, dKinetic, divTheta,
                        kinetic);
                    meshops::hold(base, div, heldDiv, wFlux, coli + k);
                    meshops::hold(base, dDiv, heldDDiv, dWFlux, coli + k);
                    meshops::hold(base, dDivTheta, heldDDivTheta, thetaFluxDiv, col + k);
                    if (keInline) meshops::hold(base, dKinetic, heldDKinetic, dBernoulli, col + k);
                    if constexpr (Advance) {
                        meshops::hold(base, divTheta, heldDivTheta, thetaFluxDivF, col + k);
                        if (keInline) meshops::hold(base, kinetic, heldKinetic, bernoulli, col + k);
                    }
                } else {
                    div = wFlux[coli + k];
                    dDiv = dWFlux[coli + k];
                    if (base == 0) {  // the others stay in memory
                        heldDiv = div;
                        heldDDiv = dDiv;
                    }
                }
            }
            T down[4] = {mc, dmc, div, dDiv}, sums[4] = {massAbove, dMassAbove, divAbove, dDivAbove};
            T upper[4] = {}, lower[4] = {};
            meshops::scans<false>(down, levels, lane, sums, upper, lower);
            massAbove = sums[0];
            dMassAbove = sums[1];
            divAbove = sums[2];
            dDivAbove = sums[3];
            const T massUpper = upper[0], massLower = lower[0], dMassUpper = upper[1], dMassLower = lower[1];
            if (lane < levels) {
                const T p = hydrostatic::avg_i2l(pTop + mul_rn(gravity, massLower),
                                                 pTop + mul_rn(gravity, massUpper));
                const T dp = hydrostatic::avg_i2l(mul_rn(gravity, dMassLower),
                                                  mul_rn(gravity, dMassUpper));
                meshops::hold(base, p, heldP, pi, col + k);
                meshops::hold(base, dp, heldDp, dPi, col + k);
            }
        }
        const T total = divAbove, dTotal = dDivAbove, dPhiSurface = perturbPhiS ? dPhiS[c] : (T)0;
        T w = 0, dw = 0, sum = 0, massAlpha = 0, phiSurface = 0;
        if constexpr (Advance) phiSurface = phiS[c];
        // dphi_i of the interface whose sum of layerSum below is s
        auto dPhi = [&](T s) {
            const T dPhiMass = mul_rn(gravity, s);
            return perturbPhiS ? dPhiMass + dPhiSurface : dPhiMass;
        };
        for (int base = 0; base < N; base += meshops::kWarpLanes) {
            const int k = base + lane, levels = MESHOPS_CHUNK_LEVELS(base, N);
            const meshops_offset ck = col + k;
            T theta = 0, dTheta = 0, layerSum = 0, rise = 0, dRise = 0, dDiv = 0, div = 0;
            T massAlphaLayer = 0;
            if (lane < levels) {
                thetas(ck, theta, dTheta);
                const T p = meshops::held(base, heldP, pi, ck), dp = meshops::held(base, heldDp, dPi, ck);
                const T exner = pow(p / p0, kappa);
                const T alpha = R * theta * exner / p;
                const T aTheta = R * pow(p / p0, kappa) / p;
                const T aP = (kappa - 1) * aTheta * theta / p;
                const T dAlpha = aP * dp + aTheta * dTheta;
                pi[ck] = cp * exner;
                dPi[ck] = cp * (kappa * pow(p / p0, kappa) / p * dp);
                layerSum = mul_rn(dMass[ck], alpha) + mul_rn(mass[ck], dAlpha);
                dDiv = meshops::held(base, heldDDiv, dWFlux, coli + k);
                div = meshops::held(base, heldDiv, wFlux, coli + k);
                rise = mul_rn(dB[k], total) - div;
                if constexpr (Advance) massAlphaLayer = mul_rn(mass[ck], alpha);
                dRise = mul_rn(dB[k], dTotal) - dDiv;
            }
            // the forward's massAlpha scan with the tangent-linear's when Advance
            constexpr int nUp = Advance ? 4 : 3;
            T up[nUp], sums[nUp], lower[nUp] = {}, upper[nUp] = {};
            up[0] = layerSum, up[1] = rise, up[2] = dRise;
            sums[0] = sum, sums[1] = w, sums[2] = dw;
            if constexpr (Advance) up[nUp - 1] = massAlphaLayer, sums[nUp - 1] = massAlpha;
            meshops::scans<true>(up, levels, lane, sums, lower, upper);
            sum = sums[0];
            w = sums[1];
            dw = sums[2];
            const T sumLower = lower[0], sumUpper = upper[0], wLower = lower[1], wUpper = upper[1];
            const T dwLower = lower[2], dwUpper = upper[2];
            T massAlphaLower = 0, massAlphaUpper = 0;
            if constexpr (Advance) {
                massAlpha = sums[nUp - 1];
                massAlphaLower = lower[nUp - 1];
                massAlphaUpper = upper[nUp - 1];
            }
            if (lane < levels) {
                const T dKinetic = keInline ? gathered(base, heldDKinetic, dBernoulli, ck) : dKe[ck];
                dBernoulli[ck] = dKinetic + hydrostatic::avg_i2l(dPhi(sumLower), dPhi(sumUpper));
                wFlux[coli + k] = wLower;
                dWFlux[coli + k] = dwLower;
                T thetaBelow = theta, dThetaBelow = dTheta, thetaAbove = 0, dThetaAbove = 0;
                if (k > 0) thetas(ck - 1, thetaBelow, dThetaBelow);
                if (k + 1 < N) thetas(ck + 1, thetaAbove, dThetaAbove);
                const T vertical = mul_rn(dwLower, hydrostatic::avg_l2i(thetaBelow, theta, k, N)) +
                                   mul_rn(wLower, hydrostatic::avg_l2i(dThetaBelow, dTheta, k, N));
                const T verticalAbove =
                    mul_rn(dwUpper, hydrostatic::avg_l2i(theta, thetaAbove, k + 1, N)) +
                    mul_rn(wUpper, hydrostatic::avg_l2i(dTheta, dThetaAbove, k + 1, N));
                const T dTendMass = -dDiv - hydrostatic::div_vflux(dwLower, dwUpper, k, N);
                const T dDivTheta = gathered(base, heldDDivTheta, thetaFluxDiv, ck);
                const T dTendTheta = hydrostatic::with_extra(
                    -dDivTheta - hydrostatic::div_vflux(vertical, verticalAbove, k, N), extra,
                    nExtra, extraStride, ck);
                hydrostatic::rk4_update(dTendMass, dMassOld, dMassNew, dMassNext, newCoef, nextCoef,
                                        accumulate, provisional, ck);
                hydrostatic::rk4_update(dTendTheta, dThetaMassOld, dThetaMassNew, dThetaMassNext,
                                        newCoef, nextCoef, accumulate, provisional, ck);
                if constexpr (Advance) {   // the forward's B and update, as hs_cell_stage's
                    const T phiLower = phiSurface + mul_rn(gravity, massAlphaLower);
                    const T phiUpper = phiSurface + mul_rn(gravity, massAlphaUpper);
                    const T kineticK = keInline ? gathered(base, heldKinetic, bernoulli, ck) : ke[ck];
                    bernoulli[ck] = kineticK + hydrostatic::avg_i2l(phiLower, phiUpper);
                    const T wTheta = mul_rn(wLower, hydrostatic::avg_l2i(thetaBelow, theta, k, N));
                    const T wThetaAbove = mul_rn(wUpper, hydrostatic::avg_l2i(theta, thetaAbove, k + 1, N));
                    const T tendMass = -div - hydrostatic::div_vflux(wLower, wUpper, k, N);
                    const T divThetaK = gathered(base, heldDivTheta, thetaFluxDivF, ck);
                    const T tendTheta = hydrostatic::with_extra(
                        -divThetaK - hydrostatic::div_vflux(wTheta, wThetaAbove, k, N), extraF, nExtraF,
                        extraStrideF, ck);
                    hydrostatic::rk4_update(tendMass, massOld, massNew, massNext, newCoef, nextCoef,
                                            accumulate, provisional, ck);
                    hydrostatic::rk4_update(tendTheta, thetaMassOld, thetaMassNew, thetaMassNext, newCoef,
                                            nextCoef, accumulate, provisional, ck);
                }
            }
        }
        if (lane == 0) {
            wFlux[coli + N] = w;
            dWFlux[coli + N] = dw;
        }
    }
}

template <typename T, int W>
__global__ void hs_cell_stage_tl(
    const int* __restrict__ edgesOnCell, const int* __restrict__ cellsAcross,
    const T* __restrict__ divCoef, const T* __restrict__ keCoef2, const T* __restrict__ dB,
    const T* __restrict__ mass, const T* __restrict__ thetaMass, const T* __restrict__ u,
    const T* __restrict__ dMass, const T* __restrict__ dThetaMass, const T* __restrict__ dU,
    const T* __restrict__ dPhiS, const T* __restrict__ dKe, const T* __restrict__ extra,
    const T* __restrict__ dMassOld, T* __restrict__ dMassNew, T* __restrict__ dMassNext,
    const T* __restrict__ dThetaMassOld, T* __restrict__ dThetaMassNew,
    T* __restrict__ dThetaMassNext, T* __restrict__ pi, T* __restrict__ dPi,
    T* __restrict__ dBernoulli, T* __restrict__ wFlux, T* __restrict__ dWFlux,
    T* __restrict__ thetaFluxDiv, T* __restrict__ F, T* __restrict__ dF, int maxEdges,
    int slotStride, int keInline, int perturbPhiS, int nExtra, int extraStride, int nVertLevels,
    T gravity, T pTop, T p0, T kappa, T R, T cp, T newCoef, T nextCoef, int accumulate,
    int provisional, int first, int last, int nlev)
{
    cell_stage_tl<T, false>(edgesOnCell, cellsAcross, divCoef, keCoef2, dB, mass, thetaMass, u,
                            dMass, dThetaMass, dU, dPhiS, dKe, extra, dMassOld, dMassNew, dMassNext,
                            dThetaMassOld, dThetaMassNew, dThetaMassNext, pi, dPi, dBernoulli,
                            wFlux, dWFlux, thetaFluxDiv, F, dF, maxEdges, slotStride, keInline,
                            perturbPhiS, nExtra, extraStride, nVertLevels, gravity, pTop, p0, kappa,
                            R, cp, newCoef, nextCoef, accumulate, provisional, first, last, nlev,
                            nullptr, nullptr, nullptr, nullptr, 0, 0, nullptr, nullptr, nullptr,
                            nullptr, nullptr, nullptr, nullptr, nullptr);
}
MESHOPS_INSTANTIATE(hs_cell_stage_tl)

// The tangent-linear cell pass advancing the forward too (hs_cell_stage's B and RK4 update of
// mass and theta_mass, bitwise; its W and pi are the pass's): both stages in one pass.
template <typename T, int W>
__global__ void hs_cell_stage_ftl(
    const int* __restrict__ edgesOnCell, const int* __restrict__ cellsAcross,
    const T* __restrict__ divCoef, const T* __restrict__ keCoef2, const T* __restrict__ dB,
    const T* __restrict__ mass, const T* __restrict__ thetaMass, const T* __restrict__ u,
    const T* __restrict__ dMass, const T* __restrict__ dThetaMass, const T* __restrict__ dU,
    const T* __restrict__ dPhiS, const T* __restrict__ dKe, const T* __restrict__ extra,
    const T* __restrict__ dMassOld, T* __restrict__ dMassNew, T* __restrict__ dMassNext,
    const T* __restrict__ dThetaMassOld, T* __restrict__ dThetaMassNew,
    T* __restrict__ dThetaMassNext, T* __restrict__ pi, T* __restrict__ dPi,
    T* __restrict__ dBernoulli, T* __restrict__ wFlux, T* __restrict__ dWFlux,
    T* __restrict__ thetaFluxDiv, T* __restrict__ F, T* __restrict__ dF, int maxEdges,
    int slotStride, int keInline, int perturbPhiS, int nExtra, int extraStride, int nVertLevels,
    T gravity, T pTop, T p0, T kappa, T R, T cp, T newCoef, T nextCoef, int accumulate,
    int provisional, const T* __restrict__ keCoef, const T* __restrict__ phiS,
    const T* __restrict__ ke, const T* __restrict__ extraF, int nExtraF, int extraStrideF,
    const T* __restrict__ massOld, T* __restrict__ massNew, T* __restrict__ massNext,
    const T* __restrict__ thetaMassOld, T* __restrict__ thetaMassNew, T* __restrict__ thetaMassNext,
    T* __restrict__ bernoulli, T* __restrict__ thetaFluxDivF, int first, int last, int nlev)
{
    cell_stage_tl<T, true>(edgesOnCell, cellsAcross, divCoef, keCoef2, dB, mass, thetaMass, u,
                           dMass, dThetaMass, dU, dPhiS, dKe, extra, dMassOld, dMassNew, dMassNext,
                           dThetaMassOld, dThetaMassNew, dThetaMassNext, pi, dPi, dBernoulli, wFlux,
                           dWFlux, thetaFluxDiv, F, dF, maxEdges, slotStride, keInline, perturbPhiS,
                           nExtra, extraStride, nVertLevels, gravity, pTop, p0, kappa, R, cp,
                           newCoef, nextCoef, accumulate, provisional, first, last, nlev, keCoef,
                           phiS, ke, extraF, nExtraF, extraStrideF, massOld, massNew, massNext,
                           thetaMassOld, thetaMassNew, thetaMassNext, bernoulli, thetaFluxDivF);
}
MESHOPS_INSTANTIATE(hs_cell_stage_ftl)

// The tangent-linear cell pass advancing the forward in two kernels, as hs_cell_flux and
// hs_cell_column: hs_cell_flux_ftl's gathers over (cell, layer) into F, dF, wFlux (D), dWFlux
// (dD), thetaFluxDiv, dBernoulli (dK), thetaFluxDivF and bernoulli (K), then hs_cell_column_ftl
// (hs_cell_stage_ftl's arguments) reading them. The same values, bitwise.
template <typename T, int W>
__global__ void hs_cell_flux_ftl(
    const int* __restrict__ edgesOnCell, const int* __restrict__ cellsAcross,
    const T* __restrict__ divCoef, const T* __restrict__ keCoef2, const T* __restrict__ keCoef,
    const T* __restrict__ mass, const T* __restrict__ thetaMass, const T* __restrict__ u,
    const T* __restrict__ dMass, const T* __restrict__ dThetaMass, const T* __restrict__ dU,
    T* __restrict__ thetaFluxDiv, T* __restrict__ wFlux, T* __restrict__ dWFlux,
    T* __restrict__ dBernoulli, T* __restrict__ thetaFluxDivF, T* __restrict__ bernoulli,
    T* __restrict__ F, T* __restrict__ dF, int maxEdges, int slotStride, int keInline,
    int nVertLevels, int first, int last, int nlev)
{
    using hydrostatic::mul_rn;
    const int N = nVertLevels;
    MESHOPS_ROWS(i, first, last, nlev) {
        MESHOPS_ROW_LANE(c, k, i, nlev);
        const T mc = mass[i], dmc = dMass[i];
        const T thc = thetaMass[i] / mc;
        const T dthc = (dThetaMass[i] - mul_rn(thc, dmc)) / mc;
        T div = 0, dDiv = 0, dDivTheta = 0, dKinetic = 0, divTheta = 0, kinetic = 0;
        cell_fluxes_tl<T, true>(
            [&](auto visit) {
                meshops::for_each_slot(edgesOnCell, c, maxEdges, slotStride,
                                       [&](meshops_offset p, int e) { visit(p, e, cellsAcross[p]); });
            },
            divCoef, keCoef2, keCoef, mass, thetaMass, u, dMass, dThetaMass, dU, F, dF, mc, dmc, thc,
            dthc, keInline, N, k, div, dDiv, dDivTheta, dKinetic, divTheta, kinetic);
        const meshops_offset ik = (meshops_offset)c * (N + 1) + k;
        wFlux[ik] = div;
        dWFlux[ik] = dDiv;
        thetaFluxDiv[i] = dDivTheta;
        thetaFluxDivF[i] = divTheta;
        if (keInline) {
            dBernoulli[i] = dKinetic;
            bernoulli[i] = kinetic;
        }
    }
}
MESHOPS_INSTANTIATE(hs_cell_flux_ftl)

template <typename T, int W>
MESHOPS_COLUMN_OCCUPANCY
__global__ void hs_cell_column_ftl(
    const int* __restrict__ edgesOnCell, const int* __restrict__ cellsAcross,
    const T* __restrict__ divCoef, const T* __restrict__ keCoef2, const T* __restrict__ dB,
    const T* __restrict__ mass, const T* __restrict__ thetaMass, const T* __restrict__ u,
    const T* __restrict__ dMass, const T* __restrict__ dThetaMass, const T* __restrict__ dU,
    const T* __restrict__ dPhiS, const T* __restrict__ dKe, const T* __restrict__ extra,
    const T* __restrict__ dMassOld, T* __restrict__ dMassNew, T* __restrict__ dMassNext,
    const T* __restrict__ dThetaMassOld, T* __restrict__ dThetaMassNew,
    T* __restrict__ dThetaMassNext, T* __restrict__ pi, T* __restrict__ dPi,
    T* __restrict__ dBernoulli, T* __restrict__ wFlux, T* __restrict__ dWFlux,
    T* __restrict__ thetaFluxDiv, T* __restrict__ F, T* __restrict__ dF, int maxEdges,
    int slotStride, int keInline, int perturbPhiS, int nExtra, int extraStride, int nVertLevels,
    T gravity, T pTop, T p0, T kappa, T R, T cp, T newCoef, T nextCoef, int accumulate,
    int provisional, const T* __restrict__ keCoef, const T* __restrict__ phiS,
    const T* __restrict__ ke, const T* __restrict__ extraF, int nExtraF, int extraStrideF,
    const T* __restrict__ massOld, T* __restrict__ massNew, T* __restrict__ massNext,
    const T* __restrict__ thetaMassOld, T* __restrict__ thetaMassNew, T* __restrict__ thetaMassNext,
    T* __restrict__ bernoulli, T* __restrict__ thetaFluxDivF, int first, int last, int nlev)
{
    cell_stage_tl<T, true, false>(edgesOnCell, cellsAcross, divCoef, keCoef2, dB, mass, thetaMass, u,
                                  dMass, dThetaMass, dU, dPhiS, dKe, extra, dMassOld, dMassNew, dMassNext,
                           dThetaMassOld, dThetaMassNew, dThetaMassNext, pi, dPi, dBernoulli, wFlux,
                           dWFlux, thetaFluxDiv, F, dF, maxEdges, slotStride, keInline, perturbPhiS,
                           nExtra, extraStride, nVertLevels, gravity, pTop, p0, kappa, R, cp,
                           newCoef, nextCoef, accumulate, provisional, first, last, nlev, keCoef,
                           phiS, ke, extraF, nExtraF, extraStrideF, massOld, massNew, massNext,
                           thetaMassOld, thetaMassNew, thetaMassNext, bernoulli, thetaFluxDivF);
}
MESHOPS_INSTANTIATE(hs_cell_column_ftl)


// The tangent-linear edge pass: dtend_u = pv_flux_e2e_tl(F, qEdge; dF, dqEdge) - grad_c2e(dB)
// - (dtheta_e grad_c2e(pi) + theta_e grad_c2e(dpi)) - (dV - V dmass_e / mass_e) / mass_e, with
// V = avg_i2l(interp_c2e(W) diff_l2i(u)), dV = avg_i2l(interp_c2e(dW) diff_l2i(u) + interp_c2e(W)
// diff_l2i(dU)); its RK4 update.
template <typename T, bool Advance>
__device__ __forceinline__ void edge_stage_tl(
    const int* __restrict__ edgesOnEdge, const T* __restrict__ weightsOnEdge,
    const int* __restrict__ cellsOnEdge, const T* __restrict__ invDcEdge, const T* __restrict__ F,
    const T* __restrict__ dF, const T* __restrict__ qEdge, const T* __restrict__ dqEdge,
    const T* __restrict__ dBernoulli, const T* __restrict__ pi, const T* __restrict__ dPi,
    const T* __restrict__ mass, const T* __restrict__ thetaMass, const T* __restrict__ dMass,
    const T* __restrict__ dThetaMass, const T* __restrict__ wFlux, const T* __restrict__ dWFlux,
    const T* __restrict__ u, const T* __restrict__ dU, const T* __restrict__ extra,
    const int* __restrict__ edgesOnEdgeDel2, const T* __restrict__ coefDel2,
    const T* __restrict__ del2In, const T* __restrict__ dUOld, T* __restrict__ dUNew,
    T* __restrict__ dUNext, int maxEdges2, int slotStride, int nExtra, int extraStride,
    T extraScale, int del2Width, int del2SlotStride, int nVertLevels, T newCoef, T nextCoef,
    int accumulate, int provisional, int first, int last, int nlev, const T* __restrict__ bernoulli,
    const T* __restrict__ extraF, int nExtraF, int extraStrideF, T extraScaleF,
    const T* __restrict__ del2InF, const T* __restrict__ uOld, T* __restrict__ uNew,
    T* __restrict__ uNext)
{
    using hydrostatic::mean_of_ends;
    using hydrostatic::mul_rn;
    const int N = nVertLevels;
    MESHOPS_ROWS(i, first, last, nlev) {
        MESHOPS_ROW_LANE(e, k, i, nlev);
        const T qe = qEdge[i], dqe = dqEdge[i];
        T acc = 0, accF = 0;
        meshops::for_each_slot(edgesOnEdge, e, maxEdges2, slotStride, [&](meshops_offset p, int e2) {
            const meshops_offset e2k = (meshops_offset)e2 * N + k;
            acc += weightsOnEdge[p] * (dF[e2k] * (qe + qEdge[e2k]) + F[e2k] * (dqe + dqEdge[e2k]));
            if constexpr (Advance) accF += weightsOnEdge[p] * (F[e2k] * (qe + qEdge[e2k]));
        });
        const int c0 = cellsOnEdge[2 * e], c1 = cellsOnEdge[2 * e + 1];
        const T invDc = invDcEdge[e];
        // theta_e and dtheta_e = interp_c2e of theta_mass / mass and (dtheta_mass - theta dmass) / mass
        T thetaSum = 0, dThetaSum = 0;
        const int ends[2] = {c0, c1};
        for (int h = 0; h < 2; ++h) {
            if (ends[h] < 0) continue;
            const meshops_offset ck = (meshops_offset)ends[h] * N + k;
            const T theta = thetaMass[ck] / mass[ck];
            thetaSum += theta;
            dThetaSum += (dThetaMass[ck] - mul_rn(theta, dMass[ck])) / mass[ck];
        }
        const T thetaEdge = (T)0.5 * thetaSum, dThetaEdge = (T)0.5 * dThetaSum;
        const T massEdge = mean_of_ends(mass, c0, c1, N, k), dMassEdge = mean_of_ends(dMass, c0, c1, N, k);
        const T gradDB = hydrostatic::difference_of_ends(dBernoulli, c0, c1, invDc, N, k);
        const T gradPi = hydrostatic::difference_of_ends(pi, c0, c1, invDc, N, k);
        const T gradDPi = hydrostatic::difference_of_ends(dPi, c0, c1, invDc, N, k);
        // the vertical advection of u at layer k, from interfaces k and k + 1
        const T* ue = u + (meshops_offset)e * N;
        const T* due = dU + (meshops_offset)e * N;
        T V[2], dV[2];
        for (int h = 0; h < 2; ++h) {
            const int j = k + h;
            const T we = mean_of_ends(wFlux, c0, c1, N + 1, j), dwe = mean_of_ends(dWFlux, c0, c1, N + 1, j);
            const T du = hydrostatic::diff_l2i(j > 0 ? ue[j - 1] : (T)0, j < N ? ue[j] : (T)0, j, N);
            const T ddu = hydrostatic::diff_l2i(j > 0 ? due[j - 1] : (T)0, j < N ? due[j] : (T)0, j, N);
            V[h] = mul_rn(we, du);
            dV[h] = mul_rn(dwe, du) + mul_rn(we, ddu);
        }
        const T v = hydrostatic::avg_i2l(V[0], V[1]), dv = hydrostatic::avg_i2l(dV[0], dV[1]);
        const T tend = mul_rn((T)0.5, acc) - gradDB -
                       (mul_rn(dThetaEdge, gradPi) + mul_rn(thetaEdge, gradDPi)) -
                       (dv - mul_rn(v, dMassEdge) / massEdge) / massEdge;
        hydrostatic::rk4_update(hydrostatic::with_extra_or_laplacian(
                                    tend, extra, nExtra, extraStride, i, extraScale, edgesOnEdgeDel2,
                                    coefDel2, del2In, e, del2Width, del2SlotStride, N, k),
                                dUOld, dUNew, dUNext, newCoef, nextCoef, accumulate, provisional, i);
        if constexpr (Advance) {   // the forward's tendency and update, as hs_edge_stage's
            const T gradB = hydrostatic::difference_of_ends(bernoulli, c0, c1, invDc, N, k);
            const T tendF = mul_rn((T)0.5, accF) - gradB - mul_rn(thetaEdge, gradPi) - v / massEdge;
            hydrostatic::rk4_update(hydrostatic::with_extra_or_laplacian(
                                        tendF, extraF, nExtraF, extraStrideF, i, extraScaleF,
                                        edgesOnEdgeDel2, coefDel2, del2InF, e, del2Width,
                                        del2SlotStride, N, k),
                                    uOld, uNew, uNext, newCoef, nextCoef, accumulate, provisional, i);
        }
    }
}

template <typename T, int W>
__global__ void hs_edge_stage_tl(
    const int* __restrict__ edgesOnEdge, const T* __restrict__ weightsOnEdge,
    const int* __restrict__ cellsOnEdge, const T* __restrict__ invDcEdge, const T* __restrict__ F,
    const T* __restrict__ dF, const T* __restrict__ qEdge, const T* __restrict__ dqEdge,
    const T* __restrict__ dBernoulli, const T* __restrict__ pi, const T* __restrict__ dPi,
    const T* __restrict__ mass, const T* __restrict__ thetaMass, const T* __restrict__ dMass,
    const T* __restrict__ dThetaMass, const T* __restrict__ wFlux, const T* __restrict__ dWFlux,
    const T* __restrict__ u, const T* __restrict__ dU, const T* __restrict__ extra,
    const int* __restrict__ edgesOnEdgeDel2, const T* __restrict__ coefDel2,
    const T* __restrict__ del2In, const T* __restrict__ dUOld, T* __restrict__ dUNew,
    T* __restrict__ dUNext, int maxEdges2, int slotStride, int nExtra, int extraStride,
    T extraScale, int del2Width, int del2SlotStride, int nVertLevels, T newCoef, T nextCoef,
    int accumulate, int provisional, int first, int last, int nlev)
{
    edge_stage_tl<T, false>(edgesOnEdge, weightsOnEdge, cellsOnEdge, invDcEdge, F, dF, qEdge,
                            dqEdge, dBernoulli, pi, dPi, mass, thetaMass, dMass, dThetaMass, wFlux,
                            dWFlux, u, dU, extra, edgesOnEdgeDel2, coefDel2, del2In, dUOld, dUNew,
                            dUNext, maxEdges2, slotStride, nExtra, extraStride, extraScale,
                            del2Width, del2SlotStride, nVertLevels, newCoef, nextCoef, accumulate,
                            provisional, first, last, nlev, nullptr, nullptr, 0, 0, (T)0, nullptr,
                            nullptr, nullptr, nullptr);
}
MESHOPS_INSTANTIATE(hs_edge_stage_tl)

// The tangent-linear edge pass advancing the forward too (hs_edge_stage's tendency and RK4
// update of u, bitwise, from the cell pass's B): both stages in one pass.
template <typename T, int W>
__global__ void hs_edge_stage_ftl(
    const int* __restrict__ edgesOnEdge, const T* __restrict__ weightsOnEdge,
    const int* __restrict__ cellsOnEdge, const T* __restrict__ invDcEdge, const T* __restrict__ F,
    const T* __restrict__ dF, const T* __restrict__ qEdge, const T* __restrict__ dqEdge,
    const T* __restrict__ dBernoulli, const T* __restrict__ pi, const T* __restrict__ dPi,
    const T* __restrict__ mass, const T* __restrict__ thetaMass, const T* __restrict__ dMass,
    const T* __restrict__ dThetaMass, const T* __restrict__ wFlux, const T* __restrict__ dWFlux,
    const T* __restrict__ u, const T* __restrict__ dU, const T* __restrict__ extra,
    const int* __restrict__ edgesOnEdgeDel2, const T* __restrict__ coefDel2,
    const T* __restrict__ del2In, const T* __restrict__ dUOld, T* __restrict__ dUNew,
    T* __restrict__ dUNext, int maxEdges2, int slotStride, int nExtra, int extraStride,
    T extraScale, int del2Width, int del2SlotStride, int nVertLevels, T newCoef, T nextCoef,
    int accumulate, int provisional, const T* __restrict__ bernoulli, const T* __restrict__ extraF,
    int nExtraF, int extraStrideF, T extraScaleF, const T* __restrict__ del2InF,
    const T* __restrict__ uOld, T* __restrict__ uNew, T* __restrict__ uNext, int first, int last,
    int nlev)
{
    edge_stage_tl<T, true>(edgesOnEdge, weightsOnEdge, cellsOnEdge, invDcEdge, F, dF, qEdge, dqEdge,
                           dBernoulli, pi, dPi, mass, thetaMass, dMass, dThetaMass, wFlux, dWFlux,
                           u, dU, extra, edgesOnEdgeDel2, coefDel2, del2In, dUOld, dUNew, dUNext,
                           maxEdges2, slotStride, nExtra, extraStride, extraScale, del2Width,
                           del2SlotStride, nVertLevels, newCoef, nextCoef, accumulate, provisional,
                           first, last, nlev, bernoulli, extraF, nExtraF, extraStrideF, extraScaleF,
                           del2InF, uOld, uNew, uNext);
}
MESHOPS_INSTANTIATE(hs_edge_stage_ftl)


// -- adjoint, deterministic: the stage of hydrostatic.dynamics.tendencies_adj about the provisional
// state (mass, thetaMass, u) with the forward's fields F, qVertex, qEdge and W of the stage's record
// (hydrostatic.fused_stages.FusedStages.record), from its adjoint tendencies (massTendAdj, thetaMassTendAdj,
// uTendAdj), in five gather passes (hydrostatic/fused_adjoint.py): every transposed sum a gather in a
// fixed slot order (edgesOnCell, the TRiSK stencil with its reverse weights, cellsOnEdgeT,
// verticesOnEdgeT, edgesOnVertexT, verticesOnCell), no atomics, so the same bits on every run.
//
//   edge pass    PV flux adjoint: F_adj = (T2 + q_e T1) / 2, q_e_adj = (g sum_j w_j F_j + F T1) / 2
//                (T1 = sum_j w'_j g_j, T2 = sum_j w'_j g_j q_e_j, w' the reverse weights), h_theta =
//                -div_e2c^T(thetaMassTendAdj): F_adj += theta_e h_theta, theta_e_adj = F h_theta -
//                grad_c2e(pi) g; the vertical advection's mass_e_adj = V g / mass_e^2, its W_e adjoint
//                diff_l2i(u) h (interfaces) and u part diff_l2i^T(W_e h), h = avg_i2l^T(-g / mass_e)
//   vertex pass  w = interp_v2e^T(q_e_adj) / interp_c2v(mass) (the vorticity's adjoint), q_v w
//   column pass  B_adj = -grad_c2e^T(g), pi_adj = -grad_c2e^T(theta_e g), theta_adj and W_adj of the
//                edges' parts (interp_c2e^T), the column: W_adj = -Dv^T(massTendAdj) + avg_l2i(theta)
//                v + ..., v = -Dv^T(thetaMassTendAdj); D_adj = -massTendAdj + W^T(W_adj); the column
//                diagnostics' adjoint (phi = B - K: phi_i, phi_s, alpha, p, theta, the scans), down the
//                column and up it; mass_adj's column part, theta_mass_adj and phi_s_adj
//   u pass       F_adj += div_e2c^T(D_adj): mass_e_adj += u F_adj, u_adj = its part + mass_e F_adj +
//                curl_e2v^T(w) + ke_e2c^T(u; B_adj) (TRiSK's kinetic energy) + the extra parts
//   mass pass    mass_adj = its column part + interp_c2e^T(mass_e_adj) - interp_c2v^T(q_v w) + extra
//
// The u and mass passes apply the adjoint step's RK4 bookkeeping (adjoint_rk4) to what they compute.

namespace hydrostatic {

// Theta = thetaMass / mass at the ends (c0, c1) of an edge, at level k, averaged (interp_c2e).
template <typename T>
__device__ __forceinline__ T theta_edge(const T* __restrict__ thetaMass, const T* __restrict__ mass,
                                        int c0, int c1, int N, int k)
{
    T sum = 0;
    if (c0 >= 0) sum += thetaMass[(meshops_offset)c0 * N + k] / mass[(meshops_offset)c0 * N + k];
    if (c1 >= 0) sum += thetaMass[(meshops_offset)c1 * N + k] / mass[(meshops_offset)c1 * N + k];
    return (T)0.5 * sum;
}

// avg_i2l^T(-g / mass_e) at interface j of an edge column (g and mass_e at layers j - 1 and j).
template <typename T>
__device__ __forceinline__ T vertical_advection_h(const T* __restrict__ g, const T* __restrict__ mass,
                                                  int c0, int c1, meshops_offset row, int j, int N)
{
    T h = 0;
    if (j < N) h += (T)0.5 * (-g[row + j] / mean_of_ends(mass, c0, c1, N, j));
    if (j > 0) h += (T)0.5 * (-g[row + j - 1] / mean_of_ends(mass, c0, c1, N, j - 1));
    return h;
}

}  // namespace hydrostatic

// The adjoint edge pass (comment above) over (edge, layer): edgesOnEdge, weightsOnEdge and
// weightsOnEdgeReverse in one layout (slotStride), cellsOnEdge and divAdjCoef row-major (2 slots).
template <typename T, int W>
__global__ void hs_adj_edge(
    const int* __restrict__ edgesOnEdge, const T* __restrict__ weightsOnEdge,
    const T* __restrict__ weightsOnEdgeReverse, const int* __restrict__ cellsOnEdge,
    const T* __restrict__ invDcEdge, const T* __restrict__ divAdjCoef, const T* __restrict__ uTendAdj,
    const T* __restrict__ thetaMassTendAdj, const T* __restrict__ F, const T* __restrict__ qEdge,
    const T* __restrict__ pi, const T* __restrict__ mass, const T* __restrict__ thetaMass,
    const T* __restrict__ wFlux, const T* __restrict__ u, T* __restrict__ qEdgeAdj,
    T* __restrict__ fluxAdj, T* __restrict__ thetaEdgeAdj, T* __restrict__ massEdgeAdj,
    T* __restrict__ wEdgeAdj, T* __restrict__ uAdjPart, int maxEdges2, int slotStride,
    int nVertLevels, int first, int last, int nlev)
{
    using hydrostatic::mean_of_ends;
    const int N = nVertLevels;
    MESHOPS_ROWS(i, first, last, nlev) {
        MESHOPS_ROW_LANE(e, k, i, nlev);
        const T g = uTendAdj[i], qe = qEdge[i], Fe = F[i];
        T t1 = 0, t2 = 0, fluxSum = 0;
        meshops::for_each_slot(edgesOnEdge, e, maxEdges2, slotStride, [&](meshops_offset p, int e2) {
            const meshops_offset e2k = (meshops_offset)e2 * N + k;
            const T g2 = uTendAdj[e2k], wr = weightsOnEdgeReverse[p];
            t1 += wr * g2;
            t2 += wr * (g2 * qEdge[e2k]);
            fluxSum += weightsOnEdge[p] * F[e2k];
        });
        const int c0 = cellsOnEdge[2 * e], c1 = cellsOnEdge[2 * e + 1];
        T divAdj = 0;
        if (c0 >= 0) divAdj += divAdjCoef[2 * e] * thetaMassTendAdj[(meshops_offset)c0 * N + k];
        if (c1 >= 0) divAdj += divAdjCoef[2 * e + 1] * thetaMassTendAdj[(meshops_offset)c1 * N + k];
        const T hTheta = -divAdj;
        const T thetaEdge = hydrostatic::theta_edge(thetaMass, mass, c0, c1, N, k);
        const T gradPi = hydrostatic::difference_of_ends(pi, c0, c1, invDcEdge[e], N, k);
        qEdgeAdj[i] = (T)0.5 * (g * fluxSum + Fe * t1);
        fluxAdj[i] = (T)0.5 * (t2 + qe * t1) + thetaEdge * hTheta;
        thetaEdgeAdj[i] = Fe * hTheta - gradPi * g;
        // the vertical advection -V / mass_e, V = avg_i2l(W_e diff_l2i(u))
        const meshops_offset row = (meshops_offset)e * N;
        const T* ue = u + row;
        const T massEdge = mean_of_ends(mass, c0, c1, N, k);
        const T duBelow = hydrostatic::diff_l2i(k > 0 ? ue[k - 1] : (T)0, ue[k], k, N);
        const T duAbove = hydrostatic::diff_l2i(ue[k], k + 1 < N ? ue[k + 1] : (T)0, k + 1, N);
        const T wBelow = mean_of_ends(wFlux, c0, c1, N + 1, k);
        const T wAbove = mean_of_ends(wFlux, c0, c1, N + 1, k + 1);
        const T v = hydrostatic::avg_i2l(wBelow * duBelow, wAbove * duAbove);
        massEdgeAdj[i] = v * g / (massEdge * massEdge);
        const T hBelow = hydrostatic::vertical_advection_h(uTendAdj, mass, c0, c1, row, k, N);
        const T hAbove = hydrostatic::vertical_advection_h(uTendAdj, mass, c0, c1, row, k + 1, N);
        const meshops_offset rowi = (meshops_offset)e * (N + 1);
        wEdgeAdj[rowi + k] = duBelow * hBelow;
        if (k == N - 1) wEdgeAdj[rowi + N] = duAbove * hAbove;
        // diff_l2i^T(W_e h) at layer k: +z[k] (k > 0), -z[k + 1] (k + 1 < N)
        T part = 0;
        if (k > 0) part += wBelow * hBelow;
        if (k + 1 < N) part -= wAbove * hAbove;
        uAdjPart[i] = part;
    }
}
MESHOPS_INSTANTIATE(hs_adj_edge)

// The adjoint vertex pass over (vertex, layer): verticesOnEdgeT (the edges of each vertex, SE slots,
// strideE; interp_v2e's 1/2 applied to the sum), cellsOnVertex and c2vCoef (vertexDegree slots,
// slotStride). vortAdj = interp_v2e^T(qEdgeAdj) / interp_c2v(mass), qVortAdj = qVertex vortAdj.
template <typename T, int W>
__global__ void hs_adj_vertex(const int* __restrict__ verticesOnEdgeT,
                              const int* __restrict__ cellsOnVertex, const T* __restrict__ c2vCoef,
                              const T* __restrict__ qEdgeAdj, const T* __restrict__ qVertex,
                              const T* __restrict__ mass, T* __restrict__ vortAdj,
                              T* __restrict__ qVortAdj, int SE, int strideE, int vertexDegree,
                              int slotStride, int nVertLevels, int first, int last, int nlev)
{
    MESHOPS_ROWS(i, first, last, nlev) {
        MESHOPS_ROW_LANE(v, k, i, nlev);
        T qAdj = 0, massVertex = 0;
        meshops::for_each_slot(verticesOnEdgeT, v, SE, strideE, [&](meshops_offset, int e) {
            qAdj += qEdgeAdj[(meshops_offset)e * nlev + k];
        });
        meshops::for_each_slot(cellsOnVertex, v, vertexDegree, slotStride, [&](meshops_offset p, int c) {
            massVertex += c2vCoef[p] * mass[(meshops_offset)c * nlev + k];
        });
        const T w = (T)0.5 * qAdj / massVertex;
        vortAdj[i] = w;
        qVortAdj[i] = qVertex[i] * w;
    }
}
MESHOPS_INSTANTIATE(hs_adj_vertex)

// The adjoint column pass's gathers at layer k of column c (interface k + 1 for W): B_adj =
// -grad_c2e^T(uTendAdj), pi_adj = -grad_c2e^T(theta_e uTendAdj), theta_adj's part
// interp_c2e^T(thetaEdgeAdj) and W_adj's interp_c2e^T(wEdgeAdj), each edge of the column through
// for_slots' visit(e, c0, c1) (its cellsOnEdge).
template <typename T, typename Slots>
__device__ __forceinline__ void adj_column_edges(
    Slots for_slots, int c, const T* __restrict__ invDcEdge, const T* __restrict__ uTendAdj,
    const T* __restrict__ thetaEdgeAdj, const T* __restrict__ wEdgeAdj, const T* __restrict__ mass,
    const T* __restrict__ thetaMass, int N, int k, T& bAdj, T& piAdj, T& thetaPart, T& wPart)
{
    for_slots([&](int e, int c0, int c1) {
        const T coef = c == c1 ? invDcEdge[e] : -invDcEdge[e];
        const meshops_offset ek = (meshops_offset)e * N + k;
        const T g = uTendAdj[ek];
        bAdj -= coef * g;
        piAdj -= coef * (hydrostatic::theta_edge(thetaMass, mass, c0, c1, N, k) * g);
        thetaPart += thetaEdgeAdj[ek];
        wPart += wEdgeAdj[(meshops_offset)e * (N + 1) + k + 1];
    });
    thetaPart = (T)0.5 * thetaPart;
    wPart = (T)0.5 * wPart;
}

// The adjoint column pass, one warp per column c (warp_column.cuh; comment above); edgesOnCell
// (maxEdges slots, slotStride), cellsOnEdge and invDcEdge (grad_c2e's coefficient of c at each edge:
// +1 / dcEdge at the edge's second cell, -1 / dcEdge at its first). When Summed the edges' parts
// are read from sums instead (bernoulliAcc, piAcc, thetaAcc, wAcc: the atomic edge pass's
// scatters or hs_adj_cell_gather's). Two sweeps over the column's chunks of levels, each lane at
// its layer k, interface j = k + 1:
//   down (chunks from the top): the edges' gathers at layer k (B_adj, pi_adj, theta_adj's part) and
//     interface j (W_adj's part), W_adj[j]; the scans from the top, in the order k = N-1..0: Y[k] =
//     sum_{j' > k} W_adj[j'], phi_i_adj[j] = avg_i2l^T(B_adj), X[k] = g sum_{j' > k} phi_i_adj[j'],
//     phi_s_adj = sum phi_i_adj, p_i and p, sum_l dB[l] Y[l]; at layer k alpha and the adjoints of
//     alpha and p, theta_adj, theta_mass_adj = theta_adj / mass, mass_adj = alpha X - theta
//     theta_mass_adj; Y and p_adj held in divAdj and pAdj (the lowest chunk's in the lane's
//     registers) until
//   up (chunks from the surface) reads them: D_adj = -massTendAdj + sum_l dB[l] Y[l] - Y[k]; the scan
//     from the surface, k = 0..N-1: mass_adj += g sum_{j <= k} avg_i2l^T(p_adj)[j].
template <typename T, bool Summed>
__device__ __forceinline__ void adj_column(
    const int* __restrict__ edgesOnCell, const int* __restrict__ cellsOnEdge,
    const T* __restrict__ invDcEdge, const T* __restrict__ dB, const T* __restrict__ uTendAdj,
    const T* __restrict__ massTendAdj, const T* __restrict__ thetaMassTendAdj,
    const T* __restrict__ thetaEdgeAdj, const T* __restrict__ wEdgeAdj,
    const T* __restrict__ bernoulliAcc, const T* __restrict__ piAcc, const T* __restrict__ thetaAcc,
    const T* __restrict__ wAcc, const T* __restrict__ mass, const T* __restrict__ thetaMass,
    const T* __restrict__ wFlux, T* __restrict__ bernoulliAdj, T* __restrict__ divAdj,
    T* __restrict__ massAdjPart, T* __restrict__ thetaMassAdj, T* __restrict__ pAdj,
    T* __restrict__ phiSAdj, int maxEdges, int slotStride, int accumulatePhiS,
    int nVertLevels, T gravity, T pTop, T p0, T kappa, T R, T cp, int first, int last)
{
    const int N = nVertLevels;
    MESHOPS_WARP_COLUMNS(c, lane, first, last) {
        const meshops_offset col = (meshops_offset)c * N, coli = (meshops_offset)c * (N + 1);
        T massAbove = 0, pAbove = pTop + gravity * massAbove;
        T ySum = 0, xSum = 0, phiS = 0, total = 0;
        T bAbove = 0;  // B_adj of the layer above (none above the top)
        T heldY = 0, heldPAdj = 0;  // the lowest chunk's
        [[maybe_unused]] const auto slots = [&] {
            if constexpr (Summed)
                return 0;
            else
                return meshops::column_slots<3>(
                    edgesOnCell, c, maxEdges, slotStride, lane,
                    [&](meshops_offset, int e, int (&more)[2]) {
                        more[0] = cellsOnEdge[2 * e];
                        more[1] = cellsOnEdge[2 * e + 1];
                    });
        }();
        for (int base = (N - 1) / meshops::kWarpLanes * meshops::kWarpLanes; base >= 0;
             base -= meshops::kWarpLanes) {
            const int k = base + lane, levels = MESHOPS_CHUNK_LEVELS(base, N);
            const meshops_offset ck = col + k;
            T bAdj = 0, piAdj = 0, thetaPart = 0, mc = 0, gt = 0, theta = 0, vAbove = 0, wAdj = 0, dBk = 0;
            if (lane < levels) {
                T wPart = 0;
                if constexpr (Summed) {
                    bAdj = bernoulliAcc[ck];
                    piAdj = piAcc[ck];
                    thetaPart = thetaAcc[ck];
                    wPart = wAcc[coli + k + 1];
                } else {
                    adj_column_edges(
                        [&](auto visit) {
                            meshops::for_each_column_slot(
                                slots, [&](meshops_offset, int e, const int (&more)[2]) {
                                    visit(e, more[0], more[1]);
                                });
                        },
                        c, invDcEdge, uTendAdj, thetaEdgeAdj, wEdgeAdj, mass, thetaMass, N, k, bAdj,
                        piAdj, thetaPart, wPart);
                }
                mc = mass[ck];
                gt = thetaMassTendAdj[ck];
                theta = thetaMass[ck] / mc;
                dBk = dB[k];
                // interface j = k + 1: v = -Dv^T(thetaMassTendAdj), W_adj
                const int j = k + 1;
                const T gm = massTendAdj[ck];
                const T gmAbove = j < N ? massTendAdj[ck + 1] : (T)0;
                const T gtAbove = j < N ? thetaMassTendAdj[ck + 1] : (T)0;
                const T thetaAbove = j < N ? thetaMass[ck + 1] / mass[ck + 1] : (T)0;
                vAbove = j < N ? -(gt - gtAbove) : (T)0;
                wAdj = (j < N ? -(gm - gmAbove) : (T)0) +
                       hydrostatic::avg_l2i(theta, thetaAbove, j, N) * vAbove + wPart;
            }
            T Y = 0, X = 0, p = 0;
            const T shared[4] = {wAdj, bAdj, mc, dBk};
            const T* terms = meshops::share_terms(shared, levels, lane, lane);
            for (int l = levels - 1; l >= 0; --l) {
                ySum += terms[l];
                const T b = terms[meshops::kWarpLanes + l];
                const T phiIAdj = (base + l + 1 < N ? (T)0.5 * bAbove : (T)0) + (T)0.5 * b;
                phiS += phiIAdj;
                xSum += phiIAdj;
                massAbove += terms[2 * meshops::kWarpLanes + l];
                const T pBelow = pTop + gravity * massAbove;
                if (l == lane) {
                    Y = ySum;
                    X = gravity * xSum;
                    p = hydrostatic::avg_i2l(pBelow, pAbove);
                }
                pAbove = pBelow;
                total += terms[3 * meshops::kWarpLanes + l] * ySum;
                bAbove = b;
            }
            if (lane < levels) {
                // layer k: alpha (hydrostatic.dynamics.column_diagnostics), the adjoints of alpha and p
                const T exner = pow(p / p0, kappa);
                const T alpha = R * theta * exner / p;
                const T aTheta = R * exner / p;
                const T aP = (kappa - 1) * aTheta * theta / p;
                const T alphaAdj = mc * X;
                const T pAdjLayer = aP * alphaAdj + cp * (kappa * exner / p * piAdj);
                const T vBelow = k > 0 ? -(thetaMassTendAdj[ck - 1] - gt) : (T)0;
                const T wv = wFlux[coli + k] * vBelow;
                const T wvUp = wFlux[coli + k + 1] * vAbove;
                const T thetaAdj = aTheta * alphaAdj + thetaPart + (k == 0 ? (T)1 : (T)0.5) * wv +
                                   (k + 1 == N ? (T)1 : (T)0.5) * wvUp;
                const T tmAdj = thetaAdj / mc;
                thetaMassAdj[ck] = tmAdj;
                massAdjPart[ck] = alpha * X - theta * tmAdj;
                meshops::hold(base, Y, heldY, divAdj, ck);
                meshops::hold(base, pAdjLayer, heldPAdj, pAdj, ck);
                bernoulliAdj[ck] = bAdj;
            }
        }
        phiS += (T)0.5 * bAbove;  // phi_i_adj at the surface interface
        T zSum = 0, pAdjBelow = 0;
        for (int base = 0; base < N; base += meshops::kWarpLanes) {
            const int k = base + lane, levels = MESHOPS_CHUNK_LEVELS(base, N);
            const meshops_offset ck = col + k;
            T pa = 0;
            if (lane < levels) {
                divAdj[ck] = -massTendAdj[ck] + (total - meshops::held(base, heldY, divAdj, ck));
                pa = meshops::held(base, heldPAdj, pAdj, ck);
            }
            T z = 0;
            const T shared[1] = {pa};
            const T* terms = meshops::share_terms(shared, levels, lane, lane);
            for (int l = 0; l < levels; ++l) {
                const T paLevel = terms[l];
                zSum += (T)0.5 * paLevel + (base + l > 0 ? (T)0.5 * pAdjBelow : (T)0);
                pAdjBelow = paLevel;
                if (l == lane) z = zSum;
            }
            if (lane < levels) massAdjPart[ck] = massAdjPart[ck] + gravity * z;
        }
        if (lane == 0) phiSAdj[c] = accumulatePhiS ? phiSAdj[c] + phiS : phiS;
    }
}

template <typename T, int W>
__global__ void hs_adj_column(
    const int* __restrict__ edgesOnCell, const int* __restrict__ cellsOnEdge,
    const T* __restrict__ invDcEdge, const T* __restrict__ dB, const T* __restrict__ uTendAdj,
    const T* __restrict__ massTendAdj, const T* __restrict__ thetaMassTendAdj,
    const T* __restrict__ thetaEdgeAdj, const T* __restrict__ wEdgeAdj,
    const T* __restrict__ bernoulliAcc, const T* __restrict__ piAcc, const T* __restrict__ thetaAcc,
    const T* __restrict__ wAcc, const T* __restrict__ mass, const T* __restrict__ thetaMass,
    const T* __restrict__ wFlux, T* __restrict__ bernoulliAdj, T* __restrict__ divAdj,
    T* __restrict__ massAdjPart, T* __restrict__ thetaMassAdj, T* __restrict__ pAdj,
    T* __restrict__ phiSAdj, int maxEdges, int slotStride, int accumulatePhiS,
    int nVertLevels, T gravity, T pTop, T p0, T kappa, T R, T cp, int first, int last, int nlev)
{
    adj_column<T, false>(edgesOnCell, cellsOnEdge, invDcEdge, dB, uTendAdj, massTendAdj,
                         thetaMassTendAdj, thetaEdgeAdj, wEdgeAdj, bernoulliAcc, piAcc, thetaAcc,
                         wAcc, mass, thetaMass, wFlux, bernoulliAdj, divAdj, massAdjPart,
                         thetaMassAdj, pAdj, phiSAdj, maxEdges, slotStride,
                         accumulatePhiS, nVertLevels, gravity, pTop, p0, kappa, R, cp, first, last);
}
MESHOPS_INSTANTIATE(hs_adj_column)

// hs_adj_column reading the sums alone, its gathers not compiled: in atomic mode and after
// hs_adj_cell_gather.
template <typename T, int W>
MESHOPS_COLUMN_OCCUPANCY
__global__ void hs_adj_column_summed(
    const int* __restrict__ edgesOnCell, const int* __restrict__ cellsOnEdge,
    const T* __restrict__ invDcEdge, const T* __restrict__ dB, const T* __restrict__ uTendAdj,
    const T* __restrict__ massTendAdj, const T* __restrict__ thetaMassTendAdj,
    const T* __restrict__ thetaEdgeAdj, const T* __restrict__ wEdgeAdj,
    const T* __restrict__ bernoulliAcc, const T* __restrict__ piAcc, const T* __restrict__ thetaAcc,
    const T* __restrict__ wAcc, const T* __restrict__ mass, const T* __restrict__ thetaMass,
    const T* __restrict__ wFlux, T* __restrict__ bernoulliAdj, T* __restrict__ divAdj,
    T* __restrict__ massAdjPart, T* __restrict__ thetaMassAdj, T* __restrict__ pAdj,
    T* __restrict__ phiSAdj, int maxEdges, int slotStride, int accumulatePhiS,
    int nVertLevels, T gravity, T pTop, T p0, T kappa, T R, T cp, int first, int last, int nlev)
{
    adj_column<T, true>(edgesOnCell, cellsOnEdge, invDcEdge, dB, uTendAdj, massTendAdj,
                        thetaMassTendAdj, thetaEdgeAdj, wEdgeAdj, bernoulliAcc, piAcc, thetaAcc,
                        wAcc, mass, thetaMass, wFlux, bernoulliAdj, divAdj, massAdjPart,
                        thetaMassAdj, pAdj, phiSAdj, maxEdges, slotStride,
                        accumulatePhiS, nVertLevels, gravity, pTop, p0, kappa, R, cp, first, last);
}
MESHOPS_INSTANTIATE(hs_adj_column_summed)

// The column pass's gathers (adj_column_edges) over (cell, layer), one level per thread, into the
// sums hs_adj_column_summed reads (bernoulliAcc, piAcc, thetaAcc; wAcc at interface
// k + 1): the deterministic pass in two kernels, the same values.
template <typename T, int W>
__global__ void hs_adj_cell_gather(
    const int* __restrict__ edgesOnCell, const int* __restrict__ cellsOnEdge,
    const T* __restrict__ invDcEdge, const T* __restrict__ uTendAdj,
    const T* __restrict__ thetaEdgeAdj, const T* __restrict__ wEdgeAdj, const T* __restrict__ mass,
    const T* __restrict__ thetaMass, T* __restrict__ bernoulliAcc, T* __restrict__ piAcc,
    T* __restrict__ thetaAcc, T* __restrict__ wAcc, int maxEdges, int slotStride, int nVertLevels,
    int first, int last, int nlev)
{
    const int N = nVertLevels;
    MESHOPS_ROWS(i, first, last, nlev) {
        MESHOPS_ROW_LANE(c, k, i, nlev);
        T bAdj = 0, piAdj = 0, thetaPart = 0, wPart = 0;
        adj_column_edges(
            [&](auto visit) {
                meshops::for_each_slot(edgesOnCell, c, maxEdges, slotStride, [&](meshops_offset, int e) {
                    visit(e, cellsOnEdge[2 * e], cellsOnEdge[2 * e + 1]);
                });
            },
            c, invDcEdge, uTendAdj, thetaEdgeAdj, wEdgeAdj, mass, thetaMass, N, k, bAdj, piAdj,
            thetaPart, wPart);
        bernoulliAcc[i] = bAdj;
        piAcc[i] = piAdj;
        thetaAcc[i] = thetaPart;
        wAcc[(meshops_offset)c * (N + 1) + k + 1] = wPart;
    }
}
MESHOPS_INSTANTIATE(hs_adj_cell_gather)

// The adjoint u pass over (edge, layer): cellsOnEdge, divAdjCoef and keAdjCoef row-major (2 slots),
// edgesOnVertexT and curlCoefT (S slots, slotStride). massEdgeAdj is completed in place; with
// `extra`, uExtraScale uExtra is added (the product rounded on its own: a lone del2 / del4 term's
// coefficient, else 1), or with del2Width > 0 uExtraScale times the composed transposed vector
// Laplacian of uExtra (edgesOnEdgeDel2, coefDel2T: vector_laplacian_e2e_adj's deterministic
// gather); the stage's u adjoint goes into the RK4 bookkeeping.
template <typename T, int W>
__global__ void hs_adj_u(
    const int* __restrict__ cellsOnEdge, const T* __restrict__ divAdjCoef,
    const T* __restrict__ keAdjCoef, const int* __restrict__ edgesOnVertexT,
    const T* __restrict__ curlCoefT, const T* __restrict__ fluxAdj, const T* __restrict__ divAdj,
    const T* __restrict__ bernoulliAdj, const T* __restrict__ vortAdj, const T* __restrict__ mass,
    const T* __restrict__ u, const T* __restrict__ uAdjPart, const T* __restrict__ uExtra,
    const int* __restrict__ edgesOnEdgeDel2, const T* __restrict__ coefDel2T,
    T* __restrict__ massEdgeAdj, T* __restrict__ yAdj, const T* __restrict__ newAdj,
    T* __restrict__ kAdj, int S, int slotStride, int keInline, int extra, T uExtraScale,
    int del2Width, int del2SlotStride, int nVertLevels, int rk, T bCoef, T aCoef, int next,
    int first, int last, int nlev)
{
    const int N = nVertLevels;
    MESHOPS_ROWS(i, first, last, nlev) {
        MESHOPS_ROW_LANE(e, k, i, nlev);
        const int c0 = cellsOnEdge[2 * e], c1 = cellsOnEdge[2 * e + 1];
        T dAdj = 0, kAdjSum = 0;
        if (c0 >= 0) {
            dAdj += divAdjCoef[2 * e] * divAdj[(meshops_offset)c0 * N + k];
            kAdjSum += keAdjCoef[2 * e] * bernoulliAdj[(meshops_offset)c0 * N + k];
        }
        if (c1 >= 0) {
            dAdj += divAdjCoef[2 * e + 1] * divAdj[(meshops_offset)c1 * N + k];
            kAdjSum += keAdjCoef[2 * e + 1] * bernoulliAdj[(meshops_offset)c1 * N + k];
        }
        const T fAdj = fluxAdj[i] + dAdj, ue = u[i];
        massEdgeAdj[i] = massEdgeAdj[i] + ue * fAdj;
        T curl = 0;
        meshops::for_each_slot(edgesOnVertexT, e, S, slotStride, [&](meshops_offset p, int v) {
            curl += curlCoefT[p] * vortAdj[(meshops_offset)v * N + k];
        });
        T p = uAdjPart[i] + hydrostatic::mean_of_ends(mass, c0, c1, N, k) * fAdj + curl;
        if (keInline) p += ue * kAdjSum;
        if (extra) p = hydrostatic::with_extra_or_laplacian(p, uExtra, 1, 0, i, uExtraScale,
                                                            edgesOnEdgeDel2, coefDel2T, uExtra, e,
                                                            del2Width, del2SlotStride, N, k);
        hydrostatic::adjoint_rk4(p, yAdj, newAdj, kAdj, bCoef, aCoef, next, rk, i);
    }
}
MESHOPS_INSTANTIATE(hs_adj_u)

// The adjoint mass pass over (cell, layer): cellsOnEdgeT (the edges of each cell, SE slots, strideE;
// interp_c2e's 1/2 applied to the sum), verticesOnCell and c2vCoefT (SV slots, strideV). With
// `extra`, massExtra and thetaMassExtra are added; both adjoints go into the RK4 bookkeeping.
template <typename T, int W>
__global__ void hs_adj_mass(
    const int* __restrict__ cellsOnEdgeT, const int* __restrict__ verticesOnCell,
    const T* __restrict__ c2vCoefT, const T* __restrict__ massAdjPart,
    const T* __restrict__ massEdgeAdj, const T* __restrict__ qVortAdj,
    const T* __restrict__ thetaMassAdj, const T* __restrict__ massExtra,
    const T* __restrict__ thetaMassExtra, T* __restrict__ yMassAdj, const T* __restrict__ newMassAdj,
    T* __restrict__ kMassAdj, T* __restrict__ yThetaMassAdj, const T* __restrict__ newThetaMassAdj,
    T* __restrict__ kThetaMassAdj, int SE, int strideE, int SV, int strideV, int extra,
    int nVertLevels, int rk, T bCoef, T aCoef, int next, int first, int last, int nlev)
{
    MESHOPS_ROWS(i, first, last, nlev) {
        MESHOPS_ROW_LANE(c, k, i, nlev);
        T edges = 0, vertices = 0;
        meshops::for_each_slot(cellsOnEdgeT, c, SE, strideE, [&](meshops_offset, int e) {
            edges += massEdgeAdj[(meshops_offset)e * nlev + k];
        });
        meshops::for_each_slot(verticesOnCell, c, SV, strideV, [&](meshops_offset p, int v) {
            vertices += c2vCoefT[p] * qVortAdj[(meshops_offset)v * nlev + k];
        });
        T pMass = massAdjPart[i] + (T)0.5 * edges - vertices;
        T pTheta = thetaMassAdj[i];
        if (extra) {
            pMass += massExtra[i];
            pTheta += thetaMassExtra[i];
        }
        hydrostatic::adjoint_rk4(pMass, yMassAdj, newMassAdj, kMassAdj, bCoef, aCoef, next, rk, i);
        hydrostatic::adjoint_rk4(pTheta, yThetaMassAdj, newThetaMassAdj, kThetaMassAdj, bCoef, aCoef,
                                 next, rk, i);
    }
}
MESHOPS_INSTANTIATE(hs_adj_mass)

// -- adjoint, atomic mode: the same adjoint with the transposed sums as atomicAdd scatters from the
// forward's rows through the forward tables, into accumulators zeroed by the caller (the order of the
// sums left to the hardware):
//
//   edge pass    as hs_adj_edge, the PV flux's F and q_e adjoints scattered over the TRiSK stencil
//                (fluxAcc, qEdgeAcc), -grad_c2e^T(g), -grad_c2e^T(theta_e g) and interp_c2e^T of
//                theta_e_adj and of W_e's adjoint scattered to the edge's cells (bernoulliAcc, piAcc,
//                thetaAcc, wAcc)
//   vertex pass  w from qEdgeAcc over edgesOnVertex; curl_e2v^T(w) scattered to the vertex's edges
//                (uAcc), -interp_c2v^T(q_v w) to its cells (massAcc)
//   column pass  hs_adj_column_summed reading the scattered sums
//   u pass       as hs_adj_u, with the curl part from uAcc, interp_c2e^T(mass_e_adj) scattered (massAcc)
//   mass pass    mass_adj = its column part + massAcc (+ extra); the RK4 bookkeeping of both

template <typename T, int W>
__global__ void hs_adj_edge_atomic(
    const int* __restrict__ edgesOnEdge, const T* __restrict__ weightsOnEdge,
    const int* __restrict__ cellsOnEdge, const T* __restrict__ invDcEdge,
    const T* __restrict__ divAdjCoef, const T* __restrict__ uTendAdj,
    const T* __restrict__ thetaMassTendAdj, const T* __restrict__ F, const T* __restrict__ qEdge,
    const T* __restrict__ pi, const T* __restrict__ mass, const T* __restrict__ thetaMass,
    const T* __restrict__ wFlux, const T* __restrict__ u, T* __restrict__ fluxAcc,
    T* __restrict__ qEdgeAcc, T* __restrict__ bernoulliAcc, T* __restrict__ piAcc,
    T* __restrict__ thetaAcc, T* __restrict__ wAcc, T* __restrict__ massEdgeAdj,
    T* __restrict__ uAdjPart, int maxEdges2, int slotStride, int nVertLevels, int first, int last,
    int nlev)
{
    using hydrostatic::mean_of_ends;
    const int N = nVertLevels;
    MESHOPS_ROWS(i, first, last, nlev) {
        MESHOPS_ROW_LANE(e, k, i, nlev);
        const T g = uTendAdj[i], qe = qEdge[i], Fe = F[i];
        const T half = (T)0.5 * g;
        T fluxSum = 0;
        meshops::for_each_slot(edgesOnEdge, e, maxEdges2, slotStride, [&](meshops_offset p, int e2) {
            const meshops_offset e2k = (meshops_offset)e2 * N + k;
            const T w = weightsOnEdge[p], F2 = F[e2k];
            fluxSum += w * F2;
            atomicAdd(&fluxAcc[e2k], w * ((qe + qEdge[e2k]) * half));
            atomicAdd(&qEdgeAcc[e2k], w * (F2 * half));
        });
        const int c0 = cellsOnEdge[2 * e], c1 = cellsOnEdge[2 * e + 1];
        T divAdj = 0;
        if (c0 >= 0) divAdj += divAdjCoef[2 * e] * thetaMassTendAdj[(meshops_offset)c0 * N + k];
        if (c1 >= 0) divAdj += divAdjCoef[2 * e + 1] * thetaMassTendAdj[(meshops_offset)c1 * N + k];
        const T hTheta = -divAdj;
        const T thetaEdge = hydrostatic::theta_edge(thetaMass, mass, c0, c1, N, k);
        const T invDc = invDcEdge[e];
        const T gradPi = hydrostatic::difference_of_ends(pi, c0, c1, invDc, N, k);
        atomicAdd(&qEdgeAcc[i], half * fluxSum);
        atomicAdd(&fluxAcc[i], thetaEdge * hTheta);
        const T thetaEdgeAdj = (T)0.5 * (Fe * hTheta - gradPi * g);
        // the vertical advection, as hs_adj_edge
        const meshops_offset row = (meshops_offset)e * N;
        const T* ue = u + row;
        const T massEdge = mean_of_ends(mass, c0, c1, N, k);
        const T duBelow = hydrostatic::diff_l2i(k > 0 ? ue[k - 1] : (T)0, ue[k], k, N);
        const T duAbove = hydrostatic::diff_l2i(ue[k], k + 1 < N ? ue[k + 1] : (T)0, k + 1, N);
        const T wBelow = mean_of_ends(wFlux, c0, c1, N + 1, k);
        const T wAbove = mean_of_ends(wFlux, c0, c1, N + 1, k + 1);
        const T v = hydrostatic::avg_i2l(wBelow * duBelow, wAbove * duAbove);
        massEdgeAdj[i] = v * g / (massEdge * massEdge);
        const T hBelow = hydrostatic::vertical_advection_h(uTendAdj, mass, c0, c1, row, k, N);
        const T hAbove = hydrostatic::vertical_advection_h(uTendAdj, mass, c0, c1, row, k + 1, N);
        T part = 0;
        if (k > 0) part += wBelow * hBelow;
        if (k + 1 < N) part -= wAbove * hAbove;
        uAdjPart[i] = part;
        const T wBelowAdj = (T)0.5 * (duBelow * hBelow), wTopAdj = (T)0.5 * (duAbove * hAbove);
        // to the edge's cells: grad_c2e^T (-1 / dcEdge at c0, +1 / dcEdge at c1), interp_c2e^T (1/2)
        const int ends[2] = {c0, c1};
        for (int s = 0; s < 2; ++s) {
            const int c = ends[s];
            if (c < 0) continue;
            const T coef = s == 1 ? invDc : -invDc;
            const meshops_offset ck = (meshops_offset)c * N + k, ci = (meshops_offset)c * (N + 1);
            atomicAdd(&bernoulliAcc[ck], -(coef * g));
            atomicAdd(&piAcc[ck], -(coef * (thetaEdge * g)));
            atomicAdd(&thetaAcc[ck], thetaEdgeAdj);
            atomicAdd(&wAcc[ci + k], wBelowAdj);
            if (k == N - 1) atomicAdd(&wAcc[ci + N], wTopAdj);
        }
    }
}
MESHOPS_INSTANTIATE(hs_adj_edge_atomic)

// The atomic vertex pass over (vertex, layer): edgesOnVertex and curlCoef, cellsOnVertex and c2vCoef
// in one layout (vertexDegree slots, slotStride); uAcc and massAcc accumulate.
template <typename T, int W>
__global__ void hs_adj_vertex_atomic(const int* __restrict__ edgesOnVertex,
                                     const T* __restrict__ curlCoef,
                                     const int* __restrict__ cellsOnVertex,
                                     const T* __restrict__ c2vCoef, const T* __restrict__ qEdgeAcc,
                                     const T* __restrict__ qVertex, const T* __restrict__ mass,
                                     T* __restrict__ uAcc, T* __restrict__ massAcc, int vertexDegree,
                                     int slotStride, int nVertLevels, int first, int last, int nlev)
{
    MESHOPS_ROWS(i, first, last, nlev) {
        MESHOPS_ROW_LANE(v, k, i, nlev);
        T qAdj = 0, massVertex = 0;
        meshops::for_each_slot(edgesOnVertex, v, vertexDegree, slotStride, [&](meshops_offset, int e) {
            qAdj += qEdgeAcc[(meshops_offset)e * nlev + k];
        });
        meshops::for_each_slot(cellsOnVertex, v, vertexDegree, slotStride, [&](meshops_offset p, int c) {
            massVertex += c2vCoef[p] * mass[(meshops_offset)c * nlev + k];
        });
        const T w = (T)0.5 * qAdj / massVertex, qw = qVertex[i] * w;
        meshops::for_each_slot(edgesOnVertex, v, vertexDegree, slotStride, [&](meshops_offset p, int e) {
            atomicAdd(&uAcc[(meshops_offset)e * nlev + k], curlCoef[p] * w);
        });
        meshops::for_each_slot(cellsOnVertex, v, vertexDegree, slotStride, [&](meshops_offset p, int c) {
            atomicAdd(&massAcc[(meshops_offset)c * nlev + k], -(c2vCoef[p] * qw));
        });
    }
}
MESHOPS_INSTANTIATE(hs_adj_vertex_atomic)

// The atomic u pass over (edge, layer): as hs_adj_u with the curl part read from uAcc (its extra
// and composed transposed Laplacian alike); the edge's mass_e_adj scattered to its cells
// (interp_c2e^T, massAcc).
template <typename T, int W>
__global__ void hs_adj_u_atomic(
    const int* __restrict__ cellsOnEdge, const T* __restrict__ divAdjCoef,
    const T* __restrict__ keAdjCoef, const T* __restrict__ fluxAcc, const T* __restrict__ divAdj,
    const T* __restrict__ bernoulliAdj, const T* __restrict__ uAcc, const T* __restrict__ mass,
    const T* __restrict__ u, const T* __restrict__ uAdjPart, const T* __restrict__ uExtra,
    const int* __restrict__ edgesOnEdgeDel2, const T* __restrict__ coefDel2T,
    const T* __restrict__ massEdgeAdj, T* __restrict__ massAcc, T* __restrict__ yAdj,
    const T* __restrict__ newAdj, T* __restrict__ kAdj, int keInline, int extra, T uExtraScale,
    int del2Width, int del2SlotStride, int nVertLevels, int rk, T bCoef, T aCoef, int next,
    int first, int last, int nlev)
{
    const int N = nVertLevels;
    MESHOPS_ROWS(i, first, last, nlev) {
        MESHOPS_ROW_LANE(e, k, i, nlev);
        const int c0 = cellsOnEdge[2 * e], c1 = cellsOnEdge[2 * e + 1];
        T dAdj = 0, kAdjSum = 0;
        if (c0 >= 0) {
            dAdj += divAdjCoef[2 * e] * divAdj[(meshops_offset)c0 * N + k];
            kAdjSum += keAdjCoef[2 * e] * bernoulliAdj[(meshops_offset)c0 * N + k];
        }
        if (c1 >= 0) {
            dAdj += divAdjCoef[2 * e + 1] * divAdj[(meshops_offset)c1 * N + k];
            kAdjSum += keAdjCoef[2 * e + 1] * bernoulliAdj[(meshops_offset)c1 * N + k];
        }
        const T fAdj = fluxAcc[i] + dAdj, ue = u[i];
        const T massEdgeHalf = (T)0.5 * (massEdgeAdj[i] + ue * fAdj);
        if (c0 >= 0) atomicAdd(&massAcc[(meshops_offset)c0 * N + k], massEdgeHalf);
        if (c1 >= 0) atomicAdd(&massAcc[(meshops_offset)c1 * N + k], massEdgeHalf);
        T p = uAdjPart[i] + hydrostatic::mean_of_ends(mass, c0, c1, N, k) * fAdj + uAcc[i];
        if (keInline) p += ue * kAdjSum;
        if (extra) p = hydrostatic::with_extra_or_laplacian(p, uExtra, 1, 0, i, uExtraScale,
                                                            edgesOnEdgeDel2, coefDel2T, uExtra, e,
                                                            del2Width, del2SlotStride, N, k);
        hydrostatic::adjoint_rk4(p, yAdj, newAdj, kAdj, bCoef, aCoef, next, rk, i);
    }
}
MESHOPS_INSTANTIATE(hs_adj_u_atomic)

// The atomic mass pass over (cell, layer): mass_adj = massAdjPart + massAcc; with `extra`,
// massExtra and thetaMassExtra are added; both adjoints go into the RK4 bookkeeping.
template <typename T, int W>
__global__ void hs_adj_mass_sum(
    const T* __restrict__ massAdjPart, const T* __restrict__ massAcc,
    const T* __restrict__ thetaMassAdj, const T* __restrict__ massExtra,
    const T* __restrict__ thetaMassExtra, T* __restrict__ yMassAdj, const T* __restrict__ newMassAdj,
    T* __restrict__ kMassAdj, T* __restrict__ yThetaMassAdj, const T* __restrict__ newThetaMassAdj,
    T* __restrict__ kThetaMassAdj, int extra, int nVertLevels, int rk, T bCoef, T aCoef, int next,
    int first, int last, int nlev)
{
    MESHOPS_ROWS(i, first, last, nlev) {
        T pMass = massAdjPart[i] + massAcc[i];
        T pTheta = thetaMassAdj[i];
        if (extra) {
            pMass += massExtra[i];
            pTheta += thetaMassExtra[i];
        }
        hydrostatic::adjoint_rk4(pMass, yMassAdj, newMassAdj, kMassAdj, bCoef, aCoef, next, rk, i);
        hydrostatic::adjoint_rk4(pTheta, yThetaMassAdj, newThetaMassAdj, kThetaMassAdj, bCoef, aCoef,
                                 next, rk, i);
    }
}
MESHOPS_INSTANTIATE(hs_adj_mass_sum)
