/* c_caller.c — calls made the way a C program makes them, for tests whose
 * point is what C allows and C++ does not: a C enum parameter may hold any
 * int value (C++ code cannot form such a gb_status without undefined
 * behaviour, which the sanitizer build would report in the test itself). */
#include "gearbx.h"

const char *gbt_c_status_str(int value) { return gb_status_str((gb_status)value); }
const char *gbt_c_gear_name(int value) { return gb_gear_name((gb_gear)value); }
const char *gbt_c_kv_policy_name(int value) { return gb_kv_policy_name((gb_kv_policy)value); }
