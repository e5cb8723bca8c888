"""The adjoint of the shallow-water RK4 stage in fused kernels (swm/cuda/shallow_water_adjoint.cu),
for CuPy fields; deterministic by default (gathers through transposed tables, no atomics; bitwise
the same every run). The reference is the operator path, `swm.tendencies.tendencies_adj`.

From the adjoint tendencies (tend_h_adj on cells, tend_u_adj on edges) of one stage, with the
stage's record from the forward (`swm.fused.FusedRK4.record`: its provisional state h, u and
its pv_vertex, h_vertex, pv_edge and flux = h_edge * u, so nothing of the forward is derived again), five
passes where the operator path runs some 25 operator and 20 elementwise kernels:

    sw_adj_phi     cells     phi_adj = -grad_c2e_adj(tend_u_adj)             (phi = ke + g (h + b))
    sw_adj_edge    edges     flux_adj = pv_flux_e2e's flux adjoint - div_e2c_adj(tend_h_adj);
                             pv_edge_adj (pv_flux_e2e's pv adjoint); h_edge_adj = u flux_adj;
                             u part = h_edge flux_adj + ke_e2c_adj(u; phi_adj)
    sw_adj_vertex  vertices  vorticity_adj = (interp_v2e_adj(pv_edge_adj) + APVM part) / h_vertex,
                             h_vertex_adj = -vorticity_adj pv_vertex
    sw_adj_u       edges     u_adj = u part + curl_e2v_adj(vorticity_adj) + APVM and viscosity parts
    sw_adj_h       cells     h_adj = g phi_adj + interp_c2e_adj(h_edge_adj)
                             + interp_c2v_adj(h_vertex_adj);  b_adj = g phi_adj

APVM, viscosity and the other terms the forward adds through the operators add their adjoints
through the operators too (their adjoints in `swm.terms`), between the edge and vertex passes:
their pv_vertex and u parts enter the vertex and u passes; their h part (with that of h_edge) is
added to the h pass's output (or, in the RK4 bookkeeping, to y_adj and the next k_adj) and their
b part to b_adj, after the h pass. Without such a term the passes are the kernels alone.

In atomic mode the transposed sums are atomicAdd scatters through the forward tables instead
(sw_adj_edge_atomic, sw_adj_edge_finish_atomic, sw_adj_vertex_atomic into accumulators zeroed by
one fill, each block summing its rows' contributions in shared-memory windows of the accumulators
first; then sw_adj_u_sum and sw_adj_h_sum): no transposed tables, the sums' order left to the
hardware.
"""
from __future__ import annotations

import itertools

import meshops
from meshops.device.backend import array_module
from meshops.device.kernels import Family, Kernel
from meshops.device.mesh import for_fields
from meshops.device.tables import SIZE_OF
from meshops.modes import resolve_mode
from meshops.operators import trisk

from swm import terms
from swm.fused import CUDA_DIR
from swm.tendencies import Physics

