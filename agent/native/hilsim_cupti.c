/* hilsim's CUPTI injection library: the cupti light profiler for any CUDA program.
 *
 * The CUDA driver loads it when CUDA_INJECTION64_PATH names it and calls
 * InitializeInjection() during cuInit (CUPTI guide, "CUPTI Injection"). It enables
 * CONCURRENT_KERNEL activity records (kernels are not serialised), RUNTIME and DRIVER
 * records of the launching calls only (every other callback id switched off at the
 * source, the rest skipped in the buffer callback), and MARKER records when
 * NVTX_INJECTION64_PATH names libcupti (NVTX ranges, CUPTI guide "NVTX"). Records are
 * handled in C (cupti_records.c) and written as hilsim.cupti-records/1, the file the
 * in-process backend writes, to $HILSIM_CUPTI_OUT ("%p" becomes the process id):
 *
 *   - at exit (on_exit: the exit status decides "complete"), after synchronising the
 *     current context and a forced flush;
 *   - on SIGINT / SIGTERM: the handler wakes a writer thread (signals blocked there),
 *     waits for it (at most $HILSIM_CUPTI_SIGNAL_WAIT_S, default 20 s), then passes the
 *     signal on to the program's own handler, or to the default action.
 *
 * When CUPTI cannot start (no driver, a CUPTI that does not match), InitializeInjection
 * prints one line, writes a records file whose header carries "error", and returns 0:
 * the program runs on, unprofiled.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cupti_activity.h>
#include <cupti_driver_cbid.h>
#include <cupti_runtime_cbid.h>
#include <cupti_version.h>

#include "cupti_records.h"

/* per-API switches (CUPTI 12.x added them; weak: absent in an older libcupti) */
extern CUptiResult cuptiActivityEnableDriverApi(CUpti_CallbackId cbid, uint8_t enable)
    __attribute__((weak));
extern CUptiResult cuptiActivityEnableRuntimeApi(CUpti_CallbackId cbid, uint8_t enable)
    __attribute__((weak));

#define HS_PREFIX "hilsim-cupti: "
#define HS_ALIGN 8

static size_t buffer_bytes = 8u << 20;
static int initialised, recording;
static sem_t flush_request, flush_done;
static volatile sig_atomic_t pending_signal;
static int signal_wait_s = 20;
static struct sigaction previous_int, previous_term;

static const char *result_text(CUptiResult status) {
    const char *text = NULL;
    if (cuptiGetResultString(status, &text) != CUPTI_SUCCESS || !text) return "unknown error";
    return text;
}

static uint64_t now_ns(void) {
    uint64_t stamp = 0;
    if (cuptiGetTimestamp(&stamp) != CUPTI_SUCCESS) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        stamp = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
    }
    return stamp;
}

/* ---- CUPTI buffers ---------------------------------------------------------------- */
static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records) {
    void *memory = NULL;
    *buffer = posix_memalign(&memory, HS_ALIGN, buffer_bytes) == 0 ? memory : NULL;
    *size = *buffer ? buffer_bytes : 0;
    *max_records = 0;
}

static void CUPTIAPI buffer_completed(CUcontext context, uint32_t stream, uint8_t *buffer,
                                      size_t size, size_t valid) {
    (void)size;
    /* a stop signal must not land in this thread while it holds the recorder's lock */
    sigset_t stops, saved;
    sigemptyset(&stops);
    sigaddset(&stops, SIGINT);
    sigaddset(&stops, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stops, &saved);
    CUpti_Activity *record = NULL;
    hs_lock();
    while (valid > 0 && cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS)
        hs_handle_record(record);
    size_t dropped = 0;
    if (cuptiActivityGetNumDroppedRecords(context, stream, &dropped) == CUPTI_SUCCESS)
        hs_add_cupti_dropped(dropped);
    hs_unlock();
    free(buffer);
    pthread_sigmask(SIG_SETMASK, &saved, NULL);
}

