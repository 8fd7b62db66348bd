/* verlc CUDA emulator: cuBLASLt is not emulated (verlc includes the header only) */
#ifndef VC_EMU_CUBLASLT_H
#define VC_EMU_CUBLASLT_H
#include "cublas_v2.h"
typedef struct vc_emu_blaslt *cublasLtHandle_t;
#endif
