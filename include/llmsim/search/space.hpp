/// \file llmsim/search/space.hpp
/// The space of the strategy search and its enumeration in one canonical order: every layout
/// (tp, cp, pp with its first/last split, virtual stages and schedule, ep, etp) that divides the
/// GPUs and the model, and per layout every micro-batch size, ZeRO stage, FP8 recipe, optimizer
/// offload and recompute choice. Everything here is constexpr (the typed `fastest_fitting` over a
/// space enumerates it in a constant expression).
///
/// ```cpp
/// llmsim::search_space sp{.gpus = 64, .global_batch = 256, .seq_len = 4096};
/// auto layouts = llmsim::search_layouts(model, sp);   // the outer loop of llmsim::search
/// ```
#pragma once

#include <llmsim/spec/model.hpp>
#include <llmsim/spec/strategy.hpp>
#include <llmsim/spec/system.hpp>
#include <llmsim/spec/validate.hpp>

#include <array>
#include <cstdint>
#include <vector>

LLMSIM_BEGIN_NAMESPACE

/// The recompute choices of the search, in the order one layout tries them: none, selective
/// (SimuMax's attn_recompute: each layer's QKV projection, rotary embedding and core attention;
/// not Megatron's --recompute-granularity selective, see typed recompute::selective), full block over
/// `recompute_layer_num` = 1 .. the most layers a stage holds (Megatron --recompute-method uniform
/// --recompute-num-layers; SimuMax `search_best_recompute_layer_num`).
enum class search_recompute : std::uint8_t { none, selective, full };

/// Which values each dimension may take. An empty list means every value the job allows (powers
/// of two for the parallel sizes, bounded by the rules of Megatron-LM's arguments.py).
/// The most GPUs a search spans (2^24): the command line's `--gpus` range and the library's check.
inline constexpr std::int64_t max_search_gpus = std::int64_t{1} << 24;

struct search_space {
  std::int64_t gpus = 0;
  std::int64_t global_batch = 0;     ///< sequences per iteration (or 0 and tokens_per_step)
  std::int64_t tokens_per_step = 0;  ///< global_batch = tokens_per_step / seq_len
  std::int64_t seq_len = 0;
  std::vector<std::int64_t> tp{}, pp{}, cp{}, ep{}, etp{}, vp{}, mbs{};
  std::vector<std::int64_t> zero{0, 1, 2, 3};  ///< ZeRO stages (2, 3: DeepSpeed; see `fsdp`)
  bool fsdp = false;                           ///< also ZeRO-2/3 as Megatron-FSDP (data_parallel_sharding_strategy)
  /// FP8 recipes too, on systems with an fp8_matmul entry (false: the base's fp8 and recipe)
  bool fp8 = true;
  bool offload = true;       ///< optimizer_cpu_offload on and off (false: the base's)
  bool recompute = true;     ///< selective and full recompute (else none only)
  bool uneven_split = true;  ///< first/last-stage splits where pp does not divide the layers
  /// ZB-H1 and DualPipeV beside (interleaved) 1F1B (false: 1F1B layouts with pp > 1 keep the
  /// base's ZB-H1 / DualPipeV)
  bool schedules = true;
  /// MoE layouts with ep > 1 and a 1F1B schedule Megatron combines (pp 1 or interleaved) also with
  /// its EP all-to-all overlap (overlap_moe_expert_parallel_comm with delay_wgrad_compute).
  bool expert_comm_overlap = false;
  /// Layouts with tp > 1 also with TE's userbuffers TP overlap (tp_comm_overlap at the base's
  /// settings), where Megatron runs it: sequence parallelism, no delayed weight gradients, a model
  /// whose linears all have userbuffers (`tp_comm_overlap_model_allowed`).
  bool tp_comm_overlap = false;
  std::int64_t max_tp = 8;   ///< tensor parallelism stays inside an NVLink domain of 8 by default
  std::int64_t max_vp = 8;   ///< most virtual stages per rank
  std::int64_t max_mbs = 8;  ///< largest micro-batch size
  /// Fields the search does not vary (kernels, dispatcher, overlap flags ...): copied into every candidate.
  strategy_spec base{};
};