/* ---- writing ---------------------------------------------------------------------- */
static void write_records(int complete, const char *reason) {
    char err[512];
    if (hs_write(complete, reason, now_ns(), err, sizeof err))
        fprintf(stderr, HS_PREFIX "error: %s\n", err);
}

/* Wait for the current context's work (a normal exit only, never from a signal). */
static void synchronize_context(void) {
    void *cuda = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
    if (!cuda) return;
    CUresult (*get_current)(CUcontext *) = (CUresult(*)(CUcontext *))dlsym(cuda, "cuCtxGetCurrent");
    CUresult (*synchronize)(void) = (CUresult(*)(void))dlsym(cuda, "cuCtxSynchronize");
    CUcontext current = NULL;
    if (get_current && synchronize && get_current(&current) == CUDA_SUCCESS && current)
        synchronize();
    dlclose(cuda);
}

static void at_exit(int status, void *unused) {
    (void)unused;
    if (!recording) return;
    synchronize_context();
    cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    char reason[64] = "";
    if (status != 0) snprintf(reason, sizeof reason, "workload exited with code %d", status);
    write_records(status == 0, reason[0] ? reason : NULL);
}

/* ---- stop signals ----------------------------------------------------------------- */
static void *signal_writer(void *unused) {
    (void)unused;
    for (;;) {
        while (sem_wait(&flush_request) != 0 && errno == EINTR) {
        }
        char reason[64];
        snprintf(reason, sizeof reason, "stopped by %s",
                 pending_signal == SIGINT ? "SIGINT" : pending_signal == SIGTERM ? "SIGTERM" : "a signal");
        cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
        write_records(0, reason);
        sem_post(&flush_done);
    }
    return NULL;
}

static void chain(int signum, siginfo_t *info, void *context) {
    const struct sigaction *before = signum == SIGINT ? &previous_int : &previous_term;
    if (before->sa_flags & SA_SIGINFO) {
        if (before->sa_sigaction) before->sa_sigaction(signum, info, context);
    } else if (before->sa_handler == SIG_IGN) {
        return;
    } else if (before->sa_handler == SIG_DFL) {
        signal(signum, SIG_DFL); /* delivered again once this handler returns: the
                                    default action, so the exit status names the signal */
        raise(signum);
    } else {
        before->sa_handler(signum);
    }
}

static void on_stop_signal(int signum, siginfo_t *info, void *context) {
    int saved_errno = errno;
    pending_signal = signum;
    sem_post(&flush_request);
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += signal_wait_s;
    while (sem_timedwait(&flush_done, &until) != 0 && errno == EINTR) {
    }
    errno = saved_errno;
    chain(signum, info, context);
}

static void install_stop_handlers(void) {
    const char *wait = getenv("HILSIM_CUPTI_SIGNAL_WAIT_S");
    if (wait && atoi(wait) > 0) signal_wait_s = atoi(wait);
    if (sem_init(&flush_request, 0, 0) || sem_init(&flush_done, 0, 0)) return;
    sigset_t all, saved;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &saved); /* the writer thread takes no signal */
    pthread_t writer;
    int started = pthread_create(&writer, NULL, signal_writer, NULL) == 0;
    pthread_sigmask(SIG_SETMASK, &saved, NULL);
    if (!started) return;
    pthread_detach(writer);
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_sigaction = on_stop_signal;
    action.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&action.sa_mask);
    sigaction(SIGINT, &action, &previous_int);
    sigaction(SIGTERM, &action, &previous_term);
}

/* ---- start ------------------------------------------------------------------------ */
/* Switch off the records of every non-launch API; say what was done (the header's
 * "api_filter", as the in-process backend words it). */
