/* Record handling and the records file of the CUPTI injection library (cupti_records.h).
 *
 * Per record, in the thread CUPTI hands the buffer to:
 *   kernel  -> one JSON line appended to an unlinked spool file, its correlation id kept;
 *   API     -> dropped unless a launch API (cbid), else 48 bytes appended to a second spool;
 *   marker  -> START kept open by id, END closes it into a range (names copied).
 * At the end (exit, signal) hs_write copies the kernel spool, the API calls whose
 * correlation id belongs to a kernel, and the ranges into a temporary sibling of the
 * output and renames it. Nothing here allocates per kernel or per API record beyond the
 * amortised growth of two arrays.
 */
#define _GNU_SOURCE
#include "cupti_records.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libgen.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hs_launch_cbids.h"

#define HS_SPOOL_FLUSH (1u << 20)
#define HS_SCHEMA "hilsim.cupti-records/1"

/* ---- growable text buffer ------------------------------------------------------- */
typedef struct {
    char *data;
    size_t len, cap;
} hs_text;

static int text_reserve(hs_text *t, size_t more) {
    if (t->len + more <= t->cap) return 0;
    size_t cap = t->cap ? t->cap : 4096;
    while (cap < t->len + more) cap *= 2;
    char *grown = realloc(t->data, cap);
    if (!grown) return -1;
    t->data = grown;
    t->cap = cap;
    return 0;
}

static void text_add(hs_text *t, const char *s, size_t n) {
    if (text_reserve(t, n) == 0) {
        memcpy(t->data + t->len, s, n);
        t->len += n;
    }
}

static void text_str(hs_text *t, const char *s) { text_add(t, s, strlen(s)); }

/* Decimal digits, written backwards into a small buffer (snprintf costs ~10x more). */
static void text_u64(hs_text *t, uint64_t v) {
    char digits[24];
    char *p = digits + sizeof digits;
    do {
        *--p = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    text_add(t, p, (size_t)(digits + sizeof digits - p));
}

static void text_i64(hs_text *t, int64_t v) {
    if (v < 0) {
        text_add(t, "-", 1);
        text_u64(t, (uint64_t)0 - (uint64_t)v);
    } else {
        text_u64(t, (uint64_t)v);
    }
}

/* Length of the valid UTF-8 sequence at s (0 when it is not one). */
static size_t utf8_length(const unsigned char *s) {
    if (s[0] < 0x80) return 1;
    size_t n = (s[0] & 0xE0) == 0xC0 ? 2 : (s[0] & 0xF0) == 0xE0 ? 3 : (s[0] & 0xF8) == 0xF0 ? 4 : 0;
    if (n == 0 || (n == 2 && s[0] < 0xC2)) return 0;
    for (size_t i = 1; i < n; i++)
        if ((s[i] & 0xC0) != 0x80) return 0;
    return n;
}

/* A JSON string: quotes, backslashes and control characters escaped; bytes that are not
 * UTF-8 become U+FFFD (what the in-process backend's errors="replace" decoding gives). */
static void text_json(hs_text *t, const char *s) {
    if (!s) {
        text_str(t, "null");
        return;
    }
    text_add(t, "\"", 1);
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        if (*p == '"' || *p == '\\') {
            char esc[2] = {'\\', (char)*p};
            text_add(t, esc, 2);
            p++;
        } else if (*p < 0x20) {
            char esc[8];
            snprintf(esc, sizeof esc, "\\u%04x", *p);
            text_add(t, esc, 6);
            p++;
        } else {
            size_t n = utf8_length(p);
            if (n == 0) {
                text_str(t, "\\ufffd");
                p++;
            } else {
                text_add(t, (const char *)p, n);
                p += n;
            }
        }
    }
    text_add(t, "\"", 1);
}

/* ---- spools: append-only files, unlinked at creation ------------------------------ */
typedef struct {
    int fd;
    hs_text pending;
    uint64_t written;
} hs_spool;

