"""The TRiSK edge-to-edge stencil shared by `tangential_e2e` and `pv_flux_e2e` (Thuburn et al.
2009, Ringler et al. 2010).

edgesOnEdge / weightsOnEdge masked beyond nEdgesOnEdge (-1, weight 0) and trimmed to the largest
nEdgesOnEdge, and the transposed map edgesOnEdgeT / weightsOnEdgeT: for each edge e', the e and
weightsOnEdge[e, j] of every pair (e, j) with edgesOnEdge[e, j] = e', in increasing (e, j) order
(-1 / 0 pads). The stencil is symmetric (e' reads e exactly when e reads e'), so the transpose
also fits on the forward's slots: weightsOnEdgeReverse[e, i] is the weight with which
e' = edgesOnEdge[e, i] reads e. Tables of `meshops.device.tables`, held once per DeviceMesh.
"""
from __future__ import annotations

import numpy as np

from meshops.device import connectivity
from meshops.device.tables import register

#: (indices, weights) of the TRiSK stencil and of its transpose.
FORWARD = ("edgesOnEdge", "weightsOnEdge")
TRANSPOSED = ("edgesOnEdgeT", "weightsOnEdgeT")
#: (indices, weights, reverse weights): the stencil with its transpose on the same slots.
SYMMETRIC = (*FORWARD, "weightsOnEdgeReverse")


@register("weightsOnEdge", kind="float", location="edge")
def _weights(h):
    """weightsOnEdge on edgesOnEdge (0 in pads), trimmed like it."""
    edges = h["edgesOnEdge"]
    return np.where(edges >= 0, np.asarray(h.mesh.weightsOnEdge)[:, :edges.shape[1]], 0.0)


@register("weightsOnEdgeT", kind="float", location="edge")
def _weights_t(h):
    """weightsOnEdge on the transposed map edgesOnEdgeT."""
    return connectivity.take(h["weightsOnEdge"], h["edgesOnEdgeT"], h["edgesOnEdgeTSlot"])


@register("weightsOnEdgeReverse", kind="float", location="edge")
def _weights_reverse(h):
    """weightsOnEdge[e', j] on each slot (e, i) of edgesOnEdge with e' = edgesOnEdge[e, i] and
    edgesOnEdge[e', j] = e (0 in pads); a neighbour that does not list e back is an error naming
    edgesOnEdge (a rank's mesh keeps every entry naming a local edge, so it stays symmetric)."""
    edges = h["edgesOnEdge"]
    return connectivity.take(h["weightsOnEdge"], edges,
                             connectivity.slot_map(edges, edges, "edgesOnEdge", "edgesOnEdge"))


def width(table, stride) -> int:
    """Slots per row of a stencil table held row-major (stride 1) or slot-major."""
    return int(table.shape[0] if int(stride) != 1 else table.shape[1])
