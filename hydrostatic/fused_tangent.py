"""The tangent-linear of the hydrostatic core's RK4 stage in fused kernels (the `_tl` kernels of
hydrostatic/cuda/hydrostatic.cu, declared in `hydrostatic.fused`), for CuPy fields.

A stage of the perturbation (dmass, dtheta_mass, du) and, as the control's, dphi_s about the
provisional state (mass, theta_mass, u) of the forward's record runs the forward's four passes,
each computing the base fields it needs beside their tangents (`hydrostatic.dynamics.tendencies_tl`
and the terms' `tangent`, the module doc of `hydrostatic.dynamics`):

    hs_pv_vertex_tl   q_v, dq_v = (curl_e2v(du) - q_v interp_c2v(dmass)) / interp_c2v(mass)
    hs_pv_edge_tl     q_e, dq_e = interp_v2e(dq_v)
    hs_cell_stage_tl  F, dF = interp_c2e(dmass) u + mass_e du (each edge's first present cell),
                      dD = div_e2c(dF), div_e2c(dtheta_e F + theta_e dF), dK; p, dp, alpha, dalpha,
                      pi, dpi, dphi, dB = dK + dphi, W, dW; dtend_mass = -dD - div_vflux_i2l(dW),
                      dtend_theta_mass = -div_e2c(dtheta_e F + theta_e dF) - div_vflux_i2l(dW
                      avg_l2i(theta) + W avg_l2i(dtheta)); their RK4 update
    hs_edge_stage_tl  dtend_u = pv_flux_e2e_tl - grad_c2e(dB) - (dtheta_e grad_c2e(pi) + theta_e
                      grad_c2e(dpi)) - (dV - V dmass_e / mass_e) / mass_e; its RK4 update

Kinetic energy other than TRiSK's, del2 / del4 and the forcing come in as in the forward
(`hydrostatic.fused`): their tangents by their operator code, added to the passes' tendency in the
operator path's order. The arithmetic is the operator path's, in the same order.

With `forward`, the cell and edge passes are the `_ftl` kernels, which also apply the forward
stage's tendencies to the state (the forward cell pass's K, phi and B, its theta flux divergence
and extra terms; the edge pass's u tendency), bitwise the forward passes': a tangent-linear step
then advances its base state itself, with no forward sweep and no records before it
(`framework.stepper.rk4_step_and_tl`, `hydrostatic.fused_stages.FusedStages.stage_and_tl`).
"""
from __future__ import annotations

from meshops.device.backend import array_module
from meshops.device.mesh import for_fields
from meshops.operators import trisk
from meshops.operators.vertical import CP_DRY, P0, R_DRY
from framework.timestepping import Update

from hydrostatic import dynamics, terms
from hydrostatic.fused import (_KERNELS, EXTRA_TERMS, FusedStage, _edge_extra, _extra,
                               lone_laplacian, reads_theta, scaled_part)


