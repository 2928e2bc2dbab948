// model.cpp — opening a .gbx: every field of the file is checked before it is
// trusted (offsets, sizes, dimensions, CRCs), so a truncated, corrupted or
// inconsistent file yields a specific status and a log line, never a crash.
// The model keeps pointers into the mapping; nothing is copied.
#include "model.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include <new>

#include "arena.h"
#include "bytes.h"
#include "crc32.h"
#include "f16.h"
#include "gguf_view.h"
#include "models/arch.h"

namespace gb {
namespace {

const char *section_name(uint32_t kind) {
  switch (kind) {
    case kSecMeta: return "META";
    case kSecVocab: return "VOCAB";
    case kSecTokenizer: return "TOKENIZER";
    case kSecLayers: return "LAYERS";
    case kSecTensors: return "TENSORS";
    case kSecCommon: return "COMMON";
    case kSecGearBase + GB_GEAR_LOW: return "GEAR_LOW";
    case kSecGearBase + GB_GEAR_MID: return "GEAR_MID";
    case kSecGearBase + GB_GEAR_HIGH: return "GEAR_HIGH";
    case kSecGearBase + GB_GEAR_F32: return "GEAR_F32";
    default: return "UNKNOWN";
  }
}

bool is_data_section(uint32_t kind) {
  return kind == kSecCommon || (kind >= kSecGearBase && kind < kSecGearBase + GB_GEAR_COUNT);
}

// Header and section table.
gb_status parse_header(const uint8_t *p, uint64_t size, const Logger &log, uint32_t *n_sections, SectionRef *secs,
                       uint32_t *page_align, uint32_t *version_out) {
  GB_RETURN_IF(size < kHeaderFixedBytes, log,
               size < 8 || memcmp(p, kGbxMagic, size < 8 ? size : 8) == 0 ? GB_ERR_TRUNCATED : GB_ERR_BAD_MAGIC,
               "gbx: file of %llu bytes is too small for a header", (unsigned long long)size);
  GB_RETURN_IF(memcmp(p, kGbxMagic, 8) != 0, log, GB_ERR_BAD_MAGIC, "model: bad magic (neither a .gbx nor a GGUF file)");
  const uint32_t version = ld_u32(p + 8);
  GB_RETURN_IF(version < kGbxMinVersion || version > kGbxVersion, log, GB_ERR_UNSUPPORTED_VERSION,
               "gbx: format version %u not supported (%u..%u)", version, kGbxMinVersion, kGbxVersion);
  *version_out = version;
  const uint32_t header_bytes = ld_u32(p + 12), n = ld_u32(p + 16), align = ld_u32(p + 20);
  const uint64_t file_size = ld_u64(p + 24);
  GB_RETURN_IF(n == 0 || n > kMaxSections, log, GB_ERR_CORRUPT, "gbx: %u sections (1..%u allowed)", n, kMaxSections);
  GB_RETURN_IF(header_bytes != kHeaderFixedBytes + n * kSectionEntryBytes, log, GB_ERR_CORRUPT,
               "gbx: header_bytes %u does not match %u sections", header_bytes, n);
  GB_RETURN_IF(file_size > size, log, GB_ERR_TRUNCATED, "gbx: file is %llu bytes, header says %llu", (unsigned long long)size,
               (unsigned long long)file_size);
  GB_RETURN_IF(file_size != size, log, GB_ERR_CORRUPT, "gbx: file is %llu bytes, header says %llu", (unsigned long long)size,
               (unsigned long long)file_size);
  GB_RETURN_IF(header_bytes > size, log, GB_ERR_TRUNCATED, "gbx: section table past end of file");
  GB_RETURN_IF(!is_pow2(align) || align < 64 || align > (1u << 24), log, GB_ERR_CORRUPT, "gbx: page_align %u invalid", align);
  // Header CRC over the header with its crc field taken as zero.
  const uint32_t stored = ld_u32(p + 36);
  uint32_t crc = crc32_update(0, p, 36);
  const uint8_t zero[4] = {0, 0, 0, 0};
  crc = crc32_update(crc, zero, 4);
  crc = crc32_update(crc, p + 40, header_bytes - 40);
  GB_RETURN_IF(crc != stored, log, GB_ERR_CHECKSUM, "gbx: header CRC mismatch (stored %08x, computed %08x)", stored, crc);

  uint64_t prev_end = header_bytes;
  for (uint32_t i = 0; i < n; i++) {
    const uint8_t *e = p + kHeaderFixedBytes + (size_t)i * kSectionEntryBytes;
    SectionRef s{ld_u32(e), ld_u64(e + 8), ld_u64(e + 16), ld_u32(e + 24)};
    const uint64_t need_align = is_data_section(s.kind) ? align : kMetaAlign;
    GB_RETURN_IF(!in_range(s.offset, s.size, size), log, GB_ERR_TRUNCATED, "gbx: section %u (%s) [%llu, +%llu) past end of file",
                 i, section_name(s.kind), (unsigned long long)s.offset, (unsigned long long)s.size);
    GB_RETURN_IF(s.offset % need_align != 0, log, GB_ERR_CORRUPT, "gbx: section %u (%s) offset %llu not %llu-aligned", i,
                 section_name(s.kind), (unsigned long long)s.offset, (unsigned long long)need_align);
    GB_RETURN_IF(s.offset < prev_end, log, GB_ERR_CORRUPT, "gbx: section %u (%s) overlaps the previous one", i,
                 section_name(s.kind));
    for (uint32_t j = 0; j < i; j++)
      GB_RETURN_IF(secs[j].kind == s.kind, log, GB_ERR_CORRUPT, "gbx: section %s appears twice", section_name(s.kind));
    prev_end = s.offset + s.size;
    secs[i] = s;
  }
  *n_sections = n;
  *page_align = align;
  return GB_OK;
}

const SectionRef *find_section(const SectionRef *secs, uint32_t n, uint32_t kind) {
  for (uint32_t i = 0; i < n; i++)
    if (secs[i].kind == kind) return &secs[i];
  return nullptr;
}

bool finite_pos(float v) { return isfinite(v) && v > 0.0f; }

// META, and (version 11) the LAYERS section `layers` of layers_size bytes
// (nullptr when the file has none); m->layer_kind then points into it.
gb_status parse_meta(const uint8_t *p, uint64_t size, const uint8_t *layers, uint64_t layers_size, const Logger &log, Meta *m) {
  GB_RETURN_IF(size < kMetaBytes, log, GB_ERR_CORRUPT, "gbx: META section is %llu bytes (need %u)", (unsigned long long)size,
               kMetaBytes);
  GB_RETURN_IF(ld_u32(p) != kMetaBytes, log, GB_ERR_CORRUPT, "gbx: META size field %u", ld_u32(p));
  m->arch = ld_u32(p + 4);
  const ArchDef *arch = arch_by_id(m->arch);
  GB_RETURN_IF(!arch || m->version < arch->min_gbx_version, log, GB_ERR_UNSUPPORTED_TYPE,
               "gbx: architecture %u not supported in a version %u file", m->arch, m->version);
  m->dim = ld_u32(p + 8);
  m->hidden_dim = ld_u32(p + 12);
  m->n_layers = ld_u32(p + 16);
  m->n_heads = ld_u32(p + 20);
  m->n_kv_heads = ld_u32(p + 24);
  m->head_dim = ld_u32(p + 28);
  m->vocab_size = ld_u32(p + 32);
  m->seq_len = ld_u32(p + 36);
  m->rope_type = ld_u32(p + 40);
  m->rope_dim = ld_u32(p + 44);
  m->rope_theta = ld_f32(p + 48);
  m->norm_eps = ld_f32(p + 52);
  m->bos = ld_i32(p + 56);
  m->eos = ld_i32(p + 60);
  m->unk = ld_i32(p + 64);
  m->pad = ld_i32(p + 68);
  m->shared_classifier = ld_u32(p + 72);
  m->source = ld_u32(p + 76);
  memcpy(m->name, p + 80, 64);
  m->name[63] = 0;
  if (m->version >= 3) {
    m->default_gear = ld_u32(p + 144);
    memcpy(m->tier_origin, p + 148, GB_GEAR_COUNT);
    m->quantized_source = ld_u32(p + 152);
    GB_RETURN_IF(m->default_gear >= GB_GEAR_COUNT, log, GB_ERR_CORRUPT, "gbx: default gear %u invalid", m->default_gear);
    for (int g = 0; g < GB_GEAR_COUNT; g++)
      GB_RETURN_IF(m->tier_origin[g] > GB_TIER_ORIGIN_REQUANTIZED, log, GB_ERR_CORRUPT, "gbx: tier %d origin %u invalid", g,
                   m->tier_origin[g]);
    GB_RETURN_IF(m->quantized_source > 1, log, GB_ERR_CORRUPT, "gbx: quantized_source %u invalid", m->quantized_source);
    m->nope_period = m->version >= 5 ? ld_u32(p + 156) : 0;
    m->rope_orig_ctx = m->version >= 6 ? ld_u32(p + 160) : 0;
    m->rope_attn_factor = m->version >= 6 ? ld_f32(p + 164) : 1.0f;
    if (m->rope_attn_factor == 0.0f) m->rope_attn_factor = 1.0f;  // the field's 0 (format.h)
    const bool v7 = m->version >= 7;
    m->swa_window = v7 ? ld_u32(p + 168) : 0;
    m->swa_period = v7 ? ld_u32(p + 172) : 0;
    m->rope_theta_swa = v7 ? ld_f32(p + 176) : 0.0f;
    m->embed_scale = v7 ? ld_f32(p + 180) : 0.0f;
    m->logit_softcap = v7 ? ld_f32(p + 184) : 0.0f;
    m->ffn_act = v7 ? ld_u32(p + 188) : 0;
    if (m->embed_scale == 0.0f) m->embed_scale = 1.0f;  // the field's 0 (format.h)
    const bool v11 = m->version >= 11;
    m->conv_kernel = v11 ? ld_u32(p + 192) : 0;
    m->conv_channels = v11 ? ld_u32(p + 196) : 0;
    m->gdn_state = v11 ? ld_u32(p + 200) : 0;
    m->gdn_k_heads = v11 ? ld_u32(p + 204) : 0;
    m->gdn_v_heads = v11 ? ld_u32(p + 208) : 0;
    m->attn_gate = v11 ? ld_u32(p + 212) : 0;
    GB_RETURN_IF(m->attn_gate > 1, log, GB_ERR_CORRUPT, "gbx: attn_gate %u (a flag)", m->attn_gate);
  } else {
    m->swa_window = m->swa_period = m->ffn_act = 0;
    m->rope_theta_swa = m->logit_softcap = 0.0f;
    m->embed_scale = 1.0f;
    m->nope_period = 0;
    m->rope_orig_ctx = 0;
    m->rope_attn_factor = 1.0f;
    m->default_gear = GB_GEAR_COUNT;  // chosen from the tiers present (parse_tensors)
    memset(m->tier_origin, 0, sizeof m->tier_origin);
    m->quantized_source = 0;
  }
  GB_RETURN_IF(layers && m->version < 11, log, GB_ERR_CORRUPT, "gbx: a version %u file with a LAYERS section (version 11 added it)",
               m->version);
  GB_RETURN_IF((layers != nullptr) != (m->conv_kernel != 0), log, GB_ERR_CORRUPT,
               "gbx: META's conv_kernel is %u but the file %s a LAYERS section", m->conv_kernel, layers ? "has" : "lacks");
  m->layer_kind = nullptr;
  if (layers) {
    GB_RETURN_IF(layers_size != align_up(8ull + m->n_layers, 8) || ld_u32(layers) != m->n_layers, log, GB_ERR_CORRUPT,
                 "gbx: LAYERS section of %llu bytes for %u layers", (unsigned long long)layers_size, m->n_layers);
    for (uint32_t l = 0; l < m->n_layers; l++)
      GB_RETURN_IF(layers[8 + l] > kLayerDeltaNet, log, GB_ERR_CORRUPT, "gbx: layer %u has kind %u (0..%u known)", l, layers[8 + l],
                   (unsigned)kLayerDeltaNet);
    m->layer_kind = layers + 8;
  }
  return check_meta(m, log);
}

}  // namespace

TensorRef *model_tensor_slot(gb_model *m, uint32_t kind, uint32_t layer, uint32_t tier) {
  switch (kind) {
    case kTokEmbd: return &m->embd;
    case kAttnNorm: return &m->attn_norm[layer];
    case kFfnNorm: return &m->ffn_norm[layer];
    case kOutNorm: return &m->out_norm;
    case kBiasQ: return &m->bias[0][layer];
    case kBiasK: return &m->bias[1][layer];
    case kBiasV: return &m->bias[2][layer];
    case kRopeFreqs: return &m->rope_freqs;
    case kRopeFreqsLong: return &m->rope_freqs_long;
    case kQNorm: return &m->qk_norm[0][layer];
    case kKNorm: return &m->qk_norm[1][layer];
    case kPostAttnNorm: return &m->post_norm[0][layer];
    case kPostFfnNorm: return &m->post_norm[1][layer];
    case kClassifier: return &m->classifier[tier];
    case kConvKernel: return &m->conv_kernel[layer];
    case kConvIn:
    case kGdnQkv: return &m->mats[tier][(size_t)layer * kMatsPerLayer + kMatQ];
    case kGdnGate: return &m->mats[tier][(size_t)layer * kMatsPerLayer + kMatK];
    case kConvOut:
    case kGdnOut: return &m->mats[tier][(size_t)layer * kMatsPerLayer + kMatO];
    case kGdnAlpha:
    case kGdnBeta:
    case kGdnDtBias:
    case kGdnA:
    case kGdnNorm: return &m->gdn[kind - kGdnAlpha][layer];
    case kPleEmbd: return &m->ple_embd;
    case kPleModelProj: return &m->ple_model_proj;
    case kPleProjNorm: return &m->ple_proj_norm;
    case kPleGate:
    case kPleProj:
    case kPlePostNorm:
    case kLayerScale: return &m->ple[kind - kPleGate][layer];
    default: {
      for (int i = 0; i < kMatsPerLayer; i++)
        if (kLayerMatrices[i] == kind) return &m->mats[tier][(size_t)layer * kMatsPerLayer + i];
      return nullptr;
    }
  }
}

gb_status check_meta(const Meta *mp, const Logger &log) {
  const Meta *m = mp;
  const uint32_t kMaxDim = 1u << 16;
  GB_RETURN_IF(m->dim == 0 || m->dim > kMaxDim || m->hidden_dim == 0 || m->hidden_dim > 4 * kMaxDim, log, GB_ERR_CORRUPT,
               "gbx: dim %u / hidden_dim %u out of range", m->dim, m->hidden_dim);
  GB_RETURN_IF(m->n_layers == 0 || m->n_layers > 1024, log, GB_ERR_CORRUPT, "gbx: n_layers %u out of range", m->n_layers);
  GB_RETURN_IF(m->n_heads == 0 || m->n_kv_heads == 0 || m->n_kv_heads > m->n_heads || m->n_heads % m->n_kv_heads != 0, log,
               GB_ERR_CORRUPT, "gbx: n_heads %u / n_kv_heads %u inconsistent", m->n_heads, m->n_kv_heads);
  GB_RETURN_IF(m->head_dim == 0 || m->head_dim % 2 != 0 || m->head_dim > 1024 || (uint64_t)m->head_dim * m->n_heads > 4 * kMaxDim,
               log, GB_ERR_CORRUPT, "gbx: head_dim %u invalid", m->head_dim);
  GB_RETURN_IF(m->vocab_size == 0 || m->vocab_size > (1u << 22), log, GB_ERR_CORRUPT, "gbx: vocab_size %u out of range",
               m->vocab_size);
  GB_RETURN_IF(m->seq_len == 0 || m->seq_len > (1u << 22), log, GB_ERR_CORRUPT, "gbx: seq_len %u out of range", m->seq_len);
  GB_RETURN_IF(m->rope_type > GB_ROPE_NEOX, log, GB_ERR_CORRUPT, "gbx: rope_type %u unknown", m->rope_type);
  GB_RETURN_IF(m->rope_dim > m->head_dim || m->rope_dim % 2 != 0, log, GB_ERR_CORRUPT, "gbx: rope_dim %u invalid for head_dim %u",
               m->rope_dim, m->head_dim);
  GB_RETURN_IF(!finite_pos(m->rope_theta) || !finite_pos(m->norm_eps), log, GB_ERR_CORRUPT, "gbx: rope_theta / norm_eps invalid");
  GB_RETURN_IF(m->nope_period > m->n_layers, log, GB_ERR_CORRUPT, "gbx: nope_period %u beyond the %u layers", m->nope_period,
               m->n_layers);
  GB_RETURN_IF(!(m->rope_attn_factor > 0.0f && m->rope_attn_factor <= 16.0f), log, GB_ERR_CORRUPT,
               "gbx: rope_attn_factor %g outside (0, 16]", (double)m->rope_attn_factor);
  GB_RETURN_IF(m->rope_orig_ctx > (1u << 22), log, GB_ERR_CORRUPT, "gbx: rope_orig_ctx %u out of range", m->rope_orig_ctx);
  GB_RETURN_IF(m->swa_window > (1u << 22) || m->swa_period > m->n_layers, log, GB_ERR_CORRUPT,
               "gbx: swa_window %u / swa_period %u out of range", m->swa_window, m->swa_period);
  GB_RETURN_IF(m->swa_window && (m->swa_period < 2 || m->n_layers < m->swa_period), log, GB_ERR_UNSUPPORTED_TYPE,
               "gbx: sliding window with period %u over %u layers leaves no global layer (not supported)", m->swa_period,
               m->n_layers);
  GB_RETURN_IF(m->swa_window && !finite_pos(m->rope_theta_swa), log, GB_ERR_CORRUPT, "gbx: rope_theta_swa invalid");
  GB_RETURN_IF(!finite_pos(m->embed_scale) || m->embed_scale > 65536.0f, log, GB_ERR_CORRUPT, "gbx: embed_scale %g invalid",
               (double)m->embed_scale);
  GB_RETURN_IF(!(m->logit_softcap == 0.0f || (finite_pos(m->logit_softcap) && m->logit_softcap <= 1e6f)), log, GB_ERR_CORRUPT,
               "gbx: logit_softcap %g invalid", (double)m->logit_softcap);
  GB_RETURN_IF(m->ffn_act > kFfnGelu, log, GB_ERR_CORRUPT, "gbx: ffn_act %u unknown", m->ffn_act);
  GB_RETURN_IF(m->conv_kernel == 1 || m->conv_kernel > kMaxConvKernel || (m->conv_kernel == 0) != (m->layer_kind == nullptr) ||
                   (m->conv_kernel && (m->conv_channels == 0 || m->conv_channels > 4 * kMaxDim)),
               log, GB_ERR_CORRUPT, "gbx: recurrent layers' convolution of %u taps over %u channels invalid (2..%u taps)",
               m->conv_kernel, m->conv_channels, kMaxConvKernel);
  bool delta = false, shortconv = false;
  for (uint32_t l = 0; l < m->n_layers; l++) {
    delta = delta || m->delta_layer(l);
    shortconv = shortconv || m->shortconv_layer(l);
  }
  // A short convolution's channels are the B * X products, one per dimension.
  GB_RETURN_IF(shortconv && m->conv_channels != m->dim, log, GB_ERR_CORRUPT,
               "gbx: short-convolution layers over %u channels (the model's dim is %u)", m->conv_channels, m->dim);
  GB_RETURN_IF(delta && (m->gdn_state == 0 || m->gdn_state > 1024 || m->gdn_k_heads == 0 || m->gdn_v_heads % m->gdn_k_heads != 0 ||
                         (uint64_t)m->gdn_v_heads * m->gdn_state > 4 * kMaxDim ||
                         m->conv_channels != 2 * m->gdn_qk_dim() + m->gdn_v_dim()),
               log, GB_ERR_CORRUPT, "gbx: Gated DeltaNet of %u key heads, %u value heads of %u invalid", m->gdn_k_heads, m->gdn_v_heads,
               m->gdn_state);
  // Gemma 4's per-layer attention shapes, cache sharing and per-layer inputs.
  const uint32_t hs = m->swa_head_dim(), ks = m->swa_kv_heads(), rs = m->swa_rope_dim();
  GB_RETURN_IF((m->head_dim_swa || m->n_kv_heads_swa || m->rope_dim_swa) && !m->swa_window, log, GB_ERR_CORRUPT,
               "gbx: sliding-layer head shapes without sliding layers");
  GB_RETURN_IF(hs == 0 || hs % 2 != 0 || hs > m->head_dim || ks > m->n_heads || m->n_heads % ks != 0 || rs > hs || rs % 2 != 0,
               log, GB_ERR_CORRUPT, "gbx: sliding layers' %u KV heads of %u (%u rotated) invalid", ks, hs, rs);
  GB_RETURN_IF(m->kv_shared_from >= m->n_layers || (m->kv_shared_from && m->kv_shared_from < 2), log, GB_ERR_CORRUPT,
               "gbx: cache sharing from layer %u of %u invalid", m->kv_shared_from, m->n_layers);
  for (uint32_t l = m->kv_shared_from; m->kv_shared_from && l < m->n_layers; l++) {
    const uint32_t src = m->kv_source(l);
    GB_RETURN_IF(m->swa_layer(src) != m->swa_layer(l) || m->conv_layer(src) || m->conv_layer(l), log, GB_ERR_UNSUPPORTED_TYPE,
                 "gbx: layer %u would share the cache of layer %u, an attention layer of another kind (not supported)", l, src);
  }
  GB_RETURN_IF(m->ff_kv_layers > m->hidden_dim || (m->ff_kv_layers && !m->kv_shared_from), log, GB_ERR_CORRUPT,
               "gbx: FFN width %u of the layers holding a cache invalid (widest %u)", m->ff_kv_layers, m->hidden_dim);
  GB_RETURN_IF(m->ple_dim > 4096 || (uint64_t)m->ple_dim * m->n_layers > 4 * kMaxDim, log, GB_ERR_CORRUPT,
               "gbx: per-layer inputs of %u values per layer out of range", m->ple_dim);
  GB_RETURN_IF(!(m->attn_scale == 0.0f || (finite_pos(m->attn_scale) && m->attn_scale <= 1e3f)) || m->v_norm > 1, log,
               GB_ERR_CORRUPT, "gbx: attention scale %g / value norm %u invalid", (double)m->attn_scale, m->v_norm);
  const int32_t ids[4] = {m->bos, m->eos, m->unk, m->pad};
  for (int i = 0; i < 4; i++)
    GB_RETURN_IF(ids[i] < -1 || ids[i] >= (int32_t)m->vocab_size, log, GB_ERR_CORRUPT, "gbx: special token id %d out of range",
                 ids[i]);
  return GB_OK;
}

namespace {

gb_status parse_vocab(const uint8_t *p, uint64_t size, const Meta &meta, const Logger &log, VocabView *v) {
  GB_RETURN_IF(size < 16, log, GB_ERR_CORRUPT, "gbx: VOCAB section too small");
  const uint32_t n = ld_u32(p), max_piece = ld_u32(p + 4), blob = ld_u32(p + 8);
  GB_RETURN_IF(n != meta.vocab_size, log, GB_ERR_CORRUPT, "gbx: vocabulary has %u tokens, model %u", n, meta.vocab_size);
  GB_RETURN_IF(max_piece > kMaxPieceBytes, log, GB_ERR_CORRUPT, "gbx: max piece length %u > %u", max_piece, kMaxPieceBytes);
  const uint64_t types_off = 16 + 4ull * n + 4ull * (n + 1);
  const uint64_t blob_off = types_off + align_up(n, 4);
  GB_RETURN_IF(!in_range(blob_off, blob, size), log, GB_ERR_CORRUPT, "gbx: VOCAB arrays exceed the section");
  v->n = n;
  v->max_piece_bytes = max_piece;
  v->scores = p + 16;
  v->offsets = p + 16 + 4ull * n;
  v->types = p + types_off;
  v->blob = p + blob_off;
  v->blob_bytes = blob;
  v->bos = meta.bos;
  v->eos = meta.eos;
  v->unk = meta.unk;
  uint32_t prev = ld_u32(v->offsets);
  GB_RETURN_IF(prev != 0, log, GB_ERR_CORRUPT, "gbx: first piece offset %u", prev);
  for (uint32_t i = 0; i < n; i++) {
    const uint32_t next = ld_u32(v->offsets + 4ull * (i + 1));
    GB_RETURN_IF(next < prev || next - prev > max_piece || next > blob, log, GB_ERR_CORRUPT, "gbx: piece %u has bad offsets", i);
    GB_RETURN_IF(v->types[i] < kTokNormal || v->types[i] > kTokByte, log, GB_ERR_CORRUPT, "gbx: token %u has type %u", i,
                 v->types[i]);
    GB_RETURN_IF(!isfinite(v->score(i)), log, GB_ERR_CORRUPT, "gbx: token %u score not finite", i);
    prev = next;
  }
  GB_RETURN_IF(prev != blob, log, GB_ERR_CORRUPT, "gbx: piece offsets end at %u, blob is %u bytes", prev, blob);
  return GB_OK;
}

}  // namespace

void expected_shape(const Meta &m, uint32_t kind, uint32_t *rows, uint32_t *cols, uint32_t layer) {
  *rows = m.dim;
  *cols = m.dim;
  const uint32_t l = layer < m.n_layers ? layer : 0;
  const uint32_t qd = m.layer_q_dim(l), kvd = m.layer_kv_dim(l), hid = m.layer_hidden(l);
  switch (kind) {
    case kTokEmbd:
    case kClassifier: *rows = m.vocab_size; break;
    case kAttnNorm:
    case kFfnNorm:
    case kOutNorm:
    case kBiasQ:
    case kBiasK:
    case kBiasV:
    case kRopeFreqs:
    case kRopeFreqsLong:
    case kQNorm:
    case kKNorm:
    case kPostAttnNorm:
    case kPostFfnNorm: *rows = 1; break;
    case kWq: *rows = qd * (m.attn_gate ? 2 : 1); break;
    case kWk:
    case kWv: *rows = kvd; break;
    case kWo: *cols = qd; break;
    case kW1:
    case kW3: *rows = hid; break;
    case kW2: *cols = hid; break;
    case kPleEmbd: *rows = m.vocab_size, *cols = m.n_layers * m.ple_dim; break;
    case kPleModelProj: *rows = m.n_layers * m.ple_dim; break;
    case kPleProjNorm: *rows = 1, *cols = m.ple_dim; break;
    case kPleGate: *rows = m.ple_dim; break;
    case kPleProj: *cols = m.ple_dim; break;
    case kPlePostNorm: *rows = 1; break;
    case kLayerScale: *rows = 1, *cols = 1; break;
    case kConvIn: *rows = 3 * m.dim; break;
    case kConvKernel: *rows = m.conv_channels, *cols = m.conv_kernel; break;
    case kGdnQkv: *rows = 2 * m.gdn_qk_dim() + m.gdn_v_dim(); break;
    case kGdnGate: *rows = m.gdn_v_dim(); break;
    case kGdnOut: *cols = m.gdn_v_dim(); break;
    case kGdnAlpha:
    case kGdnBeta: *rows = m.gdn_v_heads; break;
    case kGdnDtBias:
    case kGdnA: *rows = 1, *cols = m.gdn_v_heads; break;
    case kGdnNorm: *rows = 1, *cols = m.gdn_state; break;
    default: break;
  }
  if (kind == kBiasQ) *cols = qd;
  if (kind == kBiasK || kind == kBiasV) *cols = kvd;
  if (kind == kRopeFreqs || kind == kRopeFreqsLong) *cols = m.rope_dim / 2;
  if (kind == kQNorm || kind == kKNorm) *cols = m.layer_head_dim(l);
}

namespace {

int mat_index(uint32_t kind) {
  for (int i = 0; i < kMatsPerLayer; i++)
    if (kLayerMatrices[i] == kind) return i;
  return -1;
}

const uint32_t kTierFormat[GB_GEAR_COUNT] = {kFmtQ4, kFmtQ8, kFmtF16, kFmtF32};

gb_status parse_tensors(const uint8_t *p, uint64_t size, gb_model *m, const Logger &log) {
  GB_RETURN_IF(size < 16, log, GB_ERR_CORRUPT, "gbx: TENSORS section too small");
  const uint32_t n = ld_u32(p), entry = ld_u32(p + 4);
  GB_RETURN_IF(entry != kTensorEntryBytes, log, GB_ERR_CORRUPT, "gbx: tensor entry size %u", entry);
  GB_RETURN_IF(!in_range(16, (uint64_t)n * entry, size), log, GB_ERR_CORRUPT, "gbx: %u tensor entries exceed the section", n);
  const Meta &mt = m->meta;
  for (uint32_t i = 0; i < n; i++) {
    const uint8_t *e = p + 16 + (size_t)i * entry;
    const uint32_t kind = ld_u32(e), layer = ld_u32(e + 4), tier = ld_u32(e + 8), fmt = ld_u32(e + 12);
    const uint32_t layout = ld_u32(e + 16), rows = ld_u32(e + 20), cols = ld_u32(e + 24), sec = ld_u32(e + 28);
    const uint64_t off = ld_u64(e + 32), nbytes = ld_u64(e + 40);
    const uint32_t max_kind = mt.version < 2   ? (uint32_t)kTensorKindMaxV1
                              : mt.version < 5 ? (uint32_t)kTensorKindMaxV4
                              : mt.version < 6 ? (uint32_t)kTensorKindMaxV5
                              : mt.version < 7 ? (uint32_t)kTensorKindMaxV6
                              : mt.version < 11 ? (uint32_t)kTensorKindMaxV10
                                                : (uint32_t)kTensorKindMax;
    GB_RETURN_IF(kind == 0 || kind > max_kind, log, GB_ERR_CORRUPT, "gbx: tensor %u has kind %u (version %u file)", i, kind,
                 mt.version);
    const bool bias = kind == kBiasQ || kind == kBiasK || kind == kBiasV;
    const bool qk_norm = kind == kQNorm || kind == kKNorm || kind == kPostAttnNorm || kind == kPostFfnNorm;
    const bool recurrent = kind >= kConvIn && kind <= kGdnNorm;
    const bool per_layer = kind == kAttnNorm || kind == kFfnNorm || bias || qk_norm || recurrent || mat_index(kind) >= 0;
    GB_RETURN_IF(per_layer ? layer >= mt.n_layers : layer != 0, log, GB_ERR_CORRUPT, "gbx: tensor %u (kind %u) layer %u", i, kind,
                 layer);
    // A layer holds the tensors of its kind (format.h, LAYERS) only: a
    // recurrent layer's matrices take attention's places in the tiers.
    const uint32_t lk = per_layer ? mt.kind(layer) : (uint32_t)kLayerAttention;
    const bool fits = kind == kConvIn || kind == kConvOut ? lk == kLayerShortConv
                      : kind == kConvKernel            ? lk != kLayerAttention
                      : kind >= kGdnQkv && recurrent   ? lk == kLayerDeltaNet
                      : kind >= kWq && kind <= kWo     ? lk == kLayerAttention
                                                       : true;
    GB_RETURN_IF(!fits, log, GB_ERR_CORRUPT, "gbx: tensor %u (kind %u) in layer %u, whose kind is %u", i, kind, layer, lk);
    GB_RETURN_IF(layout >= kLayoutCount, log, GB_ERR_UNSUPPORTED_TYPE, "gbx: tensor %u layout %u not supported", i, layout);
    GB_RETURN_IF(!file_format_known(fmt, mt.version), log, GB_ERR_UNSUPPORTED_TYPE, "gbx: tensor %u format %u not supported (version %u file)", i, fmt, mt.version);
    GB_RETURN_IF(sec >= m->n_sections, log, GB_ERR_CORRUPT, "gbx: tensor %u in section %u of %u", i, sec, m->n_sections);
    const SectionRef &s = m->sections[sec];
    const bool common = is_common_kind(kind);
    if (common) {
      GB_RETURN_IF(tier != kTierCommon || s.kind != kSecCommon, log, GB_ERR_CORRUPT, "gbx: tensor %u must be in COMMON", i);
      // The embedding and the DeltaNet's alpha and beta projections may be
      // in any format (read a row at a time); norms, biases, RoPE factors
      // and convolution taps are f32.
      const bool any_format = kind == kTokEmbd || kind == kGdnAlpha || kind == kGdnBeta;
      GB_RETURN_IF(!any_format && fmt != kFmtF32, log, GB_ERR_UNSUPPORTED_TYPE, "gbx: tensor %u (kind %u) format %u", i, kind,
                   fmt);
    } else {
      GB_RETURN_IF(tier >= GB_GEAR_COUNT || s.kind != kSecGearBase + tier, log, GB_ERR_CORRUPT,
                   "gbx: tensor %u tier %u vs section %s", i, tier, section_name(s.kind));
      // Before version 3 a tier has one format; since, a tier may mix
      // formats (a GGUF source's own quantization, tensor by tensor).
      GB_RETURN_IF(mt.version < 3 && fmt != kTierFormat[tier], log, GB_ERR_UNSUPPORTED_TYPE,
                   "gbx: tensor %u format %u not the format of tier %u", i, fmt, tier);
    }
    if (layout == kLayoutRows16) {
      GB_RETURN_IF(common || (fmt != kFmtQ4 && (mt.version < 3 || rows16_format(fmt) == kFmtCount)), log, GB_ERR_UNSUPPORTED_TYPE,
                   "gbx: tensor %u (kind %u) has the 16-row layout but format %u (q4, q4k, q6k tier matrices only)", i, kind,
                   fmt);
      GB_RETURN_IF(rows % kRows16 != 0, log, GB_ERR_CORRUPT, "gbx: tensor %u has the 16-row layout but %u rows", i, rows);
    }
    GB_RETURN_IF(!format_fits(fmt, cols), log, GB_ERR_CORRUPT, "gbx: tensor %u has %u columns, not whole %s blocks", i, cols,
                 format_name(fmt));
    uint32_t er, ec;
    expected_shape(mt, kind, &er, &ec);
    GB_RETURN_IF(rows != er || cols != ec, log, GB_ERR_SHAPE_MISMATCH,
                 "gbx: tensor %u (kind %u layer %u) is %ux%u, expected %ux%u", i, kind, layer, rows, cols, er, ec);
    uint64_t want;
    GB_RETURN_IF(!mul_ok(rows, row_bytes(fmt, cols), &want) || want != nbytes, log, GB_ERR_CORRUPT, "gbx: tensor %u nbytes %llu",
                 i, (unsigned long long)nbytes);
    GB_RETURN_IF(off % 64 != 0 || !in_range(off, nbytes, s.size), log, GB_ERR_CORRUPT, "gbx: tensor %u lies outside its section",
                 i);
    TensorRef t{m->base + s.offset + off, layout == kLayoutRows16 ? rows16_format(fmt) : fmt, rows, cols, nbytes};
    TensorRef *slot = model_tensor_slot(m, kind, layer, tier);
    GB_RETURN_IF(!slot, log, GB_ERR_CORRUPT, "gbx: tensor %u has kind %u, which has no place", i, kind);
    GB_RETURN_IF(slot->data != nullptr, log, GB_ERR_CORRUPT, "gbx: tensor %u (kind %u layer %u tier %u) appears twice", i, kind,
                 layer, tier);
    *slot = t;
  }
  if (mt.version < 3) {
    // Older files name no default tier: mid when present, else the lowest.
    m->meta.default_gear = GB_GEAR_MID;
    for (uint32_t g = 0; g < GB_GEAR_COUNT && !(m->gears >> GB_GEAR_MID & 1); g++)
      if (m->gears >> g & 1) {
        m->meta.default_gear = g;
        break;
      }
  }
  return check_model_tensors(m, log);
}

}  // namespace

gb_status check_model_tensors(gb_model *m, const Logger &log) {
  const Meta &mt = m->meta;
  // Completeness: common tensors, and every tensor of every tier present.
  GB_RETURN_IF(!m->embd.data || !m->out_norm.data, log, GB_ERR_MISSING_TENSOR, "gbx: token embedding or output norm missing");
  for (uint32_t l = 0; l < mt.n_layers; l++)
    GB_RETURN_IF(!m->attn_norm[l].data || !m->ffn_norm[l].data, log, GB_ERR_MISSING_TENSOR, "gbx: norms of layer %u missing", l);
  // Biases: of every layer or of none, per projection.
  for (uint32_t b = 0; b < 3; b++)
    for (uint32_t l = 1; l < mt.n_layers; l++)
      GB_RETURN_IF(!m->bias[b][l].data != !m->bias[b][0].data, log, GB_ERR_MISSING_TENSOR,
                   "gbx: the %c bias is present in some layers only (layer %u)", "qkv"[b], l);
  // Per-head Q/K norms: both in every attention layer, or none.
  uint32_t first_attn = 0;
  while (first_attn < mt.n_layers && mt.conv_layer(first_attn)) first_attn++;
  GB_RETURN_IF(first_attn == mt.n_layers, log, GB_ERR_UNSUPPORTED_TYPE, "gbx: no attention layer (not supported)");
  for (uint32_t l = 0; l < mt.n_layers; l++)
    for (uint32_t b = 0; b < 2 && !mt.conv_layer(l); b++)
      GB_RETURN_IF(!m->qk_norm[b][l].data != (!m->qk_norm[0][first_attn].data || (b == 1 && mt.kv_shared(l))), log,
                   GB_ERR_MISSING_TENSOR,
                   "gbx: the per-head %c norm is present in some layers only (layer %u)", "qk"[b], l);
  // Recurrent layers: their convolution taps (and a Gated DeltaNet layer
  // its five vectors), none of attention's own tensors; attention layers:
  // none of theirs.
  for (uint32_t l = 0; l < mt.n_layers; l++) {
    const bool conv = mt.conv_layer(l), delta = mt.delta_layer(l);
    GB_RETURN_IF(!m->conv_kernel[l].data != !conv, log, conv ? GB_ERR_MISSING_TENSOR : GB_ERR_CORRUPT,
                 "gbx: layer %u is %s recurrent layer but %s its convolution taps", l, conv ? "a" : "not a", conv ? "lacks" : "has");
    for (uint32_t b = 0; b < 5; b++)
      GB_RETURN_IF(!m->gdn[b][l].data != !delta, log, delta ? GB_ERR_MISSING_TENSOR : GB_ERR_CORRUPT,
                   "gbx: layer %u is %s Gated DeltaNet layer but %s its tensor of kind %u", l, delta ? "a" : "not a",
                   delta ? "lacks" : "has", kGdnAlpha + b);
    GB_RETURN_IF(conv && (m->qk_norm[0][l].data || m->qk_norm[1][l].data || m->bias[0][l].data || m->bias[1][l].data ||
                          m->bias[2][l].data),
                 log, GB_ERR_CORRUPT, "gbx: recurrent layer %u has attention norms or biases", l);
  }
  // Post-attention / post-FFN norms: both in every layer, or none.
  for (uint32_t l = 0; l < mt.n_layers; l++)
    for (uint32_t b = 0; b < 2; b++)
      GB_RETURN_IF(!m->post_norm[b][l].data != !m->post_norm[0][0].data, log, GB_ERR_MISSING_TENSOR,
                   "gbx: the post-%s norm is present in some layers only (layer %u)", b ? "FFN" : "attention", l);
  // Per-layer inputs: the three common tensors and each layer's four
  // (its output scale optional: every layer or none), or none of them.
  const bool ple = mt.ple_dim != 0;
  GB_RETURN_IF(!m->ple_embd.data != !ple || !m->ple_model_proj.data != !ple || !m->ple_proj_norm.data != !ple, log,
               ple ? GB_ERR_MISSING_TENSOR : GB_ERR_CORRUPT, "gbx: per-layer input tables %s", ple ? "missing" : "without ple_dim");
  for (uint32_t l = 0; l < mt.n_layers; l++) {
    for (uint32_t b = 0; b < 3; b++)
      GB_RETURN_IF(!m->ple[b][l].data != !ple, log, ple ? GB_ERR_MISSING_TENSOR : GB_ERR_CORRUPT,
                   "gbx: layer %u: per-layer input tensor %u %s", l, b, ple ? "missing" : "without ple_dim");
    GB_RETURN_IF(!m->ple[3][l].data != !m->ple[3][0].data, log, GB_ERR_MISSING_TENSOR,
                 "gbx: the layer output scale is present in some layers only (layer %u)", l);
  }
  const TensorRef *const factor_sets[2] = {&m->rope_freqs, &m->rope_freqs_long};
  for (const TensorRef *t : factor_sets) {
    if (!t->data) continue;
    const float *f = reinterpret_cast<const float *>(t->data);
    for (uint32_t i = 0; i < mt.rope_dim / 2; i++)
      GB_RETURN_IF(!(isfinite(f[i]) && f[i] > 0.0f), log, GB_ERR_CORRUPT, "gbx: RoPE frequency factor %u is %g", i, (double)f[i]);
  }
  // Long-context factors replace the (short) factors beyond rope_orig_ctx.
  GB_RETURN_IF(m->rope_freqs_long.data && (!m->rope_freqs.data || mt.rope_orig_ctx == 0), log, GB_ERR_MISSING_TENSOR,
               "gbx: long-context RoPE factors without the short ones or without rope_orig_ctx");
  GB_RETURN_IF(!(m->gears >> mt.default_gear & 1), log, GB_ERR_CORRUPT, "gbx: default tier %s is not in the file",
               gb_gear_name((gb_gear)mt.default_gear));
  for (uint32_t g = 0; g < GB_GEAR_COUNT; g++) {
    if (!(m->gears & (1u << g))) continue;
    GB_RETURN_IF(!m->classifier[g].data, log, GB_ERR_MISSING_TENSOR, "gbx: classifier of tier %u missing", g);
    for (uint32_t i = 0; i < mt.n_layers * kMatsPerLayer; i++) {
      // A short-convolution layer has no key and value projections, a Gated
      // DeltaNet layer no value projection (its gate takes the key's place).
      const uint32_t lk = mt.kind(i / kMatsPerLayer), j = i % kMatsPerLayer;
      const bool unused = (lk == kLayerShortConv && (j == kMatK || j == kMatV)) || (lk == kLayerDeltaNet && j == kMatV) ||
                          (mt.kv_shared(i / kMatsPerLayer) && (j == kMatK || j == kMatV));
      GB_RETURN_IF(!m->mats[g][i].data != unused, log, unused ? GB_ERR_CORRUPT : GB_ERR_MISSING_TENSOR,
                   "gbx: tier %u layer %u matrix %u %s", g, i / kMatsPerLayer, i % kMatsPerLayer, unused ? "present in a short-convolution layer" : "missing");
    }
  }
  return GB_OK;
}

gb_model *model_carve(Arena &a, const Meta &meta, size_t tok_bytes, void **tok_mem) {
  gb_model *m = a.array<gb_model>(1);
  // attn, ffn norms; q, k, v biases; q, k norms; post norms; conv taps; 5 Gated DeltaNet vectors; 4 per-layer-input tensors
  constexpr uint32_t kPerLayer = 19;
  TensorRef *norms = a.array<TensorRef>((size_t)kPerLayer * meta.n_layers);
  uint8_t *layer_kinds = meta.conv_kernel ? a.array<uint8_t>(meta.n_layers) : nullptr;
  TensorRef *mats = a.array<TensorRef>((size_t)GB_GEAR_COUNT * meta.n_layers * kMatsPerLayer);
  *tok_mem = a.alloc(tok_bytes, 8);
  uint16_t *gelu = meta.ffn_act == kFfnGelu ? a.array<uint16_t>(65536) : nullptr;
  if (!m) return nullptr;
  m = new (m) gb_model();
  for (size_t i = 0; i < (size_t)kPerLayer * meta.n_layers; i++) new (&norms[i]) TensorRef();
  for (size_t i = 0; i < (size_t)GB_GEAR_COUNT * meta.n_layers * kMatsPerLayer; i++) new (&mats[i]) TensorRef();
  m->attn_norm = norms;
  m->ffn_norm = norms + meta.n_layers;
  for (uint32_t b = 0; b < 3; b++) m->bias[b] = norms + (size_t)(2 + b) * meta.n_layers;
  for (uint32_t b = 0; b < 2; b++) m->qk_norm[b] = norms + (size_t)(5 + b) * meta.n_layers;
  for (uint32_t b = 0; b < 2; b++) m->post_norm[b] = norms + (size_t)(7 + b) * meta.n_layers;
  m->conv_kernel = norms + (size_t)9 * meta.n_layers;
  for (uint32_t b = 0; b < 5; b++) m->gdn[b] = norms + (size_t)(10 + b) * meta.n_layers;
  for (uint32_t b = 0; b < 4; b++) m->ple[b] = norms + (size_t)(15 + b) * meta.n_layers;
  // The conv-layer flags, copied from the meta being opened (whose pointer
  // is into a plan that does not outlive the open): the caller points its
  // model's meta at them (model_set_meta).
  m->layer_kinds = layer_kinds;
  if (layer_kinds)
    for (uint32_t l = 0; l < meta.n_layers; l++) layer_kinds[l] = (uint8_t)meta.kind(l);
  for (uint32_t g = 0; g < GB_GEAR_COUNT; g++) m->mats[g] = mats + (size_t)g * meta.n_layers * kMatsPerLayer;
  // GeGLU's GELU is evaluated at binary16 inputs (format.h, ffn_act): one
  // table of all of them makes it a lookup.
  m->gelu_f16 = gelu;
  if (gelu)
    for (uint32_t h = 0; h < 65536; h++) {
      const float v = f16_to_f32((uint16_t)h);
      gelu[h] = f32_to_f16(0.5f * v * (1.0f + tanhf(0.79788456080286535588f * v * (1.0f + 0.044715f * v * v))));
    }
  return m;
}

gb_status verify_section(const gb_model &m, const SectionRef &s) {
  const uint32_t crc = crc32_update(0, m.base + s.offset, s.size);
  GB_RETURN_IF(crc != s.crc, m.log, GB_ERR_CHECKSUM, "gbx: section %s CRC mismatch (stored %08x, computed %08x)",
               section_name(s.kind), s.crc, crc);
  return GB_OK;
}

gb_status model_mem(const gb_model_options &opt, size_t bytes, const Logger &log, void **mem) {
  bool owned;
  return obtain_memory(log, "model options (mem)", opt.mem, opt.mem_bytes, bytes, Arena::kAlign, mem, &owned);
}

void model_count_params(gb_model *m) {
  const Meta &meta = m->meta;
  uint64_t params =
      (uint64_t)meta.vocab_size * meta.dim * (meta.shared_classifier ? 1 : 2) + (2ull * meta.n_layers + 1) * meta.dim;
  for (uint32_t l = 0; l < meta.n_layers; l++) {
    const uint32_t k = meta.kind(l);
    for (uint32_t i = 0; i < kMatsPerLayer; i++) {
      uint32_t r = 0, c = 0, kind = kLayerMatrices[i];
      if (k == kLayerShortConv) {
        if (i == kMatK || i == kMatV) continue;
        kind = i == kMatQ ? (uint32_t)kConvIn : i == kMatO ? (uint32_t)kConvOut : kind;
      } else if (k == kLayerDeltaNet) {
        if (i == kMatV) continue;
        kind = i == kMatQ ? (uint32_t)kGdnQkv : i == kMatK ? (uint32_t)kGdnGate : i == kMatO ? (uint32_t)kGdnOut : kind;
      }
      if (meta.kv_shared(l) && (i == kMatK || i == kMatV)) continue;
      expected_shape(meta, kind, &r, &c, l);
      params += (uint64_t)r * c;
    }
    if (meta.ple_dim) params += 2ull * meta.ple_dim * meta.dim + meta.dim;  // the per-layer input block
    if (k != kLayerAttention) params += (uint64_t)meta.conv_channels * meta.conv_kernel;
    if (k == kLayerDeltaNet) params += 2ull * meta.gdn_v_heads * (meta.dim + 1) + meta.gdn_state;
  }
  if (meta.ple_dim) params += (uint64_t)meta.n_layers * meta.ple_dim * (meta.vocab_size + meta.dim) + meta.ple_dim;  // its tables
  m->n_params = params;
}

gb_status model_open(const uint8_t *p, uint64_t size, const gb_model_options &opt, const gb_port_mapping *mapping, gb_model **out,
                     size_t *mem_bytes_out, const GgufPart *parts, uint32_t n_parts) {
  Logger log;
  log.fn = opt.log;
  log.user = opt.log_user;
  log.level = opt.log_level;
  if (gguf_magic(p, size)) return model_open_gguf(p, size, opt, log, mapping, out, mem_bytes_out, parts, n_parts);

  uint32_t n_sections = 0, page_align = 0, version = 0;
  SectionRef secs[kMaxSections];
  GB_TRY(parse_header(p, size, log, &n_sections, secs, &page_align, &version));
  const SectionRef *smeta = find_section(secs, n_sections, kSecMeta);
  const SectionRef *svocab = find_section(secs, n_sections, kSecVocab);
  const SectionRef *stok = find_section(secs, n_sections, kSecTokenizer);
  const SectionRef *stensors = find_section(secs, n_sections, kSecTensors);
  const SectionRef *scommon = find_section(secs, n_sections, kSecCommon);
  const SectionRef *slayers = find_section(secs, n_sections, kSecLayers);
  GB_RETURN_IF(!smeta || !stensors || !scommon, log, GB_ERR_CORRUPT,
               "gbx: a required section (META, TENSORS, COMMON) is missing");
  GB_RETURN_IF(!svocab && !stok, log, GB_ERR_CORRUPT, "gbx: the file has neither a VOCAB nor a TOKENIZER section");
  GB_RETURN_IF(stok && version < 4, log, GB_ERR_CORRUPT, "gbx: a version %u file with a TOKENIZER section (version 4 added it)",
               version);

  // Metadata sections are always verified: they are small and steer every access.
  const bool verify_data =
      !mem_bytes_out && (opt.verify == GB_VERIFY_ALL || (opt.verify == GB_VERIFY_AUTO && size <= opt.verify_auto_limit));
  for (uint32_t i = 0; i < n_sections; i++) {
    if (is_data_section(secs[i].kind) && !verify_data) continue;
    const uint32_t crc = crc32_update(0, p + secs[i].offset, secs[i].size);
    GB_RETURN_IF(crc != secs[i].crc, log, GB_ERR_CHECKSUM, "gbx: section %s CRC mismatch (stored %08x, computed %08x)",
                 section_name(secs[i].kind), secs[i].crc, crc);
  }

  Meta meta{};
  meta.version = version;
  GB_TRY(parse_meta(p + smeta->offset, smeta->size, slayers ? p + slayers->offset : nullptr, slayers ? slayers->size : 0, log,
                    &meta));

  // The tokenizer: TOKENIZER when present (validated here, its tables sized
  // from it), else the llama2.c VOCAB.
  TokView tv;
  if (stok) {
    GB_TRY(tokdata_view(p + stok->offset, stok->size, log, &tv));
    GB_RETURN_IF(tv.n_tokens != meta.vocab_size, log, GB_ERR_CORRUPT, "gbx: the TOKENIZER has %u tokens, the model %u",
                 tv.n_tokens, meta.vocab_size);
  }
  const size_t tok_bytes = stok ? tok_mem_size(tv) : tokenizer_mem_size(meta.vocab_size);
  Arena counter;
  void *tok_mem = nullptr;
  model_carve(counter, meta, tok_bytes, &tok_mem);
  if (mem_bytes_out) {  // gb_model_mem_size(): count only
    *mem_bytes_out = counter.used();
    return GB_OK;
  }
  void *mem = nullptr;
  GB_TRY(model_mem(opt, counter.used(), log, &mem));
  Arena arena(mem, counter.used());
  gb_model *m = model_carve(arena, meta, tok_bytes, &tok_mem);
  m->mem = opt.mem ? nullptr : mem;
  m->mem_bytes = counter.used();
  m->locked_bytes = 0;
  m->log = log;
  m->base = p;
  m->size = size;
  model_set_meta(m, meta);
  if (mapping) m->mapping = *mapping;
  m->n_sections = n_sections;
  memcpy(m->sections, secs, sizeof(SectionRef) * n_sections);
  for (uint32_t g = 0; g < GB_GEAR_COUNT; g++) {
    const SectionRef *s = find_section(secs, n_sections, kSecGearBase + g);
    if (s) {
      m->gears |= 1u << g;
      m->gear_section[g] = *s;
    }
  }
  gb_status st = m->gears ? GB_OK : fail(log, GB_ERR_MISSING_TENSOR, "gbx: the file has no gear tier");
  if (st == GB_OK && svocab) st = parse_vocab(p + svocab->offset, svocab->size, meta, log, &m->vocab);
  if (st == GB_OK) st = parse_tensors(p + stensors->offset, stensors->size, m, log);
  if (st == GB_OK)
    st = stok ? tokenizer_obj_init_gguf(&m->tokenizer, tv, tok_mem, tok_bytes, log)
              : tokenizer_obj_init_llama2c(&m->tokenizer, m->vocab, tok_mem, log);
  if (st != GB_OK) {
    if (!opt.mem) gb_port_aligned_free(mem);
    return st;
  }
  model_count_params(m);
  *out = m;
  return GB_OK;
}

}  // namespace gb

