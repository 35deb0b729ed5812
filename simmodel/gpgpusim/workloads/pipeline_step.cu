// pipeline_step.cu: an iterative pipeline whose data flow from kernel to kernel, for the
// simulated GPU.
//
// Every "step" runs one block of a solver-like pipeline on a vector of N floats (N from a
// fixed schedule of 5 sizes, 2K to 16K floats) held in one of R = 12 slots of a device
// arena (slot = step mod R), like the activations of the layers of a network: each step's
// buffers are their own memory, and the kernels of a step read what the kernel before them
// wrote:
//   stencil3   B = 3-point stencil of A            (A: written by the previous step)
//   axpy       C = 0.5 * B + A                     (B: just written)
//   reduce     P = per-block sums of C             (C: just written)
//   finalize   S = sum of P                        (one block)
//   normalize  A' = C / S, into the next slot      (C, S: just written)
//   gather     D = T[idx], T and idx from the host (host-copied table)
//   dot        Q = per-block sums of D * A'        (D, A': just written)
// 7 launches per step; the default 60 steps give 420 launches. The host copies only the
// table T, its indices and the first slot's A; everything else is written by kernels.
//
// Sampled simulation: `--launches FILE` runs only the listed launches. Timing does not
// depend on the values (no data-dependent control flow; every address is a function of the
// launch index), so launch k's cycles depend only on the state of the caches, which is
// what a sampled run must warm: a consumer run without its producer finds its input cold.
//
// Usage: pipeline_step [--steps N] [--launches FILE] [--list]
// Output (stdout, flushed): hilsim-region push/pop stepN, hilsim-launch K NAME before each
// launch; every launch is followed by cudaDeviceSynchronize().
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>
#include <vector>

#define CHECK(call)                                                              \
  do {                                                                           \
    cudaError_t err_ = (call);                                                   \
    if (err_ != cudaSuccess) {                                                   \
      fprintf(stderr, "pipeline_step: %s failed: %s\n", #call,                   \
              cudaGetErrorString(err_));                                         \
      exit(3);                                                                   \
    }                                                                            \
  } while (0)

static const int NMAX = 16384;  // floats per buffer at most
static const int SLOTS = 12;    // arena slots (one per step, reused every SLOTS steps)
static const int TABLE = 65536; // floats in the host-copied table (256 KiB)
static const int BLOCK = 256;

__global__ void stencil3(const float* __restrict__ a, float* __restrict__ b, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float l = a[i > 0 ? i - 1 : i], c = a[i], r = a[i + 1 < n ? i + 1 : i];
  b[i] = 0.25f * l + 0.5f * c + 0.25f * r;
}

__global__ void axpy(const float* __restrict__ b, const float* __restrict__ a,
                     float* __restrict__ c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = 0.5f * b[i] + a[i];
}

__global__ void block_sum(const float* __restrict__ x, float* __restrict__ partial, int n) {
  __shared__ float buf[BLOCK];
  int t = threadIdx.x, i = blockIdx.x * blockDim.x + t;
  buf[t] = i < n ? x[i] : 0.f;
  __syncthreads();
  for (int s = BLOCK / 2; s > 0; s /= 2) {
    if (t < s) buf[t] += buf[t + s];
    __syncthreads();
  }
  if (t == 0) partial[blockIdx.x] = buf[0];
}

__global__ void finalize(const float* __restrict__ partial, float* __restrict__ sum, int m) {
  __shared__ float buf[BLOCK];
  int t = threadIdx.x;
  float acc = 0.f;
  for (int i = t; i < m; i += BLOCK) acc += partial[i];
  buf[t] = acc;
  __syncthreads();
  for (int s = BLOCK / 2; s > 0; s /= 2) {
    if (t < s) buf[t] += buf[t + s];
    __syncthreads();
  }
  if (t == 0) sum[0] = buf[0] + 1.f;
}

__global__ void normalize(const float* __restrict__ c, const float* __restrict__ sum,
                          float* __restrict__ out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = c[i] / sum[0];
}

__global__ void gather(const float* __restrict__ table, const int* __restrict__ idx,
                       float* __restrict__ d, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) d[i] = table[idx[i]];
}

__global__ void dot_partial(const float* __restrict__ d, const float* __restrict__ a,
                            float* __restrict__ partial, int n) {
  __shared__ float buf[BLOCK];
  int t = threadIdx.x, i = blockIdx.x * blockDim.x + t;
  buf[t] = i < n ? d[i] * a[i] : 0.f;
  __syncthreads();
  for (int s = BLOCK / 2; s > 0; s /= 2) {
    if (t < s) buf[t] += buf[t + s];
    __syncthreads();
  }
  if (t == 0) partial[blockIdx.x] = buf[0];
}

// sizes cycled by step (floats)
static const int SIZES[] = {4096, 16384, 2048, 8192, 12288};
static const int NSIZES = sizeof(SIZES) / sizeof(SIZES[0]);

struct Slot {  // one step's buffers
  float *a, *b, *c, *d, *partial, *sum;
};

struct Runner {
  std::set<long> only;
  bool use_list = false, list_only = false;
  long next = 0, ran = 0;