class FusedTangentStage(FusedStage):
    """One tangent-linear RK4 stage through the fused passes on `mesh` (a `meshops.DeviceMesh`
    on CuPy, or a mesh), holding the passes' scratch fields."""

    def tangent_extras(self, mass, theta_mass, u, dmass, dtheta_mass, du, dphi_s, phi_s,
                       physics) -> dict:
        """{target: [the tangents added to the passes' one, in order]}, as (coefficient, field)
        pairs (`hydrostatic.fused._extra`): those of the active `EXTRA_TERMS`, then the forcing's
        (of the operator path's column diagnostics and their tangents, which it reads)."""
        m = for_fields(self.mesh, mass, u)
        extra = {"tend_theta_mass": [], "tend_u": []}
        active = [term for term in EXTRA_TERMS if term.active(physics)]
        b = dict(mass=mass, theta_mass=theta_mass, u=u)
        t = dict(mass=dmass, theta_mass=dtheta_mass, u=du)
        if physics.forcing is not None:
            b.update(dynamics.column_diagnostics(m, mass, theta_mass, phi_s, physics))
            t.update(dynamics.column_diagnostics_tl(m, b, mass, dmass, dtheta_mass, dphi_s, physics))
        elif reads_theta(active):
            b["theta"] = theta_mass / mass
            t["theta"] = (dtheta_mass - b["theta"] * dmass) / mass
        for term in active:
            extra[term.target].append(
                scaled_part(term, m, du, physics, lambda: term.tangent(m, b, t, physics)))
        if physics.forcing is not None:
            theta_mass_part, u_part = physics.forcing.tendencies_tl(m, b, mass, u, t, dmass, du)
            extra["tend_theta_mass"].append((1.0, theta_mass_part))
            extra["tend_u"].append((1.0, u_part))
        return extra

    def __call__(self, mass, theta_mass, u, dmass, dtheta_mass, du, dphi_s, phi_s, f_vertex, physics,
                 update: Update, *, old, new, next, forward=None) -> None:
        """One tangent-linear stage: the tangents of the tendencies of (mass, theta_mass, u) for
        (dmass, dtheta_mass, du, dphi_s) (dphi_s None: none) applied by `update` to the triples
        `old`, `new` and `next` of perturbations (`next` must hold none of the inputs).
        `forward`: the triples (old, new, next) of the state, to which the same passes apply the
        forward stage's tendencies too (the `_ftl` kernels; bitwise `FusedStage`'s)."""
        m = for_fields(self.mesh, mass, u)
        xp, N = array_module(mass), int(mass.shape[1])
        extra = self.tangent_extras(mass, theta_mass, u, dmass, dtheta_mass, du, dphi_s, phi_s,
                                    physics)
        cell_forward, edge_forward, in_pass = {}, {}, True
        if forward is not None:
            cell_forward, edge_forward, in_pass = self._forward_arguments(
                xp, m, mass, theta_mass, u, phi_s, physics, extra, *forward)
        q_vertex, dq_vertex = self.scratch("qVertex", "vertex", u), self.scratch("dqVertex", "vertex", u)
        (eov, curl, cov, kite), stride = m.stencil(
            ("edgesOnVertex", "curlCoef", "cellsOnVertex", "c2vCoef"), (u, mass))
        _KERNELS.launch("hs_pv_vertex_tl", m.nVertices, edgesOnVertex=eov, curlCoef=curl,
                        cellsOnVertex=cov, c2vCoef=kite, u=u, mass=mass, dU=du, dMass=dmass,
                        fVertex=f_vertex, qVertex=q_vertex, dqVertex=dq_vertex,
                        vertexDegree=trisk.width(eov, stride), slotStride=stride, nVertLevels=N)
        q_edge, dq_edge = self.scratch("qEdge", "edge", u), self.scratch("dqEdge", "edge", u)
        _KERNELS.launch("hs_pv_edge_tl", m.nEdges, verticesOnEdge=m.table("verticesOnEdge"),
                        qVertex=q_vertex, dqVertex=dq_vertex, qEdge=q_edge, dqEdge=dq_edge,
                        nVertLevels=N)

        form = physics.kinetic_energy
        dke = mass if form == "trisk" else terms.kinetic_energy_tl(m, u, du, form)
        F, dF = self.scratch("F", "edge", u), self.scratch("dF", "edge", u)
        pi, dpi = self.scratch("pi", "cell", mass), self.scratch("dPi", "cell", mass)
        w_flux, dw_flux = self.scratch("W", "cell", mass, 1), self.scratch("dW", "cell", mass, 1)
        dbernoulli = self.scratch("dBernoulli", "cell", mass)
        (eoc, across, div, ke_coef2), stride = m.stencil(
            ("edgesOnCell", "cellsAcrossOnCell", "divCoef", "keCoef2"), (phi_s,), mass.dtype)
        cell = dict(edgesOnCell=eoc, cellsAcross=across,
                    divCoef=div, keCoef2=ke_coef2, dB=physics.dB, mass=mass, thetaMass=theta_mass,
                    u=u, dMass=dmass, dThetaMass=dtheta_mass, dU=du,
                    dPhiS=phi_s if dphi_s is None else dphi_s, dKe=dke,
                    **_extra(xp, extra["tend_theta_mass"], mass), dMassOld=old[0],
                    dMassNew=new[0], dMassNext=next[0], dThetaMassOld=old[1],
                    dThetaMassNew=new[1], dThetaMassNext=next[1], pi=pi, dPi=dpi,
                    dBernoulli=dbernoulli, wFlux=w_flux, dWFlux=dw_flux,
                    thetaFluxDiv=self.scratch("thetaFluxDiv", "cell", mass), F=F, dF=dF,
                    maxEdges=trisk.width(eoc, stride), slotStride=stride,
                    keInline=int(form == "trisk"), perturbPhiS=int(dphi_s is not None),
                    nVertLevels=N, gravity=physics.gravity, pTop=physics.p_top, p0=P0,
                    kappa=R_DRY / CP_DRY, R=R_DRY, cp=CP_DRY, **update.arguments(),
                    **cell_forward)
        if cell_forward and self.split_cell_pass:
            _KERNELS.launch("hs_cell_flux_ftl", m.nCells, **{
                name: cell[name] for _, name in _KERNELS.kernels["hs_cell_flux_ftl"].arguments})
            _KERNELS.launch("hs_cell_column_ftl", m.nCells, **cell)
        else:
            _KERNELS.launch("hs_cell_stage_ftl" if cell_forward else "hs_cell_stage_tl", m.nCells,
                            **cell)

        (eoe, weights), stride = m.stencil(trisk.FORWARD, (u,))
        tangent_extra = _edge_extra(xp, m, extra["tend_u"], u, in_pass=in_pass)
        _KERNELS.launch("hs_edge_stage_ftl" if edge_forward else "hs_edge_stage_tl", m.nEdges,
                        edgesOnEdge=eoe, weightsOnEdge=weights,
                        cellsOnEdge=m.table("cellsOnEdge"), invDcEdge=m.table("invDcEdge", u.dtype),
                        F=F, dF=dF, qEdge=q_edge, dqEdge=dq_edge, dBernoulli=dbernoulli, pi=pi,
                        dPi=dpi, mass=mass, thetaMass=theta_mass, dMass=dmass,
                        dThetaMass=dtheta_mass, wFlux=w_flux, dWFlux=dw_flux, u=u, dU=du,
                        **tangent_extra, dUOld=old[2], dUNew=new[2], dUNext=next[2],
                        maxEdges2=trisk.width(eoe, stride), slotStride=stride, nVertLevels=N,
                        **update.arguments(), **edge_forward)

    def _forward_arguments(self, xp, m, mass, theta_mass, u, phi_s, physics, tangent_extra, old,
                           new, next) -> tuple[dict, dict, bool]:
        """The `_ftl` kernels' forward arguments ({cell pass}, {edge pass}, in_pass): the forward's
        extra terms (`FusedStage.extras`), K where not TRiSK's, its B and the state's (old, new,
        next); `in_pass` whether both the edge pass's Laplacians (the forward's and the tangent's)
        are applied in the pass (their stencil is one) or both by the operators."""
        forward_extra = self.extras(mass, theta_mass, u, phi_s, physics)
        form = physics.kinetic_energy
        (ke_coef,), _ = m.stencil(("keCoef",), (phi_s,), mass.dtype)
        cell = dict(keCoef=ke_coef, phiS=phi_s,
                    ke=mass if form == "trisk" else terms.kinetic_energy(m, u, form),
                    **_renamed(_extra(xp, forward_extra["tend_theta_mass"], mass)),
                    massOld=old[0], massNew=new[0], massNext=next[0], thetaMassOld=old[1],
                    thetaMassNew=new[1], thetaMassNext=next[1],
                    bernoulli=self.scratch("bernoulli", "cell", mass),
                    thetaFluxDivF=self.scratch("thetaFluxDivF", "cell", mass))
        in_pass = ((lone_laplacian(m, forward_extra["tend_u"], u) is None)
                   == (lone_laplacian(m, tangent_extra["tend_u"], u) is None))
        edge = _edge_extra(xp, m, forward_extra["tend_u"], u, in_pass=in_pass)
        edge = dict(bernoulli=cell["bernoulli"], extraF=edge["extra"], nExtraF=edge["nExtra"],
                    extraStrideF=edge["extraStride"], extraScaleF=edge["extraScale"],
                    del2InF=edge["del2In"], uOld=old[2], uNew=new[2], uNext=next[2])
        return cell, edge, in_pass


def _renamed(arguments: dict) -> dict:
    """The forward's extra, nExtra and extraStride arguments (`_extra`) under the `_ftl` kernels'
    names."""
    return {f"{name}F": value for name, value in arguments.items()}


def fused_tendencies_tl(mesh, mass, theta_mass, u, phi_s, f_vertex, physics, dmass, dtheta_mass, du,
                        dphi_s=None):
    """(dtend_mass, dtend_theta_mass, dtend_u) through the fused tangent-linear passes: one stage
    with old = 0 and new_coef = 1. The reference is `hydrostatic.dynamics.tendencies_tl`."""
    xp = array_module(mass, u)
    state = (mass, theta_mass, u)
    tend = [xp.empty_like(y) for y in state]
    FusedTangentStage(mesh)(*state, dmass, dtheta_mass, du, dphi_s, phi_s, f_vertex, physics,
                            Update(1.0, 0.0, False, False), old=[xp.zeros_like(y) for y in state],
                            new=tend, next=[xp.empty_like(y) for y in state])
    return tuple(tend)
