// transformer_step.cu: a small transformer inference loop for the simulated GPU.
//
// Every "step" runs one request batch (batch B, sequence length S, both from a fixed schedule)
// through an embedding, L pre-norm transformer layers (layernorm, QKV GEMM, attention scores,
// softmax, attention context, output GEMM, residual, layernorm, FFN GEMM, GELU, FFN GEMM,
// residual) and a head (layernorm, mean pool, logits GEMM, argmax): 12 * L + 5 launches of
// 10 distinct kernels per step. The GEMM runs at five shapes, softmax and attention at four
// sequence lengths, so several kernels have several behaviours (STEM, Fig. 1).
//
// Deterministic inputs per launch: every kernel reads only from buffers filled once at start
// from a fixed seed (weights and an input "pool") at an offset that depends only on the launch
// index, and writes to scratch buffers nothing reads. So launch k sees exactly the same input
// whether the whole schedule runs or only a launch list does (sampled simulation).
//
// Usage: transformer_step [--steps N] [--layers L] [--seed S] [--launches FILE] [--list]
//   --launches FILE  run only these launch indices (whitespace separated, any order; run in
//                    ascending order); every other launch is skipped.
//   --list           print the schedule (launch index, kernel, grid, block) and exit, no GPU.
// Output (stdout, flushed, so it interleaves with the simulator's own log lines):
//   hilsim-region push NAME / hilsim-region pop NAME   NVTX-like ranges (step / layer)
//   hilsim-launch K NAME                               just before launch K is issued
// Each launch is followed by cudaDeviceSynchronize(), so the simulator prints its statistics
// for launch K before the next mark.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#define CHECK(call)                                                              \
  do {                                                                           \
    cudaError_t err_ = (call);                                                   \
    if (err_ != cudaSuccess) {                                                   \
      fprintf(stderr, "transformer_step: %s failed: %s\n", #call,                \
              cudaGetErrorString(err_));                                         \
      exit(3);                                                                   \
    }                                                                            \
  } while (0)

static const int D = 32;      // model width
static const int H = 2;       // heads
static const int DH = D / H;  // head width
static const int F = 4 * D;   // FFN width
static const int V = 64;      // vocabulary (logits)
static const int POOL = 1 << 17;  // floats in the input pool (512 KiB)

// ---------------------------------------------------------------- kernels
template <int TILE>
__global__ void gemm_bias(const float* __restrict__ A, const float* __restrict__ W,
                          const float* __restrict__ bias, float* __restrict__ C, int M, int N,
                          int K) {
  // C[M,N] = A[M,K] * W[K,N] + bias[N], shared-memory tiles of TILE x TILE
  __shared__ float As[TILE][TILE];
  __shared__ float Ws[TILE][TILE + 1];
  int row = blockIdx.y * TILE + threadIdx.y;
  int col = blockIdx.x * TILE + threadIdx.x;
  float acc = 0.f;
  for (int k0 = 0; k0 < K; k0 += TILE) {
    int ak = k0 + threadIdx.x, wk = k0 + threadIdx.y;
    As[threadIdx.y][threadIdx.x] = (row < M && ak < K) ? A[row * K + ak] : 0.f;
    Ws[threadIdx.y][threadIdx.x] = (wk < K && col < N) ? W[wk * N + col] : 0.f;
    __syncthreads();
#pragma unroll
    for (int k = 0; k < TILE; ++k) acc += As[threadIdx.y][k] * Ws[k][threadIdx.x];
    __syncthreads();
  }
  if (row < M && col < N) C[row * N + col] = acc + bias[col];
}

