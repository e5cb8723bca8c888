"""How many halo layers each operator consumes, and which local rows are valid after a chain.

After one state exchange (`meshops.parallel.state.StateExchange`) with a decomposition of H cell
layers of halo, every local row of every field is valid: it equals the global field. An operator
applied to full local arrays computes every local row; a row is right when every input row its
stencil reads is valid. Say a field is *valid to depth k* when its rows in halo layers 0..k are
valid (layer 0 = owned; layers as in `grids.decompose`: cell layer j is j cellsOnCell steps from
the owned cells, an edge or vertex that is not owned sits in layer max(1, least layer of its local
cells)). Then, for an operator with consumption c = `HALO_LAYERS[name]` and r = its registry
`halo_depth` (the layers its owned rows read, r = max(c, 1)):

    inputs valid to depth k >= r   ->   outputs valid to depth k - c          (`valid_depth`)
    inputs valid to depth k <  r   ->   not even the owned outputs are valid  (-1)

Why the table holds (stencils in layer terms): an edge in layer j lies between cells of layers
<= j + 1 and a vertex in layer j touches cells of layers <= j + 1; a cell in layer j >= 1 has its
edges and vertices in layers <= j (an owned cell: <= 1); an edge's vertices lie in layers
<= max(j, 1). So a step cell -> edge, cell -> vertex, edge -> vertex or edge -> edge through
edgesOnEdge (both cells' edges), or cell -> cell through cellsOnCell, consumes one layer; a step
edge -> cell, vertex -> cell or vertex -> edge consumes none (it needs layer 1 for owned rows
only); an operator applied twice consumes twice. `tests/mpi/test_state_exchange.py` checks every
entry is exact (valid to k - c, and not valid to k - c + 1) on real meshes under 1-4 ranks.

Example: grad_c2e(div_e2c(F)) then pv_flux_e2e with q: F and q exchanged with H = 2 -> div_e2c
valid to 2 -> grad_c2e to 1 -> pv_flux_e2e to 0: right on every owned edge
(`layers_needed(["div_e2c", "grad_c2e", "pv_flux_e2e"]) == 2`).
"""
from __future__ import annotations

from typing import Sequence

from meshops.registry import OPERATORS

#: Cell layers of validity each registered operator consumes (module doc).
HALO_LAYERS: dict[str, int] = {
    "div_e2c": 0, "flux_div_e2c": 0, "ke_e2c": 0,
    "reconstruct_e2c": 0, "reconstruct_zonal_meridional_e2c": 0,
    "interp_v2c": 0, "interp_v2e": 0, "grad_v2e": 0,
    "grad_c2e": 1, "interp_c2e": 1, "interp_c2v": 1,
    "curl_e2v": 1, "circulation_e2v": 1, "ke_e2v": 1,
    "tangential_e2e": 1, "pv_flux_e2e": 1,
    "laplacian_c2c": 1, "vector_laplacian_e2e": 1,
    "del4_c2c": 2, "del4_e2e": 2,
}


def _spec(name: str):
    if name not in OPERATORS:
        raise KeyError(f"operator {name!r} is not registered; registered: {sorted(OPERATORS)}")
    return OPERATORS[name]


def halo_layers(name: str) -> int:
    """Layers of validity the operator consumes (its registry `halo_depth` when not tabled: an
    operator registered later is assumed to consume every layer its owned rows need)."""
    return HALO_LAYERS.get(name, _spec(name).halo_depth)


def valid_depth(name: str, *input_depths: int) -> int:
    """Depth to which the outputs of `name` are valid when its inputs are valid to
    `input_depths` (one per input, or one for all); -1 when not even the owned rows are."""
    spec = _spec(name)
    if not input_depths:
        raise TypeError(f"valid_depth({name!r}): give the depth of its input(s)")
    k = min(int(d) for d in input_depths)
    if k < spec.halo_depth:
        return -1
    return k - halo_layers(name)


def chain_depth(chain: Sequence[str], depth: int) -> int:
    """Depth to which the result of `chain` (operator names applied in order, each to the previous
    result and to fields exchanged to `depth`) is valid; -1 when not even on owned rows."""
    k = int(depth)
    for name in chain:
        k = valid_depth(name, k) if k >= 0 else -1
    return k


def layers_needed(chain: Sequence[str]) -> int:
    """Fewest halo layers H such that, after one exchange, `chain` is right on every owned row."""
    bound = 1 + sum(max(_spec(n).halo_depth, halo_layers(n)) for n in chain)
    for H in range(1, bound + 1):
        if chain_depth(chain, H) >= 0:
            return H
    raise AssertionError(f"layers_needed({list(chain)}): no depth up to {bound} works")


def n_valid(decomposition, location: str, depth: int) -> int:
    """Leading local rows at `location` valid to `depth` (owned rows and halo layers 1..depth);
    0 for depth -1. Rows [0, n_valid) are right, rows after it are not to be used."""
    H = decomposition.halo_depth
    if int(depth) != depth or not -1 <= depth <= H:
        raise ValueError(f"n_valid: depth {depth!r}, expected an integer in [-1, {H}] (the "
                         f"decomposition has {H} halo layers)")
    if depth < 0:
        return 0
    return int(decomposition.local.layer_offsets[location][int(depth) + 1])
