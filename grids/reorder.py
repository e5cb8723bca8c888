"""Memory-locality orderings of a mesh: space-filling curves for cells, edges/vertices following cells.

Cells are sorted by the key of a space-filling curve (3-D Morton or Hilbert, 21 bits per axis) of
their unit position vector, so cells near each other on the sphere are near each other in memory.
Edges and vertices are then numbered in the order in which they are first met walking the cells in
their new order through edgesOnCell / verticesOnCell, so each cell's edges and vertices sit together.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from grids.mesh import FIELD_DIMS, INDEX_FIELDS, Mesh

METHODS = ("morton", "hilbert")
_BITS = 21

#: Which permutation remaps the values of each index field.
_INDEX_TARGET = {"edgesOnCell": "edges", "cellsOnCell": "cells", "verticesOnCell": "vertices",
                 "cellsOnEdge": "cells", "verticesOnEdge": "vertices", "edgesOnEdge": "edges",
                 "cellsOnVertex": "cells", "edgesOnVertex": "edges"}
_DIM_PERM = {"nCells": "cells", "nEdges": "edges", "nVertices": "vertices"}


@dataclass
class MeshPermutation:
    """New -> old index arrays: new entity i is old entity cells[i] (edges[i], vertices[i])."""

    cells: np.ndarray
    edges: np.ndarray
    vertices: np.ndarray


def _quantise(p: np.ndarray, bits: int = _BITS) -> np.ndarray:
    """(n, 3) coordinates in [-1, 1] -> (n, 3) uint64 integers in [0, 2^bits)."""
    scale = (1 << bits) - 1
    return np.clip(np.rint((p + 1.0) * 0.5 * scale), 0, scale).astype(np.uint64)


def morton_keys(p: np.ndarray) -> np.ndarray:
    """63-bit Morton (Z-order) keys of (n, 3) points in [-1, 1]^3: bits of x, y, z interleaved."""
    q = _quantise(p)
    key = np.zeros(p.shape[0], dtype=np.uint64)
    for axis in range(3):
        v = q[:, axis].copy()
        # spread the 21 bits of v to every third bit (standard magic-number bit spreading)
        v = (v | (v << np.uint64(32))) & np.uint64(0x1F00000000FFFF)
        v = (v | (v << np.uint64(16))) & np.uint64(0x1F0000FF0000FF)
        v = (v | (v << np.uint64(8))) & np.uint64(0x100F00F00F00F00F)
        v = (v | (v << np.uint64(4))) & np.uint64(0x10C30C30C30C30C3)
        v = (v | (v << np.uint64(2))) & np.uint64(0x1249249249249249)
        key |= v << np.uint64(2 - axis)
    return key


def hilbert_keys(p: np.ndarray, bits: int = _BITS) -> np.ndarray:
    """Hilbert keys (3 bits per level, 63 bits at the default 21) of (n, 3) points in [-1, 1]^3,
    each axis quantised to 2^bits cells (Skilling's transpose algorithm, AIP Conf. Proc. 707,
    2004). The one Hilbert curve of the package: mesh reordering and SFC partitioning use it."""
    x = [_quantise(p, bits)[:, i].copy() for i in range(3)]
    one = np.uint64(1)
    m = np.uint64(1 << (bits - 1))
    # inverse undo of excess work
    q = m
    while q > one:
        pm = q - one
        for i in range(3):
            hit = (x[i] & q) != 0
            x[0] = np.where(hit, x[0] ^ pm, x[0])
            t = np.where(hit, np.uint64(0), (x[0] ^ x[i]) & pm)
            x[0] ^= t
            x[i] ^= t
        q >>= one
    # Gray encode
    for i in range(1, 3):
        x[i] ^= x[i - 1]
    t = np.zeros_like(x[0])
    q = m
    while q > one:
        t = np.where((x[2] & q) != 0, t ^ (q - one), t)
        q >>= one
    for i in range(3):
        x[i] ^= t
    # interleave the transposed bits: bit b of x[i] -> key bit 3 b + (2 - i)
    key = np.zeros(p.shape[0], dtype=np.uint64)
    for b in range(bits):
        for i in range(3):
            key |= ((x[i] >> np.uint64(b)) & one) << np.uint64(3 * b + 2 - i)
    return key


def sfc_order(p: np.ndarray, method: str = "morton") -> np.ndarray:
    """Permutation (new -> old) sorting (n, 3) unit vectors along a space-filling curve."""
    if method == "morton":
        keys = morton_keys(p)
    elif method == "hilbert":
        keys = hilbert_keys(p)
    else:
        raise ValueError(f"reorder method {method!r} is unknown; expected one of {METHODS}")
    return np.argsort(keys, kind="stable")


def following_order(entity_on_cell: np.ndarray, counts: np.ndarray, n_entities: int) -> np.ndarray:
    """New -> old order of entities by first appearance in entity_on_cell (cells in storage order).

    entity_on_cell is (nCells, maxEdges) (edgesOnCell or verticesOnCell), valid for j < counts[c].
    Raises ValueError if some entity never appears.
    """
    m = entity_on_cell.shape[1]
    inside = (np.arange(m)[None, :] < counts[:, None]).ravel()
    flat = entity_on_cell.ravel()[inside]
    first = np.full(n_entities, flat.size, dtype=np.int64)
    # advanced assignment with repeated indices keeps the last write: write in reverse order
    first[flat[::-1]] = np.arange(flat.size - 1, -1, -1)
    missing = np.flatnonzero(first == flat.size)
    if missing.size:
        raise ValueError(f"reorder: entity {missing[0]} appears in no cell's connectivity "
                         f"(expected every one of {n_entities} to be on some cell)")
    slot = np.full(flat.size, -1, dtype=np.int64)
    slot[first] = np.arange(n_entities)
    return slot[slot >= 0]


def _inverse(perm: np.ndarray, n: int, what: str) -> np.ndarray:
    perm = np.asarray(perm)
    if perm.shape != (n,):
        raise ValueError(f"permute_mesh: permutation of {what} has shape {perm.shape}, expected ({n},)")
    inv = np.full(n, -1, dtype=np.int64)
    ok = (perm >= 0) & (perm < n)
    if not ok.all():
        i = int(np.flatnonzero(~ok)[0])
        raise ValueError(f"permute_mesh: {what}[{i}] = {perm[i]}, expected an index in [0, {n})")
    inv[perm] = np.arange(n)
    if (inv < 0).any():
        i = int(np.flatnonzero(inv < 0)[0])
        raise ValueError(f"permute_mesh: {what} is not a permutation: old index {i} is never used")
    return inv


def _remap(values: np.ndarray, inv: np.ndarray) -> np.ndarray:
    """Map old indices to new ones, keeping -1 pads."""
    out = inv[np.where(values >= 0, values, 0)].astype(values.dtype)
    return np.where(values >= 0, out, values)


def permute_mesh(mesh: Mesh, perm: MeshPermutation) -> Mesh:
    """Apply `perm` (new -> old) to every field of `mesh`: rows are reordered, index values remapped.

    -1 pads stay -1; the orientation of every edge (cellsOnEdge, verticesOnEdge order) is kept, so
    signs and weights are permuted, not recomputed. `extra` variables are permuted along their first
    nCells / nEdges / nVertices dimension. On a local mesh, each permutation must map the owned
    block (the first nCellsSolve, nEdgesSolve, nVerticesSolve) onto itself.
    """
    sizes = {"cells": mesh.nCells, "edges": mesh.nEdges, "vertices": mesh.nVertices}
    solve = {"cells": mesh.nCellsSolve, "edges": mesh.nEdgesSolve, "vertices": mesh.nVerticesSolve}
    perms = {k: np.asarray(getattr(perm, k)) for k in sizes}
    invs = {k: _inverse(perms[k], sizes[k], f"MeshPermutation.{k}") for k in sizes}
    for k in sizes:
        owned = perms[k][:solve[k]]
        if solve[k] < sizes[k] and owned.size and owned.max() >= solve[k]:
            i = int(np.flatnonzero(owned >= solve[k])[0])
            raise ValueError(f"permute_mesh: MeshPermutation.{k}[{i}] = {owned[i]} moves a halo entity "
                             f"into the owned block (expected indices < {solve[k]})")
    changes = {}
    for name, dims in FIELD_DIMS.items():
        arr = getattr(mesh, name)[perms[_DIM_PERM[dims[0]]]]
        if name in INDEX_FIELDS:
            arr = _remap(arr, invs[_INDEX_TARGET[name]])
        changes[name] = arr
    extra = {}
    for name, (dims, arr) in mesh.extra.items():
        axes = [i for i, d in enumerate(dims) if d in _DIM_PERM]
        if axes:
            arr = np.take(np.asarray(arr), perms[_DIM_PERM[dims[axes[0]]]], axis=axes[0])
        extra[name] = (dims, arr)
    return mesh.replace(**changes, extra=extra)


def reorder_permutation(mesh: Mesh, method: str = "morton") -> MeshPermutation:
    """The permutation `reorder_mesh` applies (owned and halo blocks are each ordered in place)."""
    p = np.stack([mesh.xCell, mesh.yCell, mesh.zCell], axis=1)
    p = p / np.linalg.norm(p, axis=1)[:, None]
    cells = np.concatenate([sfc_order(p[:mesh.nCellsSolve], method),
                            mesh.nCellsSolve + sfc_order(p[mesh.nCellsSolve:], method)])
    eoc, voc, noc = mesh.edgesOnCell[cells], mesh.verticesOnCell[cells], mesh.nEdgesOnCell[cells]
    if mesh.nCellsSolve < mesh.nCells:
        # local mesh: edges/vertices keep their owned/halo block; order each block by first use
        edges = _blocked_following(eoc, noc, mesh.nEdges, mesh.nEdgesSolve)
        vertices = _blocked_following(voc, noc, mesh.nVertices, mesh.nVerticesSolve)
    else:
        edges = following_order(eoc, noc, mesh.nEdges)
        vertices = following_order(voc, noc, mesh.nVertices)
    return MeshPermutation(cells=cells, edges=edges, vertices=vertices)


def _blocked_following(on_cell, counts, n, n_solve):
    m = on_cell.shape[1]
    inside = (np.arange(m)[None, :] < counts[:, None]) & (on_cell >= 0)
    flat = on_cell[inside]
    first = np.full(n, flat.size, dtype=np.int64)
    first[flat[::-1]] = np.arange(flat.size - 1, -1, -1)
    # entities met on no cell keep their relative order at the end of their block
    first = np.where(first == flat.size, flat.size + np.arange(n), first)
    block = (np.arange(n) >= n_solve).astype(np.int64)
    return np.lexsort((first, block))


def reorder_mesh(mesh: Mesh, method: str = "morton") -> tuple[Mesh, MeshPermutation]:
    """Reorder cells along a space-filling curve (`method` "morton" or "hilbert"), edges and vertices
    following their cells; returns the permuted mesh and the permutation (new -> old)."""
    perm = reorder_permutation(mesh, method)
    return permute_mesh(mesh, perm), perm
