"""The model-agnostic framework between the operators (`meshops`) and the models (`swm`,
`hydrostatic`): the stepper and time schemes, the Simulation loop with its stop conditions and
schedules, the collective helpers, where fields live (`distribution`), errors, dates and physical
constants; and what every model's run shares: the config's loading and common sections
(`config`), the files a run writes (`files`, `output`), the shared callbacks (`callbacks`), the
steps of a run (`driver`) and the maps' drawing (`plot`). It imports no model."""
