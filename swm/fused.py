"""The shallow-water RK4 stages in fused kernels (swm/cuda/shallow_water.cu), for CuPy fields; the
fused path's stage implementation for `framework.stepper` (which runs the stage loop of every sweep
and the exchanges) is `swm.fused_stages.FusedStages`, on these passes and their tangent-linear and
adjoint (`swm.fused_tangent`, `swm.fused_adjoint`).

Each RK4 stage, after the state exchange, runs four passes where the operator path
(swm.tendencies, framework.timestepping) runs some twenty operator and elementwise kernels:

    sw_pv_vertex    vertices  pv_vertex = (f_vertex + curl_e2v(u)) / interp_c2v(h)
    sw_pv_edge      edges     pv_edge = interp_v2e(pv_vertex)
    sw_cell_stage   cells     h_edge inline, tend_h = -flux_div_e2c(h_edge, u), ke = ke_e2c(u),
                              phi = ke + gravity * (h + b); the first present cell of each edge
                              writes its thickness flux h_edge * u; the RK4 update of h
    sw_edge_stage   edges     tend_u = pv_flux_e2e(flux, pv_edge) - grad_c2e(phi); the RK4 update of u

The RK4 update is MPAS's (framework.timestepping): the new state accumulates y_new += b_j dt k_j and the
next provisional state is y_p = y_n + a_j dt k_j, written by the pass that computes k_j, so no
tendency field is stored. The terms the kernels do not compute (`swm.terms`, `fused` False)
are computed by meshops operators in between the passes, from the provisional state before the
cell pass: the pv_edge pass subtracts the pv_edge corrections (APVM; sw_pv_edge_apvm), the edge
pass adds the u part (viscosity; sw_edge_stage_extra), and the h part is added to the cell pass's
update (new += new_coef * extra, next += next_coef * extra: equal to the operator path to
round-off, bitwise for the tendencies). Without such a term the passes are the four kernels
alone. The split and its measured traffic:
docs/decisions/0010-fused-shallow-water-step.md.

The arithmetic is the operator path's: the same stencil sums in the same slot order, and every
product that path forms as a separate elementwise operation rounded on its own. Each row's result
depends only on the rows of its stencils, so a decomposed run equals one process bitwise, as the
operator path does (one state exchange per stage, the same halo depth: the passes read the
stencils of the operators they replace).
"""
from __future__ import annotations

import pathlib

import numpy as np

from meshops.device.backend import array_module
from meshops.device.kernels import Family, Kernel
from meshops.device.mesh import for_fields
from meshops.device.tables import SIZE_OF
from meshops.operators import trisk

from swm import terms
from swm.tendencies import Physics
from framework.timestepping import Update, updates

#: The model's CUDA sources, beside the model (meshops/cuda is on their include path).
CUDA_DIR = pathlib.Path(__file__).parent / "cuda"

_RK = "in:{y}Old out:{y}New out:{y}Next"
_RK_SCALARS = "real:newCoef real:nextCoef int:accumulate int:provisional"
_EDGE = ("idx:edgesOnEdge coef:weightsOnEdge idx:cellsOnEdge coef:invDcEdge in:flux in:pvEdge in:phi "
         "{extra}" + _RK.format(y="u") + " int:maxEdges2 int:slotStride " + _RK_SCALARS)
_KERNELS = Family("shallow_water", sources=CUDA_DIR, kernels=(
    Kernel("sw_pv_vertex", "idx:edgesOnVertex coef:curlCoef idx:cellsOnVertex coef:c2vCoef in:u in:h "
                           "in:fVertex out:pvVertex out:hVertexOut int:vertexDegree int:slotStride "
                           "int:record"),
    Kernel("sw_pv_edge", "idx:verticesOnEdge in:pvVertex out:pvEdge"),
    Kernel("sw_pv_edge_apvm", "idx:verticesOnEdge in:pvVertex in:pvCorrection out:pvEdge"),
    Kernel("sw_cell_stage", "idx:edgesOnCell idx:cellsAcross coef:divCoef coef:keCoef in:h in:u in:b "
                            + _RK.format(y="h") + " out:phi put:flux int:maxEdges int:slotStride "
                            "real:gravity " + _RK_SCALARS),
    Kernel("sw_edge_stage", _EDGE.format(extra="")),
    Kernel("sw_edge_stage_extra", _EDGE.format(extra="in:extra ")),
))


#: The mesh tables the passes read (`swm.model.Model` builds them together, on threads, before
#: the first step).
TABLES = ("edgesOnVertex", "curlCoef", "cellsOnVertex", "c2vCoef", "verticesOnEdge", "edgesOnCell",
          "cellsAcrossOnCell", "divCoef", "keCoef", *trisk.FORWARD, "cellsOnEdge", "invDcEdge")