/// One pipeline / parallel layout of the search (the outer loop).
struct search_layout {
  std::int64_t tp = 1, cp = 1, pp = 1, dp = 1, ep = 1, etp = 1, vp = 1;
  std::int64_t first = 0, last = 0;  ///< num_layers_in_first/last_pipeline_stage (0: even)
  pipeline_schedule_kind schedule = pipeline_schedule_kind::one_f_one_b;
  std::int64_t max_stage_layers = 0;         ///< most decoder layers a pipeline rank holds
  cp_comm_kind cp_comm = cp_comm_kind::a2a;  ///< cp > 1: Ulysses all-to-all or the KV ring (p2p)
  bool ep_overlap = false;                   ///< Megatron's combined 1F1B (overlap_moe_expert_parallel_comm)
  bool tp_overlap = false;                   ///< TE's userbuffers TP overlap (tp_comm_overlap)
};

/// One candidate: a layout and the inner choices. `order` is its place in the canonical
/// enumeration (ties of the ranking go to the lower order).
struct search_point {
  search_layout layout{};
  std::int64_t mbs = 1, mbn = 1;
  std::int64_t zero = 1;
  bool fsdp = false;
  fp8_recipe_kind fp8 = fp8_recipe_kind::invalid;  ///< invalid: bf16
  bool offload = false;
  search_recompute recompute = search_recompute::none;
  std::int64_t recompute_layers = 0;
  std::uint64_t order = 0;
};

namespace detail {
constexpr bool in_list(const std::vector<std::int64_t>& allowed, std::int64_t v) {
  if (allowed.empty()) return true;
  for (const std::int64_t a : allowed)
    if (a == v) return true;
  return false;
}
/// Powers of two 1..limit that the list allows.
constexpr std::vector<std::int64_t> powers_up_to(std::int64_t limit, const std::vector<std::int64_t>& allowed) {
  std::vector<std::int64_t> out;
  for (std::int64_t v = 1; v <= limit; v *= 2) {
    if (in_list(allowed, v)) out.push_back(v);
    if (v > limit / 2) break;  // the next power would pass the limit (or overflow)
  }
  // An explicit list may name values that are not powers of two.
  for (const std::int64_t a : allowed)
    if (a >= 1 && a <= limit && (a & (a - 1)) != 0) out.push_back(a);
  return out;
}
/// The sequences of the iteration.
constexpr std::int64_t search_global_batch(const search_space& sp) {
  if (sp.global_batch > 0) return sp.global_batch;
  return sp.seq_len > 0 ? sp.tokens_per_step / sp.seq_len : 0;
}

/// The first/last splits of `layers` over pp stages: the even split when pp divides them; else
/// (uneven_split) the most even splits Megatron-LM can express with --decoder-first-pipeline-num-layers
/// and/or --decoder-last-pipeline-num-layers (transformer_config.py: the other stages share the
/// rest evenly): middle stages of ceil(layers / pp) layers and the remainder on the first stage,
/// or on the last, or the fewest layers split equally over both ends. Each entry: {first, last, middle}.
constexpr void pipeline_splits(std::int64_t layers, std::int64_t pp, bool uneven,
                               std::vector<std::array<std::int64_t, 3>>& out) {
  out.clear();
  if (pp == 1 || layers % pp == 0) {
    out.push_back({0, 0, layers / pp});
    return;
  }
  if (!uneven) return;
  const std::int64_t m = (layers + pp - 1) / pp;
  const std::int64_t end = layers - (pp - 1) * m;  // what is left for one end stage
  if (end >= 1) {
    out.push_back({end, 0, m});
    out.push_back({0, end, m});
  }
  if (pp > 2) {
    // Both ends equal, e <= middle: the largest such e (the most even).
    for (std::int64_t e = m - 1; e >= 1; --e) {
      const std::int64_t rest = layers - 2 * e;
      if (rest > 0 && rest % (pp - 2) == 0 && rest / (pp - 2) > e) {
        out.push_back({e, e, rest / (pp - 2)});
        break;
      }
    }
  }
}
}  // namespace detail

/// The strategy of a candidate (defined below, with the searched fields it sets).
constexpr strategy_spec to_strategy(const search_point& p, const search_space& sp);

