// hilsim test program: NVTX ranges in an unmodified program become regions on the
// simulated card (tests/test_gpgpusim_nvtx.py). Two "step" ranges, each with a nested
// "attention" range around two launches and one launch after it; 6 launches in all.
// Built with nvcc -cudart shared -ldl (NVTX 3 is header-only and loads its injection
// library with dlopen); on a GPU without NVTX_INJECTION64_PATH the ranges cost nothing.
#include <cstdio>
#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>

__global__ void scale(float *x, int n, float a) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = a * x[i] + 1.0f;
}

int main() {
  const int n = 1024;
  float *x = nullptr;
  if (cudaMalloc(&x, n * sizeof(float)) != cudaSuccess) return 2;
  cudaMemset(x, 0, n * sizeof(float));
  for (int step = 0; step < 2; ++step) {
    nvtxRangePushA(step == 0 ? "step 0" : "step 1");
    nvtxRangePushA("attention");
    scale<<<4, 256>>>(x, n, 0.5f);
    scale<<<4, 256>>>(x, n, 0.25f);
    nvtxRangePop();
    scale<<<2, 512>>>(x, n, 2.0f);
    nvtxRangePop();
  }
  float host[4];
  cudaMemcpy(host, x, sizeof host, cudaMemcpyDeviceToHost);
  printf("nvtxphases %.4f\n", host[0]);
  cudaFree(x);
  return 0;
}