_RK = "int:rk real:bCoef real:aCoef int:next"
_KERNELS = Family("shallow_water_adjoint", sources=CUDA_DIR, kernels=(
    Kernel("sw_adj_phi", "idx:cellsOnEdgeT coef:gradCoefT in:uTendAdj out:phiAdj int:S int:slotStride"),
    Kernel("sw_adj_edge", "idx:edgesOnEdge coef:weightsOnEdge coef:weightsOnEdgeReverse "
                          "idx:cellsOnEdge coef:divAdjCoef coef:keAdjCoef in:uTendAdj in:hTendAdj "
                          "in:phiAdj in:flux in:pvEdge in:h in:u out:uAdjPart out:hEdgeAdj "
                          "out:pvEdgeAdj int:S2 int:stride2"),
    Kernel("sw_adj_vertex", "idx:verticesOnEdgeT in:pvEdgeAdj in:pvVertexExtra in:pvVertex in:hVertex "
                            "out:vortAdj out:hVertexAdj int:SE int:strideE int:extra"),
    Kernel("sw_adj_u", "idx:edgesOnVertexT coef:curlCoefT in:uAdjPart in:vortAdj in:uExtra out:uAdj "
                       "out:yAdj in:newAdj out:kAdj int:S int:slotStride int:extra " + _RK),
    Kernel("sw_adj_h", "idx:cellsOnEdgeT idx:verticesOnCell coef:c2vCoefT in:phiAdj in:hEdgeAdj "
                       "in:hVertexAdj out:hAdj out:bAdj out:yAdj in:newAdj out:kAdj int:SE int:strideE "
                       "int:SV int:strideV real:gravity int:accumulate " + _RK),
    # atomic mode
    Kernel("sw_adj_edge_atomic", "idx:edgesOnEdge coef:weightsOnEdge idx:cellsOnEdge coef:invDcEdge "
                                 "in:uTendAdj in:flux in:pvEdge out:phiAdj out:fluxAcc out:pvAcc int:S2"),
    Kernel("sw_adj_edge_finish_atomic", "idx:cellsOnEdge idx:verticesOnEdge coef:divAdjCoef coef:keAdjCoef "
                                        "in:hTendAdj in:phiAdj in:fluxAcc in:pvAcc in:h in:u out:uAcc "
                                        "out:hAcc out:pvVertexAcc"),
    Kernel("sw_adj_vertex_atomic", "idx:edgesOnVertex coef:curlCoef idx:cellsOnVertex coef:c2vCoef "
                                   "in:pvVertexAcc in:pvVertexExtra in:pvVertex in:hVertex out:uAcc out:hAcc "
                                   "int:S int:extra"),
    Kernel("sw_adj_u_sum", "in:uAcc in:uExtra out:uAdj out:yAdj in:newAdj out:kAdj int:extra "
                           + _RK),
    Kernel("sw_adj_h_sum", "in:phiAdj in:hAcc out:hAdj out:bAdj out:yAdj in:newAdj out:kAdj real:gravity "
                           "int:accumulate " + _RK),
))


#: The mesh tables the adjoint passes read, per mode (built together, on threads, before the
#: first adjoint stage of that mode).
TABLES = {"deterministic": ("cellsOnEdgeT", "gradCellCoefT", *trisk.SYMMETRIC,
                            "cellsOnEdge", "divAdjCoef", "keAdjCoef", "verticesOnEdgeT",
                            "edgesOnVertexT", "curlCoefT", "verticesOnCell", "c2vCoefT"),
          "atomic": (*trisk.FORWARD, "cellsOnEdge", "invDcEdge", "verticesOnEdge", "divAdjCoef",
                     "keAdjCoef", "edgesOnVertex", "curlCoef", "cellsOnVertex", "c2vCoef")}


