"""The adjoint of the hydrostatic core's RK4 stage in fused kernels (the `hs_adj_` kernels of
hydrostatic/cuda/hydrostatic.cu, declared in `hydrostatic.fused`), for CuPy fields, in the
deterministic mode: every transposed sum a gather in a fixed slot order (no atomics), so the same
bits on every run. The reference is the operator path, `hydrostatic.dynamics.tendencies_adj`.

From the adjoint tendencies (tend_mass_adj, tend_theta_mass_adj on cells, tend_u_adj on edges) of
one stage, with the stage's record of the fused forward (`hydrostatic.fused.FusedStages.record`:
its provisional state mass, theta_mass, u and its q_v, q_e, F, pi and W, so that none of them is
derived again), five passes where the operator path runs some 60 operator and 80 elementwise
kernels:

    hs_adj_edge    (edge, layer)    the PV flux's adjoint (F and q_e: the TRiSK stencil with its
                                    reverse weights), theta flux's (-div_e2c^T(tend_theta_mass_adj)
                                    times theta_e and F), the pressure gradient's theta_e adjoint,
                                    the vertical advection's (mass_e, W at the edge's interfaces, u)
    hs_adj_vertex  (vertex, layer)  w = interp_v2e^T(q_e_adj) / interp_c2v(mass), q_v w
    hs_adj_column  (cell column)    B_adj = -grad_c2e^T(tend_u_adj), pi_adj, theta's and W's edge
                                    parts (interp_c2e^T), W_adj, D_adj = -tend_mass_adj + W^T(W_adj),
                                    the column diagnostics' adjoint down the column and up it:
                                    phi_s_adj, theta_mass_adj, mass_adj's column part
    hs_adj_u       (edge, layer)    F_adj += div_e2c^T(D_adj), mass_e_adj += u F_adj, u_adj (with
                                    curl_e2v^T(w) and TRiSK's ke_e2c^T(u; B_adj))
    hs_adj_mass    (cell, layer)    mass_adj += interp_c2e^T(mass_e_adj) - interp_c2v^T(q_v w)

The u and mass passes apply the adjoint step's RK4 bookkeeping (`AdjointRK4`) to what they
compute, so the stage adjoints are never stored. The terms the forward adds from outside the
passes (del2 / del4 on u and theta, the forcing) add their adjoints through their operator code
(`extra_adjoints`), as does the kinetic energy when it is not TRiSK's (its adjoint on the
column pass's B_adj); the passes add them before the bookkeeping. In atomic mode the fused model
runs the operator path's adjoint stage.
"""
from __future__ import annotations

from typing import NamedTuple

from meshops.device.backend import array_module
from meshops.device.mesh import for_fields
from meshops.operators import trisk
from meshops.operators.vertical import CP_DRY, P0, R_DRY

from hydrostatic import dynamics, terms
from hydrostatic.fused import _KERNELS, EXTRA_TERMS, FusedStage

#: The mesh tables the deterministic adjoint passes read (built together before the first).
TABLES = (*trisk.SYMMETRIC, "cellsOnEdge", "invDcEdge", "divAdjCoef", "verticesOnEdgeT",
          "cellsOnVertex", "c2vCoef", "edgesOnCell", "keAdjCoef", "edgesOnVertexT", "curlCoefT",
          "cellsOnEdgeT", "verticesOnCell", "c2vCoefT")


class AdjointRK4(NamedTuple):
    """The RK4 bookkeeping of a stage's adjoint (`framework.timestepping.AdjointUpdate` with the
    arrays it updates), done by the u and mass passes: y_adj (mass, theta_mass, u) += the stage's
    adjoint p (with `start`, the step's last stage: y_adj = new_adj + p), and with `next` the
    earlier stage's adjoint tendency k_adj = b_coef * new_adj + a_coef * p, written over the
    stage's own adjoint tendencies."""
    y_adj: tuple
    new_adj: tuple
    b_coef: float
    a_coef: float
    next: bool
    start: bool = False

    def arguments(self) -> dict:
        return dict(rk=2 if self.start else 1, bCoef=self.b_coef, aCoef=self.a_coef,
                    next=int(self.next))


