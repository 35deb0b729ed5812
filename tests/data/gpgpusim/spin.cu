// hilsim test program: a kernel that never ends (a flag nobody sets), so a run must be
// stopped by its timeout.
#include <cstdio>
#include <cuda_runtime.h>

__global__ void spin(volatile int *flag, int *out) {
  int n = 0;
  while (*flag == 0) ++n;
  out[0] = n;
}

int main() {
  int *flag, *out, h = 0;
  cudaMalloc(&flag, sizeof(int));
  cudaMalloc(&out, sizeof(int));
  cudaMemset(flag, 0, sizeof(int));
  spin<<<1, 32>>>(flag, out);
  cudaMemcpy(&h, out, sizeof(h), cudaMemcpyDeviceToHost);
  printf("spin = %d\n", h);
  return 0;
}
