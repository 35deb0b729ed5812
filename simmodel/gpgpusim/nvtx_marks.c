/* NVTX injection library for programs run on the simulated card.
 *
 * A program that marks its phases with NVTX (nvtxRangePushA/Ex, nvtxDomainRangePushEx,
 * nvtx3::scoped_range) loads the library named by NVTX_INJECTION64_PATH at its first
 * NVTX call and hands it the NVTX function tables (nvtxDetail/nvtxInit.h). This library
 * fills the push and pop entries with functions that print the marks the simulator-log
 * reader turns into regions:
 *
 *     hilsim-region push NAME
 *     hilsim-region pop NAME
 *
 * on stdout, the stream GPGPU-Sim writes its log to, so each mark lands between the
 * kernels it encloses. No change to the program: the same binary runs on a GPU, where the
 * variable is unset (or names CUPTI's library) and NVTX calls cost nothing.
 *
 * Ranges are a stack per process (GPGPU-Sim runs a program's host code on one thread);
 * names are printed as given, a line break replaced by a space; a range without an ASCII
 * message (wide-character or registered-string messages) is printed as "(unnamed)".
 * Start/end ranges (nvtxRangeStartA) are not nested ranges and are not printed.
 */
#include <stdio.h>
#include <string.h>

#include <nvtx3/nvToolsExt.h>

#define HS_MAX_DEPTH 64
#define HS_MAX_NAME 200

static char hs_names[HS_MAX_DEPTH][HS_MAX_NAME + 1];
static int hs_depth = 0;

static void hs_print(const char *what, const char *name) {
    char clean[HS_MAX_NAME + 1];
    size_t n = 0;
    for (; name && name[n] && n < HS_MAX_NAME; ++n)
        clean[n] = (name[n] == '\n' || name[n] == '\r') ? ' ' : name[n];
    clean[n] = '\0';
    printf("hilsim-region %s %s\n", what, n ? clean : "(unnamed)");
    fflush(stdout);
}

static int hs_push(const char *name) {
    const char *shown = (name && *name) ? name : "(unnamed)";
    if (hs_depth < HS_MAX_DEPTH) {
        strncpy(hs_names[hs_depth], shown, HS_MAX_NAME);
        hs_names[hs_depth][HS_MAX_NAME] = '\0';
    }
    hs_print("push", shown);
    return hs_depth++;
}

static int hs_pop(void) {
    if (hs_depth == 0)
        return -1; /* an unmatched pop: NVTX's own answer, nothing printed */
    --hs_depth;
    hs_print("pop", hs_depth < HS_MAX_DEPTH ? hs_names[hs_depth] : "");
    return hs_depth;
}

static const char *hs_message(const nvtxEventAttributes_t *attr) {
    if (attr && attr->messageType == NVTX_MESSAGE_TYPE_ASCII)
        return attr->message.ascii;
    return NULL;
}

static int NVTX_API hs_range_push_a(const char *message) { return hs_push(message); }
static int NVTX_API hs_range_push_ex(const nvtxEventAttributes_t *attr) {
    return hs_push(hs_message(attr));
}
static int NVTX_API hs_range_pop(void) { return hs_pop(); }
static int NVTX_API hs_domain_range_push_ex(nvtxDomainHandle_t domain,
                                            const nvtxEventAttributes_t *attr) {
    (void)domain;
    return hs_push(hs_message(attr));
}
static int NVTX_API hs_domain_range_pop(nvtxDomainHandle_t domain) {
    (void)domain;
    return hs_pop();
}

static void hs_set(NvtxFunctionTable table, unsigned int size, unsigned int id,
                   NvtxFunctionPointer fn) {
    if (table && id < size && table[id])
        *table[id] = fn;
}

int NVTX_API InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get_export_table) {
    const NvtxExportTableCallbacks *callbacks =
        (const NvtxExportTableCallbacks *)get_export_table(NVTX_ETID_CALLBACKS);
    NvtxFunctionTable table = 0;
    unsigned int size = 0;
    if (!callbacks || callbacks->struct_size < sizeof(NvtxExportTableCallbacks))
        return 0;
    if (callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE, &table, &size)) {
        hs_set(table, size, NVTX_CBID_CORE_RangePushA, (NvtxFunctionPointer)hs_range_push_a);
        hs_set(table, size, NVTX_CBID_CORE_RangePushEx, (NvtxFunctionPointer)hs_range_push_ex);
        hs_set(table, size, NVTX_CBID_CORE_RangePop, (NvtxFunctionPointer)hs_range_pop);
    }
    table = 0;
    size = 0;
    if (callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &table, &size)) {
        hs_set(table, size, NVTX_CBID_CORE2_DomainRangePushEx,
               (NvtxFunctionPointer)hs_domain_range_push_ex);
        hs_set(table, size, NVTX_CBID_CORE2_DomainRangePop,
               (NvtxFunctionPointer)hs_domain_range_pop);
    }
    return 1;
}
