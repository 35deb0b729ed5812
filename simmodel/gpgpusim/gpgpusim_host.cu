// Generic host driver of the microbenchmark suite on GPGPU-Sim (hilsim.simmodel.gpgpusim.simhost).
//
// CuPy cannot drive the simulator (its driver-API entry points are stubs), so the suite's
// kernel source text (hilsim.microbench.sources.all_sources(), through
// simhost.sim_kernel_text) is compiled by nvcc together with this driver into one host
// program. The program reads a plan, one command per line, and carries it out on the
// simulated card:
//
//   buf    NAME BYTES                 cudaMalloc + zero (cudaMemset)
//   chain  NAME STRIDE FILE           pointer chain: FILE holds N int64 'next' indices; the
//                                     8-byte word at node i (byte i*STRIDE) becomes
//                                     base + next[i]*STRIDE (absolute device addresses)
//   u32s   NAME FILE                  copy FILE's bytes into the buffer (host -> device)
//   fill32 NAME VALUE                 every 32-bit word of the buffer = VALUE
//   launch KERNEL GX GY GZ BX BY BZ SMEM ARG...
//            ARG: buf:NAME | i32:V | u32:V | i64:V | u64:V | f32:HEXBITS | f64:HEXBITS
//   dump   NAME FILE                  write the buffer (device -> host) to FILE
//
// Every launch is followed by cudaDeviceSynchronize and an error check. The driver prints
// "HILSIM_LAUNCH <index> <kernel>" before each launch so that the simulator's per-kernel
// statistics in the log can be matched to the plan. Any error: one line
// "HILSIM_ERROR ..." on stderr and exit status 2.
//
// The kernel table HILSIM_KERNELS[] (name, host stub) is generated in front of this text.

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cstdint>
#include <string>
#include <vector>
#include <map>

// GPGPU-Sim's cudaLaunchKernel (CUDA >= 10) takes the configuration from the launch stack
// that nvcc's <<<...>>> stubs fill with this call; a generic driver pushes it itself.
extern "C" unsigned __cudaPushCallConfiguration(dim3 gridDim, dim3 blockDim, size_t sharedMem,
                                                struct CUstream_st* stream);

struct HilsimBuf {
    void* ptr;
    size_t bytes;
};

static std::map<std::string, HilsimBuf> g_bufs;

static void hilsim_fail(const char* what, const std::string& detail) {
    fprintf(stderr, "HILSIM_ERROR %s: %s\n", what, detail.c_str());
    fflush(stderr);
    exit(2);
}

static void hilsim_check(cudaError_t err, const std::string& where) {
    if (err != cudaSuccess) hilsim_fail(where.c_str(), cudaGetErrorString(err));
}

static std::vector<char> hilsim_read_file(const std::string& path) {
    FILE* f = fopen(path.c_str(), "rb");
    if (!f) hilsim_fail("cannot open", path);
    std::vector<char> data;
    char chunk[1 << 16];
    size_t got;
    while ((got = fread(chunk, 1, sizeof(chunk), f)) > 0) data.insert(data.end(), chunk, chunk + got);
    fclose(f);
    return data;
}

static HilsimBuf& hilsim_buf(const std::string& name) {
    std::map<std::string, HilsimBuf>::iterator it = g_bufs.find(name);
    if (it == g_bufs.end()) hilsim_fail("no such buffer", name);
    return it->second;
}

static const void* hilsim_kernel(const std::string& name) {
    for (size_t i = 0; i < sizeof(HILSIM_KERNELS) / sizeof(HILSIM_KERNELS[0]); ++i) {
        if (name == HILSIM_KERNELS[i].name) return HILSIM_KERNELS[i].fn;
    }
    hilsim_fail("no such kernel", name);
    return 0;
}

static std::vector<std::string> hilsim_split(const std::string& line) {
    std::vector<std::string> out;
    size_t i = 0;
    while (i < line.size()) {
        while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
        size_t j = i;
        while (j < line.size() && line[j] != ' ' && line[j] != '\t') ++j;
        if (j > i) out.push_back(line.substr(i, j - i));
        i = j;
    }
    return out;
}

static unsigned long long hilsim_u64(const std::string& s) {
    char* end = 0;
    unsigned long long v = strtoull(s.c_str(), &end, 0);
    if (!end || *end) hilsim_fail("not a number", s);
    return v;
}

static long long hilsim_i64(const std::string& s) {
    char* end = 0;
    long long v = strtoll(s.c_str(), &end, 0);
    if (!end || *end) hilsim_fail("not a number", s);
    return v;
}

