"""The model's RK4 step, its tangent-linear and its adjoint, with the state exchange of each stage:
the one place that steps the model and places its exchanges, on the operator path and through the
fused kernels (`swm.fused`, `swm.fused_tangent`, `swm.fused_adjoint`).

Forward step from y = (h, u), with E the state exchange (identity on one process) and T the
tendencies with topography b (swm.tendencies):

    p_1 = E(y);  k_j = T(p_j, b);  p_{j+1} = E(y + a_j dt k_j)  (j = 1, 2, 3);
    y_next = y + dt sum_j b_j k_j           (a = 1/2, 1/2, 1;  b = 1/6, 1/3, 1/3, 1/6)

Tangent-linear about y (the stage states p_j are recomputed alongside):

    dp_1 = E(dy);  dk_j = T'(p_j, b)(dp_j, db);  dp_{j+1} = E(dy + a_j dt dk_j);
    dy_next = dy + dt sum_j b_j dk_j

Adjoint: the stage states p_j are recomputed from y, then, for j = 4, 3, 2, 1,

    k_j_adj  = E(b_j dt y_next_adj + a_j dt p_{j+1}_adj)         (no second term for j = 4)
    (p_j_adj, b_j_adj) = T'(p_j, b)^T k_j_adj;   y_adj += p_j_adj   (y_adj starts at y_next_adj)

and b_adj = sum_j b_j_adj. On ranks the adjoint tendencies k_j_adj are exchanged forward, as the
tangent-linear's perturbations are, so that every rank holds its owned rows' inputs out to the
forward's halo depth (the adjoint's dependencies of an owned row are the transpose of the
forward's, so the same depth suffices); each owned row of the outputs is then a gather over the
transposed stencils in the whole mesh's order (`meshops.device.connectivity.transpose` with global
ids), so a deterministic gradient on ranks is bitwise one process's. Adjoint inputs are read on
owned rows, outputs have zero halo rows. The inner product of the adjoint is the Euclidean sum over
owned rows of every rank (`swm.distribution.owned_inner`).

`model` gives the mesh (`model.device_mesh` for the operators, `model.mesh` for the owned
counts nCellsSolve, nEdgesSolve), b, f_vertex, dt, physics, whether it is fused, and its
`distribution` (`swm.distribution.Serial` / `Distributed`: `exchange`, `exchange_tl`); a model
without one runs on one process.
"""
from __future__ import annotations

from meshops.modes import resolve_mode
from swm.distribution import Serial
from swm.tendencies import tendencies, tendencies_adj, tendencies_tl
from swm import timestepping
from swm.timestepping import RK4_A, RK4_B


def _exchanges(model, *needed):
    """(exchange, exchange_tl) of the model's distribution: Nones without one and on one process
    (`swm.distribution.Serial`: nothing to exchange, so the steps take the paths without copies);
    an error naming the method when one of `needed` is missing."""
    d = model.distribution
    if d is None or isinstance(d, Serial):
        return None, None
    missing = [name for name in needed if getattr(d, name, None) is None]
    if missing:
        raise ValueError(f"Model.distribution ({type(d).__name__}) has no {missing[0]}: the model's "
                         "tangent-linear and adjoint steps on ranks need it "
                         "(swm.distribution.Distributed has it)")
    return tuple(getattr(d, name, None) for name in ("exchange", "exchange_tl"))


def rk4_step(model, h, u):
    """(h, u) one RK4 step later, as new arrays (the halo rows of (h, u) are exchanged in place):
    the fused kernels on a fused model, else the operator path (`swm.timestepping.rk4_step`)."""
    exchange = _exchanges(model)[0]
    if model.fused:
        return model._fused.step(h, u, model.b, model.f_vertex, model.dt, model.physics, exchange)

    def tendency(fields):
        if exchange is not None:
            exchange(*fields)
        return tendencies(model.device_mesh, *fields, model.b, model.f_vertex, model.physics)
    return tuple(timestepping.rk4_step(tendency, (h, u), model.dt))


def _zero_halo(model, h, u) -> None:
    """Zero the halo rows (beyond nCellsSolve, nEdgesSolve) of (h, u) in place."""
    h[model.mesh.nCellsSolve:] = 0
    u[model.mesh.nEdgesSolve:] = 0


def stage_states(model, h, u) -> list:
    """The provisional states p_1..p_4 of the RK4 step from (h, u), halo rows exchanged, computed
    as `rk4_step` computes them (bitwise the forward's); (h, u) are not modified."""
    exchange = _exchanges(model)[0]
    state = [h.copy(), u.copy()]
    provisional, stages = state, []
    for stage in range(4):
        if exchange is not None:
            exchange(*provisional)
        stages.append(provisional)
        if stage < 3:
            k = tendencies(model.device_mesh, *provisional, model.b, model.f_vertex, model.physics)
            provisional = [y + (RK4_A[stage] * model.dt) * k_j for y, k_j in zip(state, k)]
    return stages