// ---- public API -----------------------------------------------------------------

extern "C" void gb_model_options_init(gb_model_options *o) {
  if (!o) return;
  memset(o, 0, sizeof *o);
  o->struct_size = sizeof *o;
  o->verify = GB_VERIFY_AUTO;
  o->verify_auto_limit = 256ull << 20;
  o->log_level = GB_LOG_WARN;
}

namespace gb {
gb_status read_model_options(const gb_model_options *in, gb_model_options *o, const char *fn) {
  gb_model_options_init(o);
  if (!in) return GB_OK;
  // Until struct_size is known good, the callback in *in cannot be trusted.
  GB_RETURN_IF(in->struct_size < offsetof(gb_model_options, verify_auto_limit) || in->struct_size > sizeof *o, Logger(),
               GB_ERR_STRUCT_SIZE, "%s: gb_model_options struct_size %u not supported (%u to %u)", fn, in->struct_size,
               (uint32_t)offsetof(gb_model_options, verify_auto_limit), (uint32_t)sizeof *o);
  memcpy(o, in, in->struct_size);
  if ((uint32_t)gb::raw_enum(o->log_level) > GB_LOG_DEBUG) {
    const int32_t bad = gb::raw_enum(o->log_level);
    o->log_level = GB_LOG_WARN;
    return fail(Logger{o->log, o->log_user, GB_LOG_WARN}, GB_ERR_INVALID_ARGUMENT, "%s: log level %d unknown", fn, bad);
  }
  const Logger log{o->log, o->log_user, o->log_level};
  GB_RETURN_IF((uint32_t)gb::raw_enum(o->verify) > GB_VERIFY_METADATA, log, GB_ERR_INVALID_ARGUMENT, "%s: verify mode %d unknown",
               fn, gb::raw_enum(o->verify));
  GB_RETURN_IF((uint32_t)gb::raw_enum(o->load) > GB_MODEL_LOAD_LOCK, log, GB_ERR_INVALID_ARGUMENT, "%s: load mode %d unknown", fn,
               gb::raw_enum(o->load));
  GB_RETURN_IF((uint32_t)gb::raw_enum(o->gguf_layout) > GB_GGUF_LAYOUT_REPACK, log, GB_ERR_INVALID_ARGUMENT,
               "%s: GGUF layout %d unknown", fn, gb::raw_enum(o->gguf_layout));
  return GB_OK;
}
// Every tensor a session at the default gear reads, in turn (not the
// per-layer input table, streamed a row per token: streamed_bytes).
template <class F>
void for_default_tensors(const gb_model &m, F &&f) {
  const uint32_t L = m.meta.n_layers, g = m.meta.default_gear;
  f(m.embd);
  f(m.out_norm);
  f(m.rope_freqs);
  f(m.rope_freqs_long);
  f(m.ple_model_proj);
  f(m.ple_proj_norm);
  for (uint32_t l = 0; l < L; l++) {
    f(m.attn_norm[l]);
    f(m.ffn_norm[l]);
    if (m.conv_kernel) f(m.conv_kernel[l]);
    for (int k = 0; k < 5; k++)
      if (m.gdn[k]) f(m.gdn[k][l]);
    for (int k = 0; k < 4; k++)
      if (m.ple[k]) f(m.ple[k][l]);
    for (int k = 0; k < 3; k++)
      if (m.bias[k]) f(m.bias[k][l]);
    for (int k = 0; k < 2; k++) {
      if (m.qk_norm[k]) f(m.qk_norm[k][l]);
      if (m.post_norm[k]) f(m.post_norm[k][l]);
    }
  }
  if (m.mats[g])
    for (size_t i = 0; i < (size_t)L * kMatsPerLayer; i++) f(m.mats[g][i]);
  f(m.classifier[g]);
}

// GB_MODEL_LOAD_LOCK: lock the default gear's tensors and the model's own
// memory. On refusal everything locked so far is unlocked again.
gb_status model_lock(gb_model *m, const char *path) {
  uint64_t locked = 0;
  int rc = GB_PORT_OK;
  // Tensors in the model's own memory (repacked) are locked with it.
  const uint8_t *own = reinterpret_cast<const uint8_t *>(m), *own_end = own + m->mem_bytes;
  auto outside = [&](const TensorRef &t) { return t.data && t.nbytes && (t.data < own || t.data >= own_end); };
  for_default_tensors(*m, [&](const TensorRef &t) {
    if (rc != GB_PORT_OK || !outside(t)) return;
    rc = gb_port_lock(t.data, t.nbytes);
    if (rc == GB_PORT_OK) locked += t.nbytes;
  });
  if (rc == GB_PORT_OK) {
    rc = gb_port_lock(m, m->mem_bytes);
    if (rc == GB_PORT_OK) locked += m->mem_bytes;
  }
  if (rc == GB_PORT_OK) {
    m->locked_bytes = locked;
    return GB_OK;
  }
  for_default_tensors(*m, [&](const TensorRef &t) {
    if (outside(t)) gb_port_unlock(t.data, t.nbytes);
  });
  uint64_t want = m->mem_bytes;
  for_default_tensors(*m, [&](const TensorRef &t) { want += outside(t) ? t.nbytes : 0; });
  GB_RETURN_IF(rc == GB_PORT_ENOSYS, m->log, GB_ERR_UNAVAILABLE,
               "cannot lock model '%s' in memory: this platform cannot lock pages", path);
  return fail(m->log, GB_ERR_LOCK_REFUSED,
              "cannot lock model '%s' in memory: the system refused after %llu of %llu bytes (a limit on locked "
              "memory, RLIMIT_MEMLOCK: see `ulimit -l`; or not enough memory)",
              path, (unsigned long long)locked, (unsigned long long)want);
}

}  // namespace gb