__global__ void attn_scores(const float* __restrict__ qkv, float* __restrict__ scores, int S,
                            float scale) {
  // scores[b,h,i,j] = scale * <q[b,i,h,:], k[b,j,h,:]>, qkv rows are [q | k | v] of width 3D
  __shared__ float Qs[16][DH + 1];
  __shared__ float Ks[16][DH + 1];
  int bh = blockIdx.z, b = bh / H, h = bh % H;
  int i = blockIdx.y * 16 + threadIdx.y, j = blockIdx.x * 16 + threadIdx.x;
  const float* base = qkv + (size_t)b * S * 3 * D;
  for (int d = threadIdx.x; d < DH; d += 16) {
    int qi = blockIdx.y * 16 + threadIdx.y;
    Qs[threadIdx.y][d] = qi < S ? base[qi * 3 * D + h * DH + d] : 0.f;
  }
  for (int d = threadIdx.y; d < DH; d += 16) {
    int kj = blockIdx.x * 16 + threadIdx.x;
    Ks[threadIdx.x][d] = kj < S ? base[kj * 3 * D + D + h * DH + d] : 0.f;
  }
  __syncthreads();
  float acc = 0.f;
#pragma unroll 8
  for (int d = 0; d < DH; ++d) acc += Qs[threadIdx.y][d] * Ks[threadIdx.x][d];
  if (i < S && j < S) scores[((size_t)bh * S + i) * S + j] = acc * scale;
}

__global__ void softmax_rows(const float* __restrict__ x, float* __restrict__ y, int rows,
                             int cols) {
  // one warp per row: max, exp-sum, normalise (warp shuffles)
  int warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32, lane = threadIdx.x % 32;
  if (warp >= rows) return;
  const float* in = x + (size_t)warp * cols;
  float m = -1e30f;
  for (int c = lane; c < cols; c += 32) m = fmaxf(m, in[c]);
  for (int o = 16; o > 0; o /= 2) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
  float s = 0.f;
  for (int c = lane; c < cols; c += 32) s += __expf(in[c] - m);
  for (int o = 16; o > 0; o /= 2) s += __shfl_xor_sync(0xffffffffu, s, o);
  float inv = 1.f / s;
  for (int c = lane; c < cols; c += 32) y[(size_t)warp * cols + c] = __expf(in[c] - m) * inv;
}

__global__ void attn_context(const float* __restrict__ probs, const float* __restrict__ qkv,
                             float* __restrict__ out, int S) {
  // out[b,i,h*DH+d] = sum_j probs[b,h,i,j] * v[b,j,h,d]; block (DH, 8): 8 query rows
  int bh = blockIdx.y, b = bh / H, h = bh % H;
  int i = blockIdx.x * 8 + threadIdx.y, d = threadIdx.x;
  if (i >= S) return;
  const float* p = probs + ((size_t)bh * S + i) * S;
  const float* v = qkv + (size_t)b * S * 3 * D + 2 * D + h * DH + d;
  float acc = 0.f;
  for (int j = 0; j < S; ++j) acc += p[j] * v[(size_t)j * 3 * D];
  out[((size_t)b * S + i) * D + h * DH + d] = acc;
}

__global__ void layernorm(const float* __restrict__ x, const float* __restrict__ gamma,
                          const float* __restrict__ beta, float* __restrict__ y, int rows) {
  // one block of D threads per row, shared-memory tree reductions for mean and variance
  __shared__ float buf[D];
  int r = blockIdx.x, t = threadIdx.x;
  if (r >= rows) return;
  float v = x[(size_t)r * D + t];
  buf[t] = v;
  __syncthreads();
  for (int s = D / 2; s > 0; s /= 2) {
    if (t < s) buf[t] += buf[t + s];
    __syncthreads();
  }
  float mean = buf[0] / D;
  __syncthreads();
  buf[t] = (v - mean) * (v - mean);
  __syncthreads();
  for (int s = D / 2; s > 0; s /= 2) {
    if (t < s) buf[t] += buf[t + s];
    __syncthreads();
  }
  float rstd = rsqrtf(buf[0] / D + 1e-5f);
  y[(size_t)r * D + t] = (v - mean) * rstd * gamma[t] + beta[t];
}

__global__ void gelu(const float* __restrict__ x, float* __restrict__ y, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    float v = x[i];
    y[i] = 0.5f * v * (1.f + tanhf(0.7978845608f * (v + 0.044715f * v * v * v)));
  }
}

