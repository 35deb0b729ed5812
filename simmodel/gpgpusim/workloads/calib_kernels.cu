// Calibration kernels for the analytical timing model: one small program whose
// launches cover behaviours the transformer workload misses. Each kernel is parameterised
// (grid, block, work per thread, stride, ...) so the schedule yields many distinct launches.
//
//   fma      compute bound: ILP-4 FMA chains, `iters` per thread
//   stream   memory bound: y = a*x + y over n floats, grid-stride
//   strided  uncoalesced loads: stride in floats between neighbouring threads
//   chase    latency bound: dependent loads (pointer chase), few warps
//   diverge  divergent branches: lanes take `ways` paths of different lengths
//   smem     shared-memory bound: stride-s accesses -> s-way bank conflicts
//   atomic   atomics on `targets` addresses (contention = threads / targets)
//   sfu      compute bound on the special-function unit: __sinf/__expf chains
//   dep      latency bound at low occupancy: one dependent FMA chain per thread, CTAs per
//            SM limited by a large dynamic shared-memory allocation (`smem_kb`)
//   reduce   shared-memory tree reduction with a barrier per level, `reps` times
//   shatomic shared-memory atomics on `targets` words per CTA (contention in the CTA)
//   divmem   divergent memory: lanes of `ways` paths load from different strides
//   transpose tiled 32x32 transpose through shared memory (padded or not: bank conflicts)
//
// Usage: calib_kernels [--list] [--launches FILE]   (launch marks like transformer_step)
// No clock()/clock64(): GPGPU-Sim aborts on %clock in some builds (vendor README).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>
#include <vector>
#include <cuda_runtime.h>

#define CHECK(call)                                                             \
  do {                                                                          \
    cudaError_t e_ = (call);                                                    \
    if (e_ != cudaSuccess) {                                                    \
      fprintf(stderr, "calib_kernels: %s failed: %s\n", #call,                  \
              cudaGetErrorString(e_));                                          \
      exit(1);                                                                  \
    }                                                                           \
  } while (0)

__global__ void fma_k(float* out, int iters) {
  float a = threadIdx.x * 1e-3f, b = a + 1.f, c = a + 2.f, d = a + 3.f;
  const float m = 0.999f, s = 1e-4f;
  for (int i = 0; i < iters; ++i) {
    a = a * m + s; b = b * m + s; c = c * m + s; d = d * m + s;
  }
  out[blockIdx.x * blockDim.x + threadIdx.x] = a + b + c + d;
}

__global__ void stream_k(const float* x, float* y, long n, float alpha) {
  long stride = (long)gridDim.x * blockDim.x;
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += stride)
    y[i] = alpha * x[i] + y[i];
}

__global__ void strided_k(const float* x, float* out, int stride, int reps, long mask) {
  long t = blockIdx.x * (long)blockDim.x + threadIdx.x;
  float acc = 0.f;
  for (int r = 0; r < reps; ++r) acc += x[((t + r * 32) * stride) & mask];
  out[t] = acc;
}

__global__ void chase_k(const int* next, int* out, int steps, int span) {
  int t = blockIdx.x * blockDim.x + threadIdx.x;
  int p = (t * 97) % span;
  for (int i = 0; i < steps; ++i) p = next[p];
  out[t] = p;
}

__global__ void diverge_k(float* out, int ways, int iters) {
  int lane = threadIdx.x & 31;
  int path = lane % ways;
  float v = lane;
  for (int i = 0; i < iters * (path + 1); ++i) v = v * 0.999f + 1e-3f;
  out[blockIdx.x * blockDim.x + threadIdx.x] = v;
}

__global__ void smem_k(float* out, int stride, int iters) {
  extern __shared__ float sh[];
  int t = threadIdx.x;
  int n = blockDim.x * stride;
  for (int i = t; i < n; i += blockDim.x) sh[i] = i;
  __syncthreads();
  float acc = 0.f;
  int idx = (t * stride) % n;
  for (int i = 0; i < iters; ++i) {
    acc += sh[idx];
    idx = (idx + 1) % n;
  }
  out[blockIdx.x * blockDim.x + t] = acc;
}