namespace gb {
namespace {

// A sink for a look ahead whose errors the full parse reports again.
void silent_log(void *, gb_log_level, const char *) {}

// Map (or load) one file; the statuses gb_model_open_file documents.
gb_status open_one(const char *path, bool copy, const Logger &log, gb_port_mapping *map) {
  const int rc = copy ? gb_port_load_file(path, map) : gb_port_map_file(path, map);
  GB_RETURN_IF(rc == GB_PORT_ENOENT, log, GB_ERR_FILE_NOT_FOUND, "cannot open model '%s': no such file", path);
  GB_RETURN_IF(rc == GB_PORT_ENOSYS, log, GB_ERR_UNAVAILABLE, "cannot open model '%s': this platform has no files", path);
  GB_RETURN_IF(rc == GB_PORT_ENOMEM && copy, log, GB_ERR_OUT_OF_MEMORY, "cannot load model '%s' into memory: allocation refused",
               path);
  GB_RETURN_IF(rc == GB_PORT_ENOMEM, log, GB_ERR_OUT_OF_MEMORY,
               "cannot map model '%s': no memory, or too many files mapped at once", path);
  GB_RETURN_IF(rc != GB_PORT_OK, log, GB_ERR_IO, "cannot %s model '%s'", copy ? "read" : "open or map", path);
  return GB_OK;
}

// The path of part k (from 1) of a split GGUF whose first part is `first`
// ("NAME-00001-of-0000N.gguf", N = count): false when the name is not of
// that form.
bool split_part_path(const char *first, uint32_t k, uint32_t count, char *out, size_t cap) {
  const size_t n = strlen(first);
  char tail[32];
  const int tl = snprintf(tail, sizeof tail, "-00001-of-%05u.gguf", count);
  if (tl <= 0 || n < (size_t)tl || strcmp(first + n - (size_t)tl, tail) != 0 || n + 1 > cap) return false;
  memcpy(out, first, n + 1);
  char num[8];
  snprintf(num, sizeof num, "%05u", k);
  memcpy(out + n - (size_t)tl + 1, num, 5);
  return true;
}

}  // namespace
}  // namespace gb

