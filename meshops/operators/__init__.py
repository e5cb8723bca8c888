"""The operator families: each module holds a family's NumPy forward, tangent and adjoint, and the
dispatch to its CUDA kernels (`meshops/cuda/<family>.cu`)."""
