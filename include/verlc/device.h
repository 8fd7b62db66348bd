/* Device selection: which backend (src/tensor/backend.h) runs the ops and owns tensor memory.
 * Specs: "cpu", "cuda" or "cuda:N" (an NVIDIA GPU), "auto" (cuda:0 when a GPU is usable, else cpu),
 * "sim" (the CPU kernels behind poisoned pointers, for tests: see vc_backend_sim). */
#ifndef VERLC_DEVICE_H
#define VERLC_DEVICE_H
#include "verlc/core.h"

/* Selects and initialises the device (process-wide; call before loading a model). A GPU spec without
 * a usable GPU or driver fails with VC_ERR_DEVICE and a one-line hint to use --device cpu; a malformed
 * spec is VC_ERR_ARG naming it. `who` names the option in messages ("--device", "trainer.device"). */
vc_status vc_device_select(const char *spec, const char *who);
/* "cpu", "cuda:0", "sim": the selected device */
const char *vc_device_name(void);
int vc_device_is_gpu(void);
#endif
