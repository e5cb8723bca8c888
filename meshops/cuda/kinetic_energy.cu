// Kinetic energy edge -> cell (ke_e2c), its tangent-linear model and adjoints.
// Formulas: meshops/operators/kinetic_energy.py; kw[e] = 0.25 * dcEdge[e] * dvEdge[e]. The coefficients are
// precomputed per stencil slot: cellCoef[c,j] = kw[e_j] / areaCell[c] on edgesOnCell (masked beyond
// nEdgesOnCell), cellCoef2 = 2 * cellCoef, edgeCoef[e,i] = 2 * kw[e] / areaCell[c_i] on cellsOnEdge.
#include "stencil.cuh"

using meshops::Lanes;
using meshops::load;

// ke[c,k] = sum_{j<maxEdges} cellCoef[c,j] * u[e_j,k]^2
template <typename T, int W>
__global__ void ke_e2c(const int* __restrict__ edgesOnCell, const T* __restrict__ cellCoef,
                       const Lanes<T, W>* __restrict__ u, Lanes<T, W>* __restrict__ ke, int maxEdges,
                       int first, int last, int nlev)
{
    MESHOPS_ROWS(i, first, last, nlev) {
        MESHOPS_ROW_LANE(c, k, i, nlev);
        Lanes<T, W> acc = meshops::splat<T, W>(0);
        meshops::for_each_row_slot(edgesOnCell, c, maxEdges, [&](int p, int e) {
            const Lanes<T, W> ue = load(u, (meshops_offset)e * nlev + k);
            meshops::axpy(acc, cellCoef[p], ue * ue);
        });
        ke[i] = acc;
    }
}
MESHOPS_INSTANTIATE_WIDE(ke_e2c)

// dke[c,k] = sum_j cellCoef2[c,j] * u[e_j,k] * du[e_j,k]
template <typename T, int W>
__global__ void ke_e2c_tl(const int* __restrict__ edgesOnCell, const T* __restrict__ cellCoef2,
                          const Lanes<T, W>* __restrict__ u, const Lanes<T, W>* __restrict__ du,
                          Lanes<T, W>* __restrict__ dke, int maxEdges, int first, int last, int nlev)
{
    MESHOPS_ROWS(i, first, last, nlev) {
        MESHOPS_ROW_LANE(c, k, i, nlev);
        Lanes<T, W> acc = meshops::splat<T, W>(0);
        meshops::for_each_row_slot(edgesOnCell, c, maxEdges, [&](int p, int e) {
            const meshops_offset ek = (meshops_offset)e * nlev + k;
            meshops::axpy(acc, cellCoef2[p], load(u, ek) * load(du, ek));
        });
        dke[i] = acc;
    }
}
MESHOPS_INSTANTIATE(ke_e2c_tl)

// Scatter form: one thread per (cell, lane) adds cellCoef2[c,j] * g[c,k] * u[e_j,k] into e_j.
template <typename T, int W>
__global__ void ke_e2c_adj_atomic(const int* __restrict__ edgesOnCell, const T* __restrict__ cellCoef2,
                                  const Lanes<T, W>* __restrict__ u, const Lanes<T, W>* __restrict__ g,
                                  Lanes<T, W>* __restrict__ u_adj, int maxEdges, int first, int last,
                                  int nlev)
{
    MESHOPS_ROWS(i, first, last, nlev) {
        MESHOPS_ROW_LANE(c, k, i, nlev);
        const Lanes<T, W> gc = load(g, i);
        meshops::for_each_row_slot(edgesOnCell, c, maxEdges, [&](int p, int e) {
            const meshops_offset ek = (meshops_offset)e * nlev + k;
            meshops::atomic_add(&u_adj[ek], (cellCoef2[p] * gc) * load(u, ek));
        });
    }
}
MESHOPS_INSTANTIATE(ke_e2c_adj_atomic)

// Gather form: u_adj[e,k] = u[e,k] * (edgeCoef[e,0] * g[c0,k] + edgeCoef[e,1] * g[c1,k]).
template <typename T, int W>
__global__ void ke_e2c_adj_gather(const int* __restrict__ cellsOnEdge, const T* __restrict__ edgeCoef,
                                  const Lanes<T, W>* __restrict__ u, const Lanes<T, W>* __restrict__ g,
                                  Lanes<T, W>* __restrict__ u_adj, int first, int last, int nlev)
{
    MESHOPS_ROWS(i, first, last, nlev) {
        MESHOPS_ROW_LANE(e, k, i, nlev);
        u_adj[i] = load(u, i) * meshops::stencil_gather(cellsOnEdge, edgeCoef, g, e, 2, nlev, k);
    }
}
MESHOPS_INSTANTIATE(ke_e2c_adj_gather)
