"""The adjoint of the hydrostatic core's RK4 stage in fused kernels (the `hs_adj_` kernels of
hydrostatic/cuda/hydrostatic.cu, declared in `hydrostatic.fused`), for CuPy fields; deterministic
by default (every transposed sum a gather in a fixed slot order, no atomics: the same bits on
every run). The reference is the operator path, `hydrostatic.dynamics.tendencies_adj`.

From the adjoint tendencies (tend_mass_adj, tend_theta_mass_adj on cells, tend_u_adj on edges) of
one stage, with the stage's record of the fused forward (`hydrostatic.fused.record_stage`: its
provisional state mass, theta_mass, u and its q_v, q_e, F, pi and W, so that none of them is
derived again), five passes where the operator path runs each operator's adjoint and the
elementwise arithmetic between them:

    hs_adj_edge    (edge, layer)    the PV flux's adjoint (F and q_e: the TRiSK stencil with its
                                    reverse weights), theta flux's (-div_e2c^T(tend_theta_mass_adj)
                                    times theta_e and F), the pressure gradient's theta_e adjoint,
                                    the vertical advection's (mass_e, W at the edge's interfaces, u)
    hs_adj_vertex  (vertex, layer)  w = interp_v2e^T(q_e_adj) / interp_c2v(mass), q_v w
    hs_adj_column  (cell, warp)     B_adj = -grad_c2e^T(tend_u_adj), pi_adj, theta's and W's edge
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
column pass's B_adj); the passes add them before the bookkeeping.

In atomic mode the transposed sums are atomicAdd scatters through the forward tables instead
(hs_adj_edge_atomic, hs_adj_vertex_atomic into accumulators zeroed by one fill, the column pass on
their sums without its gathers (hs_adj_column_summed), hs_adj_u_atomic, hs_adj_mass_sum): no
transposed tables but the composed vector Laplacian's (the u pass's gather of a lone del2 / del4,
as in deterministic mode), the sums' order left to the hardware. Neither mode is bitwise the
operator path (the sums run in other orders): both equal it to round-off
(tests/hydrostatic/test_fused_adjoint.py), as the shallow-water fused adjoint (decision 0015).
"""
from __future__ import annotations

import itertools

import meshops
from framework.timestepping import AdjointRK4, AdjointUpdate
from meshops.device.backend import array_module
from meshops.device.mesh import for_fields
from meshops.device.tables import SIZE_OF
from meshops.modes import resolve_mode
from meshops.operators import trisk
from meshops.operators.vertical import CP_DRY, P0, R_DRY

from hydrostatic import dynamics, terms
from hydrostatic.fused import (_KERNELS, EXTRA_TERMS, FusedStage, Laplacian, in_pass_laplacian,
                               reads_theta)

#: The mesh tables the adjoint passes read, per mode (built together before the first stage).
TABLES = {"deterministic": (*trisk.SYMMETRIC, "cellsOnEdge", "invDcEdge", "divAdjCoef",
                            "verticesOnEdgeT", "cellsOnVertex", "c2vCoef", "edgesOnCell", "keAdjCoef",
                            "edgesOnVertexT", "curlCoefT", "cellsOnEdgeT", "verticesOnCell",
                            "c2vCoefT"),
          "atomic": (*trisk.FORWARD, "cellsOnEdge", "invDcEdge", "divAdjCoef", "edgesOnVertex",
                     "curlCoef", "cellsOnVertex", "c2vCoef", "edgesOnCell", "keAdjCoef")}