def rk4_step_tl(model, h, u, dh, du, db):
    """Tangent-linear of one RK4 step about the state (h, u) at its start: (dh, du, db) ->
    (dh_next, du_next). `db` None: no topography perturbation. Inputs are not modified; on ranks
    their owned rows are read (halo rows come from the exchange) and the halo rows of the outputs
    are not valid. A fused model (`Model.fused`, CuPy) runs it in the fused kernels of
    `swm.fused_tangent` on the stage records of its fused forward."""
    exchange, exchange_tl = _exchanges(model, "exchange_tl")
    m, dt = model.device_mesh, model.dt
    if model.fused:
        records = _stage_records(model, h, u, exchange)
        return tuple(_fused_tangent(model).step(records, model.physics, dt, dh, du, db, exchange_tl))
    state, dstate = [h.copy(), u.copy()], [dh.copy(), du.copy()]
    db = None if db is None else db.copy()
    new = [d.copy() for d in dstate]
    provisional, dprovisional = state, dstate
    for stage in range(4):
        if exchange is not None:
            exchange(*provisional)
            exchange_tl(*dprovisional, *(() if stage or db is None else (db,)))
        k = (tendencies(m, *provisional, model.b, model.f_vertex, model.physics)
             if stage < 3 else None)
        dk = tendencies_tl(m, *provisional, model.b, model.f_vertex, model.physics, *dprovisional, db)
        for d_new, dk_j in zip(new, dk):
            d_new += (RK4_B[stage] * dt) * dk_j
        if stage < 3:
            provisional = [y + (RK4_A[stage] * dt) * k_j for y, k_j in zip(state, k)]
            dprovisional = [d + (RK4_A[stage] * dt) * dk_j for d, dk_j in zip(dstate, dk)]
    return new[0], new[1]


def rk4_step_adj(model, h, u, h_adj, u_adj, *, mode=None):
    """Adjoint of one RK4 step about the state (h, u) at its start: the adjoint (h_adj, u_adj) of
    the step's end state -> (h_adj_prev, u_adj_prev, b_adj_step), b_adj_step this step's part of
    the topography's adjoint (a run sums them over its steps). Recomputes the stage states from
    (h, u), then runs the stages in reverse (module doc). Inputs are not modified; on ranks their
    owned rows are read and the outputs' halo rows are zero. `mode`: the operators' adjoint mode
    (None: the global default). A fused model (`Model.fused`, CuPy) runs each stage's adjoint in
    the fused kernels of `swm.fused_adjoint` (gathers, or atomic scatters in atomic mode), on the
    stage records of its fused forward; otherwise the operators run it
    (`swm.tendencies.tendencies_adj`)."""
    exchange, exchange_tl = _exchanges(model, "exchange_tl")
    mode = resolve_mode(mode)
    dt = model.dt
    if model.fused:
        records = _stage_records(model, h, u, exchange)
        from swm.fused_adjoint import step_adjoint

        y_adj = step_adjoint(_fused_stage_adjoint(model), records, model.physics, dt, h_adj, u_adj,
                             mode, exchange=exchange_tl)
    else:
        y_adj = _step_adjoint(model, stage_states(model, h, u), (h_adj, u_adj), mode, exchange_tl)
    if exchange is not None:
        _zero_halo(model, *y_adj[:2])
        y_adj[2][model.mesh.nCellsSolve:] = 0
    return tuple(y_adj)


def _stage_records(model, h, u, exchange) -> list:
    """The fused forward's stage records of the step from (h, u) (`swm.fused.FusedRK4.stage_records`);
    on ranks from copies, whose halo rows the exchange overwrites."""
    if exchange is not None:
        h, u = h.copy(), u.copy()
    return model._fused.stage_records(h, u, model.b, model.f_vertex, model.dt, model.physics, exchange)


def _step_adjoint(model, stages, new_adj, mode, exchange_tl) -> list:
    """[h_adj, u_adj, b_adj] of the step's start through the operators' adjoints (module doc), each
    stage's adjoint tendency brought up to date on halo rows by `exchange_tl` (None: one
    process)."""
    dt = model.dt
    y_adj = [a.copy() for a in new_adj]
    b_adj, p_adj = None, None
    for stage in (3, 2, 1, 0):
        k_adj = [(RK4_B[stage] * dt) * a for a in new_adj]
        if p_adj is not None:
            for k_a, p_a in zip(k_adj, p_adj):
                k_a += (RK4_A[stage] * dt) * p_a
        if exchange_tl is not None:
            exchange_tl(*k_adj)
        *p_adj, pb_adj = tendencies_adj(model.device_mesh, *stages[stage], model.b, model.f_vertex,
                                        model.physics, *k_adj, mode=mode)
        b_adj = pb_adj if b_adj is None else b_adj + pb_adj
        for y_a, p_a in zip(y_adj, p_adj):
            y_a += p_a
    return [*y_adj, b_adj]


def _fused_stage_adjoint(model):
    """The model's `swm.fused_adjoint.FusedStageAdjoint` (made once, its scratch fields kept)."""
    from swm.fused_adjoint import FusedStageAdjoint

    stage_adjoint = getattr(model, "_fused_adjoint", None)
    if stage_adjoint is None:
        stage_adjoint = model._fused_adjoint = FusedStageAdjoint(model.device_mesh)
    return stage_adjoint


def _fused_tangent(model):
    """The model's `swm.fused_tangent.FusedTangent` (made once, its scratch fields kept)."""
    from swm.fused_tangent import FusedTangent

    tangent = getattr(model, "_fused_tangent", None)
    if tangent is None:
        tangent = model._fused_tangent = FusedTangent(model.device_mesh)
    return tangent
