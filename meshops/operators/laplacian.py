"""Laplacians as compositions: scalar `laplacian_c2c`, vector `vector_laplacian_e2e` and their squares.

    laplacian_c2c(phi)      = div_e2c(grad_c2e(phi))
        [c] = 1/areaCell[c] * sum_j edgeSignOnCell[c,j] * dvEdge[e_j] * (phi[c1] - phi[c0]) / dcEdge[e_j]
    vector_laplacian_e2e(u) = grad_c2e(div_e2c(u)) - grad_v2e(curl_e2v(u))
        [e] = (divergence[c1] - divergence[c0]) / dcEdge[e] - (vorticity[v1] - vorticity[v0]) / dvEdge[e]
    del4_c2c(phi) = laplacian_c2c(laplacian_c2c(phi)),  del4_e2e(u) = vector_laplacian_e2e(vector_laplacian_e2e(u))

with (c0, c1) = cellsOnEdge[e], (v0, v1) = verticesOnEdge[e]. `vector_laplacian_e2e` is MPAS's del2 of
the normal velocity (core_sw compute_tend, delsq_u): the normal component of
grad(div u) + k x grad(vorticity), whose normal part n . (k x grad zeta) = -t . grad zeta (t = k x n,
from v0 to v1) is the minus sign above. MPAS's del4 dissipation is tend_u -= nu4 * del4_e2e(u).

Adjoints compose the adjoints in reverse order; they are NOT assumed equal to the forwards: these
Laplacians are symmetric only in the area-weighted inner products (areaCell; dcEdge*dvEdge), while
every adjoint here is in the plain Euclidean inner product over entries and levels:

    laplacian_c2c_adj(g)        = grad_c2e_adj(div_e2c_adj(g))
    vector_laplacian_e2e_adj(g) = div_e2c_adj(grad_c2e_adj(g)) - curl_e2v_adj(grad_v2e_adj(g))
    del4_c2c_adj = laplacian_c2c_adj o laplacian_c2c_adj,  del4_e2e_adj likewise.

The NumPy code is these compositions. On CuPy arrays the scalar forward and deterministic adjoint
are fused single-pass kernels (meshops/cuda/laplacian.cu), no temporaries:

    laplacian_c2c(phi)[c]     = 1/areaCell[c] * sum_j w_cj * (phi[n_j] - phi[c])
    laplacian_c2c_adj(g)[c]   = sum_j w_cj * (g[n_j] / areaCell[n_j] - g[c] / areaCell[c])

with w_cj = dvEdge[e_j] / dcEdge[e_j], n_j the cell across e_j = edgesOnCell[c, j] (a missing
neighbour reads 0, as in the compositions). The vector forward and deterministic adjoint are three
passes: a cell pass D, a vertex pass Z (temporaries on every cell and vertex) and one edge pass,

    out[e] = a[e] * (D[c1] - D[c0]) - b[e] * (Z[v1] - Z[v0])     (a missing cell or vertex reads 0)
    forward: a = 1/dcEdge, b = 1/dvEdge, D = div_e2c(u), Z = curl_e2v(u)
    adjoint: a = dvEdge, b = dcEdge,
        D[c] = sum_j edgeSignOnCell[c,j] * g[e_j] / (dcEdge[e_j] * areaCell[c]),
        Z[v] = sum_i edgeSignOnVertex[v,i] * g[e_i] / (dvEdge[e_i] * areaTriangle[v]).

`rows` restricts the edge pass only. From the tuning's composed_from_bytes of levels per edge
(meshops/device/tuning.py; on an H200 float64 nlev 2, float32 nlev 4) the vector forward and
adjoint (of either mode) are instead one gather over the product of those passes' matrices,

    out[e] = sum_m coef[e,m] * u[nbr[e,m]],   (nbr, coef) = rows of A = Gc Dv - Gv Zc   (adjoint: A^T)

with Dv = div_e2c, Zc = curl_e2v, Gc = grad_c2e, Gv = grad_v2e as sparse matrices: the edges of the
two cells and the two vertices of e, 11 per edge on a hexagonal mesh (the same operator up to
rounding); A^T's rows list the same candidates. Below it the atomic adjoint chains the four
operators' atomic adjoints. del4_* are two Laplacians in sequence.
"""
from __future__ import annotations