static int spool_flush(hs_spool *s) {
    size_t done = 0;
    while (done < s->pending.len) {
        ssize_t n = write(s->fd, s->pending.data + done, s->pending.len - done);
        if (n < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        done += (size_t)n;
    }
    s->written += done;
    s->pending.len = 0;
    return 0;
}

static void spool_add(hs_spool *s, const void *data, size_t n) {
    text_add(&s->pending, data, n);
    if (s->pending.len >= HS_SPOOL_FLUSH) spool_flush(s);
}

/* ---- the recorder ----------------------------------------------------------------- */
typedef struct {
    uint64_t start, end;
    uint32_t correlation_id, thread_id, process_id, cbid, api; /* api: 1 runtime, 2 driver */
    uint32_t pad;
} hs_call;

typedef struct {
    uint32_t id, thread_id;
    uint64_t start, end;
    char *name, *domain;
} hs_range;

typedef struct {
    hs_range *items;
    size_t len, cap;
} hs_ranges;

static struct {
    pthread_mutex_t lock;
    int opened;
    char out[PATH_MAX];
    hs_spool kernels, calls;
    uint32_t *correlations;
    size_t n_kernels, cap_correlations;
    uint64_t n_calls;
    hs_ranges open_markers, ranges;
    uint64_t dropped_incomplete, api_skipped, cupti_dropped;
    int finished, complete;
    char reason[512];
    hs_info info;
} R = {.lock = PTHREAD_MUTEX_INITIALIZER};

hs_info *hs_header_info(void) { return &R.info; }
void hs_lock(void) { pthread_mutex_lock(&R.lock); }
void hs_unlock(void) { pthread_mutex_unlock(&R.lock); }
void hs_add_cupti_dropped(uint64_t count) { R.cupti_dropped += count; }

int hs_is_launch_api(CUpti_ActivityKind kind, uint32_t cbid) {
    const uint32_t *ids = kind == CUPTI_ACTIVITY_KIND_RUNTIME ? HS_RUNTIME_LAUNCH_CBIDS
                                                              : HS_DRIVER_LAUNCH_CBIDS;
    size_t n = kind == CUPTI_ACTIVITY_KIND_RUNTIME
                   ? sizeof HS_RUNTIME_LAUNCH_CBIDS / sizeof HS_RUNTIME_LAUNCH_CBIDS[0]
                   : sizeof HS_DRIVER_LAUNCH_CBIDS / sizeof HS_DRIVER_LAUNCH_CBIDS[0];
    for (size_t i = 0; i < n; i++)
        if (ids[i] == cbid) return 1;
    return 0;
}

static int open_spool(hs_spool *s, const char *folder, char *err, size_t err_len) {
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/.hilsim-cupti-spool.%d.XXXXXX", folder, (int)getpid());
    s->fd = mkstemp(path);
    if (s->fd < 0) {
        snprintf(err, err_len, "cannot create a spool file in %s: %s", folder, strerror(errno));
        return -1;
    }
    unlink(path); /* only this process holds it: nothing is left behind however it ends */
    return 0;
}

int hs_open(const char *out_path, char *err, size_t err_len) {
    if (strlen(out_path) >= sizeof R.out - 32) {
        snprintf(err, err_len, "output path too long: %s", out_path);
        return -1;
    }
    snprintf(R.out, sizeof R.out, "%s", out_path);
    char copy[PATH_MAX];
    snprintf(copy, sizeof copy, "%s", out_path);
    const char *folder = dirname(copy);
    if (open_spool(&R.kernels, folder, err, err_len) || open_spool(&R.calls, folder, err, err_len))
        return -1;
    R.opened = 1;
    R.complete = 1;
    return 0;
}

static int complete_times(uint64_t start, uint64_t end) {
    return start > 0 && end > 0 && end >= start; /* CUPTI_TIMESTAMP_UNKNOWN is 0 */
}

static void kernel_record(const hs_kernel_record *k) {
    if (!complete_times(k->start, k->end)) {
        R.dropped_incomplete++;
        return;
    }
    if (R.n_kernels == R.cap_correlations) {
        size_t cap = R.cap_correlations ? 2 * R.cap_correlations : 65536;
        uint32_t *grown = realloc(R.correlations, cap * sizeof *grown);
        if (!grown) {
            R.dropped_incomplete++;
            return;
        }
        R.correlations = grown;
        R.cap_correlations = cap;
    }
    R.correlations[R.n_kernels++] = k->correlationId;
    hs_text *t = &R.kernels.pending;
    text_str(t, "{\"name\":");
    text_json(t, k->name ? k->name : "");
    text_str(t, ",\"start\":");
    text_u64(t, k->start);
    text_str(t, ",\"end\":");
    text_u64(t, k->end);
    text_str(t, ",\"correlation_id\":");
    text_u64(t, k->correlationId);
    text_str(t, ",\"device_id\":");
    text_u64(t, k->deviceId);
    text_str(t, ",\"stream_id\":");
    text_u64(t, k->streamId);
    text_str(t, ",\"context_id\":");
    text_u64(t, k->contextId);
    text_str(t, ",\"grid_x\":");
    text_i64(t, k->gridX);
    text_str(t, ",\"grid_y\":");
    text_i64(t, k->gridY);
    text_str(t, ",\"grid_z\":");
    text_i64(t, k->gridZ);
    text_str(t, ",\"block_x\":");
    text_i64(t, k->blockX);
    text_str(t, ",\"block_y\":");
    text_i64(t, k->blockY);
    text_str(t, ",\"block_z\":");
    text_i64(t, k->blockZ);
    text_str(t, ",\"registers_per_thread\":");
    text_u64(t, k->registersPerThread);
    text_str(t, ",\"static_shared_memory\":");
    text_i64(t, k->staticSharedMemory);
    text_str(t, ",\"dynamic_shared_memory\":");
    text_i64(t, k->dynamicSharedMemory);
    text_str(t, ",\"kind\":\"kernel\"}\n");
    if (t->len >= HS_SPOOL_FLUSH) spool_flush(&R.kernels);
}

static void api_record(const CUpti_ActivityAPI *a) {
    if (!hs_is_launch_api(a->kind, a->cbid)) {
        R.api_skipped++; /* not a launch: read no further */
        return;
    }
    if (!complete_times(a->start, a->end)) {
        R.dropped_incomplete++;
        return;
    }
    hs_call call = {a->start, a->end, a->correlationId, a->threadId, a->processId, a->cbid,
                    a->kind == CUPTI_ACTIVITY_KIND_RUNTIME ? 1u : 2u, 0};
    spool_add(&R.calls, &call, sizeof call);
    R.n_calls++;
}

static char *copy_text(const char *s) { return s ? strdup(s) : NULL; }

static hs_range *ranges_push(hs_ranges *list) {
    if (list->len == list->cap) {
        size_t cap = list->cap ? 2 * list->cap : 256;
        hs_range *grown = realloc(list->items, cap * sizeof *grown);
        if (!grown) return NULL;
        list->items = grown;
        list->cap = cap;
    }
    return &list->items[list->len++];
}

static void marker_record(const CUpti_ActivityMarker2 *m) {
    if (m->flags & CUPTI_ACTIVITY_FLAG_MARKER_START) {
        hs_range *r = ranges_push(&R.open_markers);
        if (!r) return;
        *r = (hs_range){m->id, m->objectId.pt.threadId, m->timestamp, 0,
                        copy_text(m->name ? m->name : ""), copy_text(m->domain)};
        if (r->domain && !r->domain[0]) {
            free(r->domain);
            r->domain = NULL;
        }
    } else if (m->flags & CUPTI_ACTIVITY_FLAG_MARKER_END) {
        /* the newest open marker with this id (ranges nest: search from the end) */
        for (size_t i = R.open_markers.len; i-- > 0;) {
            hs_range *open = &R.open_markers.items[i];
            if (open->id != m->id) continue;
            hs_range done = *open;
            *open = R.open_markers.items[--R.open_markers.len];
            if (m->timestamp >= done.start && done.start > 0) {
                done.end = m->timestamp;
                hs_range *r = ranges_push(&R.ranges);
                if (r) {
                    *r = done;
                    return;
                }
            }
            free(done.name);
            free(done.domain);
            return;
        }
    }
}

void hs_handle_record(const CUpti_Activity *record) {
    if (!R.opened) return;
    switch (record->kind) {
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
    case CUPTI_ACTIVITY_KIND_KERNEL:
        kernel_record((const hs_kernel_record *)record);
        break;
    case CUPTI_ACTIVITY_KIND_RUNTIME:
    case CUPTI_ACTIVITY_KIND_DRIVER:
        api_record((const CUpti_ActivityAPI *)record);
        break;
    case CUPTI_ACTIVITY_KIND_MARKER:
        marker_record((const CUpti_ActivityMarker2 *)record);
        break;
    default:
        break;
    }
}

/* ---- the records file ------------------------------------------------------------- */
static int compare_u32(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

static int has_kernel(uint32_t correlation) {
    return bsearch(&correlation, R.correlations, R.n_kernels, sizeof(uint32_t), compare_u32) != NULL;
}

static int write_all(int fd, const char *data, size_t n) {
    while (n > 0) {
        ssize_t done = write(fd, data, n);
        if (done < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        data += done;
        n -= (size_t)done;
    }
    return 0;
}

/* Visit the spooled calls whose correlation id has a kernel: count them, or write them. */
static int pass_calls(int out_fd, uint64_t *count) {
    hs_call chunk[4096];
    hs_text line = {0};
    uint64_t offset = 0, total = R.calls.written;
    *count = 0;
    while (offset < total) {
        size_t want = total - offset < sizeof chunk ? (size_t)(total - offset) : sizeof chunk;
        ssize_t got = pread(R.calls.fd, chunk, want, (off_t)offset);
        if (got <= 0) break;
        offset += (uint64_t)got;
        for (size_t i = 0; i < (size_t)got / sizeof(hs_call); i++) {
            const hs_call *c = &chunk[i];
            if (!has_kernel(c->correlation_id)) continue;
            (*count)++;
            if (out_fd < 0) continue;
            line.len = 0;
            text_str(&line, "{\"start\":");
            text_u64(&line, c->start);
            text_str(&line, ",\"end\":");
            text_u64(&line, c->end);
            text_str(&line, ",\"correlation_id\":");
            text_u64(&line, c->correlation_id);
            text_str(&line, ",\"thread_id\":");
            text_u64(&line, c->thread_id);
            text_str(&line, ",\"process_id\":");
            text_u64(&line, c->process_id);
            text_str(&line, ",\"cbid\":");
            text_u64(&line, c->cbid);
            text_str(&line, c->api == 1 ? ",\"kind\":\"runtime\",\"api\":\"runtime\"}\n"
                                        : ",\"kind\":\"runtime\",\"api\":\"driver\"}\n");
            if (write_all(out_fd, line.data, line.len)) {
                free(line.data);
                return -1;
            }
        }
    }
    free(line.data);
    return 0;
}

static void range_line(hs_text *t, const hs_range *r, uint64_t end) {
    text_str(t, "{\"kind\":\"range\",\"name\":");
    text_json(t, r->name ? r->name : "");
    text_str(t, ",\"start\":");
    text_u64(t, r->start);
    text_str(t, ",\"thread_id\":");
    text_u64(t, r->thread_id);
    text_str(t, ",\"thread_ident\":");
    text_u64(t, r->thread_id);
    text_str(t, ",\"source\":\"marker\",\"domain\":");
    text_json(t, r->domain);
    text_str(t, ",\"end\":");
    text_u64(t, end);
    text_str(t, "}\n");
}

static void argv_json(hs_text *t) {
    text_str(t, "[");
    FILE *f = fopen("/proc/self/cmdline", "rb");
    if (f) {
        hs_text arg = {0};
        int c, first = 1;
        while ((c = fgetc(f)) != EOF) {
            if (c) {
                char ch = (char)c;
                text_add(&arg, &ch, 1);
                continue;
            }
            text_add(&arg, "", 1);
            if (!first) text_str(t, ", ");
            text_json(t, arg.data);
            first = 0;
            arg.len = 0;
        }
        fclose(f);
        free(arg.data);
    }
    text_str(t, "]");
}

static void header_line(hs_text *t, uint64_t n_calls, size_t n_ranges, size_t n_open) {
    char pid[24];
    snprintf(pid, sizeof pid, "%d", (int)getpid());
    text_str(t, "{\"schema\": \"" HS_SCHEMA "\", \"kind\": \"header\", \"tool\": {\"name\": "
                "\"hilsim-cupti-inject\", \"version\": ");
    text_json(t, R.info.tool_version[0] ? R.info.tool_version : NULL);
    text_str(t, "}, \"argv\": ");
    argv_json(t);
    text_str(t, ", \"pid\": ");
    text_str(t, pid);
    text_str(t, R.complete ? ", \"complete\": true, \"reason\": " : ", \"complete\": false, \"reason\": ");
    text_json(t, R.reason[0] ? R.reason : NULL);
    text_str(t, ", \"counts\": {\"kernel\": ");
    text_u64(t, R.n_kernels);
    text_str(t, ", \"runtime\": ");
    text_u64(t, n_calls);
    text_str(t, ", \"range\": ");
    text_u64(t, n_ranges + n_open);
    text_str(t, "}, \"dropped_incomplete\": ");
    text_u64(t, R.dropped_incomplete);
    text_str(t, ", \"api_filter\": ");
    text_json(t, R.info.api_filter[0] ? R.info.api_filter : NULL);
    text_str(t, ", \"api_records_skipped\": ");
    text_u64(t, R.api_skipped);
    text_str(t, ", \"unreadable_records\": 0, \"records_dropped_by_cupti\": ");
    text_u64(t, R.cupti_dropped);
    text_str(t, ", \"unclosed_ranges\": ");
    text_u64(t, n_open);
    text_str(t, ", \"nvtx_injection\": ");
    text_json(t, R.info.nvtx_injection[0] ? R.info.nvtx_injection : NULL);
    if (R.info.error[0]) {
        text_str(t, ", \"error\": ");
        text_json(t, R.info.error);
    }
    text_str(t, "}\n");
}

static int copy_kernels(int out_fd) {
    char chunk[1 << 16];
    uint64_t offset = 0;
    while (offset < R.kernels.written) {
        ssize_t got = pread(R.kernels.fd, chunk, sizeof chunk, (off_t)offset);
        if (got <= 0) return -1;
        if (write_all(out_fd, chunk, (size_t)got)) return -1;
        offset += (uint64_t)got;
    }
    return 0;
}

static int write_body(int fd, uint64_t now_ns) {
    hs_text t = {0};
    uint64_t n_calls = 0;
    if (pass_calls(-1, &n_calls)) return -1;
    header_line(&t, n_calls, R.ranges.len, R.open_markers.len);
    int failed = write_all(fd, t.data, t.len) || copy_kernels(fd) || pass_calls(fd, &n_calls);
    t.len = 0;
    for (size_t i = 0; !failed && i < R.ranges.len; i++) range_line(&t, &R.ranges.items[i], R.ranges.items[i].end);
    for (size_t i = 0; !failed && i < R.open_markers.len; i++) {
        const hs_range *r = &R.open_markers.items[i];
        if (r->start > 0) range_line(&t, r, now_ns > r->start ? now_ns : r->start);
    }
    failed = failed || write_all(fd, t.data, t.len);
    free(t.data);
    return failed ? -1 : 0;
}

int hs_write(int complete, const char *reason, uint64_t now_ns, char *err, size_t err_len) {
    hs_lock();
    if (!(R.finished && !R.complete)) { /* a run once marked incomplete stays so */
        R.complete = complete;
        snprintf(R.reason, sizeof R.reason, "%s", reason ? reason : "");
    }
    R.finished = 1;
    int status = -1;
    if (spool_flush(&R.kernels) || spool_flush(&R.calls)) {
        snprintf(err, err_len, "cannot write the spool files: %s", strerror(errno));
        goto done;
    }
    qsort(R.correlations, R.n_kernels, sizeof(uint32_t), compare_u32);
    char copy[PATH_MAX], tmp[PATH_MAX + 64];
    snprintf(copy, sizeof copy, "%s", R.out);
    char *name = basename(copy);
    char folder_copy[PATH_MAX];
    snprintf(folder_copy, sizeof folder_copy, "%s", R.out);
    /* the temporary name hilsim.core.files uses: leftovers of dead writers are removed */
    snprintf(tmp, sizeof tmp, "%s/.%s.%d.XXXXXX.tmp", dirname(folder_copy), name, (int)getpid());
    int fd = mkstemps(tmp, 4);
    if (fd < 0) {
        snprintf(err, err_len, "cannot create %s: %s", tmp, strerror(errno));
        goto done;
    }
    mode_t mask = umask(0);
    umask(mask);
    fchmod(fd, 0666 & ~mask);
    if (write_body(fd, now_ns) || fsync(fd)) {
        snprintf(err, err_len, "cannot write %s: %s", tmp, strerror(errno));
        close(fd);
        unlink(tmp);
        goto done;
    }
    close(fd);
    if (rename(tmp, R.out)) {
        snprintf(err, err_len, "cannot rename %s to %s: %s", tmp, R.out, strerror(errno));
        unlink(tmp);
        goto done;
    }
    status = 0;
done:
    hs_unlock();
    return status;
}
