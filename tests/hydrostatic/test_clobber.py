"""output.clobber (MPAS's clobber_mode) for real through run_model.py: what a run does with a
history or restart file already at its path.

- never_modify (the default): a second run on the same paths is one line naming the file, the key
  and the choices, every file left byte for byte (the history, its partial file, the restart);
- overwrite: the second run's history replaces the first's once complete;
- append: a new run (day 0) is refused with the same care; a resumed run continues the history,
  the first run's records kept bitwise;
- the shallow-water model shares the check (`framework.history.check_clobber`);
- a sensitivity or 4D-Var config lists as its files only what the run writes (no history, no
  restart), and the shipped configs name no history or restart file their runs never write."""
import pathlib

import netCDF4
import numpy as np
import pytest
import yaml

from tests.hydrostatic.test_run import config, history
from tests.swm.test_faults import (ROOT, assert_same, make_config, ok, refused, run_model,
                                   snapshot)


def _visc4() -> float:
    return float(np.random.default_rng().uniform(0.5e17, 2.0e17))


def _files(tmp_path, name):
    return [tmp_path / f"{name}{suffix}" for suffix in (".nc", ".nc.partial", ".restart.nc")]


@pytest.mark.parametrize("there", ["history", "partial", "restart"])
def test_never_modify_refuses_a_file_there_and_leaves_it(tmp_path, there):
    """The default: a finished run's history (or a stopped run's partial file, or a restart file
    alone) makes a second run stop in one line naming the key, the file and the choices."""
    path = config(tmp_path, "again", diffusion={"visc4": _visc4()},
                  restart={"interval_hours": 1.5})
    ok(run_model(path))
    history_file, partial, restart = _files(tmp_path, "again")
    if there == "partial":
        history_file.rename(partial)
    elif there == "restart":
        history_file.unlink()
    before = snapshot(*_files(tmp_path, "again"))
    key, file = {"history": ("output.path", history_file), "partial": ("output.path", partial),
                 "restart": ("restart.path", restart)}[there]
    line = refused(run_model(path), 2, f"{key} = ", str(file), "output.clobber = never_modify",
                   "overwrite", "restart.resume: true",
                   "one of never_modify, overwrite, append")
    assert "Traceback" not in line
    assert snapshot(*_files(tmp_path, "again")) == before
    assert not (tmp_path / "again.nc.lock").exists()


def test_overwrite_replaces_the_history_once_the_new_one_is_complete(tmp_path):
    first, second = _visc4(), _visc4()
    path = config(tmp_path, "over", diffusion={"visc4": first})
    ok(run_model(path))
    old = history(tmp_path / "over.nc")
    ok(run_model(path, "--set", f"diffusion.visc4={second!r}", "--set", "output.clobber=overwrite"))
    new = history(tmp_path / "over.nc")
    assert not np.array_equal(old["theta"], new["theta"])          # the second run's states
    with netCDF4.Dataset(tmp_path / "over.nc") as ds:
        assert yaml.safe_load(ds.config)["diffusion"]["visc4"] == second
        assert len(ds["Time"]) == 3
    fresh = config(tmp_path, "fresh", diffusion={"visc4": second})
    ok(run_model(fresh))
    assert_same(history(tmp_path / "fresh.nc"), new)
    assert not (tmp_path / "over.nc.partial").exists()


def test_append_continues_a_resumed_history_and_refuses_a_new_run(tmp_path):
    """append: a new run from day 0 is refused (it would change the records there); a resumed run
    adds its records after the first run's, which are kept bitwise."""
    visc4 = _visc4()
    path = config(tmp_path, "app", diffusion={"visc4": visc4}, restart={"interval_hours": 1.5})
    ok(run_model(path))
    first = history(tmp_path / "app.nc")
    before = snapshot(*_files(tmp_path, "app"))
    refused(run_model(path, "--set", "output.clobber=append"), 2, "output.path = ",
            str(tmp_path / "app.nc"), "output.clobber = append", "starts at day 0",
            "restart.resume: true")
    assert snapshot(*_files(tmp_path, "app")) == before
    ok(run_model(path, "--set", "output.clobber=append", "--set", "restart.resume=true",
                 "--set", "time.days=0.25"))
    extended = history(tmp_path / "app.nc")
    assert_same(first, extended, records=3)
    with netCDF4.Dataset(tmp_path / "app.nc") as ds:
        np.testing.assert_allclose(ds["Time"][:] * 24, [0, 1.5, 3, 4.5, 6])
        assert np.isfinite(ds["theta"][:]).all()


def test_shallow_water_shares_never_modify(tmp_path):
    path = make_config(tmp_path, "sw", time={"days": 1})
    ok(run_model(path))
    before = snapshot(tmp_path / "sw.nc")
    refused(run_model(path), 2, "output.path = ", str(tmp_path / "sw.nc"),
            "output.clobber = never_modify")
    assert snapshot(tmp_path / "sw.nc") == before
    ok(run_model(path, "--set", "output.clobber=overwrite"))


# -- configs name only the files their runs write ---------------------------------------------------

APPLICATIONS = ("sensitivity", "fourdvar")


@pytest.mark.parametrize("name", sorted(p.stem for p in (ROOT / "configs").glob("*.yaml")))
def test_shipped_configs_name_no_file_their_runs_never_write(name, monkeypatch, tmp_path):
    from meshrun.config import load_config

    monkeypatch.chdir(tmp_path)
    tree = yaml.safe_load((ROOT / "configs" / f"{name}.yaml").read_text())
    loaded = load_config(ROOT / "configs" / f"{name}.yaml")
    written = {f.key for f in loaded.written_files()}
    application = next((a for a in APPLICATIONS if a in tree), None)
    if application is None:
        restart = {"restart.path"} if "restart" in type(loaded).model_fields else set()
        assert {"output.path"} | restart <= written
        return
    assert written == {f"{application}.output"}
    assert "path" not in (tree.get("output") or {}), name
    assert "path" not in (tree.get("restart") or {}), name


@pytest.mark.parametrize("model", ["shallow_water", "hydrostatic"])
def test_an_application_run_lists_no_history_or_restart(tmp_path, model):
    from meshrun.config import validate_tree

    if model == "hydrostatic":
        tree = yaml.safe_load(config(tmp_path, "app").read_text())
        tree["sensitivity"] = {"cost": {"kind": "surface_pressure"},
                               "output": str(tmp_path / "grad.nc")}
    else:
        tree = yaml.safe_load(make_config(tmp_path, "app").read_text())
        tree["sensitivity"] = {"cost": {"kind": "mean"}, "output": str(tmp_path / "grad.nc")}
    files = validate_tree(tree, source="app.yaml").written_files()
    assert {f.key for f in files} == {"sensitivity.output"}
    assert pathlib.Path(tree["output"]["path"]) not in {f.path for f in files}