import numpy as np

from meshops.device import connectivity, stencil
from meshops.device.backend import array_module
from meshops.device.mesh import check_field, for_fields
from meshops.device.tables import register as table
from meshops.operators.curl import curl_e2v, curl_e2v_adj
from meshops.operators.divergence import div_e2c, div_e2c_adj
from meshops.operators.gradient import grad_c2e, grad_c2e_adj, grad_v2e, grad_v2e_adj
from meshops.device import kernels
from meshops.device.kernels import GATHER, Family, Kernel
from meshops.modes import resolve_mode
from meshops.registry import register

_KERNELS = Family("laplacian", (
    Kernel("laplacian_c2c", "idx:nbr coef:w coef:invAreaCell in:phi out:lap int:S"),
    Kernel("laplacian_c2c_adj_gather", "idx:nbr coef:w coef:invAreaCell in:g out:phi_adj int:S"),
    Kernel("vector_laplacian_e2e",
           "idx:cellsOnEdge idx:verticesOnEdge coef:a coef:b in:D in:Z out:out"),
    GATHER))


def _signs(ends, idx, sign, name_idx, name_sign, name_ends, end):
    """Check sign[r, j] == +1 exactly when r == ends[idx[r, j], end], -1 when r is the other end."""
    rows = np.arange(idx.shape[0])[:, None]
    valid = idx >= 0
    at = ends[np.where(valid, idx, 0)]
    mine, other = at[..., end] == rows, at[..., 1 - end] == rows
    bad = np.argwhere(valid & ~((mine & (sign == 1)) | (other & ~mine & (sign == -1))))
    if bad.size:
        r, j = (int(b) for b in bad[0])
        raise ValueError(f"mesh fields {name_idx}[{r}, {j}] = {idx[r, j]}, {name_sign}[{r}, {j}] = "
                         f"{sign[r, j]}, {name_ends}[{idx[r, j]}] = {ends[idx[r, j]].tolist()}: "
                         f"expected {r} among the ends, sign +1 where it is end {end}, else -1")
    return valid, np.where(mine, at[..., 1 - end], at[..., end])


@table("lapCellSign", kind="float", location="cell")
def _cell_sign(h):
    """On edgesOnCell: edgeSignOnCell / areaCell (0 in pads), after checking the signs against
    cellsOnEdge (`_signs`)."""
    eoc = h["edgesOnCell"]
    valid, _ = _signs(h.mesh.cellsOnEdge, eoc, h.mesh.edgeSignOnCell, "edgesOnCell", "edgeSignOnCell",
                      "cellsOnEdge", 0)
    return np.where(valid, h.mesh.edgeSignOnCell, 0.0) / h.mesh.areaCell[:, None]


@table("lapVertexSign", kind="float", location="vertex")
def _vertex_sign(h):
    """On edgesOnVertex: edgeSignOnVertex / areaTriangle (0 at a missing edge), after checking the
    signs against verticesOnEdge (`_signs`)."""
    eov = h["edgesOnVertex"]
    valid, _ = _signs(h.mesh.verticesOnEdge, eov, h.mesh.edgeSignOnVertex, "edgesOnVertex",
                      "edgeSignOnVertex", "verticesOnEdge", 1)
    return np.where(valid, h.mesh.edgeSignOnVertex, 0.0) / h.mesh.areaTriangle[:, None]


@table("cellsAcross", kind="int", location="cell")
def _cells_across(h):
    """On edgesOnCell: the cell across edge e_j from c (-1: missing)."""
    eoc = h["edgesOnCell"]
    valid, across = _signs(h.mesh.cellsOnEdge, eoc, h.mesh.edgeSignOnCell, "edgesOnCell",
                           "edgeSignOnCell", "cellsOnEdge", 0)
    return np.where(valid, across, -1)


