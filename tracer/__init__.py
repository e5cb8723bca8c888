"""A passive tracer on cells advected by a prescribed non-divergent wind on edges: the smallest
model on the framework (`framework.stepper`'s sweeps, `framework.simulation`'s loop), the worked
example of docs/adding-a-model.md. Run it as any model: `python run_model.py configs/tracer_bell.yaml`
or `meshrun.run("tracer_bell")`."""
