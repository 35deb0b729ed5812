// hilsim test program for fast-forward (tests/test_gpgpusim_fastforward.py).
// A chain of STEPS launches over N ints where every launch reads what the previous one
// wrote, across blocks (each element mixes a neighbour owned by another block):
// launch k (uid k + 1) is mix() for even k, scatter() for odd k. After every third launch
// and at the end the buffer is copied to the host and its checksum printed, so a launch
// computed on wrong data shows in every later line.
// Usage: ffchain [STEPS=12] [N=2048] [clock]
// With "clock", one more launch after launch 5 adds the simulated %clock (read by inline
// PTX: clock() would abort) into the data: a result that depends on timing, which a
// fast-forwarded run computes differently from the full run (the divergence check's case).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>

#define CHECK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { \
  fprintf(stderr, "CUDA error %s at %s:%d\n", cudaGetErrorString(e), __FILE__, __LINE__); \
  return 2; } } while (0)

static const unsigned MOD = 1000003u;

__global__ void mix(const unsigned *src, unsigned *dst, int n, unsigned step) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) dst[i] = (src[i] + 3u * src[(i + 129) % n] + step) % MOD;
}

__global__ void scatter(const unsigned *src, unsigned *dst, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) dst[(i * 7) % n] = (src[i] * 5u + 1u) % MOD;  // a permutation: 7 does not divide n
}

__global__ void stamp(unsigned *buf) {
  unsigned c;
  asm volatile("mov.u32 %0, %%clock;" : "=r"(c));
  buf[0] = (buf[0] + c) % MOD;
}

static unsigned long long checksum(const unsigned *h, int n) {
  unsigned long long s = 0;
  for (int i = 0; i < n; ++i) s = (s * 31u + h[i]) % 0xFFFFFFFFFFFull;
  return s;
}

int main(int argc, char **argv) {
  int steps = argc > 1 ? atoi(argv[1]) : 12;
  int n = argc > 2 ? atoi(argv[2]) : 2048;
  bool with_clock = argc > 3 && strcmp(argv[3], "clock") == 0;
  if (steps < 1 || n < 256 || n % 7 == 0) {
    fprintf(stderr, "usage: ffchain [STEPS>=1] [N>=256, not a multiple of 7] [clock]\n");
    return 2;
  }
  size_t bytes = n * sizeof(unsigned);
  unsigned *h = (unsigned *)malloc(bytes);
  for (int i = 0; i < n; ++i) h[i] = (unsigned)((i * 7919u) % MOD);
  unsigned *buf[2];
  CHECK(cudaMalloc(&buf[0], bytes));
  CHECK(cudaMalloc(&buf[1], bytes));
  CHECK(cudaMemcpy(buf[0], h, bytes, cudaMemcpyHostToDevice));
  int blocks = (n + 127) / 128, cur = 0;
  for (int k = 0; k < steps; ++k) {
    if (k % 2 == 0) mix<<<blocks, 128>>>(buf[cur], buf[1 - cur], n, (unsigned)k);
    else scatter<<<blocks, 128>>>(buf[cur], buf[1 - cur], n);
    CHECK(cudaGetLastError());
    cur = 1 - cur;
    if (with_clock && k == 5) stamp<<<1, 1>>>(buf[cur]);
    if (k % 3 == 2 || k == steps - 1) {
      CHECK(cudaMemcpy(h, buf[cur], bytes, cudaMemcpyDeviceToHost));
      printf("ffchain after launch %d checksum %llu\n", k, checksum(h, n));
    }
  }
  printf("ffchain final %u %u %u\n", h[0], h[n / 2], h[n - 1]);
  return 0;
}
