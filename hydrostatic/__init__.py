"""Hydrostatic primitive-equation core on the TRiSK mesh of `swm` (DYNAMICO-like: Dubos et al.
2015, GMD 8, 3131): layer mass, mass-weighted potential temperature and normal velocity in a
mass-based hybrid coordinate, run by `run_model.py` from a config with `model: hydrostatic`.

    python run_model.py configs/jw06_baroclinic_l5.yaml
    python -m hydrostatic.plot jw06_baroclinic_l5.nc --day 9
"""
