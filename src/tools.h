// tools.h — tool definitions (a JSON array as chat APIs take it), the tool
// calls in a model's reply, and the grammar that makes a reply a valid call
// (gb_chat_apply_ex, gb_tool_calls_parse, gb_grammar_from_tools).
#pragma once

#include "common.h"
#include "json_text.h"

namespace gb {

// The tools text is JSON (GB_ERR_SYNTAX otherwise) and an array of tool
// objects: each either {"type": "function", "function": {...}} or the inner
// object, with a "name" of 1-64 characters of [A-Za-z0-9_-] (names distinct)
// and, when present, "parameters" an object (GB_ERR_INVALID_ARGUMENT
// otherwise). Logged through log, naming the offset.
gb_status tools_check(const JsonDoc &tools, const Logger &log);

// The tool-call format of a chat template: the one list of the templates
// that render tool definitions, whose calls are parsed and (all but
// Gemma 4's, whose arguments are not JSON) constrained.
enum ToolFormat { kNoToolFormat, kToolQwen, kToolLlama31, kToolGemma4 };
ToolFormat tool_format(gb_chat_template t);

// The function object of the tool at v of a checked array (v itself when it
// has no "function" member).
size_t tool_function(const JsonDoc &tools, size_t v);

}  // namespace gb