extern "C" gb_status gb_model_open_file(const char *path, const gb_model_options *opts, gb_model **out) {
  gb_model_options o;
  GB_TRY(gb::read_model_options(opts, &o, "gb_model_open_file"));
  gb::Logger log{o.log, o.log_user, o.log_level};
  if (!path) return gb::null_arg(log, "gb_model_open_file", "path");
  if (!out) return gb::null_arg(log, "gb_model_open_file", "out");
  gb_port_mapping map{};
  const bool copy = o.load == GB_MODEL_LOAD_COPY;
  GB_TRY(gb::open_one(path, copy, log, &map));
  // A GGUF split in several files: the others, named after this one.
  gb::GgufPart parts[gb::kMaxSplitParts];
  uint32_t n_parts = 0, split_no = 0, split_count = 1;
  gb_status st = GB_OK;
  const uint8_t *p = static_cast<const uint8_t *>(map.data);
  if (gb::gguf_magic(p, map.size) && gb::gguf_split_of(p, map.size, gb::Logger{gb::silent_log, nullptr, GB_LOG_ERROR}, &split_no,
                                                       &split_count) == GB_OK &&
      split_no == 0 && split_count > 1) {
    char part_path[4096];
    if (split_count > gb::kMaxSplitParts) {
      st = gb::fail(log, GB_ERR_UNSUPPORTED_FEATURE, "model '%s' is split in %u files (at most %u)", path, split_count,
                    gb::kMaxSplitParts);
    } else if (!gb::split_part_path(path, 1, split_count, part_path, sizeof part_path)) {
      st = gb::fail(log, GB_ERR_INVALID_ARGUMENT,
                    "model '%s' is the first of %u files of a split GGUF: its name must end in -00001-of-%05u.gguf, "
                    "so that the others can be found",
                    path, split_count, split_count);
    }
    for (uint32_t k = 2; k <= split_count && st == GB_OK; k++) {
      gb::split_part_path(path, k, split_count, part_path, sizeof part_path);
      gb_port_mapping pm{};
      st = gb::open_one(part_path, copy, log, &pm);
      if (st != GB_OK) break;
      parts[n_parts++] = gb::GgufPart{static_cast<const uint8_t *>(pm.data), pm.size, pm};
    }
  }
  gb_model *m = nullptr;
  if (st == GB_OK) st = gb::model_open(p, map.size, o, &map, &m, nullptr, parts, n_parts);
  // A file that changed while it was being read is reported as such, whatever
  // the parser made of what it read (zeros, where a read faulted).
  bool changed = gb_port_mapping_faulted(&map) || gb_port_check_file(&map) == GB_PORT_ECHANGED;
  for (uint32_t k = 0; k < n_parts; k++)
    changed = changed || gb_port_mapping_faulted(&parts[k].mapping) || gb_port_check_file(&parts[k].mapping) == GB_PORT_ECHANGED;
  if (changed && st != GB_ERR_FILE_NOT_FOUND) {
    if (st == GB_OK) {
      gb_model_close(m);  // unmaps every file
      map = gb_port_mapping{};
      n_parts = 0;
    }
    st = GB_ERR_FILE_CHANGED;
  }
  if (st != GB_OK) {
    gb_port_unmap_file(&map);
    for (uint32_t k = 0; k < n_parts; k++) gb_port_unmap_file(&parts[k].mapping);
    log.log(GB_LOG_ERROR, "cannot open model '%s': %s", path, gb_status_str(st));
    return st;
  }
  if (o.load == GB_MODEL_LOAD_LOCK) {
    st = gb::model_lock(m, path);
    if (st != GB_OK) {
      gb_model_close(m);  // unmaps
      return st;
    }
  }
  *out = m;
  return GB_OK;
}

