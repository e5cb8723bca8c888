"""The model-agnostic framework between the operators (`meshops`) and the models (`swm`,
`hydrostatic`): the stepper and time schemes, the Simulation loop with its stop conditions and
schedules, the collective helpers, where fields live (`distribution`), errors and physical
constants. It imports no model."""