/// The layouts (outer loop) of the space, in canonical order.
constexpr std::vector<search_layout> search_layouts(const model_spec& m, const search_space& sp) {
  std::vector<search_layout> out;
  const std::int64_t batch = detail::search_global_batch(sp);
  if (sp.gpus <= 0 || batch <= 0 || sp.seq_len <= 0) return out;
  const bool moe = is_moe(m);
  std::vector<std::array<std::int64_t, 3>> splits;
  for (const std::int64_t tp : detail::powers_up_to(sp.max_tp < sp.gpus ? sp.max_tp : sp.gpus, sp.tp)) {
    if (sp.gpus % tp != 0 || m.head_num % tp != 0) continue;
    for (const std::int64_t cp : detail::powers_up_to(sp.gpus / tp, sp.cp)) {
      if ((sp.gpus / tp) % cp != 0 || !cp_splits_sequence(sp.seq_len, cp) || !sp_splits_sequence(sp.seq_len, cp, tp))
        continue;
      for (std::int64_t pp = 1; pp <= m.layer_num && pp <= sp.gpus / (tp * cp); ++pp) {
        if ((sp.gpus / (tp * cp)) % pp != 0 || !detail::in_list(sp.pp, pp)) continue;
        const std::int64_t dp = sp.gpus / (tp * cp * pp);
        if (batch % dp != 0) continue;
        detail::pipeline_splits(m.layer_num, pp, sp.uneven_split, splits);
        for (const auto& split : splits) {
          const std::int64_t most = split[2] > split[0] ? (split[2] > split[1] ? split[2] : split[1])
                                                        : (split[0] > split[1] ? split[0] : split[1]);
          search_layout base{tp, cp, pp, dp, 1, 1, 1, split[0], split[1], pipeline_schedule_kind::one_f_one_b, most};
          std::vector<search_layout> schedules{base};
          if (pp > 1 && split[0] == 0 && split[1] == 0) {
            for (std::int64_t vp = 2; vp <= sp.max_vp && vp <= split[2]; ++vp) {
              if (split[2] % vp != 0 || !detail::in_list(sp.vp, vp)) continue;
              search_layout v = base;
              v.vp = vp;
              v.schedule = pipeline_schedule_kind::interleaved_1f1b;
              schedules.push_back(v);
            }
          }
          if (pp > 1 && sp.schedules)
            for (const auto k : {pipeline_schedule_kind::zb_h1, pipeline_schedule_kind::dualpipev}) {
              // DualPipeV splits the layers evenly over 2 * pp virtual stages (validate.hpp).
              if (k == pipeline_schedule_kind::dualpipev &&
                  (split[0] != 0 || split[1] != 0 || m.layer_num % (2 * pp) != 0))
                continue;
              search_layout v = base;
              v.schedule = k;
              schedules.push_back(v);
            }
          if (!detail::in_list(sp.vp, 1)) schedules.erase(schedules.begin());
          if (cp > 1) {
            // TransformerEngine's all-to-all (Ulysses) splits the heads over cp: cp must divide the
            // KV heads of a tp rank (validate.hpp); the KV ring ("p2p") has no such rule.
            const std::size_t n = schedules.size();
            for (std::size_t i = 0; i < n; ++i) {
              search_layout r = schedules[i];
              r.cp_comm = cp_comm_kind::p2p;
              schedules.push_back(r);
            }
            if ((m.kv_head_num / tp) % cp != 0 || (m.head_num / tp) % cp != 0)
              schedules.erase(schedules.begin(), schedules.begin() + static_cast<std::ptrdiff_t>(n));
          }
          for (const search_layout& l : schedules) {
            if (!moe) {
              out.push_back(l);
              continue;
            }
            // Expert parallelism: ep divides the experts; ep * etp ranks inside tp * cp * dp (Megatron
            // parallel_state.py builds the expert groups from the same world: ep * etp * edp * pp).
            for (const std::int64_t etp : detail::powers_up_to(tp, sp.etp)) {
              for (const std::int64_t ep : detail::powers_up_to(m.expert_num, sp.ep)) {
                if (m.expert_num % ep != 0 || (tp * cp * dp) % (ep * etp) != 0) continue;
                search_layout e = l;
                e.ep = ep;
                e.etp = etp;
                out.push_back(e);
                e.ep_overlap = true;
                if (sp.expert_comm_overlap && !sp.base.overlap_moe_expert_parallel_comm &&
                    expert_overlap_allowed(m, to_strategy(search_point{.layout = e}, sp)))
                  out.push_back(e);
              }
            }
          }
        }
      }
    }
  }
  // TE's userbuffers TP overlap: a second copy of each layout where Megatron would run it (after
  // the others, so the canonical order of the rest is unchanged).
  if (sp.tp_comm_overlap && !sp.base.tp_comm_overlap && tp_comm_overlap_model_allowed(m)) {
    const std::size_t n = out.size();
    for (std::size_t i = 0; i < n; ++i) {
      search_layout l = out[i];
      l.tp_overlap = true;
      if (to_strategy(search_point{.layout = l}, sp).tp_comm_overlap) out.push_back(l);
    }
  }
  return out;
}