__global__ void atomic_k(int* counters, int targets, int reps) {
  int t = blockIdx.x * blockDim.x + threadIdx.x;
  for (int r = 0; r < reps; ++r) atomicAdd(&counters[(t + r) % targets], 1);
}

__global__ void sfu_k(float* out, int iters) {
  float a = threadIdx.x * 1e-3f, b = a + 0.5f;
  for (int i = 0; i < iters; ++i) { a = __sinf(a) + 0.5f; b = __expf(-b) + 0.25f; }
  out[blockIdx.x * blockDim.x + threadIdx.x] = a + b;
}

__global__ void dep_k(float* out, int iters) {
  extern __shared__ float pad[];  // only limits occupancy
  float a = threadIdx.x * 1e-3f;
  for (int i = 0; i < iters; ++i) a = a * 0.999f + 1e-4f;
  if (a < -1.f) pad[threadIdx.x] = a;  // never true: keeps the allocation
  out[blockIdx.x * blockDim.x + threadIdx.x] = a;
}

__global__ void reduce_k(const float* x, float* out, int reps) {
  extern __shared__ float sh[];
  int t = threadIdx.x;
  float total = 0.f;
  for (int r = 0; r < reps; ++r) {
    sh[t] = x[(blockIdx.x * blockDim.x + t + r * 4096) & ((1 << 20) - 1)];
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
      if (t < s) sh[t] += sh[t + s];
      __syncthreads();
    }
    total += sh[0];
    __syncthreads();
  }
  if (t == 0) out[blockIdx.x] = total;
}

__global__ void shatomic_k(int* out, int targets, int reps) {
  extern __shared__ int cnt[];
  int t = threadIdx.x;
  for (int i = t; i < targets; i += blockDim.x) cnt[i] = 0;
  __syncthreads();
  for (int r = 0; r < reps; ++r) atomicAdd(&cnt[(t + r) % targets], 1);
  __syncthreads();
  if (t < targets) out[blockIdx.x * targets + t] = cnt[t];
}

__global__ void divmem_k(const float* x, float* out, int ways, int reps) {
  long t = blockIdx.x * (long)blockDim.x + threadIdx.x;
  int path = (threadIdx.x & 31) % ways;
  float acc = 0.f;
  for (int r = 0; r < reps; ++r) {
    if (path == 0) acc += x[(t + r * 64) & ((1 << 20) - 1)];
    else acc += x[((t * (path + 1) * 8) + r * 64) & ((1 << 20) - 1)] * 0.5f;
  }
  out[t] = acc;
}

__global__ void transpose_k(const float* in, float* out, int n, int padded) {
  __shared__ float tile[32][33];
  int bx = blockIdx.x % (n / 32), by = blockIdx.x / (n / 32);
  int tx = threadIdx.x % 32, ty = threadIdx.x / 32;  // 32 x (blockDim / 32) threads
  int rows = blockDim.x / 32;
  for (int j = ty; j < 32; j += rows) {
    if (padded) tile[j][tx] = in[(by * 32 + j) * n + bx * 32 + tx];
    else (&tile[0][0])[j * 32 + tx] = in[(by * 32 + j) * n + bx * 32 + tx];
  }
  __syncthreads();
  for (int j = ty; j < 32; j += rows) {
    if (padded) out[(bx * 32 + j) * n + by * 32 + tx] = tile[tx][j];
    else out[(bx * 32 + j) * n + by * 32 + tx] = (&tile[0][0])[tx * 32 + j];
  }
}

struct Launch {
  std::string name;
  unsigned grid, block;
  int a, b, c;  // kernel parameters (meaning per kernel)
};

