"""The one stepper: the RK stage loop of every sweep (the forward step, the stage records its
tangent-linear and adjoint read, the tangent-linear step and the adjoint step) and every state
exchange, for any model and either path. A path is a stage implementation (`Stages`): the
operators (`TendencyStages`, from a model's tendencies) or fused kernels (`swm.fused_stages.FusedStages`);
a model chooses one once (`Model.stages`) and the loops here never ask which.

Forward step from the state tuple y (for the shallow-water model (h, u)), with E the state
exchange (identity on one process), T the tendencies and the scheme's coefficients a_j, b_j
(`framework.timestepping`):

    p_1 = E(y);  k_j = T(p_j);  p_{j+1} = E(y + a_j dt k_j)  (j = 1, 2, 3);
    y_next = y + dt sum_j b_j k_j           (a = 1/2, 1/2, 1;  b = 1/6, 1/3, 1/3, 1/6)

Tangent-linear about y, with the perturbation dc of the controls c (the fixed fields with an
adjoint: the shallow-water topography b), exchanged with the first stage, on the stage records
(the p_j, and what a fused path keeps of them):

    dp_1 = E(dy);  dk_j = T'(p_j, c)(dp_j, dc);  dp_{j+1} = E(dy + a_j dt dk_j);
    dy_next = dy + dt sum_j b_j dk_j

Adjoint: on the stage records, for j = 4, 3, 2, 1,

    k_j_adj  = E(b_j dt y_next_adj + a_j dt p_{j+1}_adj)         (no second term for j = 4)
    (p_j_adj, c_j_adj) = T'(p_j, c)^T k_j_adj;   y_adj += p_j_adj   (y_adj starts at y_next_adj)

and c_adj = sum_j c_j_adj. On ranks the adjoint tendencies k_j_adj are exchanged forward, as the
tangent-linear's perturbations are, so that every rank holds its owned rows' inputs out to the
forward's halo depth (the adjoint's dependencies of an owned row are the transpose of the
forward's, so the same depth suffices); each owned row of the outputs is then a gather over the
transposed stencils in the whole mesh's order (`meshops.device.connectivity.transpose` with global
ids), so a deterministic gradient on ranks is bitwise one process's. Adjoint inputs are read on
owned rows, outputs have zero halo rows. The inner product of the adjoint is the Euclidean sum over
owned rows of every rank (`swm.distribution.owned_inner`).

`model` gives `stages` (its `Stages`), `state_locations` and `control_locations` (of its state and
control fields, in order), `dt`, `mesh` (the owned counts nCellsSolve, nEdgesSolve,
nVerticesSolve) and its `distribution` (`swm.distribution.Serial` / `Distributed`: `exchange`,
`exchange_tl`, each of a tuple of fields in place); a model without one runs on one process.
"""
from __future__ import annotations

from typing import Callable, Protocol, Sequence

from meshops.device.backend import array_module
from meshops.modes import resolve_mode
from framework.distribution import Serial
from framework.timestepping import RK4_B, AdjointUpdate, Update, adjoint_updates, updates

#: The owned count of each location on a rank's mesh (owned rows come first).
OWNED = {"cell": "nCellsSolve", "edge": "nEdgesSolve", "vertex": "nVerticesSolve"}


