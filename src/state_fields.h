// state_fields.h — a part's fields, as a saved session state sees them.
//
// A part of a session (session.h) that has state lists every one of its
// fields once, in an X-macro next to its struct:
//
//   #define GB_CURSOR_FIELDS(F) F(SAVE, pos) F(SAVE, pending) F(SAVE, last_out)
//
// with one of five kinds:
//   SAVE   written, and restored by a load
//   MATCH  configuration: written, and a load into a session whose value
//          differs is refused (GB_ERR_INVALID_ARGUMENT naming the field)
//   NEST   a struct member with a field list of its own (its SAVE and MATCH
//          entries count as this part's)
//   OWN    contents the part's own code in state.cpp writes and checks
//          (variable-length arrays, records in the arena, values whose
//          restoring has side effects)
//   SKIP   not part of the state: configuration fixed at creation, derived
//          values, scratch, pointers into the arena
//
// GB_STATE_FIELDS(Type, LIST) expands a list into the functions state.cpp
// uses: put_fields (save and, on a counting writer, size), get_fields
// (read into a copy, comparing MATCH fields), read_fields (the same with
// the status and log line of state_io.h's fields_read), set_fields (apply the copy's
// SAVE fields) and fields_bytes (the fixed part's size, for the maximum),
// and fields_cover, which does not compile unless the list names every
// field of Type exactly once: a structured binding of the listed names
// needs exactly as many names as Type has fields, and each name is used as
// a member. A field added to a part without a line in its list is a build
// error, so nothing the state should hold can be forgotten.
//
// The expansions need, in the including file: W and R (writer, reader),
// put(W&, v), get(R&, T*), match(R&, const T&), Mismatch and fields_read
// (state_io.h).
#pragma once

#define GB_SF_PUT(kind, name) GB_SF_PUT_##kind(name)
#define GB_SF_PUT_SAVE(name) put(w, obj.name);
#define GB_SF_PUT_MATCH(name) put(w, obj.name);
#define GB_SF_PUT_NEST(name) put_fields(w, obj.name);
#define GB_SF_PUT_OWN(name)
#define GB_SF_PUT_SKIP(name)

#define GB_SF_GET(kind, name) GB_SF_GET_##kind(name)
#define GB_SF_GET_SAVE(name) get(r, &out->name);
#define GB_SF_GET_MATCH(name) \
  if (!match(r, obj.name)) mm->note(#name);
#define GB_SF_GET_NEST(name) get_fields(r, obj.name, &out->name, mm);
#define GB_SF_GET_OWN(name)
#define GB_SF_GET_SKIP(name)

#define GB_SF_SET(kind, name) GB_SF_SET_##kind(name)
#define GB_SF_SET_SAVE(name) assign(&obj->name, in.name);
#define GB_SF_SET_MATCH(name)
#define GB_SF_SET_NEST(name) set_fields(&obj->name, in.name);
#define GB_SF_SET_OWN(name)
#define GB_SF_SET_SKIP(name)

#define GB_SF_BYTES(kind, name) GB_SF_BYTES_##kind(name)
#define GB_SF_BYTES_SAVE(name) n += wire_bytes(obj.name);
#define GB_SF_BYTES_MATCH(name) n += wire_bytes(obj.name);
#define GB_SF_BYTES_NEST(name) n += fields_bytes(obj.name);
#define GB_SF_BYTES_OWN(name)
#define GB_SF_BYTES_SKIP(name)

#define GB_SF_USE(kind, name) (void)sizeof(obj.name);
#define GB_SF_NAME(kind, name) , name
#define GB_SF_DROP_FIRST_(first, ...) __VA_ARGS__
#define GB_SF_DROP_FIRST(...) GB_SF_DROP_FIRST_(__VA_ARGS__)

#define GB_STATE_FIELDS(Type, LIST)                                                   \
  [[maybe_unused]] void put_fields(W &w, const Type &obj) { LIST(GB_SF_PUT) }         \
  [[maybe_unused]] void get_fields(R &r, const Type &obj, Type *out, Mismatch *mm) {  \
    LIST(GB_SF_GET)                                                                   \
  }                                                                                   \
  [[maybe_unused]] gb_status read_fields(R &r, const Type &obj, Type *out, const Logger &log, const char *part) { \
    Mismatch mm;                                                                      \
    get_fields(r, obj, out, &mm);                                                     \
    return fields_read(r, mm, log, part);                                             \
  }                                                                                   \
  [[maybe_unused]] void set_fields(Type *obj, const Type &in) { LIST(GB_SF_SET) }     \
  [[maybe_unused]] uint64_t fields_bytes(const Type &obj) {                           \
    uint64_t n = 0;                                                                   \
    LIST(GB_SF_BYTES)                                                                 \
    return n;                                                                         \
  }                                                                                   \
  [[maybe_unused]] void fields_cover(const Type &obj) {                               \
    LIST(GB_SF_USE)                                                                   \
    [[maybe_unused]] const auto &[GB_SF_DROP_FIRST(LIST(GB_SF_NAME))] = obj;           \
  }
