"""The checkpointing's memory plan (adjoint.snapshot_memory): `snapshots_in_ram: auto` becomes the
snapshots that fit, at most one per step, with the stored-trajectory gradient bitwise; settings
whose states cannot fit are refused before any step, naming the key, the value and the room."""
from types import SimpleNamespace

import numpy as np
import pytest
import yaml

from swm.costs import RegionCost
from adjoint.gradient import run_gradient
from adjoint.sensitivity import cost_context
from adjoint.gradient import prepare
from adjoint.snapshot_memory import HEADROOM, WORK_STATES, capacity, plan, step_bytes
from adjoint.config import CheckpointConfig
from meshrun.config import ConfigError, load_config
from swm.driver import setup

STEPS = 12


@pytest.fixture(scope="module")
def run_setup(tmp_path_factory):
    path = tmp_path_factory.mktemp("memory") / "w5.yaml"
    path.write_text(yaml.safe_dump({"mesh": {"generate": {"level": 3, "lloyd": 10}},
                                    "case": {"name": "williamson5"},
                                    "time": {"days": STEPS * 1800 / 86400, "dt": 1800}}))
    s = setup(load_config(path))
    cost = RegionCost(cost_context(s), "h", "mean", ((20.0, 50.0), (300.0, 340.0)))
    rng = np.random.default_rng()
    h0 = s.model.h * (1 + 1e-3 * rng.standard_normal(s.model.h.shape))
    return s, cost, h0


def test_auto_snapshots_fit_and_give_the_stored_trajectory_gradient(run_setup):
    s, cost, h0 = run_setup
    value, grads, _ = run_gradient(s.model, (h0, s.model.u), cost, STEPS, schedule="none")
    auto = CheckpointConfig(schedule="revolve", snapshots_in_ram="auto")
    got_value, got, stats = run_gradient(s.model, (h0, s.model.u), cost, STEPS, checkpointing=auto)
    assert got_value == value and all(np.array_equal(a, b) for a, b in zip(got, grads))
    assert stats.memory.startswith("checkpointing.snapshots_in_ram = auto: every state (schedule "
                                   "none) (room for ")
    assert stats.recomputed == 0
    state = h0.nbytes + s.model.u.nbytes
    resolved, _ = plan(auto, STEPS, state, None, np)
    assert resolved.schedule == "none" and auto.snapshots_in_ram == "auto"


def test_auto_snapshots_are_the_room_when_not_every_state_fits(run_setup):
    s, cost, h0 = run_setup
    state = h0.nbytes + s.model.u.nbytes
    room, _ = capacity(None, np, state)
    auto = CheckpointConfig(schedule="multistage", snapshots_in_ram="auto")
    resolved, line = plan(auto, 10 * room, state, None, np, "sensitivity.checkpointing")
    assert resolved.schedule == "multistage" and 0.9 * room <= resolved.snapshots_in_ram <= 1.1 * room
    assert line.startswith(f"sensitivity.checkpointing.snapshots_in_ram = auto: "
                           f"{resolved.snapshots_in_ram} (room for ")


