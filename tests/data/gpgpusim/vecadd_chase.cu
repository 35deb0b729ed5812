// hilsim test program for the simulated card (tests/test_gpgpusim_sim.py).
// 1. vector add: c = a + b over N floats, checked on the host (exit 1 on a mismatch);
// 2. a single-thread pointer chase over a small ring, timed with %clock read by inline
//    PTX (clock()/clock64() become %clock64, which GPGPU-Sim aborts on).
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

#define CHECK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { \
  fprintf(stderr, "CUDA error %s at %s:%d\n", cudaGetErrorString(e), __FILE__, __LINE__); \
  return 2; } } while (0)

__device__ __forceinline__ unsigned int clock32() {
  unsigned int c;
  asm volatile("mov.u32 %0, %%clock;" : "=r"(c));
  return c;
}

__global__ void vecadd(const float *a, const float *b, float *c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}

__global__ void chase(const unsigned int *next, int steps, unsigned int *out) {
  unsigned int j = 0;
  for (int s = 0; s < steps; ++s) j = next[j];  // warm the ring into L1
  unsigned int t0 = clock32();
  for (int s = 0; s < steps; ++s) j = next[j];
  unsigned int t1 = clock32();
  out[0] = t1 - t0;
  out[1] = j;
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 1024;
  size_t bytes = n * sizeof(float);
  float *a = (float *)malloc(bytes), *b = (float *)malloc(bytes), *c = (float *)malloc(bytes);
  for (int i = 0; i < n; ++i) { a[i] = (float)i; b[i] = 2.0f * i; }
  float *da, *db, *dc;
  CHECK(cudaMalloc(&da, bytes)); CHECK(cudaMalloc(&db, bytes)); CHECK(cudaMalloc(&dc, bytes));
  CHECK(cudaMemcpy(da, a, bytes, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(db, b, bytes, cudaMemcpyHostToDevice));
  vecadd<<<(n + 127) / 128, 128>>>(da, db, dc, n);
  CHECK(cudaGetLastError());
  CHECK(cudaMemcpy(c, dc, bytes, cudaMemcpyDeviceToHost));
  int bad = 0;
  for (int i = 0; i < n; ++i) if (c[i] != 3.0f * i) ++bad;
  printf("vecadd n=%d mismatches=%d\n", n, bad);

  const int ring = 64, stride = 32, steps = 256;  // 64 x 128 B = 8 KiB, fits in L1
  unsigned int *next = (unsigned int *)malloc(ring * stride * sizeof(unsigned int));
  for (int k = 0; k < ring; ++k) next[k * stride] = ((k + 1) % ring) * stride;
  unsigned int *dnext, *dout, hout[2];
  CHECK(cudaMalloc(&dnext, ring * stride * sizeof(unsigned int)));
  CHECK(cudaMalloc(&dout, 2 * sizeof(unsigned int)));
  CHECK(cudaMemcpy(dnext, next, ring * stride * sizeof(unsigned int), cudaMemcpyHostToDevice));
  chase<<<1, 1>>>(dnext, steps, dout);
  CHECK(cudaGetLastError());
  CHECK(cudaMemcpy(hout, dout, sizeof(hout), cudaMemcpyDeviceToHost));
  printf("chase steps=%d cycles=%u cycles_per_load=%.2f end=%u\n", steps, hout[0],
         (double)hout[0] / steps, hout[1]);
  return bad ? 1 : 0;
}