static void restrict_to_launches(char *said, size_t said_len) {
    if (!cuptiActivityEnableDriverApi || !cuptiActivityEnableRuntimeApi) {
        snprintf(said, said_len, "callback only (no per-API switch in this CUPTI)");
        return;
    }
    unsigned refused = 0;
    for (uint32_t cbid = 1; cbid < CUPTI_DRIVER_TRACE_CBID_SIZE; cbid++)
        if (!hs_is_launch_api(CUPTI_ACTIVITY_KIND_DRIVER, cbid) &&
            cuptiActivityEnableDriverApi(cbid, 0) != CUPTI_SUCCESS)
            refused++;
    for (uint32_t cbid = 1; cbid < CUPTI_RUNTIME_TRACE_CBID_SIZE; cbid++)
        if (!hs_is_launch_api(CUPTI_ACTIVITY_KIND_RUNTIME, cbid) &&
            cuptiActivityEnableRuntimeApi(cbid, 0) != CUPTI_SUCCESS)
            refused++;
    if (refused)
        snprintf(said, said_len, "cupti (%u ids refused)", refused);
    else
        snprintf(said, said_len, "cupti");
}

static int fail(const char *what, CUptiResult status) {
    hs_info *info = hs_header_info();
    snprintf(info->error, sizeof info->error, "%s failed: %s (CUPTI %d)", what, result_text(status),
             (int)status);
    fprintf(stderr, HS_PREFIX "error: CUPTI could not start: %s; the program runs unprofiled\n",
            info->error);
    write_records(0, info->error);
    return 0;
}

static int start_recording(void) {
    hs_info *info = hs_header_info();
    uint32_t version = 0;
    if (cuptiGetVersion(&version) == CUPTI_SUCCESS)
        snprintf(info->tool_version, sizeof info->tool_version, "CUPTI API %u", version);
    CUptiResult status = cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed);
    if (status != CUPTI_SUCCESS) return fail("cuptiActivityRegisterCallbacks", status);
    const CUpti_ActivityKind kinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
                                        CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_ACTIVITY_KIND_DRIVER};
    const char *names[] = {"cuptiActivityEnable(CONCURRENT_KERNEL)",
                           "cuptiActivityEnable(RUNTIME)", "cuptiActivityEnable(DRIVER)"};
    for (int i = 0; i < 3; i++)
        if ((status = cuptiActivityEnable(kinds[i])) != CUPTI_SUCCESS) return fail(names[i], status);
    restrict_to_launches(info->api_filter, sizeof info->api_filter);
    const char *nvtx = getenv("NVTX_INJECTION64_PATH");
    if (nvtx && *nvtx) {
        if ((status = cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MARKER)) == CUPTI_SUCCESS)
            snprintf(info->nvtx_injection, sizeof info->nvtx_injection, "%s", nvtx);
        else
            fprintf(stderr, HS_PREFIX "NVTX marker records unavailable (%s); the program's own NVTX "
                            "ranges are not recorded\n", result_text(status));
    }
    recording = 1;
    install_stop_handlers();
    on_exit(at_exit, NULL); /* last: runs before CUPTI's own exit handlers */
    return 1;
}

/* The output path: $HILSIM_CUPTI_OUT with "%p" replaced by the process id. */
static int output_path(char *path, size_t len) {
    const char *pattern = getenv("HILSIM_CUPTI_OUT");
    if (!pattern || !*pattern) return -1;
    size_t at = 0;
    for (const char *p = pattern; *p && at + 24 < len; p++) {
        if (p[0] == '%' && p[1] == 'p') {
            at += (size_t)snprintf(path + at, len - at, "%d", (int)getpid());
            p++;
        } else {
            path[at++] = *p;
        }
    }
    path[at] = '\0';
    return 0;
}

__attribute__((visibility("default"))) int InitializeInjection(void) {
    if (initialised) return 1;
    initialised = 1;
    const char *size = getenv("HILSIM_CUPTI_BUFFER_BYTES");
    if (size && atol(size) >= (1 << 16)) buffer_bytes = (size_t)atol(size);
    char path[4096], err[512];
    if (output_path(path, sizeof path)) {
        fprintf(stderr, HS_PREFIX "HILSIM_CUPTI_OUT is not set: nothing is recorded\n");
        return 0;
    }
    if (hs_open(path, err, sizeof err)) {
        fprintf(stderr, HS_PREFIX "error: %s; the program runs unprofiled\n", err);
        return 0;
    }
    return start_recording();
}
