/// \file llmsim/program/context_parallel.hpp
/// Core attention under context parallelism as TransformerEngine runs it
/// (transformer_engine/pytorch/attention/dot_product_attention/context_parallel.py) inside
/// Megatron-LM's TEDotProductAttention (megatron/core/extensions/transformer_engine.py). Every other
/// module of the layer only sees the seq_len / cp_size tokens of the rank (build_context::tokens):
/// Megatron's get_batch_on_this_cp_rank (megatron/training/utils.py) cuts each sequence into 2·cp
/// chunks and gives cp rank r chunks r and 2·cp − 1 − r, so every rank holds as much of the causal
/// triangle as the others.
///
/// - `p2p` (AttnFuncWithCPAndKVP2P, ring attention): cp steps over the ring; step 0 is the causal
///   diagonal block of the rank's own tokens, every other step half a block without a mask (all of
///   its queries over the first half of the received KV, or its second-half queries over all of
///   it); before a step's attention the next step's KV send / receive is posted on another stream,
///   so the exchange runs beside that attention (`op::beside_previous`). Backward passes KV and the
///   accumulated dKV along the ring the same way (step 0 KV only, the last step dKV only).
/// - `a2a` (AttnFuncWithCPAndQKVOA2A, Ulysses): all-to-all of Q, K, V before attention (the rank
///   then holds the whole sequence for heads / cp of its heads) and of the output after; backward
///   mirrors it (dO before, dQ, dK, dV after; TE < 2.8 also exchanges the saved output again).
/// - `a2a+p2p` (hierarchical, Megatron --hierarchical-context-parallel-sizes): the all-to-all over
///   the first level, then the ring over the second on heads / a2a.
/// - `all_gather` (AttnFuncWithCPAndKVAllGather, Llama 3 §3.3.2): K and V all-gathered (exposed),
///   the rank's two query chunks each attend their causal prefix; backward gathers again and
///   reduce-scatters dK and dV.
///
/// Attention FLOPs follow the tables' convention (shape_key.hpp `attention_pairs::all`): a causal
/// block is counted over all its pairs as the sdp tables measure it, an unmasked half block is all
/// pairs anyway. The ring's blocks are those of cp rank 0 (its steps 1.. take its second-half
/// queries; rank r's first r steps take all queries over half the KV instead — the same pairs).
#pragma once

#include <llmsim/program/dense.hpp>

LLMSIM_BEGIN_NAMESPACE

/// Per-rank head layout of core attention under context parallelism (after tp, and after the
/// Ulysses split by the all-to-all level).
struct cp_heads {
  std::int64_t heads = 0, kv_heads = 0, qk_dim = 0, v_dim = 0;
  double k_width = 0, v_width = 0;  ///< elements per token of K and V (MLA: K and V as wide as all heads)
};

constexpr cp_heads cp_heads_of(const build_context& c) {
  const model_spec& m = c.m();
  const std::int64_t split = c.s().tp_size * cp_a2a_size(c.s());
  cp_heads h;
  h.heads = m.head_num / split;
  h.kv_heads = m.kv_head_num / split;
  if (m.attention_type == attention_kind::mla) {
    h.qk_dim = *m.qk_head_dim + *m.qk_pos_emb_head_dim;
    h.v_dim = *m.v_head_dim;
    h.k_width = static_cast<double>(h.heads * h.qk_dim);
    h.v_width = static_cast<double>(h.heads * h.v_dim);
  } else {
    h.qk_dim = h.v_dim = head_dim(m);
    h.k_width = h.v_width = static_cast<double>(h.kv_heads * h.qk_dim);
  }
  return h;
}

/// Elements of one attention call's tensors (q_len queries, kv_len keys) on this rank.
struct cp_tensors {
  double q = 0, k = 0, v = 0, o = 0, lse = 0;
  [[nodiscard]] constexpr double qkv() const { return q + k + v; }
};
constexpr cp_tensors cp_tensors_of(const build_context& c, const cp_heads& h, std::int64_t q_len, std::int64_t kv_len) {
  const double b = static_cast<double>(c.s().micro_batch_size);
  const double sq = static_cast<double>(q_len), skv = static_cast<double>(kv_len);
  return {b * sq * static_cast<double>(h.heads * h.qk_dim), b * skv * h.k_width, b * skv * h.v_width,
          b * sq * static_cast<double>(h.heads * h.v_dim), b * sq * static_cast<double>(h.heads)};
}

