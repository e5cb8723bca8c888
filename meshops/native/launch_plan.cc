// Runs a launch plan (meshops/device/plans.py): the output clears and kernel launches of one
// operator map, recorded once, replayed on a stream with the call's buffers, without Python.
//
// meshops_run_plan is the C entry (PyTorch calls it through ctypes); with MESHOPS_XLA_FFI defined,
// MeshopsRunPlan is the same as a typed XLA FFI handler (JAX's custom call on CUDA), its buffers
// the call's operands then results. The CUDA driver is opened at run time (no link to it).
//
// Plan (int64): MAGIC, token, device, n_buffers, then per buffer (bytes, alignment), then n_ops,
// then the ops:
//   CLEAR  buffer bytes                        zero `bytes` bytes of a buffer
//   LAUNCH function grid block n_params, then per parameter (tag, value, offset):
//          INT32 value | RAW64 value | FLOAT32 bits | BUFFER index byte-offset
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <dlfcn.h>
#include <vector>

namespace {

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct CUfunc_st* CUfunction;
typedef struct CUstream_st* CUstream;
typedef struct CUctx_st* CUcontext;

constexpr int64_t MAGIC = 0x6d6573686f707331;   // "meshops1"
enum Op : int64_t { CLEAR = 1, LAUNCH = 2 };
enum Tag : int64_t { INT32 = 0, RAW64 = 1, FLOAT32 = 2, BUFFER = 3 };
enum Status : int { OK = 0, BAD_PLAN = 1, MISALIGNED = 2, CUDA_FAILED = 3 };
constexpr CUresult CUDA_ERROR_INVALID_CONTEXT = 201;

struct Driver {
  CUresult (*launch)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                     CUstream, void**, void**) = nullptr;
  CUresult (*memset)(CUdeviceptr, unsigned char, size_t, CUstream) = nullptr;
  CUresult (*device)(CUdevice*) = nullptr;
  CUresult (*retain)(CUcontext*, CUdevice) = nullptr;
  CUresult (*set_current)(CUcontext) = nullptr;
  CUresult (*release)(CUdevice) = nullptr;
  CUresult (*error)(CUresult, const char**) = nullptr;
};

const Driver* driver() {
  static const Driver* loaded = []() -> const Driver* {
    void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) return nullptr;
    static Driver d;
    d.launch = reinterpret_cast<decltype(d.launch)>(dlsym(lib, "cuLaunchKernel"));
    d.memset = reinterpret_cast<decltype(d.memset)>(dlsym(lib, "cuMemsetD8Async"));
    d.device = reinterpret_cast<decltype(d.device)>(dlsym(lib, "cuCtxGetDevice"));
    d.retain = reinterpret_cast<decltype(d.retain)>(dlsym(lib, "cuDevicePrimaryCtxRetain"));
    d.set_current = reinterpret_cast<decltype(d.set_current)>(dlsym(lib, "cuCtxSetCurrent"));
    d.release = reinterpret_cast<decltype(d.release)>(dlsym(lib, "cuDevicePrimaryCtxRelease_v2"));
    d.error = reinterpret_cast<decltype(d.error)>(dlsym(lib, "cuGetErrorString"));
    return d.launch && d.memset && d.device && d.retain && d.set_current && d.release && d.error ? &d
                                                                                         : nullptr;
  }();
  return loaded;
}

int64_t process_token = 0;

int fail(int status, char* message, int64_t size, const char* format, long long a = 0, long long b = 0,
         long long c = 0) {
  if (message && size > 0) std::snprintf(message, static_cast<size_t>(size), format, a, b, c);
  return status;
}

int cuda_failed(const Driver* d, CUresult rc, const char* what, char* message, int64_t size) {
  const char* text = nullptr;
  d->error(rc, &text);
  if (message && size > 0)
    std::snprintf(message, static_cast<size_t>(size), "%s failed: CUDA error %d (%s)", what, rc,
                  text ? text : "unknown");
  return CUDA_FAILED;
}

}  // namespace

