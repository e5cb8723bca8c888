"""The checkpointing's memory plan (adjoint.snapshot_memory): `snapshots_in_ram: auto` becomes the
snapshots that fit, at most one per step, with the stored-trajectory gradient bitwise; settings
whose states cannot fit are refused before any step, naming the key, the value and the room."""
from types import SimpleNamespace

import numpy as np
import pytest
import yaml

from adjoint.costs import RegionCost
from adjoint.gradient import run_gradient
from adjoint.sensitivity import cost_context
from adjoint.snapshot_memory import WORK_STATES, capacity, plan
from swm.config import CheckpointConfig, ConfigError, load_config
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
    value, grads, _ = run_gradient(s.model, h0, s.model.u, cost, STEPS, schedule="none")
    auto = CheckpointConfig(schedule="revolve", snapshots_in_ram="auto")
    got_value, got, stats = run_gradient(s.model, h0, s.model.u, cost, STEPS, checkpointing=auto)
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
    room, basis = capacity(None, np, state)
    assert basis["sharers"] == 1 and basis["free"] > 0
    assert room == max(int(0.9 * basis["free"] // state) - WORK_STATES, 0)
    tiny, _ = capacity(None, np, 2 ** 62)
    assert tiny == 0


def test_snapshots_that_cannot_fit_are_refused_with_the_room(run_setup):
    s, cost, h0 = run_setup
    n = 10 ** 12
    config = CheckpointConfig(schedule="multistage", snapshots_in_ram=n)
    with pytest.raises(ConfigError, match=rf"sensitivity.checkpointing.snapshots_in_ram = {n} "
                                          r"\(.* GiB\) in memory, but the host has room for \d+ "
                                          r"beside the run \(.* a state, .* free on the host\); "
                                          r"expected at most \d+ snapshots"):
        run_gradient(s.model, h0, s.model.u, cost, STEPS, checkpointing=config,
                     checkpointing_key="sensitivity.checkpointing")


def test_a_run_too_long_to_keep_every_state_is_refused_before_any_step(run_setup):
    s, cost, h0 = run_setup
    steps = []
    config = SimpleNamespace(schedule="none", snapshots_in_ram=0, snapshots_on_disk=0, period=1,
                             directory=None)
    with pytest.raises(ConfigError, match=r"checkpointing.schedule = 'none' keeps all \d+ states "
                                          r".* expected schedule multistage with "
                                          r"snapshots_in_ram: auto"):
        run_gradient(s.model, h0, s.model.u, cost, 10 ** 12, checkpointing=config,
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
