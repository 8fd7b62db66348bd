/* The sim backend's sampling entry: translates the backend pointers (outputs and logits), checks that
 * the row descriptors and uniforms are host memory, and calls the CPU entry. */
#include "sim.h"
#include "backend/cpu/cpu.h"

void vc_sim_sample_rows(int32_t *tok, float *lp, float *lps, const float *logits, int64_t R, int64_t V,
                        const vc_sample_row *rows, const float *u) {
    SIM_BEGIN("sample_rows");
    int32_t *T = D(tok);
    float *LP = D(lp), *LPS = D(lps);
    const float *Z = D(logits);
    SIM_END;
    if (vc_sim_is_device(rows) || vc_sim_is_device(u)) {
        vc_sim_error("sample_rows", "backend memory was passed where a host pointer is expected");
        return;
    }
    vc_cpu_sample_rows(T, LP, LPS, Z, R, V, rows, u);
}