  template <typename Launch>
  void launch(const char* name, int grid, Launch&& go) {
    long k = next++;
    if (list_only) {
      printf("%ld %s %d,1,1 %d,1,1\n", k, name, grid, BLOCK);
      return;
    }
    if (use_list && only.count(k) == 0) return;
    printf("hilsim-launch %ld %s\n", k, name);
    fflush(stdout);
    go();
    CHECK(cudaGetLastError());
    CHECK(cudaDeviceSynchronize());
    ++ran;
  }
};

static void region(const Runner& r, const char* what, int step) {
  if (r.list_only) return;
  printf("hilsim-region %s step%d\n", what, step);
  fflush(stdout);
}

int main(int argc, char** argv) {
  int steps = 60;
  const char* launch_file = nullptr;
  Runner r;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--list") {
      r.list_only = true;
    } else if (i + 1 < argc && a == "--steps") {
      steps = atoi(argv[++i]);
    } else if (i + 1 < argc && a == "--launches") {
      launch_file = argv[++i];
    } else {
      fprintf(stderr, "usage: pipeline_step [--steps N] [--launches FILE] [--list]\n");
      return 2;
    }
  }
  if (steps < 1) {
    fprintf(stderr, "usage: pipeline_step [--steps N] [--launches FILE] [--list]\n");
    return 2;
  }
  if (launch_file != nullptr) {
    FILE* f = fopen(launch_file, "r");
    if (f == nullptr) {
      fprintf(stderr, "pipeline_step: cannot open launch list %s\n", launch_file);
      return 2;
    }
    long k;
    int got;
    while ((got = fscanf(f, "%ld", &k)) == 1) r.only.insert(k);
    if (got != EOF) {
      fprintf(stderr, "pipeline_step: %s: not a list of launch indices\n", launch_file);
      return 2;
    }
    fclose(f);
    r.use_list = true;
  }
  std::vector<Slot> slots(SLOTS + 1);
  float* table = nullptr;
  int* idx = nullptr;
  if (!r.list_only) {
    // one arena: SLOTS + 1 slots of (a, b, c, d) + partial sums + the sum
    const size_t per = 4 * (size_t)NMAX + NMAX / BLOCK + 32;
    float* arena = nullptr;
    CHECK(cudaMalloc(&arena, per * (SLOTS + 1) * sizeof(float)));
    for (int s = 0; s <= SLOTS; ++s) {
      float* base = arena + per * s;
      slots[s] = {base, base + NMAX, base + 2 * NMAX, base + 3 * NMAX, base + 4 * NMAX,
                  base + 4 * NMAX + NMAX / BLOCK};
    }
    std::vector<float> host(TABLE);
    unsigned state = 4321u;
    for (int i = 0; i < TABLE; ++i) {
      state = state * 1664525u + 1013904223u;
      host[i] = (state >> 8) / 16777216.f;
    }
    CHECK(cudaMalloc(&table, TABLE * sizeof(float)));
    CHECK(cudaMemcpy(table, host.data(), TABLE * sizeof(float), cudaMemcpyHostToDevice));
    std::vector<int> ids(NMAX);
    for (int i = 0; i < NMAX; ++i) {
      state = state * 1664525u + 1013904223u;
      ids[i] = (int)(state % TABLE);
    }
    CHECK(cudaMalloc(&idx, NMAX * sizeof(int)));
    CHECK(cudaMemcpy(idx, ids.data(), NMAX * sizeof(int), cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(slots[0].a, host.data(), NMAX * sizeof(float), cudaMemcpyHostToDevice));
  }
  for (int s = 0; s < steps; ++s) {
    int n = SIZES[s % NSIZES], grid = (n + BLOCK - 1) / BLOCK;
    const Slot& in = slots[s % SLOTS];
    const Slot& nxt = slots[(s + 1) % SLOTS];
    region(r, "push", s);
    r.launch("stencil3", grid, [&] { stencil3<<<grid, BLOCK>>>(in.a, in.b, n); });
    r.launch("axpy", grid, [&] { axpy<<<grid, BLOCK>>>(in.b, in.a, in.c, n); });
    r.launch("block_sum", grid, [&] { block_sum<<<grid, BLOCK>>>(in.c, in.partial, n); });
    r.launch("finalize", 1, [&] { finalize<<<1, BLOCK>>>(in.partial, in.sum, grid); });
    r.launch("normalize", grid, [&] { normalize<<<grid, BLOCK>>>(in.c, in.sum, nxt.a, n); });
    r.launch("gather", grid, [&] { gather<<<grid, BLOCK>>>(table, idx, in.d, n); });
    r.launch("dot_partial", grid, [&] { dot_partial<<<grid, BLOCK>>>(in.d, nxt.a, in.partial, n); });
    region(r, "pop", s);
  }
  if (!r.list_only) {
    printf("hilsim-workload done: %ld of %ld launches run\n", r.ran, r.next);
    fflush(stdout);
  }
  if (r.use_list) {
    for (long k : r.only) {
      if (k < 0 || k >= r.next) {
        fprintf(stderr, "pipeline_step: launch %ld is not in the schedule (0..%ld)\n", k,
                r.next - 1);
        return 2;
      }
    }
  }
  return 0;
}
