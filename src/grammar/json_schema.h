// json_schema.h — the JSON Schema converter's rules for use inside a larger
// grammar (gb_grammar_from_tools): one schema's rules under a name prefix,
// and the shared rules (ws, json-*) written once at the end.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "common.h"

namespace gb {

// Appends to buf (from offset *n; buf == nullptr: counts only) the rules of
// the schema in schema[0..len), every rule name but the shared ones behind
// `prefix` (the start rule is prefix + "root"). The shared rules it refers
// to are added to *prims, not written. Statuses as
// gb_grammar_from_json_schema, logged through log.
gb_status json_schema_rules(const char *schema, size_t len, const char *prefix, const Logger &log, char *buf,
                            size_t cap, size_t *n, uint32_t *prims);

// Appends the shared rules in prims (and those they refer to).
void json_schema_shared_rules(uint32_t prims, char *buf, size_t cap, size_t *n);

}  // namespace gb
