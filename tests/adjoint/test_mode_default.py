"""One adjoint-mode default everywhere: the meshops setting (`meshops.adjoint_mode`,
`set_adjoint_mode`) reaches whole-run gradients (`run_gradient`, and so 4D-Var), the PyTorch/JAX
model functions and the operators; the config's choices are meshops's mode names."""
import numpy as np
import pytest
import yaml

import swm.model
import meshops
from adjoint.differentiable import _Core
from adjoint.gradient import run_gradient
from adjoint.sensitivity import cost_context
from swm.costs import RegionCost
from meshops.modes import ADJOINT_MODES, DEFAULT_ADJOINT_MODE, resolve_mode
from meshrun.config import ConfigError, load_config
from swm.driver import setup


@pytest.fixture(scope="module")
def run_setup(tmp_path_factory):
    path = tmp_path_factory.mktemp("modes") / "w5.yaml"
    path.write_text(yaml.safe_dump({"mesh": {"generate": {"level": 2, "lloyd": 0}},
                                    "case": {"name": "williamson5"},
                                    "time": {"days": 2 * 1800 / 86400, "dt": 1800},
                                    "output": {"interval_hours": 1}}))
    return setup(load_config(path))


@pytest.mark.parametrize("mode", ADJOINT_MODES)
def test_the_meshops_setting_reaches_run_gradient(run_setup, monkeypatch, mode):
    s = run_setup
    seen = []
    original = swm.model.tendencies_adj

    def spy(*args, mode=None, **kwargs):
        seen.append(resolve_mode(mode))
        return original(*args, mode=mode, **kwargs)

    monkeypatch.setattr(swm.model, "tendencies_adj", spy)   # the operator path's adjoint stages
    cost = RegionCost(cost_context(s), "h", "mean", ((0.0, 60.0), (230.0, 330.0)))
    rng = np.random.default_rng()
    h0 = s.model.h + rng.standard_normal(s.model.h.shape)
    with meshops.adjoint_mode(mode):
        _, gradients, _ = run_gradient(s.model, (h0, s.model.u.copy()), cost, 2)
    assert seen and set(seen) == {mode}
    assert np.abs(gradients[0]).max() > 0
    assert meshops.get_adjoint_mode() == DEFAULT_ADJOINT_MODE


def test_the_meshops_setting_reaches_the_framework_functions(run_setup):
    with meshops.adjoint_mode("atomic"):
        assert _Core(run_setup.model, 1, None, None, 0).mode == "atomic"
    assert _Core(run_setup.model, 1, None, None, 0).mode == DEFAULT_ADJOINT_MODE
    assert _Core(run_setup.model, 1, "atomic", None, 0).mode == "atomic"
    with pytest.raises(ValueError, match=r"adjoint mode: expected one of \('atomic', 'deterministic'\), got 'fast'"):
        _Core(run_setup.model, 1, "fast", None, 0)


def test_the_config_offers_meshops_s_modes(tmp_path):
    path = tmp_path / "sens.yaml"
    tree = {"mesh": {"generate": {"level": 2}}, "case": {"name": "williamson5"}, "time": {"days": 1, "dt": 1800},
            "output": {"path": str(tmp_path / "w5.nc")},
            "sensitivity": {"cost": {"kind": "mean", "field": "h", "box": {"lat": [0, 60], "lon": [230, 330]}},
                            "output": str(tmp_path / "gradients.nc")}}
    path.write_text(yaml.safe_dump(tree))
    assert load_config(path).sensitivity.adjoint_mode == DEFAULT_ADJOINT_MODE
    assert load_config(path, ["sensitivity.adjoint_mode=atomic"]).sensitivity.adjoint_mode == "atomic"
    with pytest.raises(ConfigError, match="sensitivity.adjoint_mode") as err:
        load_config(path, ["sensitivity.adjoint_mode=fast"])
    assert all(m in str(err.value) for m in ADJOINT_MODES)
