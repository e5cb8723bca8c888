"""Gradients and tangents of a whole model run with respect to its controls (h0, u0, b).

    J(h0, u0, b) = sum_k J_k(x_k),   x_{k+1} = M(x_k; b),   x = (h, u)

`run_gradient` returns J and (dJ/dh0, dJ/du0, dJ/db) from the adjoint model (`swm.stepper`)
through a checkpoint schedule (`adjoint.checkpointing`); `run_tangent` propagates a perturbation
(dh0, du0, db) to the final state with the tangent-linear model; `run_cost` is J alone. All fields
are local arrays of the run's model (owned rows first); gradients are zero on halo rows. Inner
products of controls are sums over owned rows and ranks (`swm.distribution.owned_inner`).

Each takes an optional `check(k, x_k)`, called on every state x_0 .. x_N of the (first) forward
pass in order and collectively on every rank: it raises to stop the run before any adjoint work or
output (`watchdog` makes the forward run's watchdog into one).
"""
from __future__ import annotations

import contextlib

from adjoint.checkpointing import make_schedule, reverse_sweep
from adjoint.snapshot_memory import plan, step_bytes
from swm import stop
from swm.stepper import rk4_step_adj, rk4_step_tl


def advance(model, state):
    """x_{k+1} = M(x_k) on new arrays (the model's step: fused kernels on CuPy)."""
    return list(model.advance(*state))


@contextlib.contextmanager
def topography(model, b):
    """model.b = b inside the block (b as a control of a run), the model's own b after it."""
    saved = model.b
    model.b = b
    try:
        yield
    finally:
        model.b = saved


def watchdog(state_check, dt: float, n_steps: int, interval: int, *, start: int = 0):
    """A `check(k, x_k)` for the functions here: `state_check.check(h, u, dt, start + k)` (a
    `swm.watchdog.StateCheck`: raises `swm.watchdog.WatchdogError` on every rank together,
    naming the step, field, entity and place) on the first state, every `interval` steps and at
    the last step `n_steps`, the schedule of the forward run's watchdog
    (`watchdog.interval_steps`)."""
    interval = max(int(interval), 1)

    def check(k: int, state) -> None:
        if k == n_steps or k % interval == 0:
            state_check.check(state[0], state[1], dt, start + k)
    return check


def _checked_value(cost, check):
    """cost.value with check(k, x_k) before it (cost.value sees every x_k of the first pass)."""
    if check is None:
        return cost.value

    def value(k, state):
        check(k, state)
        return cost.value(k, state)
    return value


def cost_of_controls(model, cost, n_steps: int, *, check=None):
    """J(h0, u0, b): `run_cost` with topography b, as a function of all three controls."""
    def functional(h0, u0, b):
        with topography(model, b):
            return run_cost(model, h0, u0, cost, n_steps, check=check)
    return functional


def run_cost(model, h0, u0, cost, n_steps: int, *, check=None) -> float:
    """J of the run of n_steps from (h0, u0), no adjoint; `check(k, x_k)` on every state."""
    state, total = [h0.copy(), u0.copy()], 0.0
    value = _checked_value(cost, check)
    for k in range(n_steps + 1):
        total += value(k, state)
        if k < n_steps:
            state = advance(model, state)
    return total


def prepare(model, *, mode=None) -> int:
    """Build the device tables and compile the kernels that a gradient of `model` uses: one
    forward and one adjoint step on copies of its state, discarded (collective on ranks), so that
    a timed sweep counts steps only. Returns the bytes those two steps allocate at most beyond
    what was live before them (`adjoint.snapshot_memory.step_bytes`), measured on a second pair
    once the first has built everything; kept as `model.sweep_bytes[mode]`."""
    def steps():
        h, u = model.h.copy(), model.u.copy()
        advance(model, [h.copy(), u.copy()])
        rk4_step_adj(model, h, u, h * 0, u * 0, mode=mode)

    steps()
    with step_bytes(model.device_mesh.xp) as measured:
        steps()
    if not hasattr(model, "sweep_bytes"):
        model.sweep_bytes = {}
    model.sweep_bytes[mode] = measured["peak"]
    return measured["peak"]


def sweep_bytes(model, mode=None) -> int:
    """What a sweep's step allocates beyond its states (`prepare`'s measure; measured now if
    `prepare` has not run for `mode`)."""
    known = getattr(model, "sweep_bytes", {})
    return known[mode] if mode in known else prepare(model, mode=mode)