class Stages(Protocol):
    """A path's stages: one stage of each sweep of `framework.stepper`, which owns the loops, the
    coefficients and the exchanges. `j` is the stage's index; `old` the sweep's start (state,
    tangent), `new` its end state's buffers (`outputs`), written as `update` says; each returns
    the next provisional fields (None after the last stage)."""

    def outputs(self, fields: Sequence) -> list:
        """The buffers a sweep accumulates into: copies of `fields` where the stages always add,
        uninitialised where the first stage writes them (`Update.accumulate` False)."""

    def stage(self, j: int, provisional, update: Update, old, new):
        """Forward stage: k = T(provisional) applied by `update` (new, next provisional)."""

    def record(self, j: int, provisional, update: Update, old) -> tuple:
        """(record, next provisional): the stage as `stage` computes it (bitwise), without the
        end state; the record is what `stage_tl` and `stage_adj` read of the forward."""

    def stage_tl(self, j: int, record, dprovisional, dcontrols: tuple, update: Update, old, new):
        """Tangent-linear stage: dk = T'(record)(dprovisional, dcontrols) applied by `update`."""

    # Optional, on paths whose tangent-linear stages read nothing of the forward but the
    # provisional state: tangent_record(j, provisional) -> the record `stage_tl` reads of stage j.
    # With it `rk4_step_and_tl` runs each stage's forward and tangent-linear in one sweep: through
    # stage_and_tl(j, provisional, dprovisional, dcontrols, update, old, new, dold, dnew) ->
    # (next, dnext), where the path has it (both in the same passes; `rk4_step_tl` then takes
    # that sweep too), else `stage` then `stage_tl`.

    def stage_adj(self, j: int, record, k_adj: list, update: AdjointUpdate, y_adj: list,
                  new_adj: tuple, controls_adj, mode: str) -> tuple:
        """Adjoint stage: (p_adj, c_adj) = T'(record)^T k_adj, y_adj updated in place as `update`
        says; returns (k_adj of stage j - 1, controls_adj + c_adj) (`controls_adj` None at the
        first call)."""


def uninitialised_outputs(fields: Sequence) -> list:
    """`Stages.outputs` of paths whose first stage of every sweep writes every row of them."""
    xp = array_module(*fields)
    return [xp.empty_like(y) for y in fields]


class TendencyStages:
    """The operator path's stages from a model's tendencies of a state tuple:
    `tendency(fields) -> k`, `tendency_tl(fields, dfields, dcontrols) -> dk` (`dcontrols` empty:
    no control perturbation) and `tendency_adj(fields, k_adj, mode) -> (*fields_adj,
    *controls_adj)` (the last two needed by the tangent-linear and adjoint sweeps alone). The
    records are the provisional states. Every update is an elementwise expression per field."""

    def __init__(self, tendency: Callable, tendency_tl: Callable | None = None,
                 tendency_adj: Callable | None = None):
        self.tendency, self.tendency_tl, self.tendency_adj = tendency, tendency_tl, tendency_adj

    def outputs(self, fields):
        return [y.copy() for y in fields]

    @staticmethod
    def _apply(k, update: Update, old, new):
        for y_new, k_j in zip(new, k):
            y_new += update.new_coef * k_j
        return [y + update.next_coef * k_j for y, k_j in zip(old, k)] if update.provisional else None

    def stage(self, j, provisional, update, old, new):
        return self._apply(self.tendency(provisional), update, old, new)

    def record(self, j, provisional, update, old):
        if not update.provisional:
            return provisional, None
        k = self.tendency(provisional)
        return provisional, [y + update.next_coef * k_j for y, k_j in zip(old, k)]

    @staticmethod
    def tangent_record(j, provisional):
        return provisional

    def stage_tl(self, j, record, dprovisional, dcontrols, update, old, new):
        return self._apply(self.tendency_tl(record, dprovisional, dcontrols), update, old, new)

    def stage_adj(self, j, record, k_adj, update, y_adj, new_adj, controls_adj, mode):
        adjoint = self.tendency_adj(record, k_adj, mode)
        p_adj, c_adj = adjoint[:len(k_adj)], adjoint[len(k_adj):]
        controls_adj = c_adj if controls_adj is None else [c + p for c, p in zip(controls_adj, c_adj)]
        for y_a, p_a in zip(y_adj, p_adj):
            y_a += p_a
        if update.next:
            k_adj = [update.b_coef * a for a in new_adj]
            for k_a, p_a in zip(k_adj, p_adj):
                k_a += update.a_coef * p_a
        return k_adj, controls_adj


# -- the sweeps -------------------------------------------------------------------------------------

def step(stages: Stages, state: Sequence, dt: float, exchange=None) -> tuple:
    """The state one step of `dt` later, as new fields; `exchange(*fields)`, when given, updates
    the halo rows of each stage's provisional state in place first (stage 1's is `state`)."""
    new = stages.outputs(state)
    provisional = state
    for j, update in enumerate(updates(dt)):
        if exchange is not None:
            exchange(*provisional)
        provisional = stages.stage(j, provisional, update, state, new)
    return tuple(new)


