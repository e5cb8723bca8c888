"""The hydrostatic core's RK4 stage in fused kernels (hydrostatic/cuda/hydrostatic.cu), for CuPy
fields, and the records of its stages; `hydrostatic.fused_stages.FusedStages` runs them for
`framework.stepper`.

Each stage, after the state exchange, runs four passes where the operator path
(`hydrostatic.dynamics.tendencies` with `framework.timestepping`) runs 25 operator kernels and
about 35 elementwise ones:

    hs_pv_vertex   (vertex, layer)  q_v = (curl_e2v(u) + f) / interp_c2v(mass)
    hs_pv_edge     (edge, layer)    q_e = interp_v2e(q_v)
    hs_cell_stage  (cell, warp)     F = interp_c2e(mass) u (each edge's first present cell writes
                                    it), D = div_e2c(F), div_e2c(theta_e F), K = ke_e2c(u); down the
                                    column p_i = p_top + g sum_layers_from_top_l2i(mass), p =
                                    avg_i2l(p_i) and sum_k D; up it pi = cp exner(p), alpha,
                                    phi_i = phi_s + g sum_layers_from_bottom_l2i(mass alpha),
                                    B = K + avg_i2l(phi_i), W = sum_layers_from_bottom_l2i(dB
                                    sum_k D - D), tend_mass = -D - div_vflux_i2l(W), tend_theta_mass
                                    = -div_e2c(theta_e F) - div_vflux_i2l(W avg_l2i(theta)); the RK4
                                    update of mass and theta_mass
    hs_edge_stage  (edge, layer)    tend_u = pv_flux_e2e(F, q_e) - grad_c2e(B) - theta_e grad_c2e(pi)
                                    - avg_i2l(interp_c2e(W) diff_l2i(u)) / interp_c2e(mass); its RK4
                                    update

with theta = theta_mass / mass and theta_e = interp_c2e(theta) recomputed where read. The RK4
update is `framework.timestepping.Update`'s, applied by the pass that computes the tendency (no
tendency field is stored). The provisional state alternates between two scratch sets (the cell
pass reads mass and theta_mass at its neighbours, the edge pass u at the levels beside its own).

Kinetic energy: TRiSK's inside the cell pass; the other forms of `hydrostatic.terms.kinetic_energy`
are computed by their operators and read by the cell pass. Terms outside the passes (del2 / del4
on theta and on u: `EXTRA_TERMS`) and the forcing are computed by their operator code from the
provisional state and added by the passes to the tendency, one after the other in the operator
path's order (terms in `hydrostatic.terms.TERMS` order, then the forcing), before the update. A lone
del2 / del4 on u leaves its last vector Laplacian to the edge pass where that operator is one
gather (`_edge_extra`).

The tangent-linear and adjoint passes (`hydrostatic.fused_tangent`, `hydrostatic.fused_adjoint`)
are declared here with these, in `_KERNELS`; the stage records are the fused path's
(`record_stage`: each stage's provisional state with its q_v, q_e, F, pi and W). The arithmetic
is the operator path's, in the same order (the kernel file's comment), so a stage equals the
operator path's bitwise where neither contracts a multiply-add (the host harness, and by
construction the GPU). Each row depends only on the rows of the stencils it replaces, so a
decomposed run equals one process bitwise, as the operator path does. The design and its
traffic: docs/decisions/0032-fused-hydrostatic-stage.md.
"""
from __future__ import annotations

import dataclasses
import pathlib

import meshops
from meshops.device.backend import array_module
from meshops.device.kernels import Family, Kernel
from meshops.device.mesh import for_fields
from meshops.device.tables import SIZE_OF
from meshops.operators import laplacian, trisk
from meshops.operators.vertical import CP_DRY, P0, R_DRY
from framework.timestepping import Update, updates

from hydrostatic import dynamics, terms

CUDA_DIR = pathlib.Path(__file__).parent / "cuda"

