#include "kernels/cuda_check.cuh"
#include "kernels/graph_if_any.cuh"

namespace mambarl::cuda {

namespace {

constexpr int kThreads = 1024;

// One block: a single thread sets the condition (concurrent sets are undefined).
__global__ void set_if_any_kernel(cudaGraphConditionalHandle handle, const uint8_t* __restrict__ flags,
                                  int n) {
  int any = 0;
  for (int i = static_cast<int>(threadIdx.x); i < n; i += kThreads) any |= flags[i];
  any = __syncthreads_or(any);
  if (threadIdx.x == 0) cudaGraphSetConditional(handle, any ? 1u : 0u);
}

// An IF node with one body graph, run when the handle's value is non-zero.
cudaGraphNodeParams if_node_params(cudaGraphConditionalHandle handle) {
  cudaGraphNodeParams params{};
  params.type = cudaGraphNodeTypeConditional;
  params.conditional.handle = handle;
  params.conditional.type = cudaGraphCondTypeIf;
  params.conditional.size = 1;
  return params;
}

}  // namespace

bool graph_conditionals_supported() {
  static const bool supported = [] {
    cudaGraph_t g = nullptr;
    if (cudaGraphCreate(&g, 0) != cudaSuccess) return false;
    cudaGraphConditionalHandle handle = 0;
    cudaGraphNode_t node = nullptr;
    bool ok = cudaGraphConditionalHandleCreate(&handle, g, 0, 0) == cudaSuccess;
    cudaGraphNodeParams params = if_node_params(handle);
    ok = ok && cudaGraphAddNode(&node, g, nullptr, nullptr, 0, &params) == cudaSuccess;
    (void)cudaGraphDestroy(g);
    (void)cudaGetLastError();  // a refusal here is an answer, not a sticky error
    return ok;
  }();
  return supported;
}

void capture_if_any(cudaStream_t stream, cudaStream_t body_stream, const uint8_t* flags, int n,
                    const std::function<void(cudaStream_t)>& body) {
  MAMBARL_CHECK(n > 0 && flags, "capture_if_any: need flags for n > 0 envs, got n " << n);
  if (!graph_conditionals_supported()) {
    body(stream);
    return;
  }
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  cudaGraph_t graph = nullptr;
  MAMBARL_CUDA_CHECK(cudaStreamGetCaptureInfo(stream, &status, nullptr, &graph));
  MAMBARL_CHECK(status == cudaStreamCaptureStatusActive,
                "capture_if_any: the stream is not being captured (a conditional node lives in a graph)");
  cudaGraphConditionalHandle handle = 0;
  MAMBARL_CUDA_CHECK(cudaGraphConditionalHandleCreate(&handle, graph, 0, cudaGraphCondAssignDefault));
  set_if_any_kernel<<<1, kThreads, 0, stream>>>(handle, flags, n);
  MAMBARL_CUDA_LAUNCH_CHECK(stream);

  // The IF node after the kernel (the stream's current capture dependencies),
  // then the stream continues from it.
  const cudaGraphNode_t* deps = nullptr;
  size_t ndeps = 0;
  MAMBARL_CUDA_CHECK(cudaStreamGetCaptureInfo(stream, &status, nullptr, &graph, &deps, nullptr, &ndeps));
  cudaGraphNodeParams params = if_node_params(handle);
  cudaGraphNode_t node = nullptr;
  MAMBARL_CUDA_CHECK(cudaGraphAddNode(&node, graph, deps, nullptr, ndeps, &params));
  const cudaGraph_t body_graph = params.conditional.phGraph_out[0];
  MAMBARL_CUDA_CHECK(
      cudaStreamUpdateCaptureDependencies(stream, &node, nullptr, 1, cudaStreamSetCaptureDependencies));

  // The body: captured from the other stream into the node's own graph.
  MAMBARL_CUDA_CHECK(cudaStreamBeginCaptureToGraph(body_stream, body_graph, nullptr, nullptr, 0,
                                                   cudaStreamCaptureModeThreadLocal));
  try {
    body(body_stream);
  } catch (...) {
    cudaGraph_t ignored = nullptr;
    (void)cudaStreamEndCapture(body_stream, &ignored);
    throw;
  }
  cudaGraph_t captured = nullptr;
  MAMBARL_CUDA_CHECK(cudaStreamEndCapture(body_stream, &captured));
}

}  // namespace mambarl::cuda
