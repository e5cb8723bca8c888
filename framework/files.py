"""The names of the files a run writes beside its outputs, shared by every model: each file with
the config key it comes from (`Written`), so that the config can refuse, before any work, an
output that is another output's partial file, lock, grid file or PNG (`framework.config`).

    NAME                 an output (history, restart, gradient file, ...)
    NAME.partial         the history while it grows (`partial_path`)
    NAME.lock            the lock a run holds on NAME (`lock_path`)
    STEM.grid.nc         the grid file written beside NAME (`beside_grid_path`; output.mesh:
                         reference/auto, `may_reference`)
    STEM.MAP.png         a PNG map of NAME (`map_path`)
    STEM.observations.nc, STEM.png   a 4D-Var run's observations and convergence plot

A model's config lists the files of its run (`written_files()`: the shallow-water model's in
`swm.files`). Temporaries of atomic writes (`grids.atomic`) have random names; disk snapshots of
checkpointing live in a fresh folder of their own (`adjoint.checkpointing`).
"""
from __future__ import annotations

import pathlib
from dataclasses import dataclass
from typing import Optional

from framework.config import MESH_INSIDE_MAX_CELLS

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
    """NAME.lock: the lock a run holds on output file NAME (`framework.output.OutputFile`)."""
    path = pathlib.Path(path)
    return path.with_name(path.name + ".lock")


def beside_grid_path(output) -> pathlib.Path:
    """The grid file written beside `output` when no grid file of its mesh exists: STEM.grid.nc."""
    output = pathlib.Path(output)
    return output.with_name(f"{output.stem}.grid.nc")


def map_path(output, name: str, out_dir=None) -> pathlib.Path:
    """The PNG map `name` of output file `output` (`framework.plot`): STEM.NAME.png in `out_dir`
    (default: beside it)."""
    output = pathlib.Path(output)
    folder = output.parent if out_dir is None else pathlib.Path(out_dir)
    return folder / f"{output.stem}.{name}.png"


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
    if config.output.mesh != "auto":
        return config.output.mesh == "reference"
    generate = config.mesh.generate
    return generate is None or 10 * 4 ** generate.level + 2 > MESH_INSIDE_MAX_CELLS