def records(stages: Stages, state: Sequence, dt: float, exchange=None) -> list:
    """The stage records of the step from `state` (each stage's provisional state, halo rows
    exchanged in place, stage 1's being `state` itself), computed as `step` computes them."""
    out, provisional = [], state
    for j, update in enumerate(updates(dt)):
        if exchange is not None:
            exchange(*provisional)
        record, provisional = stages.record(j, provisional, update, state)
        out.append(record)
    return out


def step_tl(stages: Stages, recorded: list, dstate: Sequence, dcontrols: Sequence, dt: float,
            exchange_tl=None) -> tuple:
    """The tangent-linear step on the stage records `recorded` (`records`): (dstate, dcontrols)
    -> dstate one step later, as new fields; inputs are not modified. `exchange_tl(*fields)`,
    when given, updates the halo rows of each stage's perturbation (and of the controls' with the
    first)."""
    dstate = [d.copy() for d in dstate]
    dcontrols = tuple(c.copy() for c in dcontrols)
    new = stages.outputs(dstate)
    dprovisional = dstate
    for j, update in enumerate(updates(dt)):
        if exchange_tl is not None:
            exchange_tl(*dprovisional, *(() if j else dcontrols))
        dprovisional = stages.stage_tl(j, recorded[j], dprovisional, dcontrols, update, dstate, new)
    return tuple(new)


def step_adj(stages: Stages, recorded: list, state_adj: Sequence, dt: float, mode: str,
             exchange_tl=None) -> tuple:
    """The adjoint step on the stage records `recorded`: the adjoint of the end state -> (the
    state's adjoint at the start, the controls' adjoint of this step), the stages in reverse
    (module doc); `exchange_tl(*fields)`, when given, updates the halo rows of each stage's
    adjoint tendencies before the stage reads them."""
    state_adj = tuple(state_adj)
    y_adj = stages.outputs(state_adj)
    k_adj = [(RK4_B[-1] * dt) * a for a in state_adj]
    controls_adj = None
    for j, update in reversed(list(enumerate(adjoint_updates(dt)))):
        if exchange_tl is not None:
            exchange_tl(*k_adj)
        k_adj, controls_adj = stages.stage_adj(j, recorded[j], k_adj, update, y_adj, state_adj,
                                               controls_adj, mode)
    return y_adj, list(controls_adj)


# -- a model's sweeps -------------------------------------------------------------------------------

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


def _split(model, args, groups: int, name: str) -> list:
    """`args` as `groups` tuples of the model's state fields, then the rest (controls)."""
    n = len(model.state_locations)
    if not groups * n <= len(args) <= groups * n + len(model.control_locations):
        raise TypeError(f"{name}: expected {groups} x {n} state fields "
                        f"{model.state_locations} then at most {len(model.control_locations)} "
                        f"controls {model.control_locations}, got {len(args)} arrays")
    return [tuple(args[i * n:(i + 1) * n]) for i in range(groups)] + [tuple(args[groups * n:])]


def rk4_step(model, *state) -> tuple:
    """The model's state one RK4 step later, as new arrays (the halo rows of `state` are exchanged
    in place), through the model's stages (`Model.stages`: fused kernels or operators)."""
    return step(model.stages, state, model.dt, _exchanges(model)[0])


def stage_records(model, *state) -> list:
    """The stage records of the model's RK4 step from `state` (`records`; the operator path's are
    the provisional states p_1..p_4, halo rows exchanged), computed as `rk4_step` computes them
    (bitwise the forward's); `state` is not modified."""
    exchange = _exchanges(model)[0]
    if exchange is not None:
        state = [y.copy() for y in state]
    return records(model.stages, state, model.dt, exchange)