def extra_adjoints(mesh, record: dict, phi_s, physics, tend_theta_mass_adj, tend_u_adj,
                   mode: str) -> tuple:
    """(mass_adj, theta_mass_adj, u_adj, phi_s_adj) parts, each None if none, of the active
    `hydrostatic.fused.EXTRA_TERMS` and the forcing, through their own adjoints (as
    `hydrostatic.dynamics.tendencies_adj` runs them: the forcing's, the terms' in reverse, then
    the column diagnostics' adjoint of what they give the diagnostics)."""
    active = [term for term in EXTRA_TERMS if term.active(physics)]
    if not active and physics.forcing is None:
        return None, None, None, None
    m = for_fields(mesh, record["mass"])
    mass, theta_mass, u = record["mass"], record["theta_mass"], record["u"]
    b = dict(mass=mass, theta_mass=theta_mass, u=u)
    if physics.forcing is not None:
        b.update(dynamics.column_diagnostics(m, mass, theta_mass, phi_s, physics))
    else:
        b["theta"] = theta_mass / mass
    a = dict.fromkeys(("mass", "u", "theta", "p", "p_i", "pi", "alpha", "phi", "phi_i"))
    g = dict(tend_theta_mass=tend_theta_mass_adj, tend_u=tend_u_adj)
    if physics.forcing is not None:
        column_adj, a["mass"], a["u"] = dynamics._forcing(physics, "tendencies_adj")(
            m, b, mass, u, tend_theta_mass_adj, tend_u_adj, mode=mode)
        a.update(column_adj)
    for term in reversed(active):
        term.adjoint(m, b, a, g[term.target], physics, mode)
    if physics.forcing is not None:
        a["phi"] = array_module(mass).zeros_like(mass)
        mass_part, theta_mass_adj, phi_s_adj = dynamics.column_diagnostics_adj(m, b, mass, a,
                                                                               physics, mode)
        mass_adj = mass_part if a["mass"] is None else a["mass"] + mass_part
        return mass_adj, theta_mass_adj, a["u"], phi_s_adj
    if a["theta"] is None:
        return a["mass"], None, a["u"], None
    theta_mass_adj = a["theta"] / mass
    mass_part = -(b["theta"] * theta_mass_adj)
    mass_adj = mass_part if a["mass"] is None else a["mass"] + mass_part
    return mass_adj, theta_mass_adj, a["u"], None


