"""benchmarks/bench_driver.py on the CPU at level 2, shallow-water and hydrostatic: run_model.py's
rate from its own log, the bare step's rate of the same model, and their ratio."""
import json
import sys

from tests.swm.test_driver import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))


def test_bench_driver_reports_the_run_and_the_step(tmp_path, monkeypatch):
    import bench_driver

    monkeypatch.setenv("MESHOPS_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("MESHOPS_NO_MPI", "1")
    out = tmp_path / "rows.json"
    assert bench_driver.main([str(ROOT / "configs" / "williamson5.yaml"), "--set", "time.days=1",
                              "--set", "mesh.generate.lloyd=0", "--levels", "2", "--cold",
                              "--out-dir", str(tmp_path), "--json", str(out)]) == 0
    (row,) = json.loads(out.read_text())["rows"]
    assert row["level"] == 2 and row["cells"] == 162 and row["cached"]["steps"] == 72
    assert row["cold"]["startup_s"] > 0 and row["cached"]["driver_steps_per_s"] > 0
    assert row["ratio"] == row["cached"]["driver_steps_per_s"] / row["step_steps_per_s"]
    assert (tmp_path / "history.nc").stat().st_size == row["history_bytes"] > 0


def test_bench_driver_reports_a_hydrostatic_run(tmp_path, monkeypatch):
    import bench_driver

    monkeypatch.setenv("MESHOPS_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("MESHOPS_NO_MPI", "1")
    out = tmp_path / "rows.json"
    assert bench_driver.main([str(ROOT / "configs" / "jw06_baroclinic_l5.yaml"), "--set",
                              "time.days=0.25", "--set", "output.interval_hours=3", "--set",
                              "mesh.generate.lloyd=0", "--levels", "2", "--repeat", "1",
                              "--out-dir", str(tmp_path), "--json", str(out)]) == 0
    (row,) = json.loads(out.read_text())["rows"]
    assert row["level"] == 2 and row["cells"] == 162 and row["dt"] == 720.0
    assert row["cached"]["steps"] == 30 and row["cached"]["device_gib"] is None
    assert row["ratio"] == row["cached"]["driver_steps_per_s"] / row["step_steps_per_s"] > 0