def test_capacity_counts_a_state_against_free_memory():
    state = 40 * 2 ** 20
    work = 3 * state + 12345
    room, basis = capacity(None, np, state, work)
    assert basis["sharers"] == 1 and basis["free"] > 0 and basis["sweep_bytes"] == work
    assert abs(room - (int((HEADROOM * basis["free"] - work) // state) - WORK_STATES)) <= 1
    tiny, _ = capacity(None, np, 2 ** 62)
    assert tiny == 0


def test_step_bytes_is_the_high_water_mark_of_the_block():
    rng = np.random.default_rng()
    n = int(rng.integers(200_000, 400_000))
    with step_bytes(np) as measured:
        a = np.ones(n)                   # n doubles live ...
        b = np.ones(2 * n)               # ... then 3n at once: the peak
        del a, b
        c = np.ones(n)
    assert 3 * 8 * n <= measured["peak"] <= 3 * 8 * n + 2 ** 16
    del c


def test_prepare_measures_a_step_pair_beyond_the_model(run_setup):
    s, _, _ = run_setup
    state = s.model.h.nbytes + s.model.u.nbytes
    work = prepare(s.model)
    assert s.model.sweep_bytes[None] == work
    # a forward and an adjoint RK4 step: several states of stage fields, but not hundreds
    assert 2 * state <= work <= 200 * state, (work, state)


def test_snapshots_in_memory_sit_in_slots_reserved_before_the_first_step(run_setup):
    from adjoint.checkpointing import _MemoryStore

    s, _, _ = run_setup
    rng = np.random.default_rng()
    state = [rng.standard_normal(s.model.h.shape), rng.standard_normal(s.model.u.shape)]
    store = _MemoryStore(2)
    store.reserve(state)
    assert len(store.free) == 2
    store.put(5, state)
    store.put(7, [2 * a for a in state])
    store.put(9, [3 * a for a in state])             # past the slots: a copy of its own
    assert store.in_slot == {5, 7} and not store.free
    assert all(np.array_equal(a, 2 * b) for a, b in zip(store.get(7), state))
    store.delete(5)
    store.delete(9)
    assert len(store.free) == 1 and len(store) == 1
    store.put(11, state)                              # the freed slot is reused
    assert store.in_slot == {7, 11} and all(np.array_equal(a, b) for a, b in zip(store.get(11), state))


def test_a_checkpointed_gradient_in_reserved_slots_is_the_stored_one(run_setup):
    s, cost, h0 = run_setup
    value, grads, _ = run_gradient(s.model, (h0, s.model.u), cost, STEPS, schedule="none")
    for schedule in ("revolve", "multistage"):
        config = CheckpointConfig(schedule=schedule, snapshots_in_ram=3)
        got_value, got, stats = run_gradient(s.model, (h0, s.model.u), cost, STEPS,
                                             checkpointing=config)
        assert stats.recomputed > 0
        assert got_value == value and all(np.array_equal(a, b) for a, b in zip(got, grads))


def test_snapshots_that_cannot_fit_are_refused_with_the_room(run_setup):
    s, cost, h0 = run_setup
    n = 10 ** 12
    config = CheckpointConfig(schedule="multistage", snapshots_in_ram=n)
    with pytest.raises(ConfigError, match=rf"sensitivity.checkpointing.snapshots_in_ram = {n} "
                                          r"\(.* GiB\) in memory, but the host has room for \d+ "
                                          r"beside the run \(.* a state, .* free on the host, a "
                                          r"step.s work .*\); "
                                          r"expected at most \d+ snapshots"):
        run_gradient(s.model, (h0, s.model.u), cost, STEPS, checkpointing=config,
                     checkpointing_key="sensitivity.checkpointing")


def test_a_run_too_long_to_keep_every_state_is_refused_before_any_step(run_setup):
    s, cost, h0 = run_setup
    steps = []
    config = SimpleNamespace(schedule="none", snapshots_in_ram=0, snapshots_on_disk=0, period=1,
                             directory=None)
    with pytest.raises(ConfigError, match=r"checkpointing.schedule = 'none' keeps all \d+ states "
                                          r".* expected schedule multistage with "
                                          r"snapshots_in_ram: auto"):
        run_gradient(s.model, (h0, s.model.u), cost, 10 ** 12, checkpointing=config,
                     on_step=steps.append)
    assert steps == []


def test_auto_is_refused_for_the_schedule_that_keeps_every_state():
    with pytest.raises(ValueError, match="snapshots_in_ram = 'auto': schedule 'none' keeps every "
                                         "state; expected schedule revolve, multistage or "
                                         "two_level with auto"):
        CheckpointConfig(schedule="none", snapshots_in_ram="auto")


@pytest.mark.parametrize("value", [-3, "lots", 2.5, True])
def test_a_snapshot_count_that_is_neither_a_count_nor_auto_is_named(value):
    with pytest.raises(ValueError, match=r"snapshots_in_ram\n.*expected a number of states \(an "
                                         r"integer >= 0\) or auto, got "):
        CheckpointConfig(schedule="multistage", snapshots_in_ram=value)
