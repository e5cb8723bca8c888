#!/usr/bin/env python3
"""Run a model from a YAML config, on one process or under mpiexec (the config's `model:`, default
shallow_water: the TRiSK shallow-water model).

    python run_model.py configs/williamson5.yaml
    mpiexec -n 4 python run_model.py configs/williamson2.yaml --set time.days=2
    python run_model.py configs/galewsky.yaml --print-config
    python run_model.py configs/sensitivity_williamson5.yaml              (gradients of a cost)
    python run_model.py configs/sensitivity_williamson5.yaml --check-adjoint
    mpiexec -n 2 python run_model.py configs/fourdvar_twin.yaml            (a 4D-Var twin experiment)

The command line lives in `meshrun.cli` (installed as the console scripts `meshrun` and `swm-run`).
"""
import sys

from meshrun.cli import main

if __name__ == "__main__":
    sys.exit(main())