class FusedStageAdjoint(FusedStage):
    """The adjoint of one fused RK4 stage on `mesh` (a `meshops.DeviceMesh` on CuPy, or a mesh),
    holding the passes' scratch fields."""

    def __call__(self, record: dict, phi_s, physics, tend_mass_adj, tend_theta_mass_adj, tend_u_adj,
                 *, phi_s_adj=None, rk: AdjointRK4 | None = None):
        """The stage's adjoint from its adjoint tendencies about `record`. With `rk` the state's
        adjoint goes into the RK4 bookkeeping (the tend_*_adj arrays are overwritten by the
        earlier stage's when rk.next) and phi_s_adj is returned; without, (mass_adj,
        theta_mass_adj, u_adj, phi_s_adj) as new arrays. phi_s_adj: this stage's part is added to
        it in place when given, else it is a new array."""
        mass, theta_mass, u = record["mass"], record["theta_mass"], record["u"]
        m = for_fields(self.mesh, mass, u)
        m.prebuild(TABLES)
        xp, N = array_module(mass), int(mass.shape[1])
        state_adj = None
        if rk is None:
            state_adj = tuple(xp.empty_like(y) for y in (mass, theta_mass, u))
            zeros = tuple(xp.zeros_like(y) for y in (mass, theta_mass, u))
            rk = AdjointRK4(state_adj, zeros, 0.0, 0.0, False, True)
        mass_extra, theta_mass_extra, u_extra, phi_s_extra = extra_adjoints(
            m, record, phi_s, physics, tend_theta_mass_adj, tend_u_adj, "deterministic")

        q_edge_adj, flux_adj = self.scratch("qEdgeAdj", "edge", u), self.scratch("fluxAdj", "edge", u)
        theta_edge_adj = self.scratch("thetaEdgeAdj", "edge", u)
        mass_edge_adj, u_part = self.scratch("massEdgeAdj", "edge", u), self.scratch("uAdjPart", "edge", u)
        w_edge_adj = self.scratch("wEdgeAdj", "edge", u, 1)
        (eoe, weights, reverse), stride = m.stencil(trisk.SYMMETRIC, (u,))
        _KERNELS.launch("hs_adj_edge", m.nEdges, edgesOnEdge=eoe, weightsOnEdge=weights,
                        weightsOnEdgeReverse=reverse, cellsOnEdge=m.table("cellsOnEdge"),
                        invDcEdge=m.table("invDcEdge", u.dtype),
                        divAdjCoef=m.table("divAdjCoef", u.dtype), uTendAdj=tend_u_adj,
                        thetaMassTendAdj=tend_theta_mass_adj, F=record["F"], qEdge=record["q_edge"],
                        pi=record["pi"], mass=mass, thetaMass=theta_mass, wFlux=record["W"], u=u,
                        qEdgeAdj=q_edge_adj, fluxAdj=flux_adj, thetaEdgeAdj=theta_edge_adj,
                        massEdgeAdj=mass_edge_adj, wEdgeAdj=w_edge_adj, uAdjPart=u_part,
                        maxEdges2=trisk.width(eoe, stride), slotStride=stride, nVertLevels=N)

        vort_adj, q_vort_adj = self.scratch("vortAdj", "vertex", u), self.scratch("qVortAdj", "vertex", u)
        (voe_t,), stride_e = m.stencil(("verticesOnEdgeT",), (vort_adj,))
        (cov, kite), stride = m.stencil(("cellsOnVertex", "c2vCoef"), (vort_adj,))
        _KERNELS.launch("hs_adj_vertex", m.nVertices, verticesOnEdgeT=voe_t, cellsOnVertex=cov,
                        c2vCoef=kite, qEdgeAdj=q_edge_adj, qVertex=record["q_vertex"], mass=mass,
                        vortAdj=vort_adj, qVortAdj=q_vort_adj, SE=trisk.width(voe_t, stride_e),
                        strideE=stride_e, vertexDegree=trisk.width(cov, stride), slotStride=stride,
                        nVertLevels=N)

        bernoulli_adj, div_adj = self.scratch("bernoulliAdj", "cell", mass), self.scratch("divAdj", "cell", mass)
        mass_part, theta_mass_adj = (self.scratch("massAdjPart", "cell", mass),
                                     self.scratch("thetaMassAdj", "cell", mass))
        accumulate = phi_s_adj is not None
        phi_s_adj = xp.empty_like(phi_s) if phi_s_adj is None else phi_s_adj
        (eoc,), stride = m.stencil(("edgesOnCell",), (phi_s,))
        _KERNELS.launch("hs_adj_column", m.nCells, edgesOnCell=eoc, cellsOnEdge=m.table("cellsOnEdge"),
                        invDcEdge=m.table("invDcEdge", mass.dtype), dB=physics.dB,
                        uTendAdj=tend_u_adj, massTendAdj=tend_mass_adj,
                        thetaMassTendAdj=tend_theta_mass_adj, thetaEdgeAdj=theta_edge_adj,
                        wEdgeAdj=w_edge_adj, mass=mass, thetaMass=theta_mass, wFlux=record["W"],
                        bernoulliAdj=bernoulli_adj, divAdj=div_adj, massAdjPart=mass_part,
                        thetaMassAdj=theta_mass_adj, pAdj=self.scratch("pAdj", "cell", mass),
                        phiSAdj=phi_s_adj, maxEdges=trisk.width(eoc, stride), slotStride=stride,
                        accumulatePhiS=int(accumulate), nVertLevels=N, gravity=physics.gravity,
                        pTop=physics.p_top, p0=P0, kappa=R_DRY / CP_DRY, R=R_DRY, cp=CP_DRY)
        form = physics.kinetic_energy
        if form != "trisk":
            part = terms.kinetic_energy_adj(m, u, bernoulli_adj, form, "deterministic")
            u_extra = part if u_extra is None else u_extra + part

        (eov_t, curl_t), stride = m.stencil(("edgesOnVertexT", "curlCoefT"), (u,))
        _KERNELS.launch("hs_adj_u", m.nEdges, cellsOnEdge=m.table("cellsOnEdge"),
                        divAdjCoef=m.table("divAdjCoef", u.dtype),
                        keAdjCoef=m.table("keAdjCoef", u.dtype), edgesOnVertexT=eov_t, curlCoefT=curl_t,
                        fluxAdj=flux_adj, divAdj=div_adj, bernoulliAdj=bernoulli_adj, vortAdj=vort_adj,
                        mass=mass, u=u, uAdjPart=u_part, uExtra=u if u_extra is None else u_extra,
                        massEdgeAdj=mass_edge_adj, yAdj=rk.y_adj[2], newAdj=rk.new_adj[2],
                        kAdj=tend_u_adj, S=trisk.width(eov_t, stride), slotStride=stride,
                        keInline=int(form == "trisk"), extra=int(u_extra is not None), nVertLevels=N,
                        **rk.arguments())

        extra = mass_extra is not None or theta_mass_extra is not None
        if extra:
            mass_extra = xp.zeros_like(mass) if mass_extra is None else mass_extra
            theta_mass_extra = xp.zeros_like(mass) if theta_mass_extra is None else theta_mass_extra
        (eoc_t,), stride_e = m.stencil(("cellsOnEdgeT",), (mass,))
        (voc, kite_t), stride_v = m.stencil(("verticesOnCell", "c2vCoefT"), (mass,))
        _KERNELS.launch("hs_adj_mass", m.nCells, cellsOnEdgeT=eoc_t, verticesOnCell=voc,
                        c2vCoefT=kite_t, massAdjPart=mass_part, massEdgeAdj=mass_edge_adj,
                        qVortAdj=q_vort_adj, thetaMassAdj=theta_mass_adj,
                        massExtra=mass if not extra else mass_extra,
                        thetaMassExtra=mass if not extra else theta_mass_extra,
                        yMassAdj=rk.y_adj[0], newMassAdj=rk.new_adj[0], kMassAdj=tend_mass_adj,
                        yThetaMassAdj=rk.y_adj[1], newThetaMassAdj=rk.new_adj[1],
                        kThetaMassAdj=tend_theta_mass_adj, SE=trisk.width(eoc_t, stride_e),
                        strideE=stride_e, SV=trisk.width(voc, stride_v), strideV=stride_v,
                        extra=int(extra), nVertLevels=N, **rk.arguments())
        if phi_s_extra is not None:
            phi_s_adj += phi_s_extra
        if state_adj is None:
            return phi_s_adj
        return (*state_adj, phi_s_adj)


def fused_tendencies_adj(mesh, record: dict, phi_s, physics, tend_mass_adj, tend_theta_mass_adj,
                         tend_u_adj):
    """(mass_adj, theta_mass_adj, u_adj, phi_s_adj) of the tendencies about the state of `record`
    (`hydrostatic.fused.fused_record`) through the fused adjoint passes. The reference is
    `hydrostatic.dynamics.tendencies_adj`."""
    return FusedStageAdjoint(mesh)(record, phi_s, physics, tend_mass_adj, tend_theta_mass_adj,
                                   tend_u_adj)