/// The FP8 recipes the space tries on `sys` (none without an fp8_matmul entry, or `fp8` off).
constexpr std::vector<fp8_recipe_kind> search_fp8_recipes(const search_space& sp, const system_spec& sys) {
  std::vector<fp8_recipe_kind> out{fp8_recipe_kind::invalid};
  if (!sp.fp8 || !sys.op(compute_kind::fp8_matmul).present) return out;
  // The recipes the GPU runs (fp8_recipe_min_compute_capability, as validation checks them); MXFP8
  // only on a GPU known to run it, the others also on an unknown one (validation then decides).
  const double cc = sys.accelerator.compute_capability;
  for (const auto r :
       {fp8_recipe_kind::delayed, fp8_recipe_kind::tensorwise, fp8_recipe_kind::blockwise, fp8_recipe_kind::mxfp8})
    if (cc >= fp8_recipe_min_compute_capability(r) || (cc <= 0 && r != fp8_recipe_kind::mxfp8)) out.push_back(r);
  return out;
}

/// The strategy of a candidate: `base` with the searched fields set.
constexpr strategy_spec to_strategy(const search_point& p, const search_space& sp) {
  strategy_spec s = sp.base;
  const search_layout& l = p.layout;
  s.seq_len = sp.seq_len;
  s.world_size = sp.gpus;
  s.tp_size = l.tp;
  s.cp_size = l.cp;
  s.cp_comm_type = l.cp > 1 ? l.cp_comm : sp.base.cp_comm_type;
  s.pp_size = l.pp;
  s.ep_size = l.ep;
  s.etp_size = l.etp;
  s.interleaving_size = l.vp;
  // (Interleaved) 1F1B is what interleaving_size implies (`pipeline_schedule_of`), as in names; a
  // space that does not search schedules keeps the base's ZB-H1 / DualPipeV on its 1F1B layouts.
  s.pipeline_schedule = {};
  if (schedule_splits_weight_gradients(l.schedule))
    s.pipeline_schedule = l.schedule;
  else if (!sp.schedules && l.schedule == pipeline_schedule_kind::one_f_one_b && l.pp > 1 &&
           sp.base.pipeline_schedule && schedule_splits_weight_gradients(*sp.base.pipeline_schedule))
    s.pipeline_schedule = sp.base.pipeline_schedule;  // pp 1 has no pipeline to schedule
  s.overlap_moe_expert_parallel_comm = sp.base.overlap_moe_expert_parallel_comm || l.ep_overlap;
  s.delay_wgrad_compute = sp.base.delay_wgrad_compute || l.ep_overlap;
  // TP overlap (the base's, or the layout's copy) where the layout has tensor parallelism
  // (Megatron-Bridge comm_overlap.py _get_model_comm_overlap_cfgs turns it off below tp 2) and no
  // weight gradients split out (delay_wgrad_compute, ZB-H1, DualPipeV: TE refuses its bulk wgrad
  // overlap with them; validation's `detail::validate_tp_comm_overlap`).
  s.tp_comm_overlap = (sp.base.tp_comm_overlap || l.tp_overlap) && l.tp > 1 && s.enable_sequence_parallel &&
                      !splits_weight_gradients(s);
  s.num_layers_in_first_pipeline_stage = {};
  s.num_layers_in_last_pipeline_stage = {};
  if (l.first > 0) s.num_layers_in_first_pipeline_stage = l.first;
  if (l.last > 0) s.num_layers_in_last_pipeline_stage = l.last;
  s.micro_batch_size = p.mbs;
  s.micro_batch_num = p.mbn;
  s.zero_state = p.zero;
  s.data_parallel_sharding_strategy = {};
  if (p.fsdp) s.data_parallel_sharding_strategy = megatron_fsdp_sharding(p.zero);
  // FP8 and optimizer offload: the candidate's where the space searches them, else the base's. A
  // bf16 candidate drops the base's FP8-only settings (validation refuses them without fp8).
  s.fp8 = sp.fp8 ? p.fp8 != fp8_recipe_kind::invalid : sp.base.fp8;
  s.fp8_recipe = p.fp8 != fp8_recipe_kind::invalid ? p.fp8 : sp.base.fp8_recipe;
  if (!s.fp8) {
    strategy_spec bf16{};  // not const: GCC 12 refuses a const literal of it in constant evaluation
    s.fp8_recipe = bf16.fp8_recipe;
    s.fp8_param_gather = bf16.fp8_param_gather;
    s.fp8_first_last_layers_bf16 = bf16.fp8_first_last_layers_bf16;
  }
  s.optimizer_cpu_offload = sp.offload ? p.offload : sp.base.optimizer_cpu_offload;
  // Megatron's optimizer offload runs on the precision-aware optimizer (arguments.py).
  s.use_precision_aware_optimizer = sp.base.use_precision_aware_optimizer || megatron_optimizer_offload(s);
  // Selective recompute covers every layer of every stage, as the name `selective` says.
  set_recompute(s,
                p.recompute == search_recompute::selective ? recompute_kind::selective_recompute
                : p.recompute == search_recompute::full    ? recompute_kind::full_block
                                                           : recompute_kind::none,
                p.recompute == search_recompute::selective ? max_dimension : p.recompute_layers);
  return s;
}