__global__ void residual_add(const float* __restrict__ a, const float* __restrict__ b,
                             float* __restrict__ y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a[i] + b[i];
}

__global__ void embed(const int* __restrict__ ids, const float* __restrict__ table,
                      const float* __restrict__ pos, float* __restrict__ y, int S, int rows) {
  int r = blockIdx.x, t = threadIdx.x;
  if (r >= rows) return;
  y[(size_t)r * D + t] = table[ids[r] * D + t] + pos[(r % S) * D + t];
}

__global__ void mean_pool(const float* __restrict__ x, float* __restrict__ y, int S) {
  // y[b,:] = mean over the S rows of batch b; block per batch, D threads
  int b = blockIdx.x, t = threadIdx.x;
  float acc = 0.f;
  for (int s = 0; s < S; ++s) acc += x[((size_t)b * S + s) * D + t];
  y[b * D + t] = acc / S;
}

__global__ void argmax_rows(const float* __restrict__ x, int* __restrict__ out, int cols) {
  // block per row, shared-memory (value, index) reduction
  __shared__ float val[128];
  __shared__ int idx[128];
  int r = blockIdx.x, t = threadIdx.x;
  float best = -1e30f;
  int at = 0;
  for (int c = t; c < cols; c += blockDim.x) {
    float v = x[(size_t)r * cols + c];
    if (v > best) { best = v; at = c; }
  }
  val[t] = best;
  idx[t] = at;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s /= 2) {
    if (t < s && val[t + s] > val[t]) { val[t] = val[t + s]; idx[t] = idx[t + s]; }
    __syncthreads();
  }
  if (t == 0) out[r] = idx[0];
}

// ---------------------------------------------------------------- schedule
struct Shape {
  int B, S;
};
// request batches, cycled: 8..64 tokens, sequence lengths 8, 16, 32, 64
static const Shape SCHEDULE[] = {{2, 8}, {1, 16}, {1, 32}, {4, 8}, {2, 16},
                                 {1, 64}, {2, 32}, {1, 8}, {4, 16}, {8, 8}};
static const int NSHAPES = sizeof(SCHEDULE) / sizeof(SCHEDULE[0]);

struct Buffers {
  float* pool;     // read-only inputs, filled once
  float* weights;  // read-only weights, filled once
  int* ids;        // token ids
  float* scratch;  // outputs, never read
  int* iout;
};

struct Runner {
  Buffers buf;
  std::set<long> only;  // launch list (empty: all)
  bool use_list = false;
  bool list_only = false;
  long next = 0;  // next launch index
  long ran = 0;

  bool wanted(long k) const { return !use_list || only.count(k) > 0; }
  // input at a launch-dependent offset: launch k sees the same data in any run
  const float* in(long k, int slot, size_t n) const {
    size_t span = POOL - n;
    size_t off = ((size_t)(k * 7919 + slot * 104729) % (span / 32 + 1)) * 32;
    return buf.pool + off;
  }
  const float* w(int slot) const { return buf.weights + (size_t)slot * 4096; }
  float* out(int slot) const { return buf.scratch + (size_t)slot * (POOL / 2); }

  template <typename Launch>
  void launch(const char* name, dim3 grid, dim3 block, Launch&& go) {
    long k = next++;
    if (list_only) {
      printf("%ld %s %u,%u,%u %u,%u,%u\n", k, name, grid.x, grid.y, grid.z, block.x, block.y,
             block.z);
      return;
    }
    if (!wanted(k)) return;
    printf("hilsim-launch %ld %s\n", k, name);
    fflush(stdout);
    go(grid, block, k);
    CHECK(cudaGetLastError());
    CHECK(cudaDeviceSynchronize());
    ++ran;
  }
};

static void region(const Runner& r, const char* what, const std::string& name) {
  if (r.list_only) return;
  printf("hilsim-region %s %s\n", what, name.c_str());
  fflush(stdout);
}

static int cdiv(int a, int b) { return (a + b - 1) / b; }

