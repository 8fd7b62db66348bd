/* The PRM800K grader shared by verl's geometry3k and prime_math rewards (internal; grade_prm800k.c). */
#ifndef VC_RL_PRM800K_H
#define VC_RL_PRM800K_H

enum { VC_PRM_MATHRULER, VC_PRM_PRIME };
/* grade_answer(given, ground_truth) as mathruler 0.1.0 (VC_PRM_MATHRULER) or verl's prime_math (VC_PRM_PRIME)
 * has it: 1 or 0 */
int vc_prm800k_grade(const char *given, const char *ground_truth, int flavor);
/* Python's float(s): 1 with *v when s is a float literal (Python's whitespace, sign, '_' between digits, inf,
 * infinity, nan) */
int vc_py_float(const char *s, double *v);
#endif
