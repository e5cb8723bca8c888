"""The names of every file a run writes, per config key (`written_files`): the key's own file and
the files beside it that the run writes or replaces, so that the config can refuse, before any work,
an output that is another output's partial file, lock, grid file or PNG (`swm.config`).

    output.path          NAME, NAME.partial (the history while it grows), NAME.lock, the grid file
                         STEM.grid.nc (output.mesh: reference/auto), the PNGs of --plot
                         STEM.h.png, STEM.vorticity.png, STEM.h_error.png (reserved with or
                         without --plot)
    restart.path         NAME, NAME.lock

A forward run writes these; the adjoint applications' files (sensitivity.output, fourdvar.output:
`adjoint.config.GradientApplications.written_files`) are named with the helpers below. The
config's `written_files()` lists the files of its run. Temporaries of atomic writes
(`grids.atomic`) have random names; disk snapshots of checkpointing live in a fresh folder of
their own (`adjoint.checkpointing`).
"""
from __future__ import annotations

import pathlib
from dataclasses import dataclass
from typing import Optional

#: Gradient variable of each control of a sensitivity run (the names of its maps).
GRADIENT_OF = {"h": "dJdh0", "u": "dJdu0", "b": "dJdb"}


@dataclass(frozen=True)
class Written:
    """A file a run writes: the config `key` it comes from, the key's own `owner` path, its `path`
    and what it is (`what`, None for the key's own file)."""
    key: str
    owner: pathlib.Path
    path: pathlib.Path
    what: Optional[str] = None

    def describe(self) -> str:
        """"KEY = 'PATH'", or "WHAT 'PATH' of KEY = 'OWNER'"."""
        if self.what is None:
            return f"{self.key} = {str(self.path)!r}"
        return f"{self.what} {str(self.path)!r} of {self.key} = {str(self.owner)!r}"


def partial_path(path) -> pathlib.Path:
    """NAME.partial: the history while it grows."""
    path = pathlib.Path(path)
    return path.with_name(path.name + ".partial")


def lock_path(path) -> pathlib.Path:
    """NAME.lock: the lock a run holds on output file NAME (`swm.output.OutputFile`)."""
    path = pathlib.Path(path)
    return path.with_name(path.name + ".lock")


def beside_grid_path(output) -> pathlib.Path:
    """The grid file written beside `output` when no grid file of its mesh exists: STEM.grid.nc."""
    output = pathlib.Path(output)
    return output.with_name(f"{output.stem}.grid.nc")


def map_path(output, name: str, out_dir=None) -> pathlib.Path:
    """The PNG map `name` of output file `output` (`swm.plot`): STEM.NAME.png in `out_dir`
    (default: beside it)."""
    output = pathlib.Path(output)
    folder = output.parent if out_dir is None else pathlib.Path(out_dir)
    return folder / f"{output.stem}.{name}.png"


def history_maps(config) -> list[pathlib.Path]:
    """The PNGs `--plot` writes of the config's history (`swm.plot.plot_file`): h, vorticity when
    output, and the error of h for Williamson case 2."""
    names = ["h"] + (["vorticity"] if "vorticity" in config.output.variables else []) \
        + (["h_error"] if config.case.name == "williamson2" else [])
    return [map_path(config.output.path, name) for name in names]


def gradient_maps(output, controls) -> list[pathlib.Path]:
    """The PNG maps of a gradient file `output` of `controls` (`swm.plot.plot_gradients`)."""
    return [map_path(output, GRADIENT_OF[c]) for c in GRADIENT_OF if c in controls]


def observations_path(output) -> pathlib.Path:
    """The observations of a 4D-Var run: STEM.observations.nc beside its output."""
    output = pathlib.Path(output)
    return output.with_name(output.stem + ".observations.nc")


def convergence_plot(output) -> pathlib.Path:
    """The convergence plot of a 4D-Var run: STEM.png beside its output."""
    return pathlib.Path(output).with_suffix(".png")


def may_reference(config) -> bool:
    """Whether the run's output files may reference a grid file written beside them (output.mesh
    reference, or auto on a mesh above MESH_INSIDE_MAX_CELLS cells or of unknown size)."""
    from swm.config import MESH_INSIDE_MAX_CELLS

    if config.output.mesh != "auto":
        return config.output.mesh == "reference"
    generate = config.mesh.generate
    return generate is None or 10 * 4 ** generate.level + 2 > MESH_INSIDE_MAX_CELLS


def written_files(config) -> list[Written]:
    """Every file a forward run of `config` writes, per config key (the module doc lists them)."""
    out = [Written("output.path", config.output.path, config.output.path),
           Written("restart.path", config.restart.path, config.restart.path)]

    def beside(key, owner, *items):
        out.extend(Written(key, owner, path, what) for what, path in items)

    owner = config.output.path
    beside("output.path", owner, ("the partial file", partial_path(owner)),
           ("the lock file", lock_path(owner)))
    if may_reference(config):
        beside("output.path", owner, ("the grid file", beside_grid_path(owner)))
    beside("output.path", owner, *(("the --plot map", png) for png in history_maps(config)))
    beside("restart.path", config.restart.path, ("the lock file", lock_path(config.restart.path)))
    return out
