"""The command line above the models and the adjoint applications: `run_model.py` and the console
scripts `meshrun` and `swm-run` (`meshrun.cli`), the registry of models (`meshrun.models`) and the
full config schema of each (`meshrun.config`: a model's own sections, composed with the
applications' sections: `swm.applications`, `hydrostatic.applications`). Nothing below imports it.

    python run_model.py configs/williamson5.yaml          (the config's `model:` picks the model)
    meshrun.run("configs/jw06_steady_l5.yaml", "time.days=1")     (the same from Python: `api.run`)
"""
from meshrun.api import run

__all__ = ["run"]
