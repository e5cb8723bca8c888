"""The TRiSK edge-to-edge stencil shared by `tangential_e2e` and `pv_flux_e2e` (Thuburn et al.
2009, Ringler et al. 2010).

edgesOnEdge / weightsOnEdge masked beyond nEdgesOnEdge (-1, weight 0), and the transposed map
edgesOnEdgeT / weightsOnEdgeT: for each edge e', the e and weightsOnEdge[e, j] of every pair (e, j)
with edgesOnEdge[e, j] = e', in increasing (e, j) order (-1 / 0 pads). Built once per mesh and
held once per backend, dtype and layout for both operators.
"""
from __future__ import annotations

import numpy as np

from meshops.device import connectivity
from meshops.device.backend import array_module, prepared
from meshops.device.kernels import stencil_tables

FAMILY = "trisk"


def _build(mesh) -> dict:
    edges = connectivity.masked(mesh.edgesOnEdge, mesh.nEdgesOnEdge)
    weights = np.where(edges >= 0, mesh.weightsOnEdge, 0.0)
    rows, slots = connectivity.transpose(edges, mesh.nEdges, "edgesOnEdge")
    return dict(edgesOnEdge=edges, weightsOnEdge=weights, edgesOnEdgeT=rows,
                weightsOnEdgeT=connectivity.take(weights, rows, slots))


def tables(mesh, x):
    """The tables on the backend and in the dtype of `x`, row-major."""
    return prepared(mesh, FAMILY, _build, array_module(x), x.dtype)


def gather_tables(mesh, fields):
    """The tables of a gather kernel on `fields` (device arrays) and its slot stride
    (`meshops.device.kernels.stencil_tables`: slot-major at one lane per row)."""
    return stencil_tables(mesh, FAMILY, _build, fields, mesh.nEdges)