static std::vector<Launch> schedule() {
  std::vector<Launch> s;
  const unsigned grids[] = {1, 4, 16, 48};
  const unsigned blocks[] = {32, 128, 512};
  for (unsigned g : grids)
    for (unsigned b : blocks)
      for (int it : {8, 32, 128}) s.push_back({"fma", g, b, it, 0, 0});
  for (long n : {4096L, 16384L, 65536L})
    for (unsigned g : {4u, 16u, 64u})
      for (unsigned b : {64u, 256u}) s.push_back({"stream", g, b, (int)(n / 1024), 0, 0});
  for (int st : {1, 2, 4, 8, 32})
    for (unsigned g : {4u, 16u})
      for (unsigned b : {64u, 256u})
        for (int reps : {2, 6}) s.push_back({"strided", g, b, st, reps, 0});
  for (unsigned g : {1u, 4u, 16u})
    for (unsigned b : {32u, 64u, 256u})
      for (int steps : {4, 12, 24})
        for (int span : {1024, 262144}) {
          if (b == 256 && steps == 24) continue;
          s.push_back({"chase", g, b, steps, span, 0});
        }
  for (int ways : {1, 2, 4, 8, 16})
    for (unsigned g : {4u, 16u})
      for (unsigned b : {64u, 256u})
        for (int it : {2, 8}) s.push_back({"diverge", g, b, ways, it, 0});
  for (int st : {1, 2, 4, 8, 32})
    for (unsigned g : {4u, 16u})
      for (unsigned b : {64u, 256u})
        for (int it : {16, 64}) s.push_back({"smem", g, b, st, it, 0});
  for (int targets : {1, 32, 1024, 65536})
    for (unsigned g : {4u, 16u})
      for (unsigned b : {64u, 256u})
        for (int reps : {1, 3}) s.push_back({"atomic", g, b, targets, reps, 0});
  // added after the first 254 (their indices unchanged)
  for (unsigned g : {4u, 16u})
    for (unsigned b : {64u, 256u})
      for (int it : {16, 64}) s.push_back({"sfu", g, b, it, 0, 0});
  for (unsigned g : {4u, 16u})
    for (unsigned b : {64u, 256u})
      for (int smem_kb : {0, 40}) s.push_back({"dep", g, b, 128, smem_kb, 0});
  for (unsigned g : {4u, 16u})
    for (unsigned b : {64u, 256u})
      for (int reps : {1, 4}) s.push_back({"reduce", g, b, reps, 0, 0});
  for (int targets : {1, 32, 256})
    for (unsigned b : {64u, 256u}) s.push_back({"shatomic", 8, b, targets, 4, 0});
  for (int ways : {2, 8})
    for (unsigned g : {4u, 16u})
      for (unsigned b : {64u, 256u}) s.push_back({"divmem", g, b, ways, 4, 0});
  for (int n : {256, 512})
    for (unsigned b : {256u, 1024u})
      for (int padded : {0, 1}) s.push_back({"transpose", (unsigned)((n / 32) * (n / 32)), b, n, padded, 0});
  return s;
}