namespace detail {
/// One fused-attention call of `q_len` queries over `kv_len` keys in pass `pass` (forward or the
/// input gradient); traffic as attention_leaf counts it (forward reads Q, K, V, writes O and the
/// log-sum-exp; backward also reads O and dO and writes dQ, dK, dV).
constexpr void cp_attention_call(const build_context& c, leaf& l, const cp_heads& h, pass_kind pass, std::int64_t q_len,
                                 std::int64_t kv_len) {
  const cp_tensors t = cp_tensors_of(c, h, q_len, kv_len);
  const attention_shape shape{.batch = c.s().micro_batch_size,
                              .q_len = q_len,
                              .kv_len = kv_len,
                              .head_num = h.heads,
                              .kv_head_num = h.kv_heads,
                              .qk_head_dim = h.qk_dim,
                              .v_head_dim = h.v_dim,
                              .qkv_contiguous = true,
                              .pairs = attention_pairs::all};
  const double traffic = pass == pass_kind::forward ? t.qkv() + t.o + t.lse : 2 * t.q + 2 * t.k + 2 * t.v + t.o + t.lse;
  const attention_lengths whole{c.s().seq_len, c.s().seq_len};  // the window's share of the whole sequence
  c.emit(l, attention_op(pass, shape, traffic * c.element_bytes(), skipped_pair_share(c, whole)));
}

/// An all-to-all of `bytes` over the Ulysses level: TE first lays the tensor out by destination
/// (a contiguous copy, read and write), then exchanges it (flash_attn_a2a_communicate); the
/// reordering of what arrives runs on TE's cp stream beside the next exchange.
constexpr void cp_all_to_all(const build_context& c, leaf& l, pass_kind pass, double bytes) {
  c.memory(l, pass, 2 * bytes);
  c.collective(l, pass, comm_group::cp_a2a, collective_kind::all2all, bytes);
}

/// The ring's steps of one pass over `span` tokens of the ring rank: step 0 the diagonal block,
/// steps 1..ring-1 half blocks (span/2 queries over span keys), each KV exchange beside the
/// attention before it. Forward: the KV of the next step beside steps 0..ring-2. Backward: beside
/// every step, KV (step 0), KV and dKV (middle steps), dKV (last step), as TE sends them.
constexpr void cp_ring_steps(const build_context& c, leaf& l, const cp_heads& h, pass_kind pass, std::int64_t ring,
                             std::int64_t span) {
  const cp_tensors full = cp_tensors_of(c, h, span, span);
  const double kv_bytes = (full.k + full.v) * c.element_bytes();
  for (std::int64_t i = 0; i < ring; ++i) {
    if (i == 0)
      cp_attention_call(c, l, h, pass, span, span);
    else
      cp_attention_call(c, l, h, pass, span / 2, span);
    double send = kv_bytes;
    if (pass == pass_kind::forward && i == ring - 1) send = 0;  // nothing left to fetch
    if (pass != pass_kind::forward && i > 0 && i < ring - 1) send = 2 * kv_bytes;
    if (send <= 0 || ring == 1) continue;  // without a ring (plain all-to-all) nothing travels
    op o = collective_op(pass, collective_kind::p2p, comm_group::cp_ring, send);
    o.beside_previous = true;
    c.emit(l, o);
  }
}

/// KV all-gather (Llama 3 §3.3.2, TE AttnFuncWithCPAndKVAllGather): K and V gathered over cp
/// (exposed), then the rank's two query chunks of span/2 tokens attend their causal prefixes — for
/// cp rank 0 chunk 0 over span/2 keys and chunk 2cp−1 over the whole sequence.
constexpr void cp_all_gather_pass(const build_context& c, leaf& l, const cp_heads& h, pass_kind pass,
                                  std::int64_t span) {
  const std::int64_t n = c.s().seq_len;
  const cp_tensors own = cp_tensors_of(c, h, span, span);
  const double E = c.element_bytes(), cp = static_cast<double>(c.s().cp_size);
  c.collective(l, pass, comm_group::cp, collective_kind::all_gather, own.k * cp * E);
  c.collective(l, pass, comm_group::cp, collective_kind::all_gather, own.v * cp * E);
  cp_attention_call(c, l, h, pass, span / 2, span / 2);
  cp_attention_call(c, l, h, pass, span / 2, n);
  if (pass == pass_kind::forward) return;
  c.collective(l, pass, comm_group::cp, collective_kind::reduce_scatter, own.k * cp * E);
  c.collective(l, pass, comm_group::cp, collective_kind::reduce_scatter, own.v * cp * E);
}
}  // namespace detail