class FusedStageAdjoint:
    """The adjoint of one fused RK4 stage on `mesh` (a `meshops.DeviceMesh` on CuPy, or a mesh),
    holding the scratch fields of the passes."""

    def __init__(self, mesh):
        self.mesh = mesh
        self._scratch: dict = {}

    def _field(self, name: str, location: str, like):
        key = (name, like.dtype.str, like.shape[1:])
        field = self._scratch.get(key)
        if field is None:
            n = getattr(for_fields(self.mesh, like), SIZE_OF[location])
            field = self._scratch[key] = array_module(like).empty((n,) + like.shape[1:], like.dtype)
        return field

    def _accumulators(self, like, *fields):
        """Zeroed scratch fields (name, location) like `like`, views of one buffer (one fill)."""
        sizes = [getattr(for_fields(self.mesh, like), SIZE_OF[location]) for _, location in fields]
        key = ("accumulators", tuple(name for name, _ in fields), like.dtype.str, like.shape[1:])
        buffer = self._scratch.get(key)
        if buffer is None:
            buffer = self._scratch[key] = array_module(like).empty((sum(sizes),) + like.shape[1:],
                                                                   like.dtype)
        buffer.fill(0)
        starts = [0, *itertools.accumulate(sizes)]
        return [buffer[a:b] for a, b in zip(starts, starts[1:])]

    def __call__(self, record: dict, physics: Physics, tend_h_adj, tend_u_adj, b_adj=None, rk=None,
                 mode: str | None = None):
        """(h_adj, u_adj, b_adj) of the stage whose forward is `record` (`swm.fused.FusedRK4.record`),
        from its adjoint tendencies; b_adj is this stage's part added to `b_adj` in place when one
        is given, else a new array. h_adj and u_adj are new arrays; with `rk` (an `AdjointRK4`)
        they are not stored but applied to its y_adj and next k_adj (which are the tend_*_adj
        arrays: overwritten), and None is returned for them. `mode` "atomic": the transposed sums
        as atomicAdd scatters through the forward tables (`_atomic`); None: the meshops default
        (`meshops.set_adjoint_mode`)."""
        mode = resolve_mode(mode)
        for_fields(self.mesh, record["h"]).prebuild(TABLES[mode])
        if mode == "atomic":
            return self._atomic(record, physics, tend_h_adj, tend_u_adj, b_adj, rk)
        h, u = record["h"], record["u"]
        m = for_fields(self.mesh, h, u, tend_h_adj, tend_u_adj)
        xp = array_module(h, u)
        phi_adj = self._field("phiAdj", "cell", h)
        (eoc_t, grad_t), stride = m.stencil(("cellsOnEdgeT", "gradCellCoefT"), (phi_adj,))
        _KERNELS.launch("sw_adj_phi", m.nCells, cellsOnEdgeT=eoc_t, gradCoefT=grad_t,
                        uTendAdj=tend_u_adj, phiAdj=phi_adj, S=trisk.width(eoc_t, stride),
                        slotStride=stride)

        u_part, h_edge_adj = self._field("uAdjPart", "edge", u), self._field("hEdgeAdj", "edge", u)
        pv_edge_adj = self._field("pvEdgeAdj", "edge", u)
        (eoe, w, w_reverse), stride2 = m.stencil(trisk.SYMMETRIC, (u_part,))
        _KERNELS.launch("sw_adj_edge", m.nEdges, edgesOnEdge=eoe, weightsOnEdge=w,
                        weightsOnEdgeReverse=w_reverse, cellsOnEdge=m.table("cellsOnEdge"),
                        divAdjCoef=m.table("divAdjCoef", u.dtype), keAdjCoef=m.table("keAdjCoef", u.dtype),
                        uTendAdj=tend_u_adj, hTendAdj=tend_h_adj, phiAdj=phi_adj, flux=record["flux"],
                        pvEdge=record["pv_edge"], h=h, u=u, uAdjPart=u_part, hEdgeAdj=h_edge_adj,
                        pvEdgeAdj=pv_edge_adj, S2=trisk.width(eoe, stride2), stride2=stride2)

        pv_vertex_extra, u_extra, h_extra, b_extra = _operator_parts(
            m, record, physics, pv_edge_adj, tend_h_adj, tend_u_adj, "deterministic")
        pv_vertex = record["pv_vertex"]
        vort_adj, h_vertex_adj = self._field("vortAdj", "vertex", h), self._field("hVertexAdj", "vertex", h)
        (voe_t,), stride_e = m.stencil(("verticesOnEdgeT",), (vort_adj,))
        _KERNELS.launch("sw_adj_vertex", m.nVertices, verticesOnEdgeT=voe_t, pvEdgeAdj=pv_edge_adj,
                        pvVertexExtra=pv_vertex if pv_vertex_extra is None else pv_vertex_extra,
                        pvVertex=pv_vertex, hVertex=record["h_vertex"], vortAdj=vort_adj,
                        hVertexAdj=h_vertex_adj, SE=trisk.width(voe_t, stride_e), strideE=stride_e,
                        extra=int(pv_vertex_extra is not None))

        u_adj = u_part if rk is not None else xp.empty_like(u)
        (eov_t, curl_t), stride = m.stencil(("edgesOnVertexT", "curlCoefT"), (u_adj,))
        _KERNELS.launch("sw_adj_u", m.nEdges, edgesOnVertexT=eov_t, curlCoefT=curl_t, uAdjPart=u_part,
                        vortAdj=vort_adj, uExtra=u_part if u_extra is None else u_extra, uAdj=u_adj,
                        **_rk_fields(rk, 1, u_adj, tend_u_adj), S=trisk.width(eov_t, stride),
                        slotStride=stride, extra=int(u_extra is not None))

        h_adj = phi_adj if rk is not None else xp.empty_like(h)
        accumulate = b_adj is not None
        b_adj = xp.empty_like(h) if b_adj is None else b_adj
        (eoc_t,), stride_e = m.stencil(("cellsOnEdgeT",), (h_adj,))
        (voc, kite_t), stride_v = m.stencil(("verticesOnCell", "c2vCoefT"), (h_adj,))
        _KERNELS.launch("sw_adj_h", m.nCells, cellsOnEdgeT=eoc_t, verticesOnCell=voc, c2vCoefT=kite_t,
                        phiAdj=phi_adj, hEdgeAdj=h_edge_adj, hVertexAdj=h_vertex_adj, hAdj=h_adj,
                        bAdj=b_adj, **_rk_fields(rk, 0, h_adj, tend_h_adj),
                        SE=trisk.width(eoc_t, stride_e), strideE=stride_e,
                        SV=trisk.width(voc, stride_v), strideV=stride_v, gravity=physics.gravity,
                        accumulate=int(accumulate))
        _add_extra(h_extra, b_extra, h_adj, b_adj, rk, tend_h_adj)
        return (None, None, b_adj) if rk is not None else (h_adj, u_adj, b_adj)


    def _atomic(self, record: dict, physics: Physics, tend_h_adj, tend_u_adj, b_adj, rk):
        """The stage's adjoint in atomic mode: scatter passes into zeroed accumulators, then the
        sums (swm/cuda/shallow_water_adjoint.cu, "atomic mode")."""
        h, u = record["h"], record["u"]
        m = for_fields(self.mesh, h, u, tend_h_adj, tend_u_adj)
        xp = array_module(h, u)
        phi_adj, h_acc, flux_acc, pv_acc, pv_vertex_acc = self._accumulators(
            h, ("phiAdj", "cell"), ("hAcc", "cell"), ("fluxAcc", "edge"), ("pvAcc", "edge"),
            ("pvVertexAcc", "vertex"))
        u_acc = self._field("uAcc", "edge", u)         # stored by the finishing pass, not zeroed
        eoe = m.table("edgesOnEdge")
        _KERNELS.launch("sw_adj_edge_atomic", m.nEdges, edgesOnEdge=eoe,
                        weightsOnEdge=m.table("weightsOnEdge", u.dtype), cellsOnEdge=m.table("cellsOnEdge"),
                        invDcEdge=m.table("invDcEdge", u.dtype), uTendAdj=tend_u_adj, flux=record["flux"],
                        pvEdge=record["pv_edge"], phiAdj=phi_adj, fluxAcc=flux_acc, pvAcc=pv_acc,
                        S2=eoe.shape[1])
        _KERNELS.launch("sw_adj_edge_finish_atomic", m.nEdges, cellsOnEdge=m.table("cellsOnEdge"),
                        verticesOnEdge=m.table("verticesOnEdge"), divAdjCoef=m.table("divAdjCoef", u.dtype),
                        keAdjCoef=m.table("keAdjCoef", u.dtype), hTendAdj=tend_h_adj, phiAdj=phi_adj,
                        fluxAcc=flux_acc, pvAcc=pv_acc, h=h, u=u, uAcc=u_acc, hAcc=h_acc,
                        pvVertexAcc=pv_vertex_acc)
        pv_vertex_extra, u_extra, h_extra, b_extra = _operator_parts(
            m, record, physics, pv_acc, tend_h_adj, tend_u_adj, "atomic")
        pv_vertex = record["pv_vertex"]
        eov = m.table("edgesOnVertex")
        _KERNELS.launch("sw_adj_vertex_atomic", m.nVertices, edgesOnVertex=eov,
                        curlCoef=m.table("curlCoef", u.dtype), cellsOnVertex=m.table("cellsOnVertex"),
                        c2vCoef=m.table("c2vCoef", u.dtype), pvVertexAcc=pv_vertex_acc,
                        pvVertexExtra=pv_vertex if pv_vertex_extra is None else pv_vertex_extra,
                        pvVertex=pv_vertex, hVertex=record["h_vertex"], uAcc=u_acc, hAcc=h_acc,
                        S=eov.shape[1], extra=int(pv_vertex_extra is not None))
        u_adj = u_acc if rk is not None else xp.empty_like(u)
        _KERNELS.launch("sw_adj_u_sum", m.nEdges, uAcc=u_acc,
                        uExtra=u_acc if u_extra is None else u_extra, uAdj=u_adj,
                        **_rk_fields(rk, 1, u_adj, tend_u_adj), extra=int(u_extra is not None))
        h_adj = phi_adj if rk is not None else xp.empty_like(h)
        accumulate = b_adj is not None
        b_adj = xp.empty_like(h) if b_adj is None else b_adj
        _KERNELS.launch("sw_adj_h_sum", m.nCells, phiAdj=phi_adj, hAcc=h_acc, hAdj=h_adj, bAdj=b_adj,
                        **_rk_fields(rk, 0, h_adj, tend_h_adj), gravity=physics.gravity,
                        accumulate=int(accumulate))
        _add_extra(h_extra, b_extra, h_adj, b_adj, rk, tend_h_adj)
        return (None, None, b_adj) if rk is not None else (h_adj, u_adj, b_adj)