extern "C" gb_status gb_model_open_memory(const void *data, size_t size, const gb_model_options *opts, gb_model **out) {
  gb_model_options o;
  GB_TRY(gb::read_model_options(opts, &o, "gb_model_open_memory"));
  gb::Logger log{o.log, o.log_user, o.log_level};
  if (!data) return gb::null_arg(log, "gb_model_open_memory", "data");
  if (!out) return gb::null_arg(log, "gb_model_open_memory", "out");
  GB_RETURN_IF((uintptr_t)data % 16 != 0, log, GB_ERR_ALIGNMENT, "gb_model_open_memory: data must be 16-byte aligned");
  return gb::model_open(static_cast<const uint8_t *>(data), size, o, nullptr, out);
}

extern "C" gb_status gb_model_mem_size(const void *data, size_t size, const gb_model_options *opts, size_t *out_bytes) {
  gb_model_options o;
  GB_TRY(gb::read_model_options(opts, &o, "gb_model_mem_size"));
  gb::Logger log{o.log, o.log_user, o.log_level};
  if (!data) return gb::null_arg(log, "gb_model_mem_size", "data");
  if (!out_bytes) return gb::null_arg(log, "gb_model_mem_size", "out_bytes");
  size_t n = 0;
  GB_TRY(gb::model_open(static_cast<const uint8_t *>(data), size, o, nullptr, nullptr, &n));
  *out_bytes = n;
  return GB_OK;
}