def _on_slots(h, idx):
    valid = h[idx] >= 0
    return valid, np.where(valid, h[idx], 0)


@table("laplacianWeight", kind="float", location="cell")
def _laplacian_weight(h):
    """On edgesOnCell: dvEdge / dcEdge of e_j (0 in pads)."""
    valid, ec = _on_slots(h, "edgesOnCell")
    return np.where(valid, h.mesh.dvEdge[ec] / h.mesh.dcEdge[ec], 0.0)


@table("lapVertexCoef", kind="float", location="vertex")
def _vertex_coef(h):
    """On edgesOnVertex: edgeSignOnVertex * dcEdge / areaTriangle (the vertex pass of the forward)."""
    _, ev = _on_slots(h, "edgesOnVertex")
    return h["lapVertexSign"] * h.mesh.dcEdge[ev]


@table("lapCellCoefAdj", kind="float", location="cell")
def _cell_coef_adj(h):
    """On edgesOnCell: edgeSignOnCell / (dcEdge * areaCell) (the cell pass of the adjoint)."""
    _, ec = _on_slots(h, "edgesOnCell")
    return h["lapCellSign"] / h.mesh.dcEdge[ec]


@table("lapVertexCoefAdj", kind="float", location="vertex")
def _vertex_coef_adj(h):
    """On edgesOnVertex: edgeSignOnVertex / (dvEdge * areaTriangle) (the vertex pass of the adjoint)."""
    _, ev = _on_slots(h, "edgesOnVertex")
    return h["lapVertexSign"] / h.mesh.dvEdge[ev]


def _first_appearances(candidates):
    """For slot-major (width, n) candidates: `first`, the slot of each slot's candidate's first
    appearance in its row; `keep` and `at`, the distinct candidates >= 0 and their flat positions
    in the padded rows (in order of first appearance); the padded rows `nbr` of those candidates."""
    width, n = candidates.shape
    first = np.empty(candidates.shape, dtype=np.int64)
    for j in range(width):
        first[j] = j
        for i in range(j - 1, -1, -1):
            np.putmask(first[j], candidates[j] == candidates[i], i)
    keep = (first == np.arange(width)[:, None]) & (candidates >= 0)
    slot, count = np.empty(candidates.shape, dtype=np.int64), np.zeros(n, dtype=np.int64)
    for j in range(width):
        slot[j] = count
        count += keep[j]
    count = int(count.max(initial=0))
    at = (np.arange(n) * count + slot)[keep]            # flat positions in the (n, count) rows
    nbr = np.full((n, count), -1, dtype=np.int32)
    nbr.ravel()[at] = candidates[keep]
    return first, keep, at, nbr


def _merge_repeats(weights, appearances):
    """The padded rows of coefficients of slot-major (width, n) weights over the candidates of
    `appearances` (`_first_appearances`): each distinct candidate's the sum of its weights in
    candidate order."""
    first, keep, at, nbr = appearances
    merged = weights.copy()
    for j in range(len(weights)):
        repeat = np.flatnonzero(first[j] < j)
        merged[first[j, repeat], repeat] += weights[j, repeat]
    coef = np.zeros(nbr.shape)
    coef.ravel()[at] = merged[keep]
    return coef


