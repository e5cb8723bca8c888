// TRiSK tangential velocity edge -> edge and adjoints. Formulas: meshops/operators/tangential.py.
// edgesOnEdge / weightsOnEdge are masked beyond nEdgesOnEdge (-1, 0) when prepared; every kernel is
// a generic one of stencil.cuh: the forward and the gather adjoint stencil_gather_rows on them and
// on the transposed tables, row- or slot-major (slotStride), the scatter adjoint
// stencil_scatter_atomic.
#include "stencil.cuh"