_RK = "in:{y}Old:layer out:{y}New:layer out:{y}Next:layer"
_RK_SCALARS = "real:newCoef real:nextCoef int:accumulate int:provisional"
_ADJ_RK = "int:rk real:bCoef real:aCoef int:next"
# The edge passes' composed vector Laplacian (`_edge_extra`).
_DEL2 = "idx:edgesOnEdgeDel2 coef:coefDel2 in:del2In:layer"
_DEL2_INTS = "int:del2Width int:del2SlotStride"
# The tangent-linear cell and edge passes, and what those advancing the forward too add (the
# `_ftl` kernels: its B, its extra terms and RK4 update).
_CELL_TL = ("idx:edgesOnCell idx:cellsAcross coef:divCoef coef:keCoef2 coef:dB "
            "in:mass:layer in:thetaMass:layer in:u:layer in:dMass:layer "
            "in:dThetaMass:layer in:dU:layer in:dPhiS:column in:dKe:layer "
            "in:extra:layer " + _RK.format(y="dMass") + " "
            + _RK.format(y="dThetaMass") + " out:pi:layer out:dPi:layer "
            "out:dBernoulli:layer out:wFlux:interface out:dWFlux:interface "
            "out:thetaFluxDiv:layer put:F:layer put:dF:layer int:maxEdges "
            "int:slotStride int:keInline int:perturbPhiS int:nExtra int:extraStride "
            "int:nVertLevels real:gravity real:pTop real:p0 real:kappa real:R "
            "real:cp " + _RK_SCALARS)
_CELL_FORWARD = ("coef:keCoef in:phiS:column in:ke:layer in:extraF:layer int:nExtraF "
                 "int:extraStrideF " + _RK.format(y="mass") + " " + _RK.format(y="thetaMass")
                 + " out:bernoulli:layer out:thetaFluxDivF:layer")
_EDGE_TL = ("idx:edgesOnEdge coef:weightsOnEdge idx:cellsOnEdge coef:invDcEdge "
            "in:F:layer in:dF:layer in:qEdge:layer in:dqEdge:layer "
            "in:dBernoulli:layer in:pi:layer in:dPi:layer in:mass:layer "
            "in:thetaMass:layer in:dMass:layer in:dThetaMass:layer "
            "in:wFlux:interface in:dWFlux:interface in:u:layer in:dU:layer "
            "in:extra:layer " + _DEL2 + " " + _RK.format(y="dU")
            + " int:maxEdges2 int:slotStride int:nExtra int:extraStride "
            "real:extraScale " + _DEL2_INTS + " int:nVertLevels " + _RK_SCALARS)
_EDGE_FORWARD = ("in:bernoulli:layer in:extraF:layer int:nExtraF int:extraStrideF real:extraScaleF "
                 "in:del2InF:layer " + _RK.format(y="u"))
_ADJ_COLUMN = ("idx:edgesOnCell idx:cellsOnEdge coef:invDcEdge coef:dB "
               "in:uTendAdj:layer in:massTendAdj:layer in:thetaMassTendAdj:layer "
               "in:thetaEdgeAdj:layer in:wEdgeAdj:interface in:bernoulliAcc:layer "
               "in:piAcc:layer in:thetaAcc:layer in:wAcc:interface in:mass:layer "
               "in:thetaMass:layer in:wFlux:interface out:bernoulliAdj:layer "
               "out:divAdj:layer out:massAdjPart:layer out:thetaMassAdj:layer "
               "out:pAdj:layer out:phiSAdj:column int:maxEdges int:slotStride "
               "int:accumulatePhiS int:nVertLevels real:gravity "
               "real:pTop real:p0 real:kappa real:R real:cp")