def rk4_step_tl(model, *args) -> tuple:
    """Tangent-linear of one RK4 step about the state at its start: `rk4_step_tl(model, *state,
    *dstate, *dcontrols)` (shallow water: h, u, dh, du, db) -> dstate one step later; dcontrols
    None or left out: no control perturbation. Inputs are not modified; on ranks their owned rows
    are read (halo rows come from the exchange) and the halo rows of the outputs are not valid.
    The model's stages run it on the stage records of its forward (`stage_records`), or with the
    forward in the same passes where they can (`Stages.stage_and_tl`: `rk4_step_and_tl`)."""
    exchange, exchange_tl = _exchanges(model, "exchange_tl")
    state, dstate, dcontrols = _split(model, args, 2, "rk4_step_tl")
    if hasattr(model.stages, "stage_and_tl"):       # the forward in the tangent-linear passes
        if exchange is not None:
            state = [y.copy() for y in state]
        return rk4_step_and_tl(model, *state, *args[len(state):])[1]
    if all(c is None for c in dcontrols):
        dcontrols = ()
    return step_tl(model.stages, stage_records(model, *state), dstate, dcontrols, model.dt,
                   exchange_tl)


def rk4_step_and_tl(model, *args) -> tuple:
    """(the state one step later, dstate one step later): `rk4_step` and `rk4_step_tl` of the
    same arguments (bitwise both; the halo rows of the state exchanged in place, as `rk4_step`
    does), in one sweep, each stage's forward and then its tangent-linear on the same provisional
    state, where the path can (`Stages.stage_and_tl`, or `Stages.tangent_record`: no records, no
    forward sweep apart); else the two steps."""
    exchange, exchange_tl = _exchanges(model, "exchange_tl")
    state, dstate, dcontrols = _split(model, args, 2, "rk4_step_and_tl")
    stages = model.stages
    if not (hasattr(stages, "stage_and_tl") or hasattr(stages, "tangent_record")):
        dstate_next = rk4_step_tl(model, *args)
        return rk4_step(model, *state), dstate_next
    if all(c is None for c in dcontrols):
        dcontrols = ()
    dstate = [d.copy() for d in dstate]
    dcontrols = tuple(c.copy() for c in dcontrols)
    new, dnew = stages.outputs(state), stages.outputs(dstate)
    provisional, dprovisional = state, dstate
    for j, update in enumerate(updates(model.dt)):
        if exchange is not None:
            exchange(*provisional)
        if exchange_tl is not None:
            exchange_tl(*dprovisional, *(() if j else dcontrols))
        if hasattr(stages, "stage_and_tl"):
            provisional, dprovisional = stages.stage_and_tl(j, provisional, dprovisional, dcontrols,
                                                            update, state, new, dstate, dnew)
            continue
        record = stages.tangent_record(j, provisional)
        next_provisional = stages.stage(j, provisional, update, state, new)
        dprovisional = stages.stage_tl(j, record, dprovisional, dcontrols, update, dstate, dnew)
        provisional = next_provisional
    return tuple(new), tuple(dnew)


def rk4_step_adj(model, *args, mode=None) -> tuple:
    """Adjoint of one RK4 step about the state at its start: `rk4_step_adj(model, *state,
    *state_adj)` (shallow water: h, u, h_adj, u_adj), the adjoint of the step's end state ->
    (*state_adj_prev, *controls_adj_step), the controls' part this step's (a run sums them over
    its steps). Inputs are not modified; on ranks their owned rows are read and the outputs' halo
    rows are zero. `mode`: the operators' adjoint mode (None: the global default); the fused
    kernels run it as gathers, or atomic scatters in atomic mode."""
    exchange_tl = _exchanges(model, "exchange_tl")[1]
    state, state_adj, rest = _split(model, args, 2, "rk4_step_adj")
    if rest:
        raise TypeError(f"rk4_step_adj: expected the state and its adjoint "
                        f"({2 * len(model.state_locations)} arrays), got {len(args)} arrays")
    y_adj, controls_adj = step_adj(model.stages, stage_records(model, *state), state_adj, model.dt,
                                   resolve_mode(mode), exchange_tl)
    if exchange_tl is not None:
        for field, location in zip((*y_adj, *controls_adj),
                                   (*model.state_locations, *model.control_locations)):
            field[getattr(model.mesh, OWNED[location]):] = 0
    return (*y_adj, *controls_adj)
