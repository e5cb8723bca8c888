"""The files a shallow-water run writes, per config key (`written_files`): the key's own file and
the files beside it that the run writes or replaces (`framework.files` names them).

    output.path          NAME, NAME.partial (the history while it grows), NAME.lock, the grid file
                         STEM.grid.nc (output.mesh: reference/auto), the PNGs of --plot
                         STEM.h.png, STEM.vorticity.png, STEM.h_error.png (reserved with or
                         without --plot)
    restart.path         NAME, NAME.lock

A forward run writes these; the adjoint applications' files (sensitivity.output, fourdvar.output:
`swm.applications.ShallowWaterApplications.written_files`) are named with `framework.files` and
`gradient_maps`.
"""
from __future__ import annotations

import pathlib

from framework.files import Written, beside_grid_path, lock_path, map_path, may_reference, partial_path

#: Gradient variable of each control of a sensitivity run (the names of its maps).
GRADIENT_OF = {"h": "dJdh0", "u": "dJdu0", "b": "dJdb"}


def history_maps(config) -> list[pathlib.Path]:
    """The PNGs `--plot` writes of the config's history (`swm.plot.plot_file`): h, vorticity when
    output, and the error of h for Williamson case 2."""
    names = ["h"] + (["vorticity"] if "vorticity" in config.output.variables else []) \
        + (["h_error"] if config.case.name == "williamson2" else [])
    return [map_path(config.output.path, name) for name in names]


def gradient_maps(output, controls) -> list[pathlib.Path]:
    """The PNG maps of a gradient file `output` of `controls` (`swm.plot.plot_gradients`)."""
    return [map_path(output, GRADIENT_OF[c]) for c in GRADIENT_OF if c in controls]


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