_KERNELS = Family("hydrostatic", sources=CUDA_DIR, kernels=(
    Kernel("hs_pv_vertex", "idx:edgesOnVertex coef:curlCoef idx:cellsOnVertex coef:c2vCoef in:u:layer "
                           "in:mass:layer in:fVertex:column out:qVertex:layer int:vertexDegree "
                           "int:slotStride int:nVertLevels", threads="level"),
    Kernel("hs_pv_edge", "idx:verticesOnEdge in:qVertex:layer out:qEdge:layer int:nVertLevels",
           threads="level"),
    Kernel("hs_cell_stage", "idx:edgesOnCell idx:cellsAcross coef:divCoef coef:keCoef coef:dB "
                            "in:mass:layer in:thetaMass:layer in:u:layer in:phiS:column in:ke:layer "
                            "in:extra:layer " + _RK.format(y="mass") + " " + _RK.format(y="thetaMass")
                            + " out:pi:layer out:bernoulli:layer out:wFlux:interface "
                            "out:thetaFluxDiv:layer put:F:layer int:maxEdges int:slotStride "
                            "int:keInline int:nExtra int:extraStride int:nVertLevels real:gravity "
                            "real:pTop real:p0 real:kappa real:R real:cp " + _RK_SCALARS,
           threads="warp"),
    Kernel("hs_cell_flux", "idx:edgesOnCell idx:cellsAcross coef:divCoef coef:keCoef in:mass:layer "
                           "in:thetaMass:layer in:u:layer out:thetaFluxDiv:layer out:wFlux:interface "
                           "out:bernoulli:layer put:F:layer int:maxEdges int:slotStride int:keInline "
                           "int:nVertLevels", threads="level", group="split_cell"),
    Kernel("hs_cell_column", "coef:dB in:mass:layer in:thetaMass:layer in:phiS:column in:ke:layer "
                             "in:extra:layer " + _RK.format(y="mass") + " " + _RK.format(y="thetaMass")
                             + " out:pi:layer out:bernoulli:layer out:wFlux:interface "
                             "in:thetaFluxDiv:layer int:keInline int:nExtra int:extraStride "
                             "int:nVertLevels real:gravity real:pTop real:p0 real:kappa real:R real:cp "
                             + _RK_SCALARS, threads="warp", group="split_cell"),
    Kernel("hs_edge_stage", "idx:edgesOnEdge coef:weightsOnEdge idx:cellsOnEdge coef:invDcEdge "
                            "in:F:layer in:qEdge:layer in:bernoulli:layer in:pi:layer in:mass:layer "
                            "in:thetaMass:layer in:wFlux:interface in:u:layer in:extra:layer "
                            + _DEL2 + " " + _RK.format(y="u") + " int:maxEdges2 int:slotStride "
                            "int:nExtra int:extraStride real:extraScale " + _DEL2_INTS
                            + " int:nVertLevels " + _RK_SCALARS,
           threads="level"),
    Kernel("hs_pv_vertex_tl", "idx:edgesOnVertex coef:curlCoef idx:cellsOnVertex coef:c2vCoef "
                              "in:u:layer in:mass:layer in:dU:layer in:dMass:layer in:fVertex:column "
                              "out:qVertex:layer out:dqVertex:layer int:vertexDegree int:slotStride "
                              "int:nVertLevels", threads="level", group="tangent"),
    Kernel("hs_pv_edge_tl", "idx:verticesOnEdge in:qVertex:layer in:dqVertex:layer out:qEdge:layer "
                            "out:dqEdge:layer int:nVertLevels", threads="level", group="tangent"),
    Kernel("hs_cell_stage_tl", _CELL_TL, threads="warp", group="tangent_stage"),
    Kernel("hs_cell_stage_ftl", _CELL_TL + " " + _CELL_FORWARD, threads="warp", group="tangent"),
    Kernel("hs_cell_flux_ftl", "idx:edgesOnCell idx:cellsAcross coef:divCoef coef:keCoef2 "
                               "coef:keCoef in:mass:layer in:thetaMass:layer in:u:layer in:dMass:layer "
                               "in:dThetaMass:layer in:dU:layer out:thetaFluxDiv:layer "
                               "out:wFlux:interface out:dWFlux:interface out:dBernoulli:layer "
                               "out:thetaFluxDivF:layer out:bernoulli:layer put:F:layer put:dF:layer "
                               "int:maxEdges int:slotStride int:keInline int:nVertLevels",
           threads="level", group="split_cell_tangent"),
    Kernel("hs_cell_column_ftl", _CELL_TL + " " + _CELL_FORWARD, threads="warp",
           group="split_cell_tangent"),
    Kernel("hs_edge_stage_tl", _EDGE_TL, threads="level", group="tangent_stage"),
    Kernel("hs_edge_stage_ftl", _EDGE_TL + " " + _EDGE_FORWARD, threads="level", group="tangent"),
    Kernel("hs_adj_edge", "idx:edgesOnEdge coef:weightsOnEdge coef:weightsOnEdgeReverse "
                          "idx:cellsOnEdge coef:invDcEdge coef:divAdjCoef in:uTendAdj:layer "
                          "in:thetaMassTendAdj:layer in:F:layer in:qEdge:layer in:pi:layer "
                          "in:mass:layer in:thetaMass:layer in:wFlux:interface in:u:layer "
                          "out:qEdgeAdj:layer out:fluxAdj:layer out:thetaEdgeAdj:layer "
                          "out:massEdgeAdj:layer out:wEdgeAdj:interface out:uAdjPart:layer "
                          "int:maxEdges2 int:slotStride int:nVertLevels", threads="level", group="adjoint"),
    Kernel("hs_adj_vertex", "idx:verticesOnEdgeT idx:cellsOnVertex coef:c2vCoef in:qEdgeAdj:layer "
                            "in:qVertex:layer in:mass:layer out:vortAdj:layer out:qVortAdj:layer "
                            "int:SE int:strideE int:vertexDegree int:slotStride int:nVertLevels",
           threads="level", group="adjoint"),
    Kernel("hs_adj_cell_gather", "idx:edgesOnCell idx:cellsOnEdge coef:invDcEdge in:uTendAdj:layer "
                                 "in:thetaEdgeAdj:layer in:wEdgeAdj:interface in:mass:layer "
                                 "in:thetaMass:layer out:bernoulliAcc:layer out:piAcc:layer "
                                 "out:thetaAcc:layer out:wAcc:interface int:maxEdges int:slotStride "
                                 "int:nVertLevels", threads="level", group="split_cell_adjoint"),
    Kernel("hs_adj_column", _ADJ_COLUMN, threads="warp", group="adjoint"),
    Kernel("hs_adj_column_summed", _ADJ_COLUMN, threads="warp", group="adjoint_atomic"),
    Kernel("hs_adj_u", "idx:cellsOnEdge coef:divAdjCoef coef:keAdjCoef idx:edgesOnVertexT "
                       "coef:curlCoefT in:fluxAdj:layer in:divAdj:layer in:bernoulliAdj:layer "
                       "in:vortAdj:layer in:mass:layer in:u:layer in:uAdjPart:layer in:uExtra:layer "
                       "idx:edgesOnEdgeDel2 coef:coefDel2T out:massEdgeAdj:layer out:yAdj:layer "
                       "in:newAdj:layer out:kAdj:layer int:S int:slotStride int:keInline int:extra "
                       "real:uExtraScale " + _DEL2_INTS + " int:nVertLevels " + _ADJ_RK,
           threads="level", group="adjoint"),
    Kernel("hs_adj_mass", "idx:cellsOnEdgeT idx:verticesOnCell coef:c2vCoefT in:massAdjPart:layer "
                          "in:massEdgeAdj:layer in:qVortAdj:layer in:thetaMassAdj:layer "
                          "in:massExtra:layer in:thetaMassExtra:layer out:yMassAdj:layer "
                          "in:newMassAdj:layer out:kMassAdj:layer out:yThetaMassAdj:layer "
                          "in:newThetaMassAdj:layer out:kThetaMassAdj:layer int:SE int:strideE "
                          "int:SV int:strideV int:extra int:nVertLevels " + _ADJ_RK, threads="level", group="adjoint"),
    Kernel("hs_adj_edge_atomic", "idx:edgesOnEdge coef:weightsOnEdge idx:cellsOnEdge coef:invDcEdge "
                                 "coef:divAdjCoef in:uTendAdj:layer in:thetaMassTendAdj:layer "
                                 "in:F:layer in:qEdge:layer in:pi:layer in:mass:layer "
                                 "in:thetaMass:layer in:wFlux:interface in:u:layer out:fluxAcc:layer "
                                 "out:qEdgeAcc:layer out:bernoulliAcc:layer out:piAcc:layer "
                                 "out:thetaAcc:layer out:wAcc:interface out:massEdgeAdj:layer "
                                 "out:uAdjPart:layer int:maxEdges2 int:slotStride int:nVertLevels",
           threads="level", group="adjoint_atomic"),
    Kernel("hs_adj_vertex_atomic", "idx:edgesOnVertex coef:curlCoef idx:cellsOnVertex coef:c2vCoef "
                                   "in:qEdgeAcc:layer in:qVertex:layer in:mass:layer out:uAcc:layer "
                                   "out:massAcc:layer int:vertexDegree int:slotStride int:nVertLevels",
           threads="level", group="adjoint_atomic"),
    Kernel("hs_adj_u_atomic", "idx:cellsOnEdge coef:divAdjCoef coef:keAdjCoef in:fluxAcc:layer "
                              "in:divAdj:layer in:bernoulliAdj:layer in:uAcc:layer in:mass:layer "
                              "in:u:layer in:uAdjPart:layer in:uExtra:layer idx:edgesOnEdgeDel2 "
                              "coef:coefDel2T in:massEdgeAdj:layer out:massAcc:layer out:yAdj:layer "
                              "in:newAdj:layer out:kAdj:layer int:keInline int:extra "
                              "real:uExtraScale " + _DEL2_INTS + " int:nVertLevels " + _ADJ_RK,
           threads="level", group="adjoint_atomic"),
    Kernel("hs_adj_mass_sum", "in:massAdjPart:layer in:massAcc:layer in:thetaMassAdj:layer "
                              "in:massExtra:layer in:thetaMassExtra:layer out:yMassAdj:layer "
                              "in:newMassAdj:layer out:kMassAdj:layer out:yThetaMassAdj:layer "
                              "in:newThetaMassAdj:layer out:kThetaMassAdj:layer int:extra "
                              "int:nVertLevels " + _ADJ_RK, threads="level", group="adjoint_atomic"),
))