def _rk_fields(rk, which: int, unused, k_adj) -> dict:
    """The bookkeeping arguments of the u (which = 1) or h (0) pass; without `rk`, placeholders
    (`unused`, a field of the pass's location) that the kernel does not touch."""
    if rk is None:
        return dict(yAdj=unused, newAdj=unused, kAdj=unused, rk=0, bCoef=0.0, aCoef=0.0, next=0)
    return dict(yAdj=rk.y_adj[which], newAdj=rk.new_adj[which], kAdj=k_adj, **rk.arguments())


def _operator_parts(m, record, physics: Physics, pv_edge_adj, tend_h_adj, tend_u_adj, mode: str):
    """(the pv_vertex_adj, u_adj, h_adj and b_adj parts, each None if none) of the active terms the
    fused kernels do not compute (`swm.terms`: APVM, viscosity, `Physics.extra_terms`), through
    their own adjoints, each with its own base fields; as `swm.tendencies.tendencies_adj`: the
    tend_h and tend_u terms first, then the pv_edge terms on pv_edge_adj with those terms' part;
    their h_edge and pv_edge parts are carried to h and pv_vertex here."""
    tend_terms = (terms.active_terms(physics, target="tend_h", fused=False)
                  + terms.active_terms(physics, target="tend_u", fused=False))
    pv_terms = terms.active_terms(physics, target="pv_edge")
    if not tend_terms and not pv_terms:
        return None, None, None, None
    base = terms.Fields(m, u=record["u"], h=record["h"], pv_vertex=record["pv_vertex"],
                        h_vertex=record["h_vertex"], pv_edge=record["pv_edge"])
    a = dict(tend_h=tend_h_adj, tend_u=tend_u_adj, pv_edge=None, u=None, pv_vertex=None, h=None,
             b=None, h_edge=None)
    for term in tend_terms:
        term.adjoint(m, terms.base_of(term, m, base, physics), a, physics, mode)
    pv_edge_part = a["pv_edge"]
    if pv_terms:
        a["pv_edge"] = pv_edge_adj if pv_edge_part is None else pv_edge_adj + pv_edge_part
        for term in pv_terms:
            term.adjoint(m, terms.base_of(term, m, base, physics), a, physics, mode)
    if pv_edge_part is not None:            # the vertex pass reads the kernels' part alone
        part = meshops.interp_v2e_adj(m, pv_edge_part, mode=mode)
        a["pv_vertex"] = part if a["pv_vertex"] is None else a["pv_vertex"] + part
    if a["h_edge"] is not None:
        part = meshops.interp_c2e_adj(m, a["h_edge"], mode=mode)
        a["h"] = part if a["h"] is None else a["h"] + part
    return a["pv_vertex"], a["u"], a["h"], a["b"]


def _add_extra(h_extra, b_extra, h_adj, b_adj, rk, k_adj) -> None:
    """Add the h and b parts of the terms outside the kernels (`_operator_parts`) after the h pass,
    in place: b_adj += b_extra; h_adj += h_extra, or with `rk` y_adj += h_extra and, with `next`,
    the next k_adj (the tend_h_adj array) += a_coef * h_extra."""
    if b_extra is not None:
        b_adj += b_extra
    if h_extra is None:
        return
    if rk is None:
        h_adj += h_extra
        return
    y_adj = rk.y_adj[0]
    y_adj += h_extra
    if rk.update.next:
        k_adj += rk.update.a_coef * h_extra
