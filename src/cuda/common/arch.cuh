// Capability macros: device code asks "is X available" here instead of testing
// __CUDA_ARCH__ itself (STYLE.md). Defined once; every kernel includes this header.
#pragma once

#include <cstdio>

#include "build_config.h"  // TREEVERIFY_CUDA_ARCH_LIST, for the message below

// mma.sync.m16n8k16 with bf16/fp16 inputs and fp32 accumulation, ldmatrix and cp.async:
// sm_80 and later (PTX ISA: "Warp-level matrix instructions", "cp.async").
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#define TV_HAS_MMA_SYNC_16816 1
#define TV_HAS_CP_ASYNC 1
#else
#define TV_HAS_MMA_SYNC_16816 0
#define TV_HAS_CP_ASYNC 0
#endif

// Bulk asynchronous copies (cp.async.bulk) completing on an mbarrier's transaction count:
// sm_90 and later (PTX ISA: "Data Movement and Conversion Instructions: cp.async.bulk").
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define TV_HAS_BULK_COPY 1
#else
#define TV_HAS_BULK_COPY 0
#endif

// Thread-block clusters with distributed shared memory (mapa, st.async completing on a remote
// mbarrier, barrier.cluster): sm_90 and later (PTX ISA: "Cluster", "st.async").
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define TV_HAS_CLUSTER 1
#else
#define TV_HAS_CLUSTER 0
#endif

// mma.sync with e4m3 inputs (m16n8k32, m16n8k16) and cvt to e4m3x2: sm_89 and later, from a
// compiler with PTX ISA 8.7 (CUDA 12.8: m16n8k16 e4m3; m16n8k32 is 8.4), which CMake records.
// Native (QMMA) on sm_89 and sm_120; sm_90 emulates it (config.h, native_fp8_mma).
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890 && TREEVERIFY_CUDA_E4M3_MMA
#define TV_HAS_MMA_E4M3 1
#else
#define TV_HAS_MMA_E4M3 0
#endif

// cvt.rn.f16x2.e4m3x2 (e4m3 codes to fp16 pairs): sm_89 and later (PTX ISA: "cvt").
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
#define TV_HAS_CVT_E4M3 1
#else
#define TV_HAS_CVT_E4M3 0
#endif

// mma.sync with e4m3 inputs as one native instruction (QMMA): sm_89 and sm_120/121; sm_90 and
// sm_100 emulate it (config.h, native_fp8_mma).
#if TV_HAS_MMA_E4M3 && (__CUDA_ARCH__ == 890 || __CUDA_ARCH__ == 1200 || __CUDA_ARCH__ == 1210)
#define TV_HAS_NATIVE_MMA_E4M3 1
#else
#define TV_HAS_NATIVE_MMA_E4M3 0
#endif

// Warpgroup MMA (wgmma.mma_async) with its fences: code compiled for sm_90a only (PTX ISA:
// "Asynchronous Warpgroup Level Matrix Multiply-Accumulate"); sm_90 without the "a" and newer
// architectures do not have it.
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define TV_HAS_WGMMA 1
#else
#define TV_HAS_WGMMA 0
#endif

// Programmatic dependent launch (griddepcontrol): sm_90 and later.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define TV_HAS_PDL 1
#else
#define TV_HAS_PDL 0
#endif

// Whether ptxas fits the 3-stage 64-row kernel with its two score passes compiled as one
// block: not for sm_100 to sm_110 (CUDA 13.0: 36 bytes of spill), everywhere else it does.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 1000 && __CUDA_ARCH__ < 1200
#define TV_FITS_3_STAGE_QK_BLOCK 0
#else
#define TV_FITS_3_STAGE_QK_BLOCK 1
#endif

// Whether ptxas fits the two-halves 64-row kernels (r64-s3, r64-s4) with a batch-1 call's
// metadata taken from the kernel parameters (cta_work): not for sm_100 to sm_110 (CUDA 13.0:
// r64-s4 spills 8 bytes), whose halves read it from memory as larger batches do.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 1000 && __CUDA_ARCH__ < 1200
#define TV_FITS_HALVES_PARAM_METADATA 0
#else
#define TV_FITS_HALVES_PARAM_METADATA 1
#endif

// True in the device pass of any architecture (false in the host pass).
#if defined(__CUDA_ARCH__)
#define TV_DEVICE_PASS 1
#else
#define TV_DEVICE_PASS 0
#endif

// For kernels compiled into an architecture that lacks what they need: trap with a message
// instead of computing garbage (llama.cpp's NO_DEVICE_CODE). The host side never launches
// such a kernel (dispatch checks the device), so reaching this is a dispatch bug.
#define TV_NO_DEVICE_CODE(kernel_name)                                                      \
  do {                                                                                      \
    printf("treeverify: kernel %s has no code for sm_%d in this build; compiled for: %s\n", \
           kernel_name, __CUDA_ARCH__ / 10, TREEVERIFY_CUDA_ARCH_LIST);                     \
    __trap();                                                                               \
  } while (0)