#: The mesh tables the passes (forward and tangent-linear) read.
TABLES = ("edgesOnVertex", "curlCoef", "cellsOnVertex", "c2vCoef", "verticesOnEdge", "edgesOnCell",
          "cellsAcrossOnCell", "divCoef", "keCoef", "keCoef2", *trisk.FORWARD, "cellsOnEdge",
          "invDcEdge")
#: The terms of `hydrostatic.terms` the passes do not compute: added as extra tendencies.
EXTRA_TERMS = (terms.Del2Theta, terms.Del4Theta, terms.Del2, terms.Del4)


def reads_theta(active) -> bool:
    """Whether any of the `active` EXTRA_TERMS reads theta (those on theta_mass)."""
    return any(term.target == "tend_theta_mass" for term in active)


class FusedStage:
    """One RK4 stage of the state (mass, theta_mass, u) through the fused passes on `mesh` (a
    `meshops.DeviceMesh` on CuPy, or a mesh), holding the passes' scratch fields."""

    #: The cell pass as two kernels, its gathers one level per thread (hs_cell_flux) and its scans
    #: and update one warp per column (hs_cell_column), instead of hs_cell_stage's one (bitwise
    #: the same); the tangent-linear sweep's and the deterministic adjoint's likewise.
    split_cell_pass = False

    def __init__(self, mesh):
        self.mesh = mesh
        self._scratch: dict = {}

    def scratch(self, name: str, location: str, like, levels: int = 0):
        """Scratch field `name` at `location` with the dtype of `like` and its levels (plus
        `levels`), kept between calls."""
        shape = (like.shape[1] + levels,)
        key = (name, like.dtype.str, shape)
        field = self._scratch.get(key)
        if field is None:
            n = getattr(for_fields(self.mesh, like), SIZE_OF[location])
            field = self._scratch[key] = array_module(like).empty((n,) + shape, like.dtype)
        return field

    def extras(self, mass, theta_mass, u, phi_s, physics) -> dict:
        """{target: [the tendencies added to the passes' one, in order]} of the provisional state,
        as (coefficient, field) pairs (`_extra`): the active `EXTRA_TERMS`, then the forcing's (of
        the operator path's column diagnostics, which it reads)."""
        m = for_fields(self.mesh, mass, u)
        extra = {"tend_theta_mass": [], "tend_u": []}
        active = [term for term in EXTRA_TERMS if term.active(physics)]
        b = dict(mass=mass, theta_mass=theta_mass, u=u)
        if physics.forcing is not None:
            b.update(dynamics.column_diagnostics(m, mass, theta_mass, phi_s, physics))
        elif reads_theta(active):
            b["theta"] = theta_mass / mass
        for term in active:
            extra[term.target].append(
                scaled_part(term, m, u, physics, lambda: term.forward(m, b, physics)))
        if physics.forcing is not None:
            theta_mass_part, u_part = physics.forcing.tendencies(m, b, mass, u)
            extra["tend_theta_mass"].append((1.0, theta_mass_part))
            extra["tend_u"].append((1.0, u_part))
        return extra

    def __call__(self, mass, theta_mass, u, phi_s, f_vertex, physics, update: Update, *, old, new,
                 next) -> None:
        """One stage of the provisional state (mass, theta_mass, u): its tendencies applied by
        `update` to the triples `old`, `new` and `next` (`next` must hold none of the provisional
        fields)."""
        m = for_fields(self.mesh, mass, u)
        xp, N = array_module(mass), int(mass.shape[1])
        extra = self.extras(mass, theta_mass, u, phi_s, physics)
        q_vertex = self.scratch("qVertex", "vertex", u)
        (eov, curl, cov, kite), stride = m.stencil(
            ("edgesOnVertex", "curlCoef", "cellsOnVertex", "c2vCoef"), (u, mass))
        _KERNELS.launch("hs_pv_vertex", m.nVertices, edgesOnVertex=eov, curlCoef=curl,
                        cellsOnVertex=cov, c2vCoef=kite, u=u, mass=mass, fVertex=f_vertex,
                        qVertex=q_vertex, vertexDegree=trisk.width(eov, stride), slotStride=stride,
                        nVertLevels=N)
        q_edge = self.scratch("qEdge", "edge", u)
        _KERNELS.launch("hs_pv_edge", m.nEdges, verticesOnEdge=m.table("verticesOnEdge"),
                        qVertex=q_vertex, qEdge=q_edge, nVertLevels=N)

        form = physics.kinetic_energy
        ke = mass if form == "trisk" else terms.kinetic_energy(m, u, form)
        F, pi = self.scratch("F", "edge", u), self.scratch("pi", "cell", mass)
        bernoulli, w_flux = self.scratch("bernoulli", "cell", mass), self.scratch("W", "cell", mass, 1)
        (eoc, across, div, ke_coef), stride = m.stencil(
            ("edgesOnCell", "cellsAcrossOnCell", "divCoef", "keCoef"), (phi_s,), mass.dtype)
        theta_flux_div = self.scratch("thetaFluxDiv", "cell", mass)
        column = dict(dB=physics.dB, mass=mass, thetaMass=theta_mass, phiS=phi_s, ke=ke,
                      **_extra(xp, extra["tend_theta_mass"], mass), massOld=old[0], massNew=new[0],
                      massNext=next[0], thetaMassOld=old[1], thetaMassNew=new[1],
                      thetaMassNext=next[1], pi=pi, bernoulli=bernoulli, wFlux=w_flux,
                      thetaFluxDiv=theta_flux_div, keInline=int(form == "trisk"), nVertLevels=N,
                      gravity=physics.gravity, pTop=physics.p_top, p0=P0, kappa=R_DRY / CP_DRY,
                      R=R_DRY, cp=CP_DRY, **update.arguments())
        fluxes = dict(edgesOnCell=eoc, cellsAcross=across, divCoef=div, keCoef=ke_coef,
                      maxEdges=trisk.width(eoc, stride), slotStride=stride)
        if self.split_cell_pass:
            _KERNELS.launch("hs_cell_flux", m.nCells, **fluxes, mass=mass, thetaMass=theta_mass, u=u,
                            thetaFluxDiv=theta_flux_div, wFlux=w_flux, bernoulli=bernoulli, F=F,
                            keInline=column["keInline"], nVertLevels=N)
            _KERNELS.launch("hs_cell_column", m.nCells, **column)
        else:
            _KERNELS.launch("hs_cell_stage", m.nCells, **fluxes, **column, u=u, F=F)

        (eoe, weights), stride = m.stencil(trisk.FORWARD, (u,))
        _KERNELS.launch("hs_edge_stage", m.nEdges, edgesOnEdge=eoe, weightsOnEdge=weights,
                        cellsOnEdge=m.table("cellsOnEdge"), invDcEdge=m.table("invDcEdge", u.dtype),
                        F=F, qEdge=q_edge, bernoulli=bernoulli, pi=pi, mass=mass,
                        thetaMass=theta_mass, wFlux=w_flux, u=u,
                        **_edge_extra(xp, m, extra["tend_u"], u),
                        uOld=old[2], uNew=new[2], uNext=next[2], maxEdges2=trisk.width(eoe, stride),
                        slotStride=stride, nVertLevels=N, **update.arguments())


