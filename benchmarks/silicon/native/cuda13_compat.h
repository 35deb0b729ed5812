// What CUDA 13 removed from the runtime API and the Rodinia apps of the silicon loop still
// use, put back with the same meaning, so the unmodified sources build with a CUDA 13 nvcc
// (programs.py passes `-include` of this file only to a compiler of version 13 or later):
//   cudaThreadSynchronize()          the old name of cudaDeviceSynchronize()
//   cudaDeviceProp::clockRate        now cudaDeviceGetAttribute(cudaDevAttrClockRate) (kHz)
//   cudaDeviceProp::deviceOverlap    now cudaDeviceGetAttribute(cudaDevAttrGpuOverlap)
#pragma once
#include <cuda_runtime.h>

static inline cudaError_t cudaThreadSynchronize(void) { return cudaDeviceSynchronize(); }

struct hilsim_cudaDeviceProp : cudaDeviceProp {
  int clockRate;
  int deviceOverlap;
};

static inline cudaError_t hilsim_cudaGetDeviceProperties(hilsim_cudaDeviceProp* prop,
                                                         int device) {
  cudaError_t err = cudaGetDeviceProperties(static_cast<cudaDeviceProp*>(prop), device);
  if (err != cudaSuccess) return err;
  err = cudaDeviceGetAttribute(&prop->clockRate, cudaDevAttrClockRate, device);
  if (err != cudaSuccess) return err;
  return cudaDeviceGetAttribute(&prop->deviceOverlap, cudaDevAttrGpuOverlap, device);
}

#define cudaDeviceProp hilsim_cudaDeviceProp
#define cudaGetDeviceProperties hilsim_cudaGetDeviceProperties
