// hilsim test program: clock64() becomes %clock64, which GPGPU-Sim aborts on
// (src/cuda-sim/ptx_sim.cc): the run must end in a one-line error naming sim.log.
#include <cstdio>
#include <cuda_runtime.h>

__global__ void stamp(long long *out) { out[0] = clock64(); }

int main() {
  long long *d, h = 0;
  cudaMalloc(&d, sizeof(long long));
  stamp<<<1, 1>>>(d);
  cudaMemcpy(&h, d, sizeof(h), cudaMemcpyDeviceToHost);
  printf("clock64 = %lld\n", h);
  return 0;
}