def extra_adjoints(mesh, record: dict, phi_s, physics, tend_theta_mass_adj, tend_u_adj,
                   mode: str) -> tuple:
    """(mass_adj, theta_mass_adj, (coefficient, u_adj), phi_s_adj) parts, each None if none, of
    the active `hydrostatic.fused.EXTRA_TERMS` and the forcing, through their own adjoints (as
    `hydrostatic.dynamics.tendencies_adj` runs them: the forcing's, the terms' in reverse, then
    the column diagnostics' adjoint of what they give the diagnostics). u_adj's coefficient is
    for the u pass to apply: a lone term on u that is a coefficient times a vector Laplacian of
    a linear operator (del2, del4) gives its coefficient and the `hydrostatic.fused.Laplacian`
    (transposed) of its `inner_adjoint` field, any other 1 and its field."""
    active = [term for term in EXTRA_TERMS if term.active(physics)]
    if not active and physics.forcing is None:
        return None, None, (1.0, None), None
    m = for_fields(mesh, record["mass"])
    mass, theta_mass, u = record["mass"], record["theta_mass"], record["u"]
    b = dict(mass=mass, theta_mass=theta_mass, u=u)
    if physics.forcing is not None:
        b.update(dynamics.column_diagnostics(m, mass, theta_mass, phi_s, physics))
    elif reads_theta(active):
        b["theta"] = theta_mass / mass
    a = dict.fromkeys(("mass", "u", "theta", "p", "p_i", "pi", "alpha", "phi", "phi_i"))
    g = dict(tend_theta_mass=tend_theta_mass_adj, tend_u=tend_u_adj)
    on_u = [term for term in active if term.target == "tend_u"]
    lone = on_u[0] if (physics.forcing is None and len(on_u) == 1
                       and hasattr(on_u[0], "coefficient")) else None
    if physics.forcing is not None:
        column_adj, a["mass"], a["u"] = dynamics._forcing(physics, "tendencies_adj")(
            m, b, mass, u, tend_theta_mass_adj, tend_u_adj, mode=mode)
        a.update(column_adj)
    for term in reversed(active):
        if term is not lone:
            term.adjoint(m, b, a, g[term.target], physics, mode)
    u_part = ((1.0, a["u"]) if lone is None else
              (lone.coefficient(physics), Laplacian(lone.inner_adjoint(m, g["tend_u"], mode))))
    if physics.forcing is not None:
        a["phi"] = array_module(mass).zeros_like(mass)
        mass_part, theta_mass_adj, phi_s_adj = dynamics.column_diagnostics_adj(m, b, mass, a,
                                                                               physics, mode)
        mass_adj = mass_part if a["mass"] is None else a["mass"] + mass_part
        return mass_adj, theta_mass_adj, u_part, phi_s_adj
    if a["theta"] is None:
        return a["mass"], None, u_part, None
    theta_mass_adj = a["theta"] / mass
    mass_part = -(b["theta"] * theta_mass_adj)
    mass_adj = mass_part if a["mass"] is None else a["mass"] + mass_part
    return mass_adj, theta_mass_adj, u_part, None


