/* The hilsim.cupti-records/1 writer of the CUPTI injection library (docs/agent.md).
 *
 * Takes CUPTI activity records one at a time (hs_handle_record, under hs_lock) and writes
 * the records file the in-process backend (agent/cupti_launch.py) writes: a header line,
 * then one JSON line per kernel, per launching API call whose correlation id matches a
 * kernel, per NVTX range (marker START/END pairs). Uses CUPTI's types only, never a CUPTI
 * function, so the replay harness links it without libcupti.
 */
#ifndef HILSIM_CUPTI_RECORDS_H
#define HILSIM_CUPTI_RECORDS_H

#include <stddef.h>
#include <stdint.h>

#include <cupti_activity.h>
#include <cupti_version.h>

#if !defined(CUPTI_API_VERSION) || CUPTI_API_VERSION < 19
#error "hilsim's CUPTI injection library needs the CUPTI headers of CUDA 12.0 or newer"
#endif

/* The newest kernel record of these headers: CUPTI hands over that version. The fields
 * read here sit in the part every version since CUpti_ActivityKernel4 shares. */
#if CUPTI_API_VERSION >= 130000
typedef CUpti_ActivityKernel10 hs_kernel_record;
#else
typedef CUpti_ActivityKernel9 hs_kernel_record;
#endif

/* What the header line says besides the counts (set before hs_write). */
typedef struct {
    char tool_version[64];     /* the CUPTI version the library runs with */
    char api_filter[128];      /* how non-launch API records were switched off */
    char nvtx_injection[1024]; /* NVTX_INJECTION64_PATH, empty when NVTX is not recorded */
    char error[512];           /* why recording could not start, empty when it did */
} hs_info;

/* Open the spools beside out_path (its folder must be writable). 0 on success, else -1
 * with the reason in err. */
int hs_open(const char *out_path, char *err, size_t err_len);
/* The header's fields; the caller fills them before hs_write (any thread, under hs_lock). */
hs_info *hs_header_info(void);
void hs_lock(void);
void hs_unlock(void);
/* One activity record (call under hs_lock): kernel, runtime/driver API, marker; others
 * are ignored. */
void hs_handle_record(const CUpti_Activity *record);
/* Records CUPTI reported dropped (buffer full). */
void hs_add_cupti_dropped(uint64_t count);
/* Write the records file atomically (temporary sibling, fsync, rename). A run once
 * marked incomplete stays incomplete (a later normal exit keeps the first reason);
 * ranges still open end at now_ns. 0 on success, else -1 with the reason in err. */
int hs_write(int complete, const char *reason, uint64_t now_ns, char *err, size_t err_len);

/* Callback ids of the kernel-launching APIs (generated at build time from the CUPTI
 * headers with the rule of agent/cupti_api.py). */
int hs_is_launch_api(CUpti_ActivityKind kind, uint32_t cbid);

#endif
