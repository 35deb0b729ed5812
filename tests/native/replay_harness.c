/* Replay harness of the CUPTI injection library's record code (tests/test_cupti_native.py).
 *
 *   replay_harness OUT NOW_NS COMPLETE [REASON] < records.txt
 *
 * Builds CUPTI activity records from text lines and hands each to hs_handle_record, as
 * the library's buffer callback does, then writes OUT with hs_write. One record a line,
 * fields separated by single spaces, the name last (it may hold spaces):
 *
 *   K start end correlation device stream context gx gy gz bx by bz regs smem dsmem NAME
 *   A R|D cbid start end process thread correlation
 *   M flags id timestamp thread DOMAIN|- NAME|-
 *
 * "-" stands for a NULL string. Exit status 0 when OUT was written.
 */
#define _GNU_SOURCE
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cupti_records.h"

static char *field(char **cursor) {
    char *start = *cursor, *space = strchr(start, ' ');
    if (space) {
        *space = '\0';
        *cursor = space + 1;
    } else {
        *cursor = start + strlen(start);
    }
    return start;
}

static uint64_t number(char **cursor) { return strtoull(field(cursor), NULL, 10); }

static char *text_or_null(char *s) { return strcmp(s, "-") == 0 ? NULL : strdup(s); }

static void kernel_line(char *cursor) {
    hs_kernel_record k;
    memset(&k, 0, sizeof k);
    k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
    k.start = number(&cursor);
    k.end = number(&cursor);
    k.correlationId = (uint32_t)number(&cursor);
    k.deviceId = (uint32_t)number(&cursor);
    k.streamId = (uint32_t)number(&cursor);
    k.contextId = (uint32_t)number(&cursor);
    k.gridX = (int32_t)number(&cursor);
    k.gridY = (int32_t)number(&cursor);
    k.gridZ = (int32_t)number(&cursor);
    k.blockX = (int32_t)number(&cursor);
    k.blockY = (int32_t)number(&cursor);
    k.blockZ = (int32_t)number(&cursor);
    k.registersPerThread = (uint16_t)number(&cursor);
    k.staticSharedMemory = (int32_t)number(&cursor);
    k.dynamicSharedMemory = (int32_t)number(&cursor);
    k.name = strdup(cursor);
    hs_handle_record((const CUpti_Activity *)&k);
}

static void api_line(char *cursor) {
    CUpti_ActivityAPI a;
    memset(&a, 0, sizeof a);
    a.kind = *field(&cursor) == 'R' ? CUPTI_ACTIVITY_KIND_RUNTIME : CUPTI_ACTIVITY_KIND_DRIVER;
    a.cbid = (CUpti_CallbackId)number(&cursor);
    a.start = number(&cursor);
    a.end = number(&cursor);
    a.processId = (uint32_t)number(&cursor);
    a.threadId = (uint32_t)number(&cursor);
    a.correlationId = (uint32_t)number(&cursor);
    hs_handle_record((const CUpti_Activity *)&a);
}

static void marker_line(char *cursor) {
    CUpti_ActivityMarker2 m;
    memset(&m, 0, sizeof m);
    m.kind = CUPTI_ACTIVITY_KIND_MARKER;
    m.flags = (CUpti_ActivityFlag)number(&cursor);
    m.id = (uint32_t)number(&cursor);
    m.timestamp = number(&cursor);
    m.objectKind = CUPTI_ACTIVITY_OBJECT_THREAD;
    m.objectId.pt.threadId = (uint32_t)number(&cursor);
    m.domain = text_or_null(field(&cursor));
    m.name = text_or_null(cursor);
    hs_handle_record((const CUpti_Activity *)&m);
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: %s OUT NOW_NS COMPLETE [REASON] < records.txt\n", argv[0]);
        return 2;
    }
    char err[512];
    if (hs_open(argv[1], err, sizeof err)) {
        fprintf(stderr, "replay: %s\n", err);
        return 1;
    }
    hs_info *info = hs_header_info();
    snprintf(info->tool_version, sizeof info->tool_version, "replay, CUPTI API %d", CUPTI_API_VERSION);
    snprintf(info->api_filter, sizeof info->api_filter, "cupti");
    snprintf(info->nvtx_injection, sizeof info->nvtx_injection, "replay");
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    hs_lock();
    while ((n = getline(&line, &cap, stdin)) > 0) {
        if (line[n - 1] == '\n') line[n - 1] = '\0';
        char *cursor = line + 2;
        if (line[0] == 'K') kernel_line(cursor);
        else if (line[0] == 'A') api_line(cursor);
        else if (line[0] == 'M') marker_line(cursor);
    }
    hs_unlock();
    free(line);
    if (hs_write(atoi(argv[3]), argc > 4 ? argv[4] : NULL, strtoull(argv[2], NULL, 10), err,
                 sizeof err)) {
        fprintf(stderr, "replay: %s\n", err);
        return 1;
    }
    return 0;
}
