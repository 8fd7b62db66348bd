/* LaTeX to plain text as pylatexenc 2.11's LatexNodes2Text().latex_to_text (internal; latex_text.c). */
#ifndef VC_RL_LATEX_TEXT_H
#define VC_RL_LATEX_TEXT_H
#include "verlc/core.h"

/* *out (malloc'd) = latex_to_text(latex); VC_ERR_FORMAT where pylatexenc raises (a macro whose text needs an
 * argument the input lacks, as a \sqrt at the end). */
vc_status vc_latex_to_text(const char *latex, char **out);
#endif
