"""The autodiff-adapter benchmark on the CPU with a tiny mesh: every pass of every configuration gets a
row (and the frameworks' floor row), adapters and peers agree with meshops before they are timed, and
a wrong adapter is reported."""
import json

import numpy as np
import pytest

from benchmarks import bench_frameworks as bench

pytest.importorskip("torch")
pytest.importorskip("jax")


def test_rows_for_every_operator_pass_and_framework(tmp_path):
    out = tmp_path / "rows.json"
    ops = ["div_e2c", "ke_e2c", "reconstruct_e2c"]
    bench.main(["--backend", "numpy", "--levels", "2", "--quick", "--reps", "2", "--ops", *ops,
                "--frameworks", "torch", "jax", "jax.buffer", "--nlev", "1", "3",
                "--cache-dir", str(tmp_path), "--json", str(out)])
    doc = json.loads(out.read_text())
    rows = doc["rows"]
    assert {(r["op"], r["nlev"], r["pass_"]) for r in rows} == {
        (op, nlev, p) for op in [bench.FLOOR, bench.CUSTOM_FLOOR, *ops] for nlev in (1, 3)
        for p in bench.PASSES}
    for r in rows:
        assert r["errors"] == {}, r
        peers = {"native torch", "native jax"} if r["op"] in ("div_e2c", "ke_e2c") else set()
        columns = ({"meshops", "torch"} if r["op"] == bench.CUSTOM_FLOOR
                   else {"meshops", "torch", "jax", "jax.buffer"} | peers)
        assert set(r["us"]) == columns
        assert all(v > 0 for v in r["us"].values())
        for fw, extra in r["overhead_us"].items():
            assert extra == pytest.approx(r["us"][fw] - r["us"]["meshops"])
    table = bench.markdown(doc)
    assert table.count("\n| div_e2c | float64 |") == 4


def test_an_adapter_that_disagrees_is_not_timed(tmp_path, monkeypatch):
    from meshops.registry import OPERATORS
    from grids.icosahedral import generate_icosahedral

    mesh = generate_icosahedral(2)
    spec = OPERATORS["grad_c2e"]
    args = bench.parse_args(["--backend", "numpy", "--quick", "--reps", "2"])
    good = bench.bench_one(spec, mesh, np.float64, 1, np, ["torch"], args, np.random.default_rng(0))
    assert good["fwd"]["errors"] == {} and "torch" in good["fwd"]["us"]

    original = bench.TorchAdapter.prepare

    def off_by_one_ulp(self, x, g):
        fwd, fwd_bwd = original(self, x, g)
        return (lambda: fwd() * (1 + 2**-52)), fwd_bwd

    monkeypatch.setattr(bench.TorchAdapter, "prepare", off_by_one_ulp)
    bad = bench.bench_one(spec, mesh, np.float64, 1, np, ["torch"], args, np.random.default_rng(0))
    assert bad["fwd"]["errors"] == {"torch": "fwd: output 0 disagrees with meshops"}
    assert "torch" not in bad["fwd"]["us"] and "native torch" in bad["fwd"]["us"]
