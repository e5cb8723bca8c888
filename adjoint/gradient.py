"""Gradients and tangents of a whole model run with respect to its initial state x_0 and its
controls c (any model of the shared stepper: shallow water x = (h, u), c = (b,); the hydrostatic
core x = (mass, theta_mass, u), c = (phi_s,)).

    J(x_0, c) = sum_k J_k(x_k),   x_{k+1} = M(x_k; c)

`run_gradient` returns J and (dJ/dx_0, dJ/dc) from the adjoint model (`framework.stepper`) through a
checkpoint schedule (`adjoint.checkpointing`); `run_tangent` propagates a perturbation (dx_0, dc)
to the final state with the tangent-linear model; `run_cost` is J alone. A model gives `state`,
`state_locations`, `control_locations` and `controls` (a tuple it can be set to). All fields are
local arrays of the run's model (owned rows first); gradients are zero on halo rows. Inner
products of controls are sums over owned rows and ranks (`swm.distribution.owned_inner`).

Each takes an optional `check(k, x_k)`, called on every state x_0 .. x_N of the (first) forward
pass in order and collectively on every rank: it raises to stop the run before any adjoint work or
output (`watchdog` makes the forward run's watchdog into one).
"""
from __future__ import annotations

import contextlib

from adjoint.checkpointing import make_schedule, reverse_sweep
from adjoint.snapshot_memory import plan, step_bytes
from framework import stop
from framework.stepper import rk4_step_adj, rk4_step_and_tl


def advance(model, state):
    """x_{k+1} = M(x_k) on new arrays (the model's step: fused kernels on CuPy)."""
    return list(model.advance(*state))


@contextlib.contextmanager
def controls(model, values):
    """model.controls = values inside the block (the controls of a run), the model's own after
    it."""
    saved = model.controls
    model.controls = tuple(values)
    try:
        yield
    finally:
        model.controls = saved


def watchdog(check_state, n_steps: int, interval: int, *, start: int = 0):
    """A `check(k, x_k)` for the functions here: `check_state(x_k, start + k)` (a model's state
    check, e.g. `swm.watchdog.StateCheck.check` of (h, u) at the run's dt: raises
    `swm.watchdog.WatchdogError` on every rank together, naming the step, field, entity and
    place) on the first state, every `interval` steps and at the last step `n_steps`, the schedule
    of the forward run's watchdog (`watchdog.interval_steps`)."""
    interval = max(int(interval), 1)

    def check(k: int, state) -> None:
        if k == n_steps or k % interval == 0:
            check_state(state, start + k)
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
    """J(*x_0, *c): `run_cost` with the controls c, as a function of the initial state's fields
    and the controls."""
    n = len(model.state_locations)

    def functional(*fields):
        with controls(model, fields[n:]):
            return run_cost(model, fields[:n], cost, n_steps, check=check)
    return functional


def run_cost(model, state0, cost, n_steps: int, *, check=None) -> float:
    """J of the run of n_steps from x_0 = state0, no adjoint; `check(k, x_k)` on every state."""
    state, total = [x.copy() for x in state0], 0.0
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
        state = [x.copy() for x in model.state]
        advance(model, [x.copy() for x in state])
        rk4_step_adj(model, *state, *(x * 0 for x in state), mode=mode)

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


def run_gradient(model, state0, cost, n_steps: int, *, schedule="none", mode=None,
                 checkpointing=None, rank: int = 0, on_step=None, check=None,
                 checkpointing_key: str = "checkpointing", planned: str | None = None):
    """(J, (*dJ/dx_0, *dJ/dc), stats) of the run of n_steps from x_0 = state0 (shallow water:
    (J, (dJ/dh0, dJ/du0, dJ/db), stats)).

    `mode`: the operators' adjoint mode (None: the meshops default, `meshops.get_adjoint_mode()`).
    `checkpointing` (a `adjoint.config.CheckpointConfig` or None) chooses the schedule, checked against
    the memory free for snapshots before any step (`adjoint.snapshot_memory.plan`: `auto` snapshots
    become as many as fit; a setting that does not fit raises framework.errors.ConfigError naming
    `checkpointing_key`); stats is the sweep's `adjoint.checkpointing.SweepStats` (its `memory`
    says what the plan chose; `planned`: that line when the caller already planned `checkpointing`
    with `adjoint.snapshot_memory.plan`); `on_step` as in `reverse_sweep`. `check(k, x_k)`,
    when given, is called on x_0, ..., x_N of the first forward pass in order (not on
    recomputed states), before J_k; what it raises ends the sweep before any adjoint step. SIGTERM
    or SIGINT stops the sweeps after a step, on every rank together (`framework.stop.Interrupted`),
    their disk snapshots removed."""
    # A signal stops every rank after the same step (not inside numba's compiling of a schedule).
    with stop.deferred():
        return _gradient(model, list(state0), cost, n_steps, schedule, mode, checkpointing, rank,
                         on_step, check, checkpointing_key, planned)


def _gradient(model, state0, cost, n_steps, schedule, mode, checkpointing, rank, on_step, check,
              checkpointing_key, planned):
    memory, slots = planned or "", None
    if checkpointing is not None:
        if planned is None:
            comm = getattr(model.distribution, "comm", None)
            checkpointing, memory = plan(checkpointing, n_steps, sum(x.nbytes for x in state0), comm,
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
    n = len(model.state_locations)
    controls_adj = [c * 0 for c in model.controls]

    def adjoint(state, lam):
        adj = rk4_step_adj(model, *state, *lam, mode=mode)
        for i, step_part in enumerate(adj[n:]):
            controls_adj[i] = controls_adj[i] + step_part
        return list(adj[:n])

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
        schedule, n_steps, state0, forward=forward_step, adjoint=adjoint_step,
        cost_value=_checked_value(cost, check), cost_gradient=cost.gradient,
        disk_directory=directory, rank=rank, disk_key=f"{checkpointing_key}.directory",
        on_step=on_step, memory_slots=slots)
    stats.memory = memory
    return cost_value, (*lam, *controls_adj), stats


def run_tangent(model, state0, dstate0, dcontrols, n_steps: int, *, check=None):
    """dx_N: the tangent-linear model of the n_steps run from x_0 = state0 applied to (dx_0 =
    dstate0, dc = dcontrols); `check(k, x_k)` on every state of the base run."""
    state, tangent = [x.copy() for x in state0], tuple(dx.copy() for dx in dstate0)
    for k in range(n_steps):
        if check is not None:
            check(k, state)
        state, tangent = rk4_step_and_tl(model, *state, *tangent, *dcontrols)
        state = list(state)
    if check is not None:
        check(n_steps, state)
    return tangent


__all__ = ["advance", "controls", "prepare", "cost_of_controls", "run_cost", "run_gradient",
           "run_tangent", "sweep_bytes", "watchdog"]
