/* Stand-in for CUPTI and a CUDA program, to test the injection library's exit and signal
 * paths without a GPU (tests/test_cupti_native.py).
 *
 * Linked with agent/native/hilsim_cupti.c and cupti_records.c instead of libcupti: the
 * CUPTI functions the library calls are defined here and deliver the records this program
 * "launched" when the library flushes, as CUPTI does. The program:
 *
 *   cupti_standin MODE N
 *
 * installs its own SIGTERM handler first when MODE is "own-handler" (it writes
 * "program handler ran" to stderr and exits 3), calls InitializeInjection(), queues N
 * kernels with their launching runtime calls and one NVTX range left open, then
 *   exit0 / exit3      : exit(0) / exit(3);
 *   wait / own-handler : prints "ready" and waits for a signal;
 *   bench              : N launches delivered 1,000 at a time through the library's buffer
 *                        callback, then prints the CPU and wall nanoseconds per launch (kernel + API
 *                        record, formatting and spooling included) and exits 0.
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cupti_activity.h>
#include <cupti_version.h>

#include "cupti_records.h"

int InitializeInjection(void);

static CUpti_BuffersCallbackRequestFunc requested;
static CUpti_BuffersCallbackCompleteFunc completed;
static unsigned char queue[1 << 20];
static size_t queued;

#define STEP(size) (((size) + 7u) & ~(size_t)7u)

static size_t record_size(const CUpti_Activity *record) {
    switch (record->kind) {
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: return STEP(sizeof(hs_kernel_record));
    case CUPTI_ACTIVITY_KIND_RUNTIME:
    case CUPTI_ACTIVITY_KIND_DRIVER: return STEP(sizeof(CUpti_ActivityAPI));
    default: return STEP(sizeof(CUpti_ActivityMarker2));
    }
}

static void enqueue(const void *record) {
    size_t size = record_size(record);
    memcpy(queue + queued, record, size);
    queued += size;
}

CUptiResult cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc request,
                                           CUpti_BuffersCallbackCompleteFunc complete) {
    requested = request;
    completed = complete;
    return CUPTI_SUCCESS;
}
CUptiResult cuptiActivityEnable(CUpti_ActivityKind kind) { (void)kind; return CUPTI_SUCCESS; }
CUptiResult cuptiActivityEnableDriverApi(CUpti_CallbackId cbid, uint8_t enable) {
    (void)cbid; (void)enable; return CUPTI_SUCCESS;
}
CUptiResult cuptiActivityEnableRuntimeApi(CUpti_CallbackId cbid, uint8_t enable) {
    (void)cbid; (void)enable; return CUPTI_SUCCESS;
}
CUptiResult cuptiGetVersion(uint32_t *version) { *version = 1; return CUPTI_SUCCESS; }
CUptiResult cuptiGetResultString(CUptiResult result, const char **text) {
    (void)result; *text = "stand-in"; return CUPTI_SUCCESS;
}
CUptiResult cuptiGetTimestamp(uint64_t *stamp) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    *stamp = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
    return CUPTI_SUCCESS;
}
CUptiResult cuptiActivityGetNumDroppedRecords(CUcontext context, uint32_t stream, size_t *n) {
    (void)context; (void)stream; *n = 0; return CUPTI_SUCCESS;
}
CUptiResult cuptiActivityGetNextRecord(uint8_t *buffer, size_t valid, CUpti_Activity **record) {
    uint8_t *next = *record ? (uint8_t *)*record + record_size(*record) : buffer;
    if (next >= buffer + valid) return CUPTI_ERROR_MAX_LIMIT_REACHED;
    *record = (CUpti_Activity *)next;
    return CUPTI_SUCCESS;
}
CUptiResult cuptiActivityFlushAll(uint32_t flag) {
    (void)flag;
    if (!queued || !requested) return CUPTI_SUCCESS;
    uint8_t *buffer = NULL;
    size_t size = 0, max_records = 0;
    requested(&buffer, &size, &max_records);
    size_t valid = queued < size ? queued : size;
    memcpy(buffer, queue, valid);
    queued = 0;
    completed(NULL, 0, buffer, size, valid);
    return CUPTI_SUCCESS;
}

static void program_handler(int signum) {
    (void)signum;
    static const char said[] = "program handler ran\n";
    write(2, said, sizeof said - 1);
    _exit(3);
}

static void launch_from(int first, int n, int with_marker) {
    uint64_t t0;
    cuptiGetTimestamp(&t0);
    for (int i = first; i < first + n; i++) {
        CUpti_ActivityAPI call;
        memset(&call, 0, sizeof call);
        call.kind = CUPTI_ACTIVITY_KIND_RUNTIME;
        call.cbid = 211; /* cudaLaunchKernel_v7000 */
        call.start = t0 + 1000u * (uint64_t)i;
        call.end = call.start + 400;
        call.processId = (uint32_t)getpid();
        call.threadId = 77;
        call.correlationId = (uint32_t)(i + 1);
        enqueue(&call);
        hs_kernel_record k;
        memset(&k, 0, sizeof k);
        k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
        k.start = call.start + 500;
        k.end = k.start + 300;
        k.correlationId = call.correlationId;
        k.gridX = i + 1;
        k.gridY = k.gridZ = k.blockY = k.blockZ = 1;
        k.blockX = 128;
        k.name = "_Z9standin_kPf";
        enqueue(&k);
    }
    if (!with_marker) return;
    CUpti_ActivityMarker2 start;
    memset(&start, 0, sizeof start);
    start.kind = CUPTI_ACTIVITY_KIND_MARKER;
    start.flags = CUPTI_ACTIVITY_FLAG_MARKER_START;
    start.id = 1;
    start.timestamp = t0 - 100000; /* 100 us before the first call */
    start.objectId.pt.threadId = 77;
    start.name = "open phase";
    enqueue(&start);
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "exit0";
    int n = argc > 2 ? atoi(argv[2]) : 10;
    if (strcmp(mode, "own-handler") == 0) signal(SIGTERM, program_handler);
    InitializeInjection(); /* a program runs on whether or not CUPTI started */
    if (strcmp(mode, "bench") == 0) {
        uint64_t t0, t1;
        struct timespec c0, c1;
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
        cuptiGetTimestamp(&t0);
        for (int done = 0; done < n; done += 1000) {
            launch_from(done, 1000, 0);
            cuptiActivityFlushAll(0);
        }
        cuptiGetTimestamp(&t1);
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1);
        double cpu = (double)(c1.tv_sec - c0.tv_sec) * 1e9 + (double)(c1.tv_nsec - c0.tv_nsec);
        printf("%.1f ns CPU, %.1f ns wall per launch\n", cpu / n, (double)(t1 - t0) / n);
        exit(0);
    }
    launch_from(0, n, 1);
    if (strcmp(mode, "exit0") == 0) exit(0);
    if (strcmp(mode, "exit3") == 0) exit(3);
    printf("ready\n");
    fflush(stdout);
    for (;;) pause();
}