def run_gradient(model, h0, u0, cost, n_steps: int, *, schedule="none", mode=None,
                 checkpointing=None, rank: int = 0, on_step=None, check=None,
                 checkpointing_key: str = "checkpointing", planned: str | None = None):
    """(J, (dJ/dh0, dJ/du0, dJ/db), stats) of the run of n_steps from (h0, u0).

    `mode`: the operators' adjoint mode (None: the meshops default, `meshops.get_adjoint_mode()`).
    `checkpointing` (a `adjoint.config.CheckpointConfig` or None) chooses the schedule, checked against
    the memory free for snapshots before any step (`adjoint.snapshot_memory.plan`: `auto` snapshots
    become as many as fit; a setting that does not fit raises swm.config.ConfigError naming
    `checkpointing_key`); stats is the sweep's `adjoint.checkpointing.SweepStats` (its `memory`
    says what the plan chose; `planned`: that line when the caller already planned `checkpointing`
    with `adjoint.snapshot_memory.plan`); `on_step` as in `reverse_sweep`. `check(k, x_k)`,
    when given, is called on x_0, ..., x_N of the first forward pass in order (not on
    recomputed states), before J_k; what it raises ends the sweep before any adjoint step. SIGTERM
    or SIGINT stops the sweeps after a step, on every rank together (`swm.stop.Interrupted`),
    their disk snapshots removed."""
    # A signal stops every rank after the same step (not inside numba's compiling of a schedule).
    with stop.deferred():
        return _gradient(model, h0, u0, cost, n_steps, schedule, mode, checkpointing, rank,
                         on_step, check, checkpointing_key, planned)


def _gradient(model, h0, u0, cost, n_steps, schedule, mode, checkpointing, rank, on_step, check,
              checkpointing_key, planned):
    memory, slots = planned or "", None
    if checkpointing is not None:
        if planned is None:
            comm = getattr(model.distribution, "comm", None)
            checkpointing, memory = plan(checkpointing, n_steps, h0.nbytes + u0.nbytes, comm,
                                         model.device_mesh.xp, checkpointing_key,
                                         sweep_bytes(model, mode))
        if checkpointing.schedule in ("revolve", "multistage", "two_level"):
            slots = checkpointing.snapshots_in_ram
        schedule = make_schedule(checkpointing.schedule, n_steps,
                                 snapshots_in_ram=checkpointing.snapshots_in_ram,
                                 snapshots_on_disk=checkpointing.snapshots_on_disk,
                                 period=checkpointing.period)
        directory = checkpointing.directory
    else:
        schedule = make_schedule(schedule, n_steps) if isinstance(schedule, str) else schedule
        directory = None
    b_adj = model.b * 0

    def adjoint(state, lam):
        nonlocal b_adj
        h_adj, u_adj, b_step = rk4_step_adj(model, state[0], state[1], lam[0], lam[1], mode=mode)
        b_adj = b_adj + b_step
        return [h_adj, u_adj]

    comm = getattr(model.distribution, "comm", None)
    sweep = ["forward"]                 # "adjoint" from the first adjoint step (recomputing too)

    def forward_step(state):
        state = advance(model, state)
        stop.check(comm, f" in the {sweep[0]} sweep of the gradient")
        return state

    def adjoint_step(state, lam):
        sweep[0] = "adjoint"
        lam = adjoint(state, lam)
        stop.check(comm, " in the adjoint sweep of the gradient")
        return lam

    cost_value, lam, stats = reverse_sweep(
        schedule, n_steps, [h0, u0], forward=forward_step, adjoint=adjoint_step,
        cost_value=_checked_value(cost, check), cost_gradient=cost.gradient,
        disk_directory=directory, rank=rank, on_step=on_step, memory_slots=slots)
    stats.memory = memory
    return cost_value, (lam[0], lam[1], b_adj), stats


def run_tangent(model, h0, u0, dh0, du0, db, n_steps: int, *, check=None):
    """(dh_N, du_N): the tangent-linear model of the n_steps run from (h0, u0) applied to
    (dh0, du0, db); `check(k, x_k)` on every state of the base run."""
    state, tangent = [h0.copy(), u0.copy()], (dh0.copy(), du0.copy())
    for k in range(n_steps):
        if check is not None:
            check(k, state)
        tangent = rk4_step_tl(model, state[0], state[1], tangent[0], tangent[1], db)
        state = advance(model, state)
    if check is not None:
        check(n_steps, state)
    return tangent


__all__ = ["advance", "prepare", "cost_of_controls", "run_cost", "run_gradient", "run_tangent", "sweep_bytes",
           "topography", "watchdog"]
