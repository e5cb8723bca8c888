// Laplacians: scalar cell -> cell (laplacian_c2c, forward and gather adjoint fused into one pass
// each) and vector edge -> edge (vector_laplacian_e2e: a cell pass, a vertex pass and an edge pass).
// Formulas: meshops/operators/laplacian.py. Per stencil slot (c, j), j < S = maxEdges: nbr[c,j] the cell
// across edge j (-1: missing neighbour or pad) and w[c,j] = dvEdge/dcEdge of that edge (0 on pads).
#include "stencil.cuh"

using meshops::Lanes;
using meshops::load;

// lap[c,k] = invAreaCell[c] * sum_{j<S} w[c,j] * (phi[n_j,k] - phi[c,k]), n_j = nbr[c,j]; a missing
// neighbour (n_j < 0) reads phi = 0 and a pad has w = 0 (as grad_c2e then div_e2c treat them), so
// every slot is visited.
template <typename T, int W>
__global__ void laplacian_c2c(const int* __restrict__ nbr, const T* __restrict__ w,
                              const T* __restrict__ invAreaCell, const Lanes<T, W>* __restrict__ phi,
                              Lanes<T, W>* __restrict__ lap, int S, int first, int last, int nlev)
{
    MESHOPS_ROWS(i, first, last, nlev) {
        MESHOPS_ROW_LANE(c, k, i, nlev);
        const Lanes<T, W> pc = load(phi, i);
        Lanes<T, W> acc = meshops::splat<T, W>(0);
        for (int j = 0; j < S; ++j) {
            const int n = nbr[c * S + j];
            const Lanes<T, W> pn =
                n >= 0 ? load(phi, (meshops_offset)n * nlev + k) : meshops::splat<T, W>(0);
            meshops::axpy(acc, w[c * S + j], pn - pc);
        }
        lap[i] = invAreaCell[c] * acc;
    }
}
MESHOPS_INSTANTIATE(laplacian_c2c)

// Gather adjoint (the transpose; w is symmetric across an edge):
// phi_adj[c,k] = sum_j w[c,j] * (g[n_j,k] * invAreaCell[n_j] - g[c,k] * invAreaCell[c]).
// (invAreaCell, one value per cell, stays in L2: a per-slot copy of it made this kernel slower.)
template <typename T, int W>
__global__ void laplacian_c2c_adj_gather(const int* __restrict__ nbr, const T* __restrict__ w,
                                         const T* __restrict__ invAreaCell,
                                         const Lanes<T, W>* __restrict__ g,
                                         Lanes<T, W>* __restrict__ phi_adj, int S, int first, int last,
                                         int nlev)
{
    MESHOPS_ROWS(i, first, last, nlev) {
        MESHOPS_ROW_LANE(c, k, i, nlev);
        const Lanes<T, W> gc = invAreaCell[c] * load(g, i);
        Lanes<T, W> acc = meshops::splat<T, W>(0);
        for (int j = 0; j < S; ++j) {
            const int n = nbr[c * S + j];
            const Lanes<T, W> gn = n >= 0 ? invAreaCell[n] * load(g, (meshops_offset)n * nlev + k)
                                          : meshops::splat<T, W>(0);
            meshops::axpy(acc, w[c * S + j], gn - gc);
        }
        phi_adj[i] = acc;
    }
}
MESHOPS_INSTANTIATE(laplacian_c2c_adj_gather)

// The cell and vertex passes of vector_laplacian_e2e are stencil_gather_rows (stencil.cuh):
// D with edgesOnCell and cellCoef, Z with edgesOnVertex and vertexCoef. Forward (D = div_e2c,
// Z = curl_e2v): cellCoef = edgeSignOnCell * dvEdge / areaCell, vertexCoef = edgeSignOnVertex *
// dcEdge / areaTriangle. Adjoint: cellCoef = edgeSignOnCell / (dcEdge * areaCell),
// vertexCoef = edgeSignOnVertex / (dvEdge * areaTriangle).
// The edge pass: out[e,k] = a[e] * (D[c1,k] - D[c0,k]) - b[e] * (Z[v1,k] - Z[v0,k]) with
// (c0, c1) = cellsOnEdge[e], (v0, v1) = verticesOnEdge[e]; a missing cell or vertex reads 0.
// Forward: a = 1/dcEdge, b = 1/dvEdge. Adjoint: a = dvEdge, b = dcEdge.
template <typename T, int W>
__global__ void vector_laplacian_e2e(const int* __restrict__ cellsOnEdge,
                                     const int* __restrict__ verticesOnEdge,
                                     const T* __restrict__ a, const T* __restrict__ b,
                                     const Lanes<T, W>* __restrict__ D,
                                     const Lanes<T, W>* __restrict__ Z,
                                     Lanes<T, W>* __restrict__ out, int first, int last, int nlev)
{
    MESHOPS_ROWS(i, first, last, nlev) {
        MESHOPS_ROW_LANE(e, k, i, nlev);
        const int c0 = cellsOnEdge[2 * e], c1 = cellsOnEdge[2 * e + 1];
        const int v0 = verticesOnEdge[2 * e], v1 = verticesOnEdge[2 * e + 1];
        const Lanes<T, W> zero = meshops::splat<T, W>(0);
        const Lanes<T, W> D0 = c0 >= 0 ? load(D, (meshops_offset)c0 * nlev + k) : zero;
        const Lanes<T, W> D1 = c1 >= 0 ? load(D, (meshops_offset)c1 * nlev + k) : zero;
        const Lanes<T, W> Z0 = v0 >= 0 ? load(Z, (meshops_offset)v0 * nlev + k) : zero;
        const Lanes<T, W> Z1 = v1 >= 0 ? load(Z, (meshops_offset)v1 * nlev + k) : zero;
        out[i] = a[e] * (D1 - D0) - b[e] * (Z1 - Z0);
    }
}
MESHOPS_INSTANTIATE(vector_laplacian_e2e)