def _del2_paths(h, transpose: bool):
    """paths(e) for rows e of the composed vector Laplacian (`_composed`): the (candidates,
    weights) of the rows, slot-major (candidate order down the slots), the weights A's products
    (transpose: A^T's, each path from e' to e read backwards)."""
    mesh = h.mesh
    sign = np.array([-1.0, 1.0])
    grad = {"cell": sign * h["invDcEdge"][:, None], "vertex": -sign * h["invDvEdge"][:, None]}
    parts = {"cell": (mesh.cellsOnEdge, h["edgesOnCell"], h["divCoef"], "cellsOnEdge", "edgesOnCell"),
             "vertex": (mesh.verticesOnEdge, h["edgesOnVertex"], h["lapVertexCoef"], "verticesOnEdge",
                        "edgesOnVertex")}
    if transpose:   # end[k][p, m]: which end of edges[p, m] p is; slot[k][e, i]: e's slot at ends[e, i]
        end = {k: connectivity.slot_map(edges, ends, name_e, name_ends)
               for k, (ends, edges, _, name_ends, name_e) in parts.items()}
        slot = {k: connectivity.slot_map(ends, edges, name_ends, name_e)
                for k, (ends, edges, _, name_ends, name_e) in parts.items()}

    def paths(e):
        candidates, weights = [], []
        for k, (ends, edges, pass_coef, _, _) in parts.items():
            for i in range(2):
                p = ends[e, i]
                valid = p >= 0
                p = np.where(valid, p, 0)
                other = np.where(valid[:, None], edges[p], -1)
                inside = other >= 0
                candidates.append(other.T)
                if transpose:
                    o = np.where(inside, other, 0)
                    mine = np.take_along_axis(pass_coef[p], np.maximum(slot[k][e, i], 0)[:, None], axis=1)
                    weight = grad[k][o, np.maximum(end[k][p], 0)] * mine
                else:
                    weight = grad[k][e, i][:, None] * pass_coef[p]
                weights.append(np.where(inside, weight, 0.0).T)
        return np.ascontiguousarray(np.concatenate(candidates)), np.concatenate(weights)
    return paths


@table("edgesOnEdgeDel2", "coefDel2", kind=("int", "float"), location="edge")
def _composed(h) -> dict:
    """vector_laplacian_e2e as one edge stencil: edgesOnEdgeDel2 / coefDel2, the padded rows of
    A = Gc Dv - Gv Zc. Row e lists the edges of cellsOnEdge[e, 0], cellsOnEdge[e, 1] (edgesOnCell
    order), verticesOnEdge[e, 0] and verticesOnEdge[e, 1] (edgesOnVertex order), each at its first
    appearance, with the sum of its paths' products in that order:

        A[e, e'] = sum_{i, c = cellsOnEdge[e,i]} (-1)^(i+1) / dcEdge[e] * cellCoef[c, slot of e' in c]
                 - sum_{i, v = verticesOnEdge[e,i]} (-1)^(i+1) / dvEdge[e] * vertexCoef[v, slot of e' in v]

    so the summation order follows the mesh's connectivity, not its numbering (a rank's local mesh
    sums as the global one). Built in blocks of rows on threads (`grids.geometry.blocks`), the
    same tables for any thread count; the transpose's coefficients apart (`_composed_transpose`),
    which a forward run never reads."""
    from grids.geometry import blocks

    paths = _del2_paths(h, transpose=False)

    def rows(block):
        candidates, weights = paths(np.arange(block.start, block.stop))
        appearances = _first_appearances(candidates)
        return appearances[-1], _merge_repeats(weights, appearances)
    done = list(blocks(rows, h.mesh.nEdges))
    width = max((nbr.shape[1] for _, (nbr, _) in done), default=0)
    out = {"edgesOnEdgeDel2": np.full((h.mesh.nEdges, width), -1, dtype=np.int32),
           "coefDel2": np.zeros((h.mesh.nEdges, width))}
    for block, (nbr, coef) in done:
        out["edgesOnEdgeDel2"][block, :nbr.shape[1]] = nbr
        out["coefDel2"][block, :coef.shape[1]] = coef
    return out


@table("coefDel2T", kind="float", location="edge")
def _composed_transpose(h) -> np.ndarray:
    """The rows of A^T (`_composed`) over edgesOnEdgeDel2's candidates: row e' lists A[e, e'] for
    the same edges e as A's row e', each summed over the paths from e to e' in e''s candidate
    order."""
    from grids.geometry import for_blocks

    paths = _del2_paths(h, transpose=True)
    out = np.zeros(h["edgesOnEdgeDel2"].shape)

    def rows(block):
        candidates, weights = paths(np.arange(block.start, block.stop))
        coef = _merge_repeats(weights, _first_appearances(candidates))
        out[block, :coef.shape[1]] = coef
    for_blocks(rows, h.mesh.nEdges)
    return out