extern "C" gb_status gb_model_get_info(const gb_model *m, gb_model_info *info) {
  GB_TRY(gb::check_handle(m, gb::kHandleModel, "gb_model_get_info"));
  if (!info) return gb::null_arg(m->log, "gb_model_get_info", "info");
  GB_RETURN_IF(info->struct_size < offsetof(gb_model_info, gears) || info->struct_size > sizeof(gb_model_info), m->log,
               GB_ERR_STRUCT_SIZE, "gb_model_get_info: gb_model_info struct_size %u not supported (%u to %u)", info->struct_size,
               (uint32_t)offsetof(gb_model_info, gears), (uint32_t)sizeof(gb_model_info));
  gb_model_info r;
  memset(&r, 0, sizeof r);
  const gb::Meta &t = m->meta;
  r.struct_size = info->struct_size;
  r.dim = t.dim;
  r.hidden_dim = t.hidden_dim;
  r.n_layers = t.n_layers;
  r.n_heads = t.n_heads;
  r.n_kv_heads = t.n_kv_heads;
  r.head_dim = t.head_dim;
  r.vocab_size = t.vocab_size;
  r.seq_len = t.seq_len;
  r.rope_type = t.rope_type;
  r.rope_dim = t.rope_dim;
  r.rope_theta = t.rope_theta;
  r.norm_eps = t.norm_eps;
  r.bos_id = t.bos;
  r.eos_id = t.eos;
  r.unk_id = t.unk;
  r.pad_id = t.pad;
  r.gears = m->gears;
  r.shared_classifier = t.shared_classifier;
  r.file_bytes = m->size + m->parts_bytes;
  r.n_params = m->n_params;
  for (uint32_t l = 0; l < t.n_layers; l++) {
    r.n_attention_layers += t.kind(l) == gb::kLayerAttention;
    r.n_shortconv_layers += t.kind(l) == gb::kLayerShortConv;
    r.n_deltanet_layers += t.kind(l) == gb::kLayerDeltaNet;
  }
  r.head_dim_swa = t.swa_head_dim();
  r.n_kv_heads_swa = t.swa_kv_heads();
  r.n_kv_shared_layers = t.n_kv_shared();
  r.per_layer_input_bytes = gb::streamed_bytes(m);
  r.per_layer_input_row_bytes = m->ple_embd.data ? m->ple_embd.nbytes / m->ple_embd.rows : 0;
  r.conv_kernel = t.conv_kernel;
  if (t.conv_kernel)
    r.recurrent_bytes = 4ull * (r.n_shortconv_layers + r.n_deltanet_layers) * (t.conv_kernel - 1) * t.conv_channels +
                        4ull * r.n_deltanet_layers * t.gdn_v_heads * t.gdn_state * t.gdn_state;
  for (int g = 0; g < GB_GEAR_COUNT; g++) r.gear_bytes[g] = (m->gears >> g & 1) ? m->gear_section[g].size : 0;
  memcpy(r.name, t.name, sizeof r.name);
  r.default_gear = (gb_gear)t.default_gear;
  for (uint32_t g = 0; g < GB_GEAR_COUNT; g++) {
    r.tier_origin[g] = t.tier_origin[g];
    if (!(m->gears >> g & 1)) continue;
    // Bits per weight as stored, and the formats, of the tier's matrices
    // and classifier.
    uint64_t bytes = 0, weights = 0;
    uint32_t fmts = 0;
    const size_t nm = (size_t)t.n_layers * gb::kMatsPerLayer;
    for (size_t i = 0; i <= nm; i++) {
      const gb::TensorRef &w = i < nm ? m->mats[g][i] : m->classifier[g];
      bytes += w.nbytes;
      weights += (uint64_t)w.rows * w.cols;
      fmts |= 1u << gb::file_format(w.format);
    }
    r.tier_bits[g] = weights ? (float)((double)bytes * 8.0 / (double)weights) : 0.0f;
    size_t len = 0;
    for (uint32_t f = 0; f < gb::kFmtCount; f++) {
      if (!(fmts >> f & 1)) continue;
      const char *nm_f = gb::format_name(f);
      const size_t n = strlen(nm_f);
      if (len + (len ? 1 : 0) + n + 1 > sizeof r.tier_formats[g]) break;
      if (len) r.tier_formats[g][len++] = '+';
      memcpy(r.tier_formats[g] + len, nm_f, n);
      len += n;
    }
    r.tier_formats[g][len] = 0;
  }
  r.is_gguf = m->gguf_meta_bytes ? 1 : 0;
  r.locked_bytes = m->locked_bytes;
  memcpy(info, &r, info->struct_size);
  return GB_OK;
}

