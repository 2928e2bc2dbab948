// chat.h — built-in chat templates: recognising a model's Jinja template by
// its markers, rendering (role, text) messages into a caller buffer, and the
// strings that end an assistant turn. Pure functions over static tables: no
// allocation, no state, thread-safe. The C API (gb_chat_*) forwards here.
#pragma once

#include <stddef.h>

#include "common.h"
#include "json_text.h"

namespace gb {

// The template's name; "unknown" for a value outside the enum.
const char *chat_template_name(gb_chat_template t);

// Exact name ("llama2", "llama3", "chatml", "zephyr", "phi3", "gemma",
// "qwen2", "qwen2.5") -> id; GB_ERR_INVALID_ARGUMENT for any other name.
gb_status chat_template_from_name(const char *name, gb_chat_template *out);

// The model's tokenizer.chat_template text (len bytes) -> id, by markers;
// GB_ERR_UNAVAILABLE when it is none of the built-in templates.
gb_status chat_template_detect(const char *jinja_text, size_t len, gb_chat_template *out);

// Render msgs into buf (cap bytes, NUL-terminated); see gb_chat_apply.
gb_status chat_apply(gb_chat_template t, const gb_chat_message *msgs, size_t n, int add_assistant_prompt,
                     char *buf, size_t cap, size_t *n_out);

// gb_chat_apply_ex; errors about the options or the tools are logged
// through log.
gb_status chat_apply_ex(gb_chat_template t, const gb_chat_message *msgs, size_t n, const gb_chat_options *opts,
                        char *buf, size_t cap, size_t *n_out, const Logger &log);
void chat_options_init(gb_chat_options *o);

// Gemma 4's tool declarations (chat_gemma4.cpp), for a tools array that
// tools_check accepted: the shapes its template renders the same way in any
// engine (GB_ERR_UNSUPPORTED_FEATURE / GB_ERR_INVALID_ARGUMENT otherwise,
// logged), then each tool as <|tool>declaration:...<tool|>.
gb_status gemma4_tools_check(const JsonDoc &tools, const Logger &log);
void gemma4_put_tools(const JsonDoc &tools, TextOut &o);

// Static NULL-terminated list of end-of-turn strings; count without the NULL.
gb_status chat_eot_strings(gb_chat_template t, const char *const **strings, size_t *count);

}  // namespace gb