def _run(name, x, n, m, rows=None):
    """Scalar Laplacian kernel `name` on x into a new (n[, nlev]) field, tables from DeviceMesh m."""
    out = array_module(x).empty((n,) + x.shape[1:], x.dtype)
    fields = dict(phi=x, lap=out) if name == "laplacian_c2c" else dict(g=x, phi_adj=out)
    w = m.table("laplacianWeight", x.dtype)
    _KERNELS.launch(name, n, nbr=m.table("cellsAcross"), w=w, invAreaCell=m.table("invAreaCell", x.dtype),
                    **fields, S=w.shape[1], rows=rows)
    return out


def composed(m, x) -> bool:
    """Whether vector_laplacian_e2e on x runs as one composed stencil on DeviceMesh m: from the
    tuning's composed_from_bytes of levels per edge (meshops/device/tuning.py), under the "fast"
    table policy."""
    return (m.policy == "fast"
            and stencil.nlev_of(x) * x.dtype.itemsize >= kernels.tuning().composed_from_bytes)


def _vector(mesh, x, adjoint, rows=None):
    """The cell pass D, the vertex pass Z (every cell and vertex), then the edge pass on `rows`;
    one gather over the composed stencil where `composed` says so."""
    xp, m, dt = array_module(x), for_fields(mesh, x), x.dtype
    if composed(m, x):
        out = xp.empty_like(x)
        names = ("edgesOnEdgeDel2", "coefDel2T") if adjoint else ("edgesOnEdgeDel2", "coefDel2")
        (nbr, coef), stride = m.stencil(names, (x, out))
        _KERNELS.gather(m.nEdges, nbr, coef, x, out, slot_stride=stride, rows=rows)
        return out
    if adjoint:
        names = ("dvEdge", "dcEdge", "lapCellCoefAdj", "lapVertexCoefAdj")
    else:
        names = ("invDcEdge", "invDvEdge", "divCoef", "lapVertexCoef")
    ea, eb, cell_coef, vertex_coef = (m.table(n, dt) for n in names)
    D = xp.empty((m.nCells,) + x.shape[1:], dt)
    Z = xp.empty((m.nVertices,) + x.shape[1:], dt)
    _KERNELS.gather(m.nCells, m.table("edgesOnCell"), cell_coef, x, D)
    _KERNELS.gather(m.nVertices, m.table("edgesOnVertex"), vertex_coef, x, Z)
    out = xp.empty((m.nEdges,) + x.shape[1:], dt)
    _KERNELS.launch("vector_laplacian_e2e", m.nEdges, cellsOnEdge=m.table("cellsOnEdge"),
                    verticesOnEdge=m.table("verticesOnEdge"), a=ea, b=eb, D=D, Z=Z, out=out, rows=rows)
    return out


def laplacian_c2c(mesh, phi, *, rows=None):
    """Scalar Laplacian on cells: (nCells[, nlev]) -> (nCells[, nlev]); div_e2c(grad_c2e(phi)).

    lap[c] = 1/areaCell[c] * sum_j edgeSignOnCell[c,j] * dvEdge[e_j] / dcEdge[e_j]
             * (phi[cellsOnEdge[e_j,1]] - phi[cellsOnEdge[e_j,0]]). Adjoint: `laplacian_c2c_adj`.
    `rows=(first, last)`: only cells [first, last) are computed (the others are left
    unspecified).
    """
    phi = check_field(phi, mesh, "phi", "cell")
    if array_module(phi) is np:
        return div_e2c(mesh, grad_c2e(mesh, phi), rows=rows)
    return _run("laplacian_c2c", phi, mesh.nCells, for_fields(mesh, phi), rows=rows)


def laplacian_c2c_adj(mesh, g, *, mode=None):
    """Adjoint of `laplacian_c2c` (Euclidean): grad_c2e_adj(div_e2c_adj(g)), cells -> cells."""
    g = check_field(g, mesh, "g", "cell")
    mode = resolve_mode(mode)
    if array_module(g) is np or mode == "atomic":
        return grad_c2e_adj(mesh, div_e2c_adj(mesh, g, mode=mode), mode=mode)
    return _run("laplacian_c2c_adj_gather", g, mesh.nCells, for_fields(mesh, g))