/// The inner choices of one layout except recompute ("groups"), in canonical order; calls
/// `f(point)` with recompute none for each. Stops early when `f` returns false.
template <class F>
constexpr bool for_each_group(const search_layout& l, const search_space& sp,
                              const std::vector<fp8_recipe_kind>& recipes, std::uint64_t layout_index, F&& f) {
  const std::int64_t per_dp = detail::search_global_batch(sp) / l.dp;
  std::uint64_t g = 0;
  for (std::int64_t mbs = 1; mbs <= sp.max_mbs && mbs <= per_dp; mbs *= 2) {
    if (per_dp % mbs != 0 || !detail::in_list(sp.mbs, mbs)) continue;
    // Megatron's interleaved schedule runs micro-batches in groups of pp (schedules.py).
    if (l.vp > 1 && (per_dp / mbs) % l.pp != 0) continue;
    // DualPipeV needs at least two micro-batches per rank (dualpipev.py; schedule/dualpipev.hpp).
    if (l.schedule == pipeline_schedule_kind::dualpipev && per_dp / mbs < 2 * l.pp) continue;
    for (const std::int64_t zero : sp.zero) {
      // Nothing to shard over at dp x cp = 1, but the optimizer offload runs on the distributed
      // optimizer (zero_state >= 1, strategy.hpp): zero 1 there only with the offload.
      const bool unsharded = l.dp * l.cp == 1;
      if (zero > 0 && unsharded && !(zero == 1 && sp.offload)) continue;
      for (int fsdp = 0; fsdp <= ((sp.fsdp && zero >= 2) ? 1 : 0); ++fsdp) {
        // DeepSpeed's pipeline engine refuses ZeRO-2/3 with pipeline parallelism (estimate.hpp).
        if (zero >= 2 && fsdp == 0 && l.pp > 1) continue;
        for (const fp8_recipe_kind r : recipes) {
          for (int off = 0; off <= (sp.offload ? 1 : 0); ++off) {
            if (off == 1 && zero == 0) continue;               // Megatron offloads only the distributed optimizer
            if (off == 0 && zero == 1 && unsharded) continue;  // zero 0's twin
            search_point p{l, mbs, per_dp / mbs, zero, fsdp == 1, r, off == 1};
            p.order = (layout_index << 32U) | (g++ << 10U);
            if (!f(p)) return false;
          }
        }
      }
    }
  }
  return true;
}

/// The recompute variants of a group in canonical order: none, selective, full 1..max layers
/// (not with Megatron's combined 1F1B, which refuses full recompute).
constexpr std::int64_t recompute_variant_count(const search_point& group, const search_space& sp) {
  if (!sp.recompute) return 1;
  return group.layout.ep_overlap ? 2 : 2 + group.layout.max_stage_layers;
}
constexpr search_point recompute_variant(search_point p, std::int64_t i) {
  if (i == 0) {
    p.recompute = search_recompute::none;
  } else if (i == 1) {
    p.recompute = search_recompute::selective;
  } else {
    p.recompute = search_recompute::full;
    p.recompute_layers = i - 1;
  }
  p.order += static_cast<std::uint64_t>(i);
  return p;
}

LLMSIM_END_NAMESPACE
