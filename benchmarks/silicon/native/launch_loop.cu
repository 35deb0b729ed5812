// launch_loop.cu: many small kernel launches inside NVTX ranges, a native program for the
// CUPTI injection profiler's overhead on silicon (benchmarks/silicon/overhead.py).
//
// Usage: launch_loop [--launches N] [--phases P] [--size ELEMENTS]
// Three kernels in turn (axpy, scale, a one-block sum), N launches split into P NVTX
// push/pop ranges "phase0".."phase{P-1}", no synchronisation inside the loop (the launch
// rate is what a profiler slows). Prints, on stdout:
//   launch_loop: N launches in S s (U us per launch)      the loop alone, after a warm-up
//   launch_loop: checksum C                                 the result (same with and without a profiler)
// Build: nvcc -O2 -gencode arch=compute_90,code=sm_90 -o launch_loop launch_loop.cu
#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#define CHECK(call)                                                                     \
  do {                                                                                  \
    cudaError_t err_ = (call);                                                          \
    if (err_ != cudaSuccess) {                                                          \
      fprintf(stderr, "launch_loop: %s failed: %s\n", #call, cudaGetErrorString(err_)); \
      exit(3);                                                                          \
    }                                                                                   \
  } while (0)

__global__ void axpy(float a, const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}

__global__ void scale(float* y, float s, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] *= s;
}

__global__ void block_sum(const float* y, float* out, int n) {
  __shared__ float part[256];
  float acc = 0.f;
  for (int i = threadIdx.x; i < n; i += blockDim.x) acc += y[i];
  part[threadIdx.x] = acc;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) part[threadIdx.x] += part[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) *out += part[0] * 1e-6f;
}

int main(int argc, char** argv) {
  int launches = 60000, phases = 10, n = 4096;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--launches")) launches = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--phases")) phases = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--size")) n = atoi(argv[i + 1]);
    else {
      fprintf(stderr, "launch_loop: unknown option %s\n", argv[i]);
      return 2;
    }
  }
  if (launches < 1 || phases < 1 || n < 1) {
    fprintf(stderr, "launch_loop: --launches, --phases and --size must be positive\n");
    return 2;
  }
  float *x, *y, *out;
  CHECK(cudaMalloc(&x, n * sizeof(float)));
  CHECK(cudaMalloc(&y, n * sizeof(float)));
  CHECK(cudaMalloc(&out, sizeof(float)));
  CHECK(cudaMemset(x, 0, n * sizeof(float)));
  CHECK(cudaMemset(y, 0, n * sizeof(float)));
  CHECK(cudaMemset(out, 0, sizeof(float)));
  int blocks = (n + 255) / 256;
  axpy<<<blocks, 256>>>(1.f, x, y, n);  // warm-up: module load, first launch
  CHECK(cudaDeviceSynchronize());
  auto t0 = std::chrono::steady_clock::now();
  int per_phase = (launches + phases - 1) / phases, done = 0;
  for (int p = 0; p < phases && done < launches; p++) {
    char name[32];
    snprintf(name, sizeof name, "phase%d", p);
    nvtxRangePushA(name);
    for (int i = 0; i < per_phase && done < launches; i++, done++) {
      switch (done % 3) {
        case 0: axpy<<<blocks, 256>>>(0.5f, y, x, n); break;
        case 1: scale<<<blocks, 256>>>(x, 0.999f, n); break;
        default: block_sum<<<1, 256>>>(x, out, n); break;
      }
    }
    nvtxRangePop();
  }
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  printf("launch_loop: %d launches in %.4f s (%.2f us per launch)\n", done, seconds,
         1e6 * seconds / done);
  float result = 0.f;
  CHECK(cudaMemcpy(&result, out, sizeof(float), cudaMemcpyDeviceToHost));
  printf("launch_loop: checksum %.6g\n", result);
  return 0;
}
