// gguf_view.cpp — the in-place GGUF reader (see gguf_view.h). A cursor over
// [0, size) whose every read is checked; counts are bounded by the bytes
// left (every element takes at least a known number of bytes) before a loop
// runs.
#include "gguf_view.h"

#include <string.h>

#include <algorithm>

#include "bytes.h"
#include "format.h"

namespace gb {

uint64_t gguf_scalar_size(uint32_t t) {
  switch (t) {
    case kGgufU8: case kGgufI8: case kGgufBool: return 1;
    case kGgufU16: case kGgufI16: return 2;
    case kGgufU32: case kGgufI32: case kGgufF32: return 4;
    case kGgufU64: case kGgufI64: case kGgufF64: return 8;
    default: return 0;
  }
}

uint64_t gguf_min_value_size(uint32_t t) {
  if (t == kGgufString) return 8;
  if (t == kGgufArray) return 12;
  return gguf_scalar_size(t);
}

namespace {

struct Cur {
  const uint8_t *p;
  uint64_t size, pos;
  uint64_t left() const { return size - pos; }
  bool u32(uint32_t *v) {
    if (left() < 4) return false;
    *v = ld_u32(p + pos);
    pos += 4;
    return true;
  }
  bool u64(uint64_t *v) {
    if (left() < 8) return false;
    *v = ld_u64(p + pos);
    pos += 8;
    return true;
  }
  bool skip(uint64_t n) {
    if (left() < n) return false;
    pos += n;
    return true;
  }
};

gb_status truncated(const Logger &log, const char *what) {
  return fail(log, GB_ERR_TRUNCATED, "gguf: the file ends inside %s", what);
}

// A string (u64 length, bytes) of at most limit bytes.
gb_status read_string(Cur &c, uint64_t limit, const Logger &log, const char *what, uint64_t *off, uint64_t *len) {
  if (!c.u64(len)) return truncated(log, what);
  GB_RETURN_IF(*len > c.left(), log, GB_ERR_TRUNCATED, "gguf: %s of %llu bytes runs past the end of the file", what,
               (unsigned long long)*len);
  GB_RETURN_IF(*len > limit, log, GB_ERR_CORRUPT, "gguf: %s of %llu bytes is too long (limit %llu)", what,
               (unsigned long long)*len, (unsigned long long)limit);
  *off = c.pos;
  c.pos += *len;
  return GB_OK;
}

gb_status skip_value(Cur &c, uint32_t type, uint32_t depth, const Logger &log) {
  if (type == kGgufString) {
    uint64_t off = 0, len = 0;
    return read_string(c, ~0ull, log, "a string value", &off, &len);
  }
  if (type == kGgufArray) {
    GB_RETURN_IF(depth >= kGgufMaxDepth, log, GB_ERR_CORRUPT, "gguf: arrays nested deeper than %u", kGgufMaxDepth);
    uint32_t elem;
    uint64_t count;
    if (!c.u32(&elem) || !c.u64(&count)) return truncated(log, "an array header");
    const uint64_t m = gguf_min_value_size(elem);
    GB_RETURN_IF(m == 0, log, GB_ERR_CORRUPT, "gguf: array element type %u unknown", elem);
    GB_RETURN_IF(count > c.left() / m, log, GB_ERR_TRUNCATED, "gguf: array of %llu elements runs past the end",
                 (unsigned long long)count);
    if (elem != kGgufString && elem != kGgufArray) {
      c.pos += count * m;
      return GB_OK;
    }
    for (uint64_t i = 0; i < count; i++) GB_TRY(skip_value(c, elem, depth + 1, log));
    return GB_OK;
  }
  const uint64_t n = gguf_scalar_size(type);
  GB_RETURN_IF(n == 0, log, GB_ERR_CORRUPT, "gguf: value type %u unknown", type);
  if (!c.skip(n)) return truncated(log, "a value");
  return GB_OK;
}

// Skips a value that gguf_view_open already checked.
uint64_t skip_checked(const uint8_t *p, uint64_t pos, uint32_t type) {
  if (type == kGgufString) return pos + 8 + ld_u64(p + pos);
  if (type == kGgufArray) {
    const uint32_t elem = ld_u32(p + pos);
    const uint64_t count = ld_u64(p + pos + 4);
    pos += 12;
    if (elem != kGgufString && elem != kGgufArray) return pos + count * gguf_scalar_size(elem);
    for (uint64_t i = 0; i < count; i++) pos = skip_checked(p, pos, elem);
    return pos;
  }
  return pos + gguf_scalar_size(type);
}

// One tensor info at c (names bounded, dimensions checked).
gb_status read_tensor_info(Cur &c, const Logger &log, GgufTensorInfo *t) {
  uint64_t len = 0;
  GB_TRY(read_string(c, kGgufMaxNameBytes, log, "a tensor name", &t->name_off, &len));
  t->name_len = (uint32_t)len;
  if (!c.u32(&t->n_dims)) return truncated(log, "a tensor's dimensions");
  GB_RETURN_IF(t->n_dims == 0 || t->n_dims > 4, log, GB_ERR_CORRUPT, "gguf: tensor '%.*s' has %u dimensions (1..4)",
               (int)t->name_len, (const char *)c.p + t->name_off, t->n_dims);
  uint64_t elems = 1;
  for (uint32_t i = 0; i < 4; i++) t->ne[i] = 1;
  for (uint32_t i = 0; i < t->n_dims; i++) {
    if (!c.u64(&t->ne[i])) return truncated(log, "a tensor's dimensions");
    GB_RETURN_IF(t->ne[i] == 0 || t->ne[i] > (1ull << 40) || !mul_ok(elems, t->ne[i], &elems) || elems > (1ull << 48), log,
                 GB_ERR_CORRUPT, "gguf: tensor '%.*s' dimension %u = %llu invalid", (int)t->name_len,
                 (const char *)c.p + t->name_off, i, (unsigned long long)t->ne[i]);
  }
  if (!c.u32(&t->type) || !c.u64(&t->offset)) return truncated(log, "a tensor's type and offset");
  t->nbytes = 0;
  return GB_OK;
}

bool key_is(const uint8_t *p, uint64_t off, uint64_t len, const char *key) {
  const size_t n = strlen(key);
  return len == n && memcmp(p + off, key, n) == 0;
}

// The bytes an entry names (a key or a tensor's name).
inline uint64_t name_off(const GgufKv &e) { return e.key_off; }
inline uint32_t name_len(const GgufKv &e) { return e.key_len; }
inline uint64_t name_off(const GgufTensorInfo &t) { return t.name_off; }
inline uint32_t name_len(const GgufTensorInfo &t) { return t.name_len; }

// The index of an entry whose name an earlier one has (sorted through idx,
// n entries of scratch), or n when every name is once.
template <class E>
uint64_t first_repeat(const uint8_t *p, const E *e, uint64_t n, uint32_t *idx) {
  for (uint64_t i = 0; i < n; i++) idx[i] = (uint32_t)i;
  auto less = [&](uint32_t a, uint32_t b) {
    const uint32_t la = name_len(e[a]), lb = name_len(e[b]);
    const int r = memcmp(p + name_off(e[a]), p + name_off(e[b]), la < lb ? la : lb);
    return r < 0 || (r == 0 && la < lb);
  };
  std::sort(idx, idx + n, less);
  for (uint64_t i = 1; i < n; i++)
    if (!less(idx[i - 1], idx[i])) return idx[i];
  return n;
}

}  // namespace

bool gguf_row_bytes(uint32_t type, uint64_t cols, uint64_t *out) {
  const uint32_t f = format_of_ggml(type);
  if (f >= kFmtCount || cols % format_block(f) != 0) return false;
  *out = cols / format_block(f) * format_block_bytes(f);
  return true;
}

size_t gguf_view_scratch_bytes(uint64_t n_kv, uint64_t n_tensors) {
  return 4 * (size_t)(n_kv > n_tensors ? n_kv : n_tensors);
}

gb_status gguf_view_header(const uint8_t *p, uint64_t size, const Logger &log, uint64_t *n_kv, uint64_t *n_tensors) {
  if (size < 4 || !gguf_magic(p, size)) {
    const bool prefix = size < 4 && memcmp(p, "GGUF", (size_t)size) == 0;
    return fail(log, prefix ? GB_ERR_TRUNCATED : GB_ERR_BAD_MAGIC, "gguf: %s", prefix ? "file too small for a header" : "bad magic");
  }
  GB_RETURN_IF(size < 24, log, GB_ERR_TRUNCATED, "gguf: file of %llu bytes is too small for a header", (unsigned long long)size);
  const uint32_t version = ld_u32(p + 4);
  GB_RETURN_IF(version != 2 && version != 3, log, GB_ERR_UNSUPPORTED_VERSION, "gguf: version %u not supported (2 and 3 are)",
               version);
  *n_tensors = ld_u64(p + 8);
  *n_kv = ld_u64(p + 16);
  // A key-value pair takes at least 13 bytes, a tensor info at least 32.
  GB_RETURN_IF(*n_kv > (size - 24) / 13, log, GB_ERR_TRUNCATED, "gguf: %llu metadata pairs cannot fit in the file",
               (unsigned long long)*n_kv);
  GB_RETURN_IF(*n_tensors > (size - 24) / 32, log, GB_ERR_TRUNCATED, "gguf: %llu tensors cannot fit in the file",
               (unsigned long long)*n_tensors);
  GB_RETURN_IF(*n_kv > kGgufMaxKv || *n_tensors > kGgufMaxTensors, log, GB_ERR_CORRUPT,
               "gguf: %llu metadata pairs / %llu tensors (at most %llu / %llu)", (unsigned long long)*n_kv,
               (unsigned long long)*n_tensors, (unsigned long long)kGgufMaxKv, (unsigned long long)kGgufMaxTensors);
  return GB_OK;
}

gb_status gguf_view_open(const uint8_t *p, uint64_t size, const Logger &log, GgufKv *kv, GgufTensorInfo *tensors,
                         uint32_t *scratch, GgufView *out) {
  GgufView v;
  GB_TRY(gguf_view_header(p, size, log, &v.n_kv, &v.n_tensors));
  v.base = p;
  v.size = size;
  v.version = ld_u32(p + 4);
  Cur c{p, size, 24};
  v.kv_start = c.pos;
  for (uint64_t i = 0; i < v.n_kv; i++) {
    GgufKv e;
    uint64_t len = 0;
    GB_TRY(read_string(c, kGgufMaxKeyBytes, log, "a metadata key", &e.key_off, &len));
    e.key_len = (uint32_t)len;
    if (!c.u32(&e.type)) return truncated(log, "a metadata value type");
    e.val_off = c.pos;
    GB_TRY(skip_value(c, e.type, 0, log));
    if (key_is(p, e.key_off, e.key_len, "general.alignment")) {
      GB_RETURN_IF(e.type != kGgufU32 && e.type != kGgufU64 && e.type != kGgufI32, log, GB_ERR_CORRUPT,
                   "gguf: general.alignment has value type %u", e.type);
      uint64_t a = e.type == kGgufU64 ? ld_u64(p + e.val_off) : ld_u32(p + e.val_off);
      if (e.type == kGgufI32 && (int32_t)a < 0) a = 0;
      GB_RETURN_IF(a == 0 || a > (1u << 24) || !is_pow2(a), log, GB_ERR_CORRUPT,
                   "gguf: general.alignment %llu is not a power of two in [1, 16 MiB]", (unsigned long long)a);
      v.alignment = (uint32_t)a;
    }
    if (kv) kv[i] = e;
  }
  v.ti_start = c.pos;
  for (uint64_t i = 0; i < v.n_tensors; i++) {
    GgufTensorInfo t;
    GB_TRY(read_tensor_info(c, log, &t));
    if (tensors) tensors[i] = t;
  }
  v.data_start = align_up(c.pos, v.alignment);
  GB_RETURN_IF(v.n_tensors > 0 && v.data_start > size, log, GB_ERR_TRUNCATED, "gguf: the file ends before its tensor data");
  // Offsets, sizes and ranges: a second walk (tables or not).
  Cur t{p, size, v.ti_start};
  for (uint64_t i = 0; i < v.n_tensors; i++) {
    GgufTensorInfo ti;
    read_tensor_info(t, log, &ti);  // checked above
    const char *n = (const char *)p + ti.name_off;
    const int nl = (int)ti.name_len;
    GB_RETURN_IF(ti.offset % v.alignment != 0, log, GB_ERR_CORRUPT, "gguf: tensor '%.*s' offset %llu is not %u-aligned", nl, n,
                 (unsigned long long)ti.offset, v.alignment);
    GB_RETURN_IF(ti.offset > size - v.data_start, log, GB_ERR_TRUNCATED, "gguf: tensor '%.*s' starts past the end of the file", nl,
                 n);
    ti.offset += v.data_start;
    uint64_t rb;
    if (gguf_row_bytes(ti.type, ti.ne[0], &rb)) {
      const uint64_t rows = ti.ne[1] * ti.ne[2] * ti.ne[3];  // bounded by the element limit
      GB_RETURN_IF(!mul_ok(rows, rb, &ti.nbytes), log, GB_ERR_CORRUPT, "gguf: tensor '%.*s' is too large", nl, n);
      GB_RETURN_IF(!in_range(ti.offset, ti.nbytes, size), log, GB_ERR_TRUNCATED,
                   "gguf: tensor '%.*s' (%llu bytes at %llu) runs past the end of the file", nl, n,
                   (unsigned long long)ti.nbytes, (unsigned long long)ti.offset);
    } else {
      GB_RETURN_IF(format_of_ggml(ti.type) < kFmtCount, log, GB_ERR_CORRUPT,
                   "gguf: tensor '%.*s' (ggml type %u) has %llu columns, not whole blocks", nl, n, ti.type,
                   (unsigned long long)ti.ne[0]);
      ti.nbytes = 0;  // a type no format reads: refused if the model needs it
    }
    if (tensors) tensors[i] = ti;
  }
  if (kv && tensors && scratch) {
    // Keys and names appear once; tensor data do not overlap.
    uint32_t *idx = scratch;
    const uint64_t dk = first_repeat(p, kv, v.n_kv, idx), dt = first_repeat(p, tensors, v.n_tensors, idx);
    GB_RETURN_IF(dk < v.n_kv, log, GB_ERR_CORRUPT, "gguf: key '%.*s' appears twice", (int)kv[dk].key_len,
                 (const char *)p + kv[dk].key_off);
    GB_RETURN_IF(dt < v.n_tensors, log, GB_ERR_CORRUPT, "gguf: tensor '%.*s' appears twice", (int)tensors[dt].name_len,
                 (const char *)p + tensors[dt].name_off);
    for (uint64_t i = 0; i < v.n_tensors; i++) idx[i] = (uint32_t)i;
    std::sort(idx, idx + v.n_tensors, [&](uint32_t a, uint32_t b) { return tensors[a].offset < tensors[b].offset; });
    uint64_t end = 0;
    for (uint64_t i = 0; i < v.n_tensors; i++) {
      const GgufTensorInfo &ti = tensors[idx[i]];
      if (!ti.nbytes) continue;
      GB_RETURN_IF(ti.offset < end, log, GB_ERR_CORRUPT, "gguf: tensor data ranges overlap at offset %llu",
                   (unsigned long long)ti.offset);
      end = ti.offset + ti.nbytes;
    }
    v.kv = kv;
    v.tensors = tensors;
  }
  *out = v;
  return GB_OK;
}

bool GgufView::find(const char *key, GgufKv *out) const {
  if (kv) {
    for (uint64_t i = 0; i < n_kv; i++)
      if (key_is(base, kv[i].key_off, kv[i].key_len, key)) {
        *out = kv[i];
        return true;
      }
    return false;
  }
  uint64_t pos = kv_start;
  for (uint64_t i = 0; i < n_kv; i++) {
    GgufKv e;
    e.key_len = (uint32_t)ld_u64(base + pos);
    e.key_off = pos + 8;
    e.type = ld_u32(base + e.key_off + e.key_len);
    e.val_off = e.key_off + e.key_len + 4;
    if (key_is(base, e.key_off, e.key_len, key)) {
      *out = e;
      return true;
    }
    pos = skip_checked(base, e.val_off, e.type);
  }
  return false;
}

GgufTensorInfo GgufView::next_tensor(uint64_t *pos) const {
  Cur c{base, size, *pos};
  GgufTensorInfo t;
  const Logger quiet;  // the walk was checked at open: nothing fails here
  read_tensor_info(c, quiet, &t);
  *pos = c.pos;
  t.offset += data_start;
  t.base = base;
  uint64_t rb;
  t.nbytes = gguf_row_bytes(t.type, t.ne[0], &rb) ? rb * t.ne[1] * t.ne[2] * t.ne[3] : 0;
  return t;
}

bool GgufView::name_is(const GgufTensorInfo &t, const char *name) const { return key_is(base, t.name_off, t.name_len, name); }

bool GgufView::tensor(const char *name, GgufTensorInfo *out) const {
  if (tensors) {
    for (uint64_t i = 0; i < n_tensors; i++)
      if (name_is(tensors[i], name)) {
        *out = tensors[i];
        out->base = base;
        return true;
      }
  } else {
    uint64_t pos = ti_start;
    for (uint64_t i = 0; i < n_tensors; i++) {
      const GgufTensorInfo t = next_tensor(&pos);
      if (name_is(t, name)) {
        *out = t;
        return true;
      }
    }
  }
  return next_part && next_part->tensor(name, out);
}

bool GgufView::value(const char *key, GgufScalar *out) const {
  GgufKv e;
  if (!find(key, &e) || e.type == kGgufArray) return false;
  GgufScalar v;
  v.type = e.type;
  const uint8_t *b = base + e.val_off;
  if (e.type == kGgufString) {
    v.is_str = true;
    v.len = ld_u64(b);
    v.s = b + 8;
    *out = v;
    return true;
  }
  v.is_int = true;
  switch (e.type) {
    case kGgufU8: case kGgufBool: v.i = b[0]; break;
    case kGgufI8: v.i = (int8_t)b[0]; break;
    case kGgufU16: v.i = ld_u16(b); break;
    case kGgufI16: v.i = (int16_t)ld_u16(b); break;
    case kGgufU32: v.i = ld_u32(b); break;
    case kGgufI32: v.i = ld_i32(b); break;
    case kGgufU64: {
      const uint64_t u = ld_u64(b);
      v.big = u > (uint64_t)INT64_MAX;
      v.i = v.big ? INT64_MAX : (int64_t)u;
      break;
    }
    case kGgufI64: v.i = (int64_t)ld_u64(b); break;
    case kGgufF32: v.is_int = false; v.is_float = true; v.f = ld_f32(b); break;
    case kGgufF64: v.is_int = false; v.is_float = true; v.f = ld_f64(b); break;
    default: return false;
  }
  *out = v;
  return true;
}

bool GgufView::array(const char *key, GgufArray *out) const {
  GgufKv e;
  if (!find(key, &e) || e.type != kGgufArray) return false;
  out->elem = ld_u32(base + e.val_off);
  out->count = ld_u64(base + e.val_off + 4);
  out->off = e.val_off + 12;
  return true;
}

void GgufView::next_string(uint64_t *off, const uint8_t **s, uint64_t *len) const {
  *len = ld_u64(base + *off);
  *s = base + *off + 8;
  *off += 8 + *len;
}

}  // namespace gb