def apply_extra(update: Update, extra, y_new, y_next) -> None:
    """Add the tendency `extra` to a pass's update in place, as `update` applies k: y_new +=
    new_coef * extra, and with `provisional` y_next += next_coef * extra."""
    y_new += update.new_coef * extra
    if update.provisional:
        y_next += update.next_coef * extra


class FusedRK4:
    """The RK4 stages of the state (h on cells, u on edges) through the fused kernels on `mesh` (a
    `meshops.DeviceMesh` on CuPy, or a mesh), holding the scratch fields of a stage."""

    def __init__(self, mesh):
        self.mesh = mesh
        self._scratch: dict = {}
        self._tag = ""      # "@j" while `record` runs stage j: its own scratch fields

    def scratch(self, name: str, location: str, like):
        """Scratch field `name` at `location` with the levels and dtype of `like`, kept between
        calls."""
        key = (name + self._tag, like.dtype.str, like.shape[1:])
        field = self._scratch.get(key)
        if field is None:
            n = getattr(for_fields(self.mesh, like), SIZE_OF[location])
            field = self._scratch[key] = array_module(like).empty((n,) + like.shape[1:], like.dtype)
        return field

    def record(self, j: int, h, u, b, f_vertex, physics: Physics, update: Update, old) -> tuple:
        """(record, next provisional state) of stage j of the provisional state (h, u), computed
        as `stage` computes it (bitwise; the last stage's u update, which nothing reads, is left
        out, and the end state goes to scratch nobody reads): the record, as the adjoint reads
        it, is a dict of (h, u) and its pv_vertex, h_vertex, pv_edge (APVM included) and flux =
        h_edge * u, every stage in buffers of its own (kept)."""
        new = (self.scratch("hRecordEnd", "cell", h), self.scratch("uRecordEnd", "edge", u))
        self._tag = f"@{j}"
        try:
            last = not update.provisional
            h_next, u_next = self.scratch("hProvisional", "cell", h), self.scratch("uProvisional", "edge", u)
            h_vertex = self.scratch("hVertex", "vertex", h)
            pv_vertex = self.vertex_pass(h, u, f_vertex, h_vertex)
            pv_edge = self.pv_edge_pass(h, u, pv_vertex, physics)
            # the last stage's u update is not read
            extra = self.extra(h, u, b, pv_vertex, pv_edge, physics,
                               ("tend_h",) if last else ("tend_h", "tend_u"))
            flux, phi = self.cell_pass(h, u, b, physics, update, old[0], new[0], h_next,
                                       extra["tend_h"])
            if not last:
                self.edge_pass(u, flux, pv_edge, phi, physics, update, old[1], new[1], u_next,
                               extra["tend_u"])
        finally:
            self._tag = ""
        return (dict(h=h, u=u, pv_vertex=pv_vertex, h_vertex=h_vertex, pv_edge=pv_edge, flux=flux),
                (h_next, u_next))

    def stage(self, h, u, b, f_vertex, physics: Physics, update: Update, *, old, new,
              next) -> None:
        """One RK4 stage of the provisional state (h, u): its tendencies k applied by `update` to
        the pairs (cells, edges) `old`, `new` and `next`; `next` must not hold h."""
        pv_vertex = self.vertex_pass(h, u, f_vertex)
        pv_edge = self.pv_edge_pass(h, u, pv_vertex, physics)
        extra = self.extra(h, u, b, pv_vertex, pv_edge, physics)
        flux, phi = self.cell_pass(h, u, b, physics, update, old[0], new[0], next[0], extra["tend_h"])
        self.edge_pass(u, flux, pv_edge, phi, physics, update, old[1], new[1], next[1],
                       extra["tend_u"])

    def extra(self, h, u, b, pv_vertex, pv_edge, physics: Physics, targets=("tend_h", "tend_u")):
        """{target: the sum of the active terms of `target` the kernels do not compute
        (`swm.terms.extra`), None if none} of the provisional state, from its diagnostics held
        (pv_vertex, pv_edge) or derived (`swm.terms.Fields`); computed before the cell pass, as
        the edge pass overwrites the provisional u."""
        extra = dict.fromkeys(("tend_h", "tend_u"))
        if any(terms.active_terms(physics, target=t, fused=False) for t in targets):
            m = for_fields(self.mesh, h, u)
            d = terms.Fields(m, h=h, u=u, pv_vertex=pv_vertex, pv_edge=pv_edge)
            for target in targets:
                extra[target] = terms.extra(m, h, u, b, d, physics, target)
        return extra

    def vertex_pass(self, h, u, f_vertex, h_vertex=None):
        """pv_vertex (scratch) of the provisional state (h, u); its denominator h_vertex written
        to `h_vertex` too when given."""
        m = for_fields(self.mesh, h, u)
        pv_vertex = self.scratch("pvVertex", "vertex", h)
        (eov, curl, cov, kite), stride = m.stencil(
            ("edgesOnVertex", "curlCoef", "cellsOnVertex", "c2vCoef"), (u, h, f_vertex, pv_vertex))
        _KERNELS.launch("sw_pv_vertex", m.nVertices, edgesOnVertex=eov, curlCoef=curl,
                        cellsOnVertex=cov, c2vCoef=kite, u=u, h=h, fVertex=f_vertex,
                        pvVertex=pv_vertex, hVertexOut=pv_vertex if h_vertex is None else h_vertex,
                        vertexDegree=trisk.width(eov, stride), slotStride=stride,
                        record=int(h_vertex is not None))
        return pv_vertex

    def pv_edge_pass(self, h, u, pv_vertex, physics: Physics):
        """pv_edge (scratch) of the provisional state (h, u) from pv_vertex, less the sum of the
        pv_edge corrections of the active terms (`swm.terms.pv_correction`: APVM)."""
        m = for_fields(self.mesh, u, pv_vertex)
        pv_edge = self.scratch("pvEdge", "edge", u)
        if terms.active_terms(physics, target="pv_edge"):
            correction = terms.pv_correction(m, h, u, terms.Fields(m, h=h, u=u, pv_vertex=pv_vertex),
                                             physics)
            _KERNELS.launch("sw_pv_edge_apvm", m.nEdges, verticesOnEdge=m.table("verticesOnEdge"),
                            pvVertex=pv_vertex, pvCorrection=correction, pvEdge=pv_edge)
        else:
            _KERNELS.launch("sw_pv_edge", m.nEdges, verticesOnEdge=m.table("verticesOnEdge"),
                            pvVertex=pv_vertex, pvEdge=pv_edge)
        return pv_edge

    def cell_pass(self, h, u, b, physics: Physics, update: Update, h_old, h_new, h_next,
                  extra=None):
        """(flux, phi) (scratch) of the provisional state, and the update of h, plus that of
        `extra` (the h part of the terms the kernels do not compute) when given."""
        m = for_fields(self.mesh, h, u)
        flux, phi = self.scratch("flux", "edge", u), self.scratch("phi", "cell", h)
        (eoc, across, div, ke), stride = m.stencil(
            ("edgesOnCell", "cellsAcrossOnCell", "divCoef", "keCoef"),
            (h, u, b, h_old, h_new, h_next, phi, flux))
        _KERNELS.launch("sw_cell_stage", m.nCells, edgesOnCell=eoc, cellsAcross=across, divCoef=div,
                        keCoef=ke, h=h, u=u, b=b, hOld=h_old, hNew=h_new, hNext=h_next, phi=phi,
                        flux=flux, maxEdges=trisk.width(eoc, stride), slotStride=stride,
                        gravity=physics.gravity, **update.arguments())
        if extra is not None:
            apply_extra(update, extra, h_new, h_next)
        return flux, phi

    def edge_pass(self, u, flux, pv_edge, phi, physics: Physics, update: Update, u_old, u_new,
                  u_next, extra_u=None) -> None:
        """The update of u from the cell pass's flux, pv_edge and phi, plus `extra_u` when given
        (the u part of the terms the kernels do not compute, `extra`: viscosity)."""
        m = for_fields(self.mesh, u)
        extra, name = {}, "sw_edge_stage"
        if extra_u is not None:
            extra, name = dict(extra=extra_u), name + "_extra"
        (eoe, weights), stride = m.stencil(trisk.FORWARD, (flux, pv_edge, u_old, u_new, u_next))
        _KERNELS.launch(name, m.nEdges, edgesOnEdge=eoe, weightsOnEdge=weights,
                        cellsOnEdge=m.table("cellsOnEdge"), invDcEdge=m.table("invDcEdge", u.dtype),
                        flux=flux, pvEdge=pv_edge, phi=phi, uOld=u_old, uNew=u_new, uNext=u_next,
                        maxEdges2=trisk.width(eoe, stride), slotStride=stride, **extra,
                        **update.arguments())


def fused_tendencies(mesh, h, u, b, f_vertex, physics: Physics):
    """(tend_h, tend_u) of the state (h, u) through the fused kernels: one stage with old = 0 and
    new_coef = 1 (new = 0 + 1 * k = k exactly). The reference is swm.tendencies.tendencies."""
    xp = array_module(h, u)
    stepper = FusedRK4(mesh)
    tend_h, tend_u = xp.empty_like(h), xp.empty_like(u)
    unused = (stepper.scratch("hProvisional0", "cell", h), stepper.scratch("uProvisional", "edge", u))
    stepper.stage(h, u, b, f_vertex, physics, Update(1.0, 0.0, False, False),
                  old=(xp.zeros_like(h), xp.zeros_like(u)), new=(tend_h, tend_u), next=unused)
    return tend_h, tend_u



def fused_record(mesh, h, u, b, f_vertex, physics: Physics) -> dict:
    """The record of the state (h, u) as the fused tangent-linear and adjoint read it: stage 1 of
    a step from it (`FusedRK4.record`)."""
    return FusedRK4(mesh).record(0, h, u, b, f_vertex, physics, updates(1.0)[0], (h, u))[0]