int main(int argc, char** argv) {
    if (argc != 2) hilsim_fail("usage", "prog PLAN");
    std::vector<char> text = hilsim_read_file(argv[1]);
    std::string all(text.begin(), text.end());
    size_t pos = 0;
    int lineno = 0, launches = 0;
    while (pos < all.size()) {
        size_t nl = all.find('\n', pos);
        if (nl == std::string::npos) nl = all.size();
        std::string line = all.substr(pos, nl - pos);
        pos = nl + 1;
        ++lineno;
        std::vector<std::string> w = hilsim_split(line);
        if (w.empty() || w[0][0] == '#') continue;
        const std::string& cmd = w[0];
        std::string where = std::string("plan line ") + std::to_string(lineno);
        if (cmd == "buf" && w.size() == 3) {
            HilsimBuf b;
            b.bytes = (size_t)hilsim_u64(w[2]);
            hilsim_check(cudaMalloc(&b.ptr, b.bytes), where + " cudaMalloc");
            hilsim_check(cudaMemset(b.ptr, 0, b.bytes), where + " cudaMemset");
            g_bufs[w[1]] = b;
        } else if (cmd == "chain" && w.size() == 4) {
            HilsimBuf& b = hilsim_buf(w[1]);
            unsigned long long stride = hilsim_u64(w[2]);
            std::vector<char> raw = hilsim_read_file(w[3]);
            size_t n = raw.size() / 8;
            if (n * stride > b.bytes || stride % 8) hilsim_fail("chain does not fit", where);
            std::vector<unsigned long long> image(b.bytes / 8, 0ull);
            const long long* next = (const long long*)raw.data();
            unsigned long long base = (unsigned long long)(uintptr_t)b.ptr;
            for (size_t i = 0; i < n; ++i) {
                if (next[i] < 0 || (size_t)next[i] >= n) hilsim_fail("chain index out of range", where);
                image[i * stride / 8] = base + (unsigned long long)next[i] * stride;
            }
            hilsim_check(cudaMemcpy(b.ptr, image.data(), b.bytes, cudaMemcpyHostToDevice),
                         where + " cudaMemcpy");
        } else if (cmd == "u32s" && w.size() == 3) {
            HilsimBuf& b = hilsim_buf(w[1]);
            std::vector<char> raw = hilsim_read_file(w[2]);
            if (raw.size() > b.bytes) hilsim_fail("file larger than buffer", where);
            hilsim_check(cudaMemcpy(b.ptr, raw.data(), raw.size(), cudaMemcpyHostToDevice),
                         where + " cudaMemcpy");
        } else if (cmd == "fill32" && w.size() == 3) {
            HilsimBuf& b = hilsim_buf(w[1]);
            std::vector<unsigned int> image(b.bytes / 4, (unsigned int)hilsim_u64(w[2]));
            hilsim_check(cudaMemcpy(b.ptr, image.data(), image.size() * 4, cudaMemcpyHostToDevice),
                         where + " cudaMemcpy");
        } else if (cmd == "launch" && w.size() >= 9) {
            const void* fn = hilsim_kernel(w[1]);
            dim3 grid((unsigned)hilsim_u64(w[2]), (unsigned)hilsim_u64(w[3]), (unsigned)hilsim_u64(w[4]));
            dim3 block((unsigned)hilsim_u64(w[5]), (unsigned)hilsim_u64(w[6]), (unsigned)hilsim_u64(w[7]));
            size_t smem = (size_t)hilsim_u64(w[8]);
            size_t nargs = w.size() - 9;
            std::vector<unsigned long long> slots(nargs + 1, 0ull);  // 8 bytes per argument
            std::vector<void*> args(nargs + 1, (void*)0);
            for (size_t a = 0; a < nargs; ++a) {
                const std::string& s = w[9 + a];
                size_t colon = s.find(':');
                if (colon == std::string::npos) hilsim_fail("argument needs TYPE:VALUE", s);
                std::string type = s.substr(0, colon), val = s.substr(colon + 1);
                void* slot = &slots[a];
                if (type == "buf") {
                    void* p = hilsim_buf(val).ptr;
                    memcpy(slot, &p, sizeof(p));
                } else if (type == "i32") {
                    int v = (int)hilsim_i64(val);
                    memcpy(slot, &v, 4);
                } else if (type == "u32" || type == "f32") {
                    unsigned int v = (unsigned int)hilsim_u64(val);
                    memcpy(slot, &v, 4);
                } else if (type == "i64") {
                    long long v = hilsim_i64(val);
                    memcpy(slot, &v, 8);
                } else if (type == "u64" || type == "f64") {
                    unsigned long long v = hilsim_u64(val);
                    memcpy(slot, &v, 8);
                } else {
                    hilsim_fail("unknown argument type", s);
                }
                args[a] = slot;
            }
            printf("HILSIM_LAUNCH %d %s\n", launches++, w[1].c_str());
            fflush(stdout);
            __cudaPushCallConfiguration(grid, block, smem, 0);
            hilsim_check(cudaLaunchKernel(fn, grid, block, args.data(), smem, 0), where + " launch");
            hilsim_check(cudaDeviceSynchronize(), where + " synchronize");
            hilsim_check(cudaGetLastError(), where + " kernel");
        } else if (cmd == "dump" && w.size() == 3) {
            HilsimBuf& b = hilsim_buf(w[1]);
            std::vector<char> image(b.bytes);
            hilsim_check(cudaMemcpy(image.data(), b.ptr, b.bytes, cudaMemcpyDeviceToHost),
                         where + " cudaMemcpy");
            FILE* f = fopen(w[2].c_str(), "wb");
            if (!f || fwrite(image.data(), 1, image.size(), f) != image.size()) hilsim_fail("cannot write", w[2]);
            fclose(f);
        } else {
            hilsim_fail("bad plan line", where + ": " + line);
        }
    }
    printf("HILSIM_DONE %d launches\n", launches);
    fflush(stdout);
    return 0;
}
