// hilsim test program: NVTX calls from a host-only C program (tests/test_gpgpusim_nvtx.py):
// with NVTX_INJECTION64_PATH naming the marks library each push/pop prints a region mark;
// the third pop is unmatched; the domain range uses NVTX 3's domain API.
#include <stdio.h>
#include <nvtx3/nvToolsExt.h>
int main(void) {
  nvtxRangePushA("outer");
  printf("work 1\n");
  nvtxEventAttributes_t a = {0};
  a.version = NVTX_VERSION; a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  a.messageType = NVTX_MESSAGE_TYPE_ASCII; a.message.ascii = "inner\nline";
  nvtxRangePushEx(&a);
  printf("work 2\n");
  nvtxRangePop();
  nvtxRangePop();
  nvtxRangePop();
  nvtxDomainHandle_t d = nvtxDomainCreateA("mine");
  nvtxDomainRangePushEx(d, &a);
  nvtxDomainRangePop(d);
  return 0;
}
