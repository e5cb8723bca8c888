"""The tangent-linear of the shallow-water RK4 step in fused kernels (swm/cuda/shallow_water_tl.cu),
for CuPy fields: one stage (the loop is `framework.stepper.step_tl`'s, through `swm.fused_stages.FusedStages`).
The reference is the operator path, `swm.tendencies.tendencies_tl`.

About the stage records of the step's forward (`swm.fused.FusedRK4.record`: each stage's
provisional state h, u and its pv_vertex, h_vertex, pv_edge and flux), each tangent stage runs four
passes, as the forward's stage does:

    sw_tl_vertex   vertices  dpv_vertex = (curl_e2v(du) - pv_vertex interp_c2v(dh)) / h_vertex
    sw_pv_edge     edges     dpv_edge = interp_v2e(dpv_vertex), less the tangent of the pv_edge
                             corrections (APVM, through its operators; the forward's kernels)
    sw_tl_cell     cells     dF = dh_edge u + h_edge du (written by each edge's first cell),
                             dtend_h = -div(dF), dphi = dke + g (dh + db); the RK4 update of dh,
                             to which the tangent of the h terms outside the kernels is added
    sw_tl_edge     edges     dtend_u = pv_flux_e2e's tangent - grad_c2e(dphi) + the tangent of the
                             terms outside the fused kernels (`swm.terms`); the RK4 update of du

with the RK4 update inside the cell and edge passes (dnew += b_j dt dk, dnext = d + a_j dt dk), so
no tangent tendency is stored.
"""
from __future__ import annotations

from framework.timestepping import Update
from meshops.device.kernels import Family, Kernel
from meshops.device.mesh import for_fields
from meshops.operators import trisk

from swm import fused, terms
from swm.fused import CUDA_DIR
from swm.tendencies import Physics

_RK = "real:newCoef real:nextCoef int:accumulate int:provisional"
_KERNELS = Family("shallow_water_tl", sources=CUDA_DIR, kernels=(
    Kernel("sw_tl_vertex", "idx:edgesOnVertex coef:curlCoef idx:cellsOnVertex coef:c2vCoef in:du in:dh "
                           "in:pvVertex in:hVertex out:dPvVertex int:vertexDegree int:slotStride"),
    Kernel("sw_tl_cell", "idx:edgesOnCell idx:cellsAcross coef:divCoef coef:keCoef in:h in:u in:dh in:du "
                         "in:db in:dhOld out:dhNew out:dhNext out:dPhi put:dFlux int:maxEdges "
                         "int:slotStride real:gravity int:hasDb " + _RK),
    Kernel("sw_tl_edge", "idx:edgesOnEdge coef:weightsOnEdge idx:cellsOnEdge coef:invDcEdge in:flux "
                         "in:pvEdge in:dFlux in:dPvEdge in:dPhi in:extra in:duOld out:duNew out:duNext "
                         "int:maxEdges2 int:slotStride int:hasExtra " + _RK),
))


class FusedTangent:
    """The tangent-linear RK4 stage through the fused kernels on `mesh` (a `meshops.DeviceMesh` on
    CuPy, or a mesh), holding the scratch fields of a stage (those of a `FusedRK4`); the stage
    loop is `framework.stepper.step_tl`'s (`swm.fused_stages.FusedStages`)."""

    def __init__(self, mesh):
        self.mesh = mesh
        self._scratch = fused.FusedRK4(mesh)

    def scratch(self, name: str, location: str, like):
        """Scratch field `name` (`swm.fused.FusedRK4.scratch`)."""
        return self._scratch.scratch(name, location, like)

    def stage(self, record: dict, physics: Physics, dh, du, db, update: Update, *, old, new, next):
        """One tangent stage about `record` for the stage's tangent (dh, du): its tangent
        tendencies applied by `update` to the pairs (cells, edges) `old`, `new` and `next`."""
        m = for_fields(self.mesh, dh, du)
        scratch = self._scratch.scratch
        d_pv_vertex = scratch("dPvVertex", "vertex", dh)
        (eov, curl, cov, kite), stride = m.stencil(("edgesOnVertex", "curlCoef", "cellsOnVertex", "c2vCoef"),
                                                   (du, dh, d_pv_vertex))
        _KERNELS.launch("sw_tl_vertex", m.nVertices, edgesOnVertex=eov, curlCoef=curl, cellsOnVertex=cov,
                        c2vCoef=kite, du=du, dh=dh, pvVertex=record["pv_vertex"],
                        hVertex=record["h_vertex"], dPvVertex=d_pv_vertex,
                        vertexDegree=trisk.width(eov, stride), slotStride=stride)
        base = terms.Fields(m, u=record["u"], h=record["h"], pv_vertex=record["pv_vertex"],
                            h_vertex=record["h_vertex"], pv_edge=record["pv_edge"])
        t = terms.Fields(m, du=du, dh=dh, db=db, dpv_vertex=d_pv_vertex)
        d_pv_edge = scratch("dPvEdge", "edge", du)
        if terms.active_terms(physics, target="pv_edge"):
            correction = terms.tangent_sum(m, base, t, physics, target="pv_edge")
            fused._KERNELS.launch("sw_pv_edge_apvm", m.nEdges, verticesOnEdge=m.table("verticesOnEdge"),
                                  pvVertex=d_pv_vertex, pvCorrection=correction, pvEdge=d_pv_edge)
        else:
            fused._KERNELS.launch("sw_pv_edge", m.nEdges, verticesOnEdge=m.table("verticesOnEdge"),
                                  pvVertex=d_pv_vertex, pvEdge=d_pv_edge)

        t["dpv_edge"] = d_pv_edge
        # the terms outside the kernels, before the edge pass overwrites du
        extra_h = terms.tangent_sum(m, base, t, physics, target="tend_h", fused=False)
        extra = terms.tangent_sum(m, base, t, physics, target="tend_u", fused=False)

        d_phi, d_flux = scratch("dPhi", "cell", dh), scratch("dFlux", "edge", du)
        (eoc, across, div, ke), stride = m.stencil(("edgesOnCell", "cellsAcrossOnCell", "divCoef", "keCoef"),
                                                   (dh, du, old[0], new[0], next[0], d_phi, d_flux))
        _KERNELS.launch("sw_tl_cell", m.nCells, edgesOnCell=eoc, cellsAcross=across, divCoef=div, keCoef=ke,
                        h=record["h"], u=record["u"], dh=dh, du=du, db=dh if db is None else db,
                        dhOld=old[0], dhNew=new[0], dhNext=next[0], dPhi=d_phi, dFlux=d_flux,
                        maxEdges=trisk.width(eoc, stride), slotStride=stride, gravity=physics.gravity,
                        hasDb=int(db is not None), **update.arguments())
        if extra_h is not None:
            fused.apply_extra(update, extra_h, new[0], next[0])
        (eoe, weights), stride = m.stencil(trisk.FORWARD, (d_flux, d_pv_edge, old[1], new[1], next[1]))
        _KERNELS.launch("sw_tl_edge", m.nEdges, edgesOnEdge=eoe, weightsOnEdge=weights,
                        cellsOnEdge=m.table("cellsOnEdge"), invDcEdge=m.table("invDcEdge", du.dtype),
                        flux=record["flux"], pvEdge=record["pv_edge"], dFlux=d_flux, dPvEdge=d_pv_edge,
                        dPhi=d_phi, extra=d_flux if extra is None else extra, duOld=old[1], duNew=new[1],
                        duNext=next[1], maxEdges2=trisk.width(eoe, stride), slotStride=stride,
                        hasExtra=int(extra is not None), **update.arguments())