static void gemm(Runner& r, const char* tag, int M, int N, int K, int wslot) {
  (void)tag;
  dim3 grid(cdiv(N, 16), cdiv(M, 16)), block(16, 16);
  r.launch("gemm_bias<16>", grid, block, [&](dim3 g, dim3 b, long k) {
    gemm_bias<16><<<g, b>>>(r.in(k, 0, (size_t)M * K), r.w(wslot), r.w(60), r.out(0), M, N, K);
  });
}

static void step(Runner& r, int s, int layers) {
  Shape sh = SCHEDULE[s % NSHAPES];
  int B = sh.B, S = sh.S, M = B * S;
  region(r, "push", "step" + std::to_string(s));
  r.launch("embed", dim3(M), dim3(D), [&](dim3 g, dim3 b, long k) {
    (void)k;
    embed<<<g, b>>>(r.buf.ids, r.w(40), r.w(44), r.out(0), S, M);
  });
  for (int l = 0; l < layers; ++l) {
    region(r, "push", "layer" + std::to_string(l));
    r.launch("layernorm", dim3(M), dim3(D), [&](dim3 g, dim3 b, long k) {
      layernorm<<<g, b>>>(r.in(k, 0, (size_t)M * D), r.w(50), r.w(51), r.out(0), M);
    });
    gemm(r, "qkv", M, 3 * D, D, 0);
    r.launch("attn_scores", dim3(cdiv(S, 16), cdiv(S, 16), B * H), dim3(16, 16),
             [&](dim3 g, dim3 b, long k) {
               attn_scores<<<g, b>>>(r.in(k, 0, (size_t)M * 3 * D), r.out(0), S,
                                     1.f / sqrtf((float)DH));
             });
    int rows = B * H * S;
    r.launch("softmax_rows", dim3(cdiv(rows, 4)), dim3(128), [&](dim3 g, dim3 b, long k) {
      softmax_rows<<<g, b>>>(r.in(k, 1, (size_t)rows * S), r.out(0), rows, S);
    });
    r.launch("attn_context", dim3(cdiv(S, 8), B * H), dim3(DH, 8), [&](dim3 g, dim3 b, long k) {
      attn_context<<<g, b>>>(r.in(k, 1, (size_t)rows * S), r.in(k, 0, (size_t)M * 3 * D),
                             r.out(0), S);
    });
    gemm(r, "out", M, D, D, 4);
    r.launch("residual_add", dim3(cdiv(M * D, 256)), dim3(256), [&](dim3 g, dim3 b, long k) {
      residual_add<<<g, b>>>(r.in(k, 0, (size_t)M * D), r.in(k, 1, (size_t)M * D), r.out(1),
                             M * D);
    });
    r.launch("layernorm", dim3(M), dim3(D), [&](dim3 g, dim3 b, long k) {
      layernorm<<<g, b>>>(r.in(k, 0, (size_t)M * D), r.w(52), r.w(53), r.out(0), M);
    });
    gemm(r, "ffn1", M, F, D, 8);
    r.launch("gelu", dim3(std::min(cdiv(M * F, 256), 64)), dim3(256),
             [&](dim3 g, dim3 b, long k) {
               gelu<<<g, b>>>(r.in(k, 0, (size_t)M * F), r.out(0), M * F);
             });
    gemm(r, "ffn2", M, D, F, 12);
    r.launch("residual_add", dim3(cdiv(M * D, 256)), dim3(256), [&](dim3 g, dim3 b, long k) {
      residual_add<<<g, b>>>(r.in(k, 0, (size_t)M * D), r.in(k, 1, (size_t)M * D), r.out(1),
                             M * D);
    });
    region(r, "pop", "layer" + std::to_string(l));
  }
  region(r, "push", "head");
  r.launch("layernorm", dim3(M), dim3(D), [&](dim3 g, dim3 b, long k) {
    layernorm<<<g, b>>>(r.in(k, 0, (size_t)M * D), r.w(54), r.w(55), r.out(0), M);
  });
  r.launch("mean_pool", dim3(B), dim3(D), [&](dim3 g, dim3 b, long k) {
    mean_pool<<<g, b>>>(r.in(k, 0, (size_t)M * D), r.out(0), S);
  });
  gemm(r, "logits", B, V, D, 16);
  r.launch("argmax_rows", dim3(B), dim3(128), [&](dim3 g, dim3 b, long k) {
    argmax_rows<<<g, b>>>(r.in(k, 0, (size_t)B * V), r.buf.iout, V);
  });
  region(r, "pop", "head");
  region(r, "pop", "step" + std::to_string(s));
}