int main(int argc, char** argv) {
  bool list = false;
  const char* launch_file = nullptr;
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "--list")) list = true;
    else if (!strcmp(argv[i], "--launches") && i + 1 < argc) launch_file = argv[++i];
    else { fprintf(stderr, "usage: calib_kernels [--list] [--launches FILE]\n"); return 2; }
  }
  std::vector<Launch> s = schedule();
  if (list) {
    for (size_t k = 0; k < s.size(); ++k)
      printf("%zu %s %u %u %d %d\n", k, s[k].name.c_str(), s[k].grid, s[k].block, s[k].a, s[k].b);
    return 0;
  }
  std::set<long> only;
  if (launch_file) {
    FILE* f = fopen(launch_file, "r");
    if (!f) { fprintf(stderr, "calib_kernels: cannot open launch list %s\n", launch_file); return 2; }
    long k;
    while (fscanf(f, "%ld", &k) == 1) only.insert(k);
    fclose(f);
  }
  const long POOL = 1L << 20;  // floats (4 MB), power of two for masks
  float *x, *y, *out;
  int *next, *iout;
  CHECK(cudaMalloc(&x, POOL * sizeof(float)));
  CHECK(cudaMalloc(&y, POOL * sizeof(float)));
  CHECK(cudaMalloc(&out, POOL * sizeof(float)));
  CHECK(cudaMalloc(&next, 262144 * sizeof(int)));
  CHECK(cudaMalloc(&iout, POOL * sizeof(int)));
  std::vector<float> hx(POOL);
  for (long i = 0; i < POOL; ++i) hx[i] = (float)(i % 1000) * 1e-3f;
  CHECK(cudaMemcpy(x, hx.data(), POOL * sizeof(float), cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(y, hx.data(), POOL * sizeof(float), cudaMemcpyHostToDevice));
  // a random cyclic permutation per span (Sattolo), spans are powers of two <= 262144:
  // the chase over `span` elements follows next[p] & (span - 1) -> stored pre-masked per span
  std::vector<int> perm(262144);
  unsigned rng = 12345u;
  for (int i = 0; i < 262144; ++i) perm[i] = i;
  for (int i = 262143; i > 0; --i) {
    rng = rng * 1664525u + 1013904223u;
    int j = rng % i;
    std::swap(perm[i], perm[j]);
  }
  std::vector<int> nxt(262144);
  for (int i = 0; i < 262144; ++i) nxt[perm[i]] = perm[(i + 1) % 262144];
  CHECK(cudaMemcpy(next, nxt.data(), 262144 * sizeof(int), cudaMemcpyHostToDevice));
  // small spans: a separate cyclic order inside the first 1024 entries would need its own
  // table; the chase on span 1024 uses indices < 1024 wrapped by the kernel's start only,
  // then follows the full cycle (working set grows with steps): still a dependent chain.
  long ran = 0;
  for (size_t k = 0; k < s.size(); ++k) {
    if (launch_file && !only.count((long)k)) continue;
    const Launch& L = s[k];
    printf("hilsim-launch %zu %s\n", k, L.name.c_str());
    fflush(stdout);
    if (L.name == "fma") fma_k<<<L.grid, L.block>>>(out, L.a);
    else if (L.name == "stream") stream_k<<<L.grid, L.block>>>(x, y, (long)L.a * 1024, 1.5f);
    else if (L.name == "strided") strided_k<<<L.grid, L.block>>>(x, out, L.a, L.b, POOL - 1);
    else if (L.name == "chase") chase_k<<<L.grid, L.block>>>(next, iout, L.a, L.b);
    else if (L.name == "diverge") diverge_k<<<L.grid, L.block>>>(out, L.a, L.b);
    else if (L.name == "smem")
      smem_k<<<L.grid, L.block, L.block * L.a * sizeof(float)>>>(out, L.a, L.b);
    else if (L.name == "atomic") atomic_k<<<L.grid, L.block>>>(iout, L.a, L.b);
    else if (L.name == "sfu") sfu_k<<<L.grid, L.block>>>(out, L.a);
    else if (L.name == "dep") dep_k<<<L.grid, L.block, L.b * 1024>>>(out, L.a);
    else if (L.name == "reduce")
      reduce_k<<<L.grid, L.block, L.block * sizeof(float)>>>(x, out, L.a);
    else if (L.name == "shatomic")
      shatomic_k<<<L.grid, L.block, L.a * sizeof(int)>>>(iout, L.a, L.b);
    else if (L.name == "divmem") divmem_k<<<L.grid, L.block>>>(x, out, L.a, L.b);
    else if (L.name == "transpose") transpose_k<<<L.grid, L.block>>>(x, y, L.a, L.b);
    CHECK(cudaGetLastError());
    CHECK(cudaDeviceSynchronize());
    ++ran;
  }
  printf("hilsim-workload done: %ld of %zu launches run\n", ran, s.size());
  fflush(stdout);
  return 0;
}