/// Core attention of a context-parallel job (cp_size > 1, flash attention): the ops of its
/// cp_comm_type (see the file comment) and its memory. Held for backward as without cp, over the
/// rank's tokens: Q, K, V and the log-sum-exp (TE >= 2.8's all-to-all also keeps its output before
/// the output exchange: te_cp_a2a_save_pre_posta2a_min_version). Transients on top of the plain
/// flash-attention ones: the ring keeps every step's KV buffer, output and fp32 log-sum-exp until
/// the last step's correction (forward), and two [KV, dKV] buffers plus a dQ accumulator
/// (backward); the all-to-all keeps the caller's Q, K, V beside the exchanged ones and its helper's
/// send copy, receive buffer and reordered result of the largest exchange; the all-gather the
/// gathered KV (and in backward the full dKV).
constexpr leaf context_parallel_attention_leaf(const build_context& c) {
  const strategy_spec& s = c.s();
  leaf l;
  l.id = leaf_id::core_attention;
  l.kind = leaf_kind::attention;
  l.communicates_in_replay = true;  // a replayed forward exchanges again
  const cp_heads h = cp_heads_of(c);
  const std::int64_t a2a = cp_a2a_size(s), ring = cp_ring_size(s);
  const bool all_gather = s.cp_comm_type == cp_comm_kind::all_gather;
  // Tokens the rank's attention runs over: its own (all-gather), the ring rank's after the
  // all-to-all gathered its level's (the whole sequence without a ring).
  const std::int64_t span = all_gather ? s.seq_len / s.cp_size : s.seq_len / ring;
  const cp_tensors t = cp_tensors_of(c, h, span, span);  // as many bytes as the rank's own Q, K, V, O
  const double E = c.element_bytes();
  const bool saves_output = a2a > 1 && te_at_least(s, s.te_cp_a2a_save_pre_posta2a_min_version);
  // Forward: Q, K, V exchanged, attention, the output exchanged back. Backward: dO (and before TE
  // 2.8 the saved output) exchanged, attention backward, dQ, dK, dV exchanged back.
  if (a2a > 1)
    for (const double x : {t.q, t.k, t.v}) detail::cp_all_to_all(c, l, pass_kind::forward, x * E);
  if (all_gather)
    detail::cp_all_gather_pass(c, l, h, pass_kind::forward, span);
  else
    detail::cp_ring_steps(c, l, h, pass_kind::forward, ring, span);
  if (a2a > 1) {
    detail::cp_all_to_all(c, l, pass_kind::forward, t.o * E);
    detail::cp_all_to_all(c, l, pass_kind::backward_input, t.o * E);
    if (!saves_output) detail::cp_all_to_all(c, l, pass_kind::backward_input, t.o * E);
  }
  if (all_gather)
    detail::cp_all_gather_pass(c, l, h, pass_kind::backward_input, span);
  else
    detail::cp_ring_steps(c, l, h, pass_kind::backward_input, ring, span);
  if (a2a > 1)
    for (const double x : {t.q, t.k, t.v}) detail::cp_all_to_all(c, l, pass_kind::backward_input, x * E);
  const double base_fwd = t.qkv() + t.lse + t.o, base_bwd = 2 * t.qkv() + t.lse + t.o;
  const double kv = t.k + t.v;
  const double r = static_cast<double>(ring);
  double fwd_extra = 0, bwd_extra = 0;
  if (ring > 1) {
    fwd_extra = r * kv + (1 + (r - 1) / 2) * (t.o + t.lse * 4 / E);
    bwd_extra = 4 * kv + t.q;
  }
  if (a2a > 1) {
    fwd_extra += t.qkv() + (2 * t.qkv() > 3 * t.o ? 2 * t.qkv() : 3 * t.o);
    bwd_extra += 3 * t.qkv() > 3 * t.o ? 3 * t.qkv() : 3 * t.o;
  }
  if (all_gather) {
    const double gathered = kv * (static_cast<double>(s.cp_size) - 1);
    fwd_extra = gathered;
    bwd_extra = 2 * gathered;
  }
  l.input = t.qkv() * E;
  l.cache = (t.qkv() + t.lse + (saves_output ? t.o : 0)) * E;
  l.fwd_peak = (base_fwd + fwd_extra) * E;
  l.bwd_peak = (base_bwd + bwd_extra) * E;
  return l;
}

LLMSIM_END_NAMESPACE
