// TV_HD marks functions that host code and CUDA device code both compile: the split schedule's
// wave model and the graph plan's step arithmetic, written once for the CPU and the GPU.
#pragma once

#if defined(__CUDACC__)
#define TV_HD __host__ __device__
#else
#define TV_HD
#endif