@dataclasses.dataclass(frozen=True)
class Laplacian:
    """An extra part's field left as the vector Laplacian (`meshops.vector_laplacian_e2e`) of
    `of`: the edge pass applies it where it is one gather (`_edge_extra`)."""
    of: object


def scaled_part(term, mesh, x, physics, value) -> tuple:
    """(coefficient, field) of an extra term whose tendency is coefficient x field: a term on u that
    is a coefficient times a vector Laplacian of a linear operator (`terms.Del2`, `terms.Del4`)
    gives its coefficient and the `Laplacian` of its `inner` field of `x` (u, or its tangent), for
    the edge pass; any other 1 and `value()`, its tendency."""
    if hasattr(term, "coefficient"):
        return term.coefficient(physics), Laplacian(term.inner(mesh, x))
    return 1.0, value()


def in_pass_laplacian(m, field, like, names) -> dict | None:
    """The arguments of a pass's own composed vector Laplacian of `field` (a field like `like`)
    over the stencil `names` (the forward's pair or the transposed one) and its width and slot
    stride, where the operator is one gather over it (`laplacian.composed` on DeviceMesh m);
    else None."""
    if not (laplacian.composed(m, like) and field.dtype == like.dtype
            and field.shape == like.shape and field.flags.c_contiguous):
        return None
    (nbr, coef), stride = m.stencil(names, (like,))
    return {names[0]: nbr, names[1]: coef, "del2Width": trisk.width(nbr, stride),
            "del2SlotStride": stride}


