/* c_caller.c — calls made the way a C program makes them, for tests whose
 * point is what C allows and C++ does not: a C enum parameter may hold any
 * int value (C++ code cannot form such a gb_status without undefined
 * behaviour, which the sanitizer build would report in the test itself). */
#include "gearbx.h"

const char *gbt_c_status_str(int value) { return gb_status_str((gb_status)value); }
const char *gbt_c_gear_name(int value) { return gb_gear_name((gb_gear)value); }
const char *gbt_c_kv_policy_name(int value) { return gb_kv_policy_name((gb_kv_policy)value); }
const char *gbt_c_chat_template_name(int value) { return gb_chat_template_name((gb_chat_template)value); }
gb_status gbt_c_chat_apply(int t, const gb_chat_message *msgs, size_t n, int gen, char *buf, size_t cap, size_t *n_out) {
  return gb_chat_apply((gb_chat_template)t, msgs, n, gen, buf, cap, n_out);
}
gb_status gbt_c_chat_eot_strings(int t, const char *const **strings, size_t *count) {
  return gb_chat_eot_strings((gb_chat_template)t, strings, count);
}
