/* Helpers of the golden reward tests (test_reward_geo3k.c, test_reward_prime_math.c). */
#ifndef VC_REWARD_TEST_UTIL_H
#define VC_REWARD_TEST_UTIL_H
#include <cjson/cJSON.h>

/* the i-th string of a fixture row ("" when it is not a string) */
static inline const char *str_at(const cJSON *row, int i) {
    const cJSON *x = cJSON_GetArrayItem(row, i);
    return cJSON_IsString(x) ? x->valuestring : "";
}
#endif
