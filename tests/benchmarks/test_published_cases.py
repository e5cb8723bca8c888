"""benchmarks/published_cases.py on short model runs (swm.driver.run, as run_model.py): every analysis reads a history file,
prints its table and writes its map; bad input names the problem."""
import pytest
import yaml

from benchmarks import published_cases
from meshrun.config import load_config
from swm.driver import run


@pytest.fixture(scope="module")
def history(tmp_path_factory):
    """History files of half-day runs (records at 0 and 12 h) on 642 / 2562 cells, by (case, level)."""
    tmp = tmp_path_factory.mktemp("published")
    files = {}
    for case, level, dt, extra in (("williamson5", 3, 1800, {}), ("williamson6", 3, 1800, {}),
                                   ("williamson6", 4, 900, {}), ("galewsky", 4, 900, {"perturbed": True})):
        path = tmp / f"{case}_{level}.nc"
        tree = {"mesh": {"generate": {"level": level, "lloyd": 20}}, "case": {"name": case, **extra},
                "time": {"days": 0.5, "dt": dt}, "output": {"path": str(path), "interval_hours": 12}}
        config = tmp / f"{case}_{level}.yaml"
        config.write_text(yaml.safe_dump(tree))
        run(load_config(config, []), progress=False)
        files[case, level] = path
    return files


def test_every_analysis_prints_its_table_and_writes_its_map(history, tmp_path, capsys):
    images = tmp_path / "images"
    for case, key in (("case5", ("williamson5", 3)), ("case6", ("williamson6", 4)),
                      ("steady-jet", ("galewsky", 4)), ("jet", ("galewsky", 4))):
        assert published_cases.main([case, str(history[key]), "--images", str(images), "--name", case]) == 0
        out = capsys.readouterr().out
        assert out.startswith("| day |") and "| 0.5 |" in out, out
        assert (images / f"{case}.png").stat().st_size > 10000
    published_cases.main(["case6", str(history["williamson6", 4]), "--images", str(images)])
    day0 = capsys.readouterr().out.splitlines()[2].split("|")
    # the sampled initial wave holds no wavenumber outside the multiples of 4, and has not moved
    assert float(day0[6]) == 0.0 and float(day0[8]) == 0.0, day0


def test_difference_of_two_resolutions(history, capsys):
    assert published_cases.main(["difference", str(history["williamson6", 3]), str(history["williamson6", 4]),
                                 "--day", "0.5"]) == 0
    out = capsys.readouterr().out
    l2 = float(out.split("l2 ")[1].split(",")[0])
    assert out.startswith("day 0.5: 642 vs 2562 cells") and 0.0 < l2 < 0.05, out


def test_bad_input_is_named(history, capsys):
    assert published_cases.main(["case5", str(history["williamson5", 3]), "--day", "0.25"]) == 2
    assert "--day 0.25: no record at that day" in capsys.readouterr().err
    assert published_cases.main(["case6", "no_such_file.nc"]) == 2
    assert "no_such_file.nc: no such file" in capsys.readouterr().err