extern "C" gb_status gb_model_verify(const gb_model *m) {
  GB_TRY(gb::check_handle(m, gb::kHandleModel, "gb_model_verify"));
  GB_TRY(gb::model_check_file(*m, m->log, "gb_model_verify"));
  if (m->gguf_meta_bytes) {
    const gb_status st = gb::verify_gguf(*m);
    GB_TRY(gb::model_check_file(*m, m->log, "gb_model_verify"));  // changed while it was read
    return st;
  }
  for (uint32_t i = 0; i < m->n_sections; i++) {
    const gb_status st = gb::verify_section(*m, m->sections[i]);
    if (st != GB_OK) {
      GB_TRY(gb::model_check_file(*m, m->log, "gb_model_verify"));  // changed while it was read
      return st;
    }
  }
  return GB_OK;
}

namespace gb {
gb_status model_check_file(const gb_model &m, const Logger &log, const char *fn) {
  // A faulted read is named first: something read the file after it changed
  // (its status then usually differs too). Every file of a split model.
  int rc = gb_port_mapping_faulted(&m.mapping) ? -1 : gb_port_check_file(&m.mapping);
  for (uint32_t k = 0; k < m.n_parts && rc == GB_PORT_OK; k++)
    rc = gb_port_mapping_faulted(&m.parts[k]) ? -1 : gb_port_check_file(&m.parts[k]);
  const char *what = rc < 0                   ? "could not be read: a read of its mapping faulted (truncated or unreadable)"
                     : rc == GB_PORT_ECHANGED ? "was truncated or written since it was opened"
                     : rc != GB_PORT_OK       ? "can no longer be examined"
                                              : nullptr;
  if (!what) return GB_OK;
  return fail(log, GB_ERR_FILE_CHANGED,
              "%s: the model file %s (%llu bytes when opened); nothing computed from it is handed out: "
              "open the model again",
              fn, what, (unsigned long long)(m.mapping.size + m.parts_bytes));
}
}  // namespace gb

extern "C" void gb_model_close(gb_model *m) {
  if (!m || gb::check_handle(m, gb::kHandleModel, "gb_model_close") != GB_OK) return;  // NULL: a no-op; else logged
  gb_port_mapping map = m->mapping;
  void *mem = m->mem;
  const size_t mem_bytes = m->mem_bytes;
  const bool locked = m->locked_bytes != 0;
  m->handle = gb::kHandleDead;  // caller memory stays readable: a second close is refused
  for (uint32_t k = 0; k < m->n_parts; k++) gb_port_unmap_file(&m->parts[k]);  // before the memory holding them goes
  gb_port_unmap_file(&map);     // a zeroed mapping (opened from memory) holds nothing; unmapping unlocks
  // The model's own memory (this struct is its first bytes) is unlocked
  // before it goes back, so the pages do not stay locked for the allocator.
  if (locked) gb_port_unlock(m, mem_bytes);
  gb_port_aligned_free(mem);
}
