/* verlc tracking: verl's `trainer.logger` backends that need no network or Python (verl/utils/tracking.py):
 *   file         verl's FileLogger: $VERL_FILE_LOGGER_PATH, else $VERL_FILE_LOGGER_ROOT (default ".")/
 *                <project>/<experiment>.jsonl, one line {"step": s, "data": {name: value, ...}} per log call
 *   tensorboard  TensorBoard event files (what torch's SummaryWriter.add_scalar writes) in $TENSORBOARD_DIR,
 *                else tensorboard_log/<project>/<experiment>: events.out.tfevents.<time>.<host>.<pid>.0, a
 *                TFRecord stream of Event protos (file_version "brain.Event:2", then per log call one Event at
 *                the step with a scalar summary value per metric), flushed after every call.
 * Others (console is the caller's; wandb, swanlab, mlflow, ... need their services) are not handled here. */
#ifndef VERLC_TRACKING_H
#define VERLC_TRACKING_H
#include "verlc/core.h"
#include <stddef.h>
#include <stdint.h>

typedef struct vc_tracker vc_tracker;
/* backends: names as in trainer.logger; names other than file and tensorboard are skipped. *out is NULL when
 * none of the backends is one of these. Fails naming the path that cannot be created. */
vc_status vc_tracker_open(const char *const *backends, size_t n_backends, const char *project, const char *experiment,
                          vc_tracker **out);
/* Logs n named values at step (non-finite values: JSON null, and as they are in TensorBoard). */
vc_status vc_tracker_log(vc_tracker *t, int64_t step, size_t n, const char *const *names, const double *values);
/* A text summary at step (TensorBoard's text plugin, as torch's add_text: tag "<tag>/text_summary"); only the
 * tensorboard backend logs text (as verl's validation-generations logger) */
vc_status vc_tracker_text(vc_tracker *t, int64_t step, const char *tag, const char *text);
/* the files written (for messages): the JSONL path or the event file, NULL when that backend is off */
const char *vc_tracker_file_path(const vc_tracker *t);
const char *vc_tracker_tb_path(const vc_tracker *t);
void vc_tracker_close(vc_tracker *t);
/* ... from trainer.logger's text as a command line gives it: a name, or a list "[console,'tensorboard']" */
vc_status vc_tracker_open_spec(const char *logger, const char *project, const char *experiment, vc_tracker **out);
/* from verl's keys: trainer.logger (a name or a list), trainer.project_name and trainer.experiment_name
 * (defaults when absent); says where it writes on stdout */
struct vc_config;
vc_status vc_tracker_open_config(const struct vc_config *c, const char *def_project, const char *def_experiment,
                                 vc_tracker **out);

/* CRC-32C (Castagnoli) of n bytes, and TFRecord's masked form of it */
uint32_t vc_crc32c(const void *data, size_t n);
uint32_t vc_crc32c_masked(const void *data, size_t n);

#endif
