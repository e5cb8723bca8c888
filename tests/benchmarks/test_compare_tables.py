import json

import numpy as np

from benchmarks import compare_tables


def _table(rng, ops):
    return {"rows": [{"op": op, "dtype": "float64", "nlev": 32, "pass": "fwd", "ms": float(ms)}
                     for op, ms in zip(ops, rng.uniform(0.1, 2.0, len(ops)))]}


def test_ratios_and_rows_beyond_tolerance(tmp_path, rng, capsys):
    ops = ["div_e2c", "grad_c2e", "curl_e2v"]
    before = _table(rng, ops)
    after = json.loads(json.dumps(before))
    factor = rng.uniform(1.05, 1.5)
    after["rows"][1]["ms"] *= factor
    after["rows"].append({"op": "ke_e2c", "dtype": "float64", "nlev": 32, "pass": "fwd", "ms": 1.0})
    rows = compare_tables.compare(before, after)
    assert [key[0] for key, *_ in rows] == sorted(ops)          # rows of both tables only
    ratios = {key[0]: r for key, _, _, r in rows}
    np.testing.assert_allclose(ratios["grad_c2e"], factor, rtol=1e-12)
    assert ratios["div_e2c"] == ratios["curl_e2v"] == 1.0
    paths = []
    for name, doc in (("b.json", before), ("a.json", after)):
        paths.append(tmp_path / name)
        paths[-1].write_text(json.dumps(doc))
    compare_tables.main([str(p) for p in paths])
    out = capsys.readouterr().out
    assert "1 of 3 rows differ by more than 3%" in out and "grad_c2e float64 nlev 32 fwd" in out
