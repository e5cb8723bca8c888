// Curl edge -> vertex (curl_e2v, circulation_e2v) and adjoints. Formulas: meshops/operators/curl.py.
// coef[v,i] = edgeSignOnVertex[v,i] * dcEdge[e_i] (/ areaTriangle[v] for the curl), precomputed;
// every kernel is a generic one of stencil.cuh: the forward and the gather adjoint (over the
// transposed table) stencil_gather_rows, the scatter adjoint stencil_scatter_atomic.
#include "stencil.cuh"