def lone_laplacian(m, parts, like) -> dict | None:
    """The arguments of an edge pass applying `parts` itself (`_edge_extra`): where they are a
    lone `Laplacian` part whose operator is one gather (`in_pass_laplacian`), its coefficient as
    extraScale, its input del2In and the stencil's; else None."""
    if len(parts) == 1 and isinstance(parts[0][1], Laplacian):
        coefficient, field = parts[0][0], parts[0][1].of
        stencil = in_pass_laplacian(m, field, like, ("edgesOnEdgeDel2", "coefDel2"))
        if stencil is not None:
            return dict(extraScale=coefficient, del2In=field, **stencil)
    return None


def _edge_extra(xp, m, parts, like, in_pass: bool = True) -> dict:
    """The edge passes' extra arguments (`_extra`, scaled) and their composed vector Laplacian's:
    a lone `Laplacian` part applied by the pass (its input del2In, the stencil edgesOnEdgeDel2 /
    coefDel2) where the operator is one gather over that stencil (`lone_laplacian`) and
    `in_pass`, every other `Laplacian` computed here by the operator."""
    lone = lone_laplacian(m, parts, like) if in_pass else None
    if lone is not None:
        return dict(_extra(xp, [], like, scaled=True), **lone)
    parts = [(c, meshops.vector_laplacian_e2e(m, f.of) if isinstance(f, Laplacian) else f)
             for c, f in parts]
    eoc = m.table("cellsOnEdge")
    return dict(_extra(xp, parts, like, scaled=True), edgesOnEdgeDel2=eoc, coefDel2=like,
                del2In=like, del2Width=0, del2SlotStride=1)