def vector_laplacian_e2e(mesh, u, *, rows=None):
    """Vector Laplacian of the normal velocity (MPAS del2): (nEdges[, nlev]) -> (nEdges[, nlev]).

    del2u[e] = (div[c1] - div[c0]) / dcEdge[e] - (vort[v1] - vort[v0]) / dvEdge[e], div = div_e2c(u),
    vort = curl_e2v(u). Adjoint: `vector_laplacian_e2e_adj`. `rows`: as for `laplacian_c2c` (edges).
    """
    u = check_field(u, mesh, "u", "edge")
    if array_module(u) is np:
        return grad_c2e(mesh, div_e2c(mesh, u), rows=rows) - grad_v2e(mesh, curl_e2v(mesh, u), rows=rows)
    return _vector(mesh, u, adjoint=False, rows=rows)


def vector_laplacian_e2e_adj(mesh, g, *, mode=None):
    """Adjoint of `vector_laplacian_e2e` (Euclidean), edges -> edges:
    div_e2c_adj(grad_c2e_adj(g)) - curl_e2v_adj(grad_v2e_adj(g)). Where the forward is one gather
    over the composed stencil (`composed`), so is the adjoint, in both modes (A^T's rows over the
    forward's candidates, coefDel2T); else the deterministic mode gathers each pass's transpose and
    the atomic mode chains the four operators' atomic adjoints."""
    g = check_field(g, mesh, "g", "edge")
    mode = resolve_mode(mode)
    if array_module(g) is np or (mode == "atomic" and not composed(for_fields(mesh, g), g)):
        return (div_e2c_adj(mesh, grad_c2e_adj(mesh, g, mode=mode), mode=mode)
                - curl_e2v_adj(mesh, grad_v2e_adj(mesh, g, mode=mode), mode=mode))
    return _vector(mesh, g, adjoint=True)


def del4_c2c(mesh, phi, *, rows=None):
    """Biharmonic operator on cells: laplacian_c2c applied twice, (nCells[, nlev]) -> same.

    `rows`: as for `laplacian_c2c`, on the second pass (the first is computed on every cell).
    """
    return laplacian_c2c(mesh, laplacian_c2c(mesh, phi), rows=rows)


def del4_c2c_adj(mesh, g, *, mode=None):
    """Adjoint of `del4_c2c` (Euclidean): laplacian_c2c_adj applied twice."""
    return laplacian_c2c_adj(mesh, laplacian_c2c_adj(mesh, g, mode=mode), mode=mode)


def del4_e2e(mesh, u, *, rows=None):
    """Biharmonic operator on normal velocities (MPAS del4): vector_laplacian_e2e applied twice.

    `rows`: as for `vector_laplacian_e2e`, on the second pass (the first is computed on every edge).
    """
    return vector_laplacian_e2e(mesh, vector_laplacian_e2e(mesh, u), rows=rows)


def del4_e2e_adj(mesh, g, *, mode=None):
    """Adjoint of `del4_e2e` (Euclidean): vector_laplacian_e2e_adj applied twice."""
    return vector_laplacian_e2e_adj(mesh, vector_laplacian_e2e_adj(mesh, g, mode=mode), mode=mode)


register("laplacian_c2c", forward=laplacian_c2c, adjoint=laplacian_c2c_adj, domain="cell",
         range="cell", halo_depth=1)
register("vector_laplacian_e2e", forward=vector_laplacian_e2e, adjoint=vector_laplacian_e2e_adj,
         domain="edge", range="edge", halo_depth=1)
register("del4_c2c", forward=del4_c2c, adjoint=del4_c2c_adj, domain="cell", range="cell",
         halo_depth=2, single_pass=False)
register("del4_e2e", forward=del4_e2e, adjoint=del4_e2e_adj, domain="edge", range="edge",
         halo_depth=2, single_pass=False)