static unsigned lcg(unsigned& state) {
  state = state * 1664525u + 1013904223u;
  return state;
}

static void usage() {
  fprintf(stderr,
          "usage: transformer_step [--steps N] [--layers L] [--seed S] [--launches FILE] "
          "[--list]\n");
  exit(2);
}

int main(int argc, char** argv) {
  int steps = 36, layers = 2;
  unsigned seed = 1234;
  const char* launch_file = nullptr;
  bool list_only = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--list") {
      list_only = true;
    } else if (i + 1 < argc && a == "--steps") {
      steps = atoi(argv[++i]);
    } else if (i + 1 < argc && a == "--layers") {
      layers = atoi(argv[++i]);
    } else if (i + 1 < argc && a == "--seed") {
      seed = (unsigned)strtoul(argv[++i], nullptr, 10);
    } else if (i + 1 < argc && a == "--launches") {
      launch_file = argv[++i];
    } else {
      usage();
    }
  }
  if (steps < 1 || layers < 1) usage();
  Runner r;
  r.list_only = list_only;
  if (launch_file != nullptr) {
    FILE* f = fopen(launch_file, "r");
    if (f == nullptr) {
      fprintf(stderr, "transformer_step: cannot open launch list %s\n", launch_file);
      return 2;
    }
    long k;
    int got;
    while ((got = fscanf(f, "%ld", &k)) == 1) r.only.insert(k);
    if (got != EOF) {
      fprintf(stderr, "transformer_step: %s: not a list of launch indices\n", launch_file);
      return 2;
    }
    fclose(f);
    r.use_list = true;
  }
  if (!list_only) {
    std::vector<float> host(POOL);
    unsigned state = seed;
    for (int i = 0; i < POOL; ++i) host[i] = ((lcg(state) >> 8) / 16777216.f - 0.5f) * 8.f;
    CHECK(cudaMalloc(&r.buf.pool, POOL * sizeof(float)));
    CHECK(cudaMemcpy(r.buf.pool, host.data(), POOL * sizeof(float), cudaMemcpyHostToDevice));
    std::vector<float> wts(64 * 4096);
    for (size_t i = 0; i < wts.size(); ++i) wts[i] = ((lcg(state) >> 8) / 16777216.f - 0.5f) * 0.25f;
    CHECK(cudaMalloc(&r.buf.weights, wts.size() * sizeof(float)));
    CHECK(cudaMemcpy(r.buf.weights, wts.data(), wts.size() * sizeof(float),
                     cudaMemcpyHostToDevice));
    std::vector<int> ids(1024);
    for (int i = 0; i < 1024; ++i) ids[i] = (int)(lcg(state) % 64);
    CHECK(cudaMalloc(&r.buf.ids, ids.size() * sizeof(int)));
    CHECK(cudaMemcpy(r.buf.ids, ids.data(), ids.size() * sizeof(int), cudaMemcpyHostToDevice));
    CHECK(cudaMalloc(&r.buf.scratch, 2 * (POOL / 2) * sizeof(float)));
    CHECK(cudaMalloc(&r.buf.iout, 1024 * sizeof(int)));
  }
  for (int s = 0; s < steps; ++s) step(r, s, layers);
  if (!list_only) {
    printf("hilsim-workload done: %ld of %ld launches run\n", r.ran, r.next);
    fflush(stdout);
  }
  if (r.use_list) {
    for (long k : r.only) {
      if (k < 0 || k >= r.next) {
        fprintf(stderr, "transformer_step: launch %ld is not in the schedule (0..%ld)\n", k,
                r.next - 1);
        return 2;
      }
    }
  }
  return 0;
}