def _extra(xp, parts, like, scaled: bool = False) -> dict:
    """The kernels' extra, nExtra and extraStride arguments (with `scaled`, the edge passes', and
    extraScale) for the tendencies `parts`, (coefficient, field) pairs each adding coefficient x
    field: one part as it is, its coefficient the kernel's extraScale; several (or a coefficient
    a pass without extraScale cannot apply) stacked as their products; none: `like` stands in,
    unread."""
    scale = {"extraScale": 1.0} if scaled else {}
    if not parts:
        return dict(extra=like, nExtra=0, extraStride=0, **scale)
    coefficient, one = parts[0]
    if len(parts) == 1 and (scaled or coefficient == 1.0) and one.dtype == like.dtype \
            and one.shape == like.shape and one.flags.c_contiguous:
        return dict(extra=one, nExtra=1, extraStride=int(like.size),
                    **({"extraScale": coefficient} if scaled else {}))
    n = like.shape[0]
    stacked = xp.empty((len(parts) * n,) + like.shape[1:], like.dtype)
    for i, (coefficient, part) in enumerate(parts):
        stacked[i * n:(i + 1) * n] = part if coefficient == 1.0 else coefficient * part
    return dict(extra=stacked, nExtra=len(parts), extraStride=int(like.size), **scale)