class FusedStageAdjoint(FusedStage):
    """The adjoint of one fused RK4 stage on `mesh` (a `meshops.DeviceMesh` on CuPy, or a mesh),
    holding the passes' scratch fields."""

    def accumulators(self, like, *fields):
        """Zeroed scratch fields (name, location, extra levels) like `like`, views of one buffer
        (one fill)."""
        m = for_fields(self.mesh, like)
        shapes = [(getattr(m, SIZE_OF[location]), like.shape[1] + levels)
                  for _, location, levels in fields]
        sizes = [a * b for a, b in shapes]
        buffer = self.scratch_flat("accumulators", like, sum(sizes))
        buffer.fill(0)
        starts = [0, *itertools.accumulate(sizes)]
        return [buffer[a:b].reshape(shape) for a, b, shape in zip(starts, starts[1:], shapes)]

    def scratch_flat(self, name: str, like, size: int):
        key = (name, like.dtype.str, (size,))
        field = self._scratch.get(key)
        if field is None:
            field = self._scratch[key] = array_module(like).empty(size, like.dtype)
        return field

    def __call__(self, record: dict, phi_s, physics, tend_mass_adj, tend_theta_mass_adj, tend_u_adj,
                 *, phi_s_adj=None, rk: AdjointRK4 | None = None, mode: str | None = None):
        """The stage's adjoint from its adjoint tendencies about `record`. With `rk` the state's
        adjoint goes into the RK4 bookkeeping (the tend_*_adj arrays are overwritten by the
        earlier stage's when rk.update.next) and phi_s_adj is returned; without, (mass_adj,
        theta_mass_adj, u_adj, phi_s_adj) as new arrays. phi_s_adj: this stage's part is added to
        it in place when given, else it is a new array. `mode` "atomic": the transposed sums as
        atomicAdd scatters through the forward tables; None: the meshops default."""
        mode = resolve_mode(mode)
        mass, theta_mass, u = record["mass"], record["theta_mass"], record["u"]
        m = for_fields(self.mesh, mass, u)
        m.prebuild(TABLES[mode])
        xp = array_module(mass)
        state_adj = None
        if rk is None:
            state_adj = tuple(xp.empty_like(y) for y in (mass, theta_mass, u))
            zeros = tuple(xp.zeros_like(y) for y in (mass, theta_mass, u))
            rk = AdjointRK4(state_adj, zeros, AdjointUpdate(0.0, 0.0, False, True))
        extras = extra_adjoints(m, record, phi_s, physics, tend_theta_mass_adj, tend_u_adj, mode)
        accumulate = phi_s_adj is not None
        phi_s_adj = xp.empty_like(phi_s) if phi_s_adj is None else phi_s_adj
        passes = self._atomic if mode == "atomic" else self._deterministic
        passes(m, record, physics, (tend_mass_adj, tend_theta_mass_adj, tend_u_adj), extras, rk,
               phi_s_adj, accumulate)
        if extras[3] is not None:
            phi_s_adj += extras[3]
        return phi_s_adj if state_adj is None else (*state_adj, phi_s_adj)

    def _column(self, m, record, physics, tend_adj, phi_s_adj, accumulate, edges, sums=None):
        """The column pass: the edges' parts gathered from `edges` (theta_e_adj at edges, W_e's
        adjoint at their interfaces), or with `sums` read from what the atomic edge pass scattered
        (B_adj, pi_adj, theta_adj's and W_adj's parts: hs_adj_column_summed; `edges` then stand
        in, unread); with `split_cell_pass` the gathers run first as their own kernel
        (hs_adj_cell_gather) into such sums; returns (bernoulli_adj, div_adj, mass_part,
        theta_mass_adj)."""
        mass = record["mass"]
        N = int(mass.shape[1])
        fields = [self.scratch(name, "cell", mass) for name in
                  ("bernoulliAdj", "divAdj", "massAdjPart", "thetaMassAdj")]
        kernel = "hs_adj_column" if sums is None else "hs_adj_column_summed"
        (eoc,), stride = m.stencil(("edgesOnCell",), (phi_s_adj,))
        if sums is None and self.split_cell_pass:
            sums = (*(self.scratch(name, "cell", mass)
                      for name in ("bernoulliAcc", "piAcc", "thetaAcc")),
                    self.scratch("wAcc", "cell", mass, 1))
            _KERNELS.launch("hs_adj_cell_gather", m.nCells, edgesOnCell=eoc,
                            cellsOnEdge=m.table("cellsOnEdge"),
                            invDcEdge=m.table("invDcEdge", mass.dtype), uTendAdj=tend_adj[2],
                            thetaEdgeAdj=edges[0], wEdgeAdj=edges[1], mass=mass,
                            thetaMass=record["theta_mass"], bernoulliAcc=sums[0], piAcc=sums[1],
                            thetaAcc=sums[2], wAcc=sums[3], maxEdges=trisk.width(eoc, stride),
                            slotStride=stride, nVertLevels=N)
            kernel = "hs_adj_column_summed"
        if sums is None:
            sums = (mass, mass, mass, record["W"])
        _KERNELS.launch(kernel, m.nCells, edgesOnCell=eoc, cellsOnEdge=m.table("cellsOnEdge"),
                        invDcEdge=m.table("invDcEdge", mass.dtype), dB=physics.dB,
                        uTendAdj=tend_adj[2], massTendAdj=tend_adj[0],
                        thetaMassTendAdj=tend_adj[1], thetaEdgeAdj=edges[0], wEdgeAdj=edges[1],
                        bernoulliAcc=sums[0], piAcc=sums[1], thetaAcc=sums[2], wAcc=sums[3],
                        mass=mass, thetaMass=record["theta_mass"], wFlux=record["W"],
                        bernoulliAdj=fields[0], divAdj=fields[1], massAdjPart=fields[2],
                        thetaMassAdj=fields[3], pAdj=self.scratch("pAdj", "cell", mass),
                        phiSAdj=phi_s_adj, maxEdges=trisk.width(eoc, stride), slotStride=stride,
                        accumulatePhiS=int(accumulate), nVertLevels=N,
                        gravity=physics.gravity, pTop=physics.p_top, p0=P0, kappa=R_DRY / CP_DRY,
                        R=R_DRY, cp=CP_DRY)
        return fields

    @staticmethod
    def _u_extra(m, record, physics, u_part, bernoulli_adj, mode) -> tuple:
        """(coefficient, field or None) of the u pass's extra: `extra_adjoints`' u part, with the
        kinetic energy's adjoint on B_adj added when it is not TRiSK's."""
        coefficient, u_extra = u_part
        form = physics.kinetic_energy
        if form == "trisk":
            return coefficient, u_extra
        u_extra = _laplacian_adjoint(m, u_extra, mode)
        part = terms.kinetic_energy_adj(m, record["u"], bernoulli_adj, form, mode)
        if u_extra is None:
            return 1.0, part
        return 1.0, (u_extra if coefficient == 1.0 else coefficient * u_extra) + part

    @staticmethod
    def _mass_extras(xp, mass, extras) -> tuple:
        """(extra flag, massExtra, thetaMassExtra) of the mass passes; `mass` stands in, unread."""
        mass_extra, theta_mass_extra = extras[0], extras[1]
        if mass_extra is None and theta_mass_extra is None:
            return 0, mass, mass
        return (1, xp.zeros_like(mass) if mass_extra is None else mass_extra,
                xp.zeros_like(mass) if theta_mass_extra is None else theta_mass_extra)

    def _deterministic(self, m, record, physics, tend_adj, extras, rk, phi_s_adj, accumulate):
        """The five gather passes (module doc)."""
        mass, theta_mass, u = record["mass"], record["theta_mass"], record["u"]
        xp, N = array_module(mass), int(mass.shape[1])
        q_edge_adj, flux_adj = self.scratch("qEdgeAdj", "edge", u), self.scratch("fluxAdj", "edge", u)
        theta_edge_adj = self.scratch("thetaEdgeAdj", "edge", u)
        mass_edge_adj, u_part = self.scratch("massEdgeAdj", "edge", u), self.scratch("uAdjPart", "edge", u)
        w_edge_adj = self.scratch("wEdgeAdj", "edge", u, 1)
        (eoe, weights, reverse), stride = m.stencil(trisk.SYMMETRIC, (u,))
        _KERNELS.launch("hs_adj_edge", m.nEdges, edgesOnEdge=eoe, weightsOnEdge=weights,
                        weightsOnEdgeReverse=reverse, cellsOnEdge=m.table("cellsOnEdge"),
                        invDcEdge=m.table("invDcEdge", u.dtype),
                        divAdjCoef=m.table("divAdjCoef", u.dtype), uTendAdj=tend_adj[2],
                        thetaMassTendAdj=tend_adj[1], F=record["F"], qEdge=record["q_edge"],
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

        bernoulli_adj, div_adj, mass_part, theta_mass_adj = self._column(
            m, record, physics, tend_adj, phi_s_adj, accumulate, (theta_edge_adj, w_edge_adj))
        u_scale, u_extra = self._u_extra(m, record, physics, extras[2], bernoulli_adj,
                                         "deterministic")

        u_extra, del2 = _u_pass_laplacian(m, u_extra, u, "deterministic")
        (eov_t, curl_t), stride = m.stencil(("edgesOnVertexT", "curlCoefT"), (u,))
        _KERNELS.launch("hs_adj_u", m.nEdges, cellsOnEdge=m.table("cellsOnEdge"),
                        divAdjCoef=m.table("divAdjCoef", u.dtype),
                        keAdjCoef=m.table("keAdjCoef", u.dtype), edgesOnVertexT=eov_t, curlCoefT=curl_t,
                        fluxAdj=flux_adj, divAdj=div_adj, bernoulliAdj=bernoulli_adj, vortAdj=vort_adj,
                        mass=mass, u=u, uAdjPart=u_part, uExtra=u if u_extra is None else u_extra,
                        massEdgeAdj=mass_edge_adj, yAdj=rk.y_adj[2], newAdj=rk.new_adj[2],
                        kAdj=tend_adj[2], S=trisk.width(eov_t, stride), slotStride=stride,
                        keInline=int(physics.kinetic_energy == "trisk"),
                        extra=int(u_extra is not None), uExtraScale=u_scale, nVertLevels=N,
                        **del2, **rk.arguments())

        extra, mass_extra, theta_mass_extra = self._mass_extras(xp, mass, extras)
        (eoc_t,), stride_e = m.stencil(("cellsOnEdgeT",), (mass,))
        (voc, kite_t), stride_v = m.stencil(("verticesOnCell", "c2vCoefT"), (mass,))
        _KERNELS.launch("hs_adj_mass", m.nCells, cellsOnEdgeT=eoc_t, verticesOnCell=voc,
                        c2vCoefT=kite_t, massAdjPart=mass_part, massEdgeAdj=mass_edge_adj,
                        qVortAdj=q_vort_adj, thetaMassAdj=theta_mass_adj, massExtra=mass_extra,
                        thetaMassExtra=theta_mass_extra, yMassAdj=rk.y_adj[0],
                        newMassAdj=rk.new_adj[0], kMassAdj=tend_adj[0], yThetaMassAdj=rk.y_adj[1],
                        newThetaMassAdj=rk.new_adj[1], kThetaMassAdj=tend_adj[1],
                        SE=trisk.width(eoc_t, stride_e), strideE=stride_e,
                        SV=trisk.width(voc, stride_v), strideV=stride_v, extra=extra,
                        nVertLevels=N, **rk.arguments())

    def _atomic(self, m, record, physics, tend_adj, extras, rk, phi_s_adj, accumulate):
        """The atomic mode's passes: scatters into accumulators zeroed by one fill, then the
        column pass on their sums, the u pass and the mass sum (hydrostatic/cuda/hydrostatic.cu,
        "atomic mode")."""
        mass, theta_mass, u = record["mass"], record["theta_mass"], record["u"]
        xp, N = array_module(mass), int(mass.shape[1])
        flux_acc, q_edge_acc, u_acc, bernoulli_acc, pi_acc, theta_acc, mass_acc, w_acc = \
            self.accumulators(mass, ("fluxAcc", "edge", 0), ("qEdgeAcc", "edge", 0), ("uAcc", "edge", 0),
                              ("bernoulliAcc", "cell", 0), ("piAcc", "cell", 0),
                              ("thetaAcc", "cell", 0), ("massAcc", "cell", 0), ("wAcc", "cell", 1))
        mass_edge_adj, u_part = self.scratch("massEdgeAdj", "edge", u), self.scratch("uAdjPart", "edge", u)
        (eoe, weights), stride = m.stencil(trisk.FORWARD, (u,))
        _KERNELS.launch("hs_adj_edge_atomic", m.nEdges, edgesOnEdge=eoe, weightsOnEdge=weights,
                        cellsOnEdge=m.table("cellsOnEdge"), invDcEdge=m.table("invDcEdge", u.dtype),
                        divAdjCoef=m.table("divAdjCoef", u.dtype), uTendAdj=tend_adj[2],
                        thetaMassTendAdj=tend_adj[1], F=record["F"], qEdge=record["q_edge"],
                        pi=record["pi"], mass=mass, thetaMass=theta_mass, wFlux=record["W"], u=u,
                        fluxAcc=flux_acc, qEdgeAcc=q_edge_acc, bernoulliAcc=bernoulli_acc,
                        piAcc=pi_acc, thetaAcc=theta_acc, wAcc=w_acc, massEdgeAdj=mass_edge_adj,
                        uAdjPart=u_part, maxEdges2=trisk.width(eoe, stride), slotStride=stride,
                        nVertLevels=N)
        (eov, curl, cov, kite), stride = m.stencil(
            ("edgesOnVertex", "curlCoef", "cellsOnVertex", "c2vCoef"), (u, mass))
        _KERNELS.launch("hs_adj_vertex_atomic", m.nVertices, edgesOnVertex=eov, curlCoef=curl,
                        cellsOnVertex=cov, c2vCoef=kite, qEdgeAcc=q_edge_acc,
                        qVertex=record["q_vertex"], mass=mass, uAcc=u_acc, massAcc=mass_acc,
                        vertexDegree=trisk.width(eov, stride), slotStride=stride, nVertLevels=N)
        bernoulli_adj, div_adj, mass_part, theta_mass_adj = self._column(
            m, record, physics, tend_adj, phi_s_adj, accumulate,
            (u, w_acc), sums=(bernoulli_acc, pi_acc, theta_acc, w_acc))
        u_scale, u_extra = self._u_extra(m, record, physics, extras[2], bernoulli_adj, "atomic")
        u_extra, del2 = _u_pass_laplacian(m, u_extra, u, "atomic")
        _KERNELS.launch("hs_adj_u_atomic", m.nEdges, cellsOnEdge=m.table("cellsOnEdge"),
                        divAdjCoef=m.table("divAdjCoef", u.dtype),
                        keAdjCoef=m.table("keAdjCoef", u.dtype), fluxAcc=flux_acc, divAdj=div_adj,
                        bernoulliAdj=bernoulli_adj, uAcc=u_acc, mass=mass, u=u, uAdjPart=u_part,
                        uExtra=u if u_extra is None else u_extra, massEdgeAdj=mass_edge_adj,
                        massAcc=mass_acc, yAdj=rk.y_adj[2], newAdj=rk.new_adj[2], kAdj=tend_adj[2],
                        keInline=int(physics.kinetic_energy == "trisk"),
                        extra=int(u_extra is not None), uExtraScale=u_scale, nVertLevels=N,
                        **del2, **rk.arguments())
        extra, mass_extra, theta_mass_extra = self._mass_extras(xp, mass, extras)
        _KERNELS.launch("hs_adj_mass_sum", m.nCells, massAdjPart=mass_part, massAcc=mass_acc,
                        thetaMassAdj=theta_mass_adj, massExtra=mass_extra,
                        thetaMassExtra=theta_mass_extra, yMassAdj=rk.y_adj[0],
                        newMassAdj=rk.new_adj[0], kMassAdj=tend_adj[0], yThetaMassAdj=rk.y_adj[1],
                        newThetaMassAdj=rk.new_adj[1], kThetaMassAdj=tend_adj[1], extra=extra,
                        nVertLevels=N, **rk.arguments())


def _laplacian_adjoint(m, field, mode):
    """`field`, a `Laplacian` computed (`meshops.vector_laplacian_e2e_adj` in `mode`)."""
    if isinstance(field, Laplacian):
        return meshops.vector_laplacian_e2e_adj(m, field.of, mode=mode)
    return field


def _u_pass_laplacian(m, field, u, mode) -> tuple:
    """(uExtra, its transposed Laplacian's arguments) of the u pass of `mode`: a `Laplacian`
    applied by the pass (edgesOnEdgeDel2, coefDel2T) where the transposed operator is one
    gather over that stencil (`hydrostatic.fused.in_pass_laplacian`; the operator's in either
    mode), else computed here."""
    if isinstance(field, Laplacian):
        stencil = in_pass_laplacian(m, field.of, u, ("edgesOnEdgeDel2", "coefDel2T"))
        if stencil is not None:
            return field.of, stencil
    return (_laplacian_adjoint(m, field, mode),
            dict(edgesOnEdgeDel2=m.table("cellsOnEdge"), coefDel2T=u, del2Width=0,
                 del2SlotStride=1))


def fused_tendencies_adj(mesh, record: dict, phi_s, physics, tend_mass_adj, tend_theta_mass_adj,
                         tend_u_adj):
    """(mass_adj, theta_mass_adj, u_adj, phi_s_adj) of the tendencies about the state of `record`
    (`hydrostatic.fused.fused_record`) through the fused adjoint passes. The reference is
    `hydrostatic.dynamics.tendencies_adj`."""
    return FusedStageAdjoint(mesh)(record, phi_s, physics, tend_mass_adj, tend_theta_mass_adj,
                                   tend_u_adj)