extern "C" {

// The token every plan of this process carries (a plan from another process is refused).
void meshops_set_token(int64_t token) { process_token = token; }

// Runs `plan` (n int64) on `stream` with `buffers` (their sizes in bytes); 0, or a Status with a
// message. Nothing is launched unless the whole plan checks.
int meshops_run_plan(const int64_t* plan, int64_t n, void* const* buffers, const int64_t* sizes,
                     int64_t n_buffers, void* stream, char* message, int64_t message_size) {
  if (n < 5 || plan[0] != MAGIC)
    return fail(BAD_PLAN, message, message_size, "not a meshops launch plan (%lld words)", n);
  if (plan[1] != process_token)
    return fail(BAD_PLAN, message, message_size,
                "launch plan of another process (token %lld, this process %lld)", plan[1], process_token);
  if (plan[3] != n_buffers)
    return fail(BAD_PLAN, message, message_size, "launch plan for %lld buffers, called with %lld",
                plan[3], n_buffers);
  int64_t at = 4;
  if (n < at + 2 * n_buffers + 1) return fail(BAD_PLAN, message, message_size, "truncated launch plan");
  for (int64_t b = 0; b < n_buffers; ++b, at += 2) {
    if (sizes[b] < plan[at])
      return fail(BAD_PLAN, message, message_size, "buffer %lld holds %lld bytes, the plan needs %lld", b,
                  sizes[b], plan[at]);
    if (reinterpret_cast<uintptr_t>(buffers[b]) % static_cast<uintptr_t>(plan[at + 1]))
      return fail(MISALIGNED, message, message_size, "buffer %lld is not aligned to %lld bytes", b,
                  plan[at + 1]);
  }
  const Driver* d = driver();
  if (!d) return fail(CUDA_FAILED, message, message_size, "the CUDA driver (libcuda.so.1) is not available");
  CUdevice device = -1;
  CUresult rc = d->device(&device);
  if (rc == CUDA_ERROR_INVALID_CONTEXT) {
    // No context is current on this thread (another library popped its own, leaving none): the
    // plan's kernels live in its device's primary context, which the CUDA runtime holds; make it
    // current, as the runtime would on its next call here. The one reference taken is kept.
    CUcontext primary = nullptr;
    rc = d->retain(&primary, static_cast<CUdevice>(plan[2]));
    if (rc) return cuda_failed(d, rc, "cuDevicePrimaryCtxRetain", message, message_size);
    rc = d->set_current(primary);
    if (rc) {
      d->release(static_cast<CUdevice>(plan[2]));
      return cuda_failed(d, rc, "cuCtxSetCurrent", message, message_size);
    }
    rc = d->device(&device);
  }
  if (rc) return cuda_failed(d, rc, "cuCtxGetDevice", message, message_size);
  if (device != plan[2])
    return fail(BAD_PLAN, message, message_size, "launch plan for CUDA device %lld, run on device %lld",
                plan[2], device);
  CUstream s = static_cast<CUstream>(stream);
  const int64_t n_ops = plan[at++];
  std::vector<uint64_t> values;
  std::vector<void*> params;
  for (int64_t op = 0; op < n_ops; ++op) {
    if (at >= n) return fail(BAD_PLAN, message, message_size, "truncated launch plan at op %lld", op);
    if (plan[at] == CLEAR) {
      if (at + 3 > n || plan[at + 1] < 0 || plan[at + 1] >= n_buffers)
        return fail(BAD_PLAN, message, message_size, "bad clear at op %lld", op);
      rc = d->memset(reinterpret_cast<CUdeviceptr>(buffers[plan[at + 1]]), 0,
                     static_cast<size_t>(plan[at + 2]), s);
      if (rc) return cuda_failed(d, rc, "cuMemsetD8Async", message, message_size);
      at += 3;
      continue;
    }
    if (plan[at] != LAUNCH || at + 5 > n)
      return fail(BAD_PLAN, message, message_size, "unknown op %lld at op %lld", plan[at], op);
    const int64_t n_params = plan[at + 4];
    if (n_params < 0 || at + 5 + 3 * n_params > n)
      return fail(BAD_PLAN, message, message_size, "truncated launch at op %lld", op);
    values.assign(static_cast<size_t>(n_params), 0);
    params.resize(static_cast<size_t>(n_params));
    const int64_t* p = plan + at + 5;
    for (int64_t i = 0; i < n_params; ++i, p += 3) {
      uint64_t& v = values[i];
      switch (p[0]) {
        case INT32: { int32_t x = static_cast<int32_t>(p[1]); std::memcpy(&v, &x, 4); break; }
        case FLOAT32: { uint32_t x = static_cast<uint32_t>(p[1]); std::memcpy(&v, &x, 4); break; }
        case RAW64: v = static_cast<uint64_t>(p[1]); break;
        case BUFFER:
          if (p[1] < 0 || p[1] >= n_buffers)
            return fail(BAD_PLAN, message, message_size, "op %lld reads buffer %lld of %lld", op, p[1],
                        n_buffers);
          v = reinterpret_cast<uint64_t>(static_cast<char*>(buffers[p[1]]) + p[2]);
          break;
        default:
          return fail(BAD_PLAN, message, message_size, "op %lld: unknown parameter tag %lld", op, p[0]);
      }
      params[i] = &v;
    }
    rc = d->launch(reinterpret_cast<CUfunction>(plan[at + 1]), static_cast<unsigned>(plan[at + 2]), 1, 1,
                   static_cast<unsigned>(plan[at + 3]), 1, 1, 0, s, params.data(), nullptr);
    if (rc) return cuda_failed(d, rc, "cuLaunchKernel", message, message_size);
    at += 5 + 3 * n_params;
  }
  return OK;
}

}  // extern "C"

#ifdef MESHOPS_XLA_FFI
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;
typedef CUstream cudaStream_t;   // the runtime's stream is the driver's

static ffi::Error RunPlan(cudaStream_t stream, ffi::Span<const int64_t> plan, ffi::RemainingArgs args,
                          ffi::RemainingRets rets) {
  std::vector<void*> buffers;
  std::vector<int64_t> sizes;
  for (size_t i = 0; i < args.size(); ++i) {
    auto buffer = args.get<ffi::AnyBuffer>(i);
    if (buffer.has_error()) return buffer.error();
    buffers.push_back(buffer->untyped_data());
    sizes.push_back(static_cast<int64_t>(buffer->size_bytes()));
  }
  for (size_t i = 0; i < rets.size(); ++i) {
    auto buffer = rets.get<ffi::AnyBuffer>(i);
    if (buffer.has_error()) return buffer.error();
    buffers.push_back((*buffer)->untyped_data());
    sizes.push_back(static_cast<int64_t>((*buffer)->size_bytes()));
  }
  char message[512] = {0};
  int status = meshops_run_plan(plan.begin(), static_cast<int64_t>(plan.size()), buffers.data(), sizes.data(),
                                static_cast<int64_t>(buffers.size()), stream, message, sizeof message);
  if (status) return ffi::Error(ffi::ErrorCode::kInternal, std::string("meshops launch plan: ") + message);
  return ffi::Error::Success();
}

XLA_FFI_DEFINE_HANDLER_SYMBOL(MeshopsRunPlan, RunPlan,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::PlatformStream<cudaStream_t>>()
                                  .Attr<ffi::Span<const int64_t>>("plan")
                                  .RemainingArgs()
                                  .RemainingRets());
#endif