def fused_tendencies(mesh, mass, theta_mass, u, phi_s, f_vertex, physics):
    """(tend_mass, tend_theta_mass, tend_u) through the fused passes: one stage with old = 0 and
    new_coef = 1 (new = 0 + 1 * k = k exactly). The reference is
    `hydrostatic.dynamics.tendencies`."""
    xp = array_module(mass, u)
    state = (mass, theta_mass, u)
    tend = [xp.empty_like(y) for y in state]
    FusedStage(mesh)(*state, phi_s, f_vertex, physics, Update(1.0, 0.0, False, False),
                     old=[xp.zeros_like(y) for y in state], new=tend,
                     next=[xp.empty_like(y) for y in state])
    return tuple(tend)


def _record_of(stage: FusedStage, mass, theta_mass, u) -> dict:
    """The record of the stage `stage` just ran on (mass, theta_mass, u): that state and the
    forward fields the tangent-linear and adjoint stages read (its scratch fields)."""
    return dict(mass=mass, theta_mass=theta_mass, u=u, q_vertex=stage.scratch("qVertex", "vertex", u),
                q_edge=stage.scratch("qEdge", "edge", u), F=stage.scratch("F", "edge", u),
                pi=stage.scratch("pi", "cell", mass), W=stage.scratch("W", "cell", mass, 1))


def record_stage(stage: FusedStage, provisional, phi_s, f_vertex, physics, update: Update, old,
                 dump: FusedStage | None = None):
    """(record, next provisional) of one forward stage run by `stage` (which keeps the record's
    fields, and the next provisional state when `update.provisional`) as the forward step runs it
    (bitwise), its end state written to scratch of `dump` (default: `stage`) and dropped."""
    names = (("mass", "cell"), ("thetaMass", "cell"), ("u", "edge"))
    new = [(dump or stage).scratch(f"{name}Dropped", location, y)
           for (name, location), y in zip(names, provisional)]
    next = ([stage.scratch(f"{name}Next", location, y) for (name, location), y in zip(names, provisional)]
            if update.provisional else new)
    stage(*provisional, phi_s, f_vertex, physics,
          Update(update.new_coef, update.next_coef, False, update.provisional), old=old, new=new,
          next=next)
    return _record_of(stage, *provisional), (next if update.provisional else None)


def fused_record(mesh, mass, theta_mass, u, phi_s, f_vertex, physics) -> dict:
    """The record of a first stage at the state (mass, theta_mass, u) (`record_stage`)."""
    state = (mass, theta_mass, u)
    return record_stage(FusedStage(mesh), state, phi_s, f_vertex, physics, updates(1.0)[0],
                        state)[0]
