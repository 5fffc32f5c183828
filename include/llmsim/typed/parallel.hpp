/// \file llmsim/typed/parallel.hpp
/// A training strategy as a type: `llmsim::parallel<tp<8>, pp<4>, dp<64>, recompute::selective>`.
/// Options come in any order; the rest keep the defaults of strategy names
/// (`catalogue::parse_strategy_name`): sequence 4096, micro-batch 1, 8 micro-batches, ZeRO-1,
/// sequence parallelism on, no recompute. `parallel<...>::spec` is the `strategy_spec`, with
/// `world_size = tp * pp * cp * dp`, checked on its own by `validate(strategy_spec)`.
///
/// ```cpp
/// using namespace llmsim;
/// using layout = parallel<tp<8>, pp<4>, dp<64>, zero<1>, recompute::selective, seq<4096>, micro_batches<32>>;
/// static_assert(layout::spec.world_size == 2048);
/// ```
#pragma once

#include <llmsim/core/error.hpp>
#include <llmsim/spec/model.hpp>
#include <llmsim/spec/strategy.hpp>
#include <llmsim/typed/concepts.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>

LLMSIM_BEGIN_NAMESPACE

/// Tensor-parallel size.
template <std::int64_t N>
struct tp {
  static constexpr option_key key = option_key::tp;
  static constexpr void apply(strategy_draft& d) { d.spec.tp_size = N; }
};
/// Pipeline-parallel size (stages).
template <std::int64_t N>
struct pp {
  static constexpr option_key key = option_key::pp;
  static constexpr void apply(strategy_draft& d) { d.spec.pp_size = N; }
};
/// Data-parallel size.
template <std::int64_t N>
struct dp {
  static constexpr option_key key = option_key::dp;
  static constexpr void apply(strategy_draft& d) { d.dp = N; }
};
/// Context-parallel size.
template <std::int64_t N>
struct cp {
  static constexpr option_key key = option_key::cp;
  static constexpr void apply(strategy_draft& d) { d.spec.cp_size = N; }
};
/// Expert-parallel size.
template <std::int64_t N>
struct ep {
  static constexpr option_key key = option_key::ep;
  static constexpr void apply(strategy_draft& d) { d.spec.ep_size = N; }
};
/// Expert tensor-parallel size.
template <std::int64_t N>
struct etp {
  static constexpr option_key key = option_key::etp;
  static constexpr void apply(strategy_draft& d) { d.spec.etp_size = N; }
};
/// Virtual pipeline chunks per stage (interleaved 1F1B); 1 is plain 1F1B.
template <std::int64_t N>
struct vpp {
  static constexpr option_key key = option_key::vpp;
  static constexpr void apply(strategy_draft& d) { d.spec.interleaving_size = N; }
};
/// ZeRO stage: 0 plain data parallelism, 1 Megatron's distributed optimizer, 2 and 3 DeepSpeed ZeRO-2/3.
template <std::int64_t N>
struct zero {
  static constexpr option_key key = option_key::zero;
  static constexpr void apply(strategy_draft& d) { d.spec.zero_state = N; }
};
/// Sequence length in tokens.
template <std::int64_t N>
struct seq {
  static constexpr option_key key = option_key::seq;
  static constexpr void apply(strategy_draft& d) { d.spec.seq_len = N; }
};
/// Sequences per micro-batch.
template <std::int64_t N>
struct micro_batch {
  static constexpr option_key key = option_key::micro_batch;
  static constexpr void apply(strategy_draft& d) { d.spec.micro_batch_size = N; }
};
/// Micro-batches per iteration (gradient-accumulation steps).
template <std::int64_t N>
struct micro_batches {
  static constexpr option_key key = option_key::micro_batches;
  static constexpr void apply(strategy_draft& d) { d.spec.micro_batch_num = N; }
};
/// Decoder layers of the first pipeline stage, when it differs from the others (Megatron
/// `--decoder-first-pipeline-num-layers`; the other stages share the rest evenly).
template <std::int64_t N>
struct first_stage_layers {
  static constexpr option_key key = option_key::first_stage_layers;
  static constexpr void apply(strategy_draft& d) { d.spec.num_layers_in_first_pipeline_stage = N; }
};
/// Decoder layers of the last pipeline stage (Megatron `--decoder-last-pipeline-num-layers`).
template <std::int64_t N>
struct last_stage_layers {
  static constexpr option_key key = option_key::last_stage_layers;
  static constexpr void apply(strategy_draft& d) { d.spec.num_layers_in_last_pipeline_stage = N; }
};
/// Megatron sequence parallelism of the tensor-parallel group's norms and dropouts (on by default).
template <bool On>
struct sequence_parallel {
  static constexpr option_key key = option_key::sequence_parallel;
  static constexpr void apply(strategy_draft& d) { d.spec.enable_sequence_parallel = On; }
};
using no_sequence_parallel = sequence_parallel<false>;

/// What backward recomputes (the strategy-name tokens `full` / `selective`).
namespace recompute {
/// Keep every activation (the default).
struct none {
  static constexpr option_key key = option_key::recompute;
  static constexpr void apply(strategy_draft& d) { set_recompute(d.spec, recompute_kind::none, 0); }
};
/// Recompute each layer's attention block but its output projection in backward: the QKV (or MLA
/// up-) projections, rotary embedding and core attention, keeping only the block's input (SimuMax's
/// attn_recompute). Not Megatron's `--recompute-granularity selective`, whose default core_attn
/// module saves nothing under flash attention (`megatron_recompute_modules` refuses it) and which
/// has no module recomputing the QKV projection.
struct selective {
  static constexpr option_key key = option_key::recompute;
  static constexpr void apply(strategy_draft& d) {
    set_recompute(d.spec, recompute_kind::selective_recompute, max_dimension);
  }
};
/// Recompute whole layers, keeping only their inputs; `full_layers<N>`: the first N layers of
/// each stage (Megatron `--recompute-granularity full --recompute-method block --recompute-num-layers N`).
template <std::int64_t Layers>
struct full_layers {
  static constexpr option_key key = option_key::recompute;
  static constexpr void apply(strategy_draft& d) { set_recompute(d.spec, recompute_kind::full_block, Layers); }
};
/// Recompute every layer.
using full = full_layers<max_dimension>;
}  // namespace recompute

/// The pipeline schedule (the strategy-name tokens `zbh1` / `dualpipev`): `schedule::zb_h1`, ...
namespace schedule {
template <pipeline_schedule_kind K>
struct kind {
  static constexpr option_key key = option_key::pipeline_schedule;
  static constexpr void apply(strategy_draft& d) { d.spec.pipeline_schedule = K; }
};
using one_f_one_b = kind<pipeline_schedule_kind::one_f_one_b>;
using interleaved_1f1b = kind<pipeline_schedule_kind::interleaved_1f1b>;
using zb_h1 = kind<pipeline_schedule_kind::zb_h1>;
using dualpipev = kind<pipeline_schedule_kind::dualpipev>;
}  // namespace schedule

/// FP8 / NVFP4 training of the decoder layers with a TransformerEngine recipe (Megatron --fp8-recipe,
/// --fp4-recipe): `fp8_training<>` (delayed scaling), `fp8_training<fp8_recipe_kind::mxfp8>`.
template <fp8_recipe_kind Recipe = fp8_recipe_kind::delayed>
struct fp8_training {
  static constexpr option_key key = option_key::fp8;
  static constexpr void apply(strategy_draft& d) {
    d.spec.fp8 = true;
    d.spec.fp8_recipe = Recipe;
  }
};

/// How context parallelism exchanges the sequence (TransformerEngine `cp_comm_type`, with `cp<N>`):
/// `cp_comm::p2p` (ring), `cp_comm::a2a` (Ulysses), `cp_comm::all_gather`, and
/// `cp_comm::hierarchical<A, P>` ("a2a+p2p" with Megatron's hierarchical_context_parallel_sizes {A, P}).
namespace cp_comm {
template <cp_comm_kind K>
struct kind {
  static constexpr option_key key = option_key::cp_comm_type;
  static constexpr void apply(strategy_draft& d) { d.spec.cp_comm_type = K; }
};
using p2p = kind<cp_comm_kind::p2p>;
using a2a = kind<cp_comm_kind::a2a>;
using all_gather = kind<cp_comm_kind::all_gather>;
template <std::int64_t A2A, std::int64_t P2P>
struct hierarchical {
  static constexpr option_key key = option_key::cp_comm_type;
  static constexpr void apply(strategy_draft& d) {
    d.spec.cp_comm_type = cp_comm_kind::a2a_p2p;
    d.spec.hierarchical_context_parallel_sizes = std::array<std::int64_t, 2>{A2A, P2P};
  }
};
}  // namespace cp_comm

/// The starting point of `parallel<...>`: the defaults of strategy names
/// (`catalogue::parse_strategy_name`; tests/static/typed_api_static.cpp checks they agree).
inline constexpr strategy_spec parallel_defaults{
    .seq_len = 4096, .micro_batch_size = 1, .micro_batch_num = 8, .enable_recompute = false};

namespace detail {

/// Option `Index` (0-based) of `llmsim::parallel<...>` has type `T`.
template <std::size_t Index, class T>
struct parallel_option {
  static_assert(StrategyOption<T>,
                "llmsim::parallel: an option is not a strategy option (tp<N>, pp<N>, dp<N>, cp<N>, ep<N>, etp<N>, "
                "vpp<N>, zero<N>, seq<N>, micro_batch<N>, micro_batches<N>, first_stage_layers<N>, "
                "last_stage_layers<N>, recompute::none/selective/full/full_layers<N>, sequence_parallel<bool>, "
                "schedule::zb_h1/..., fp8_training<recipe>); "
                "parallel_option<index, type> in the notes names it");
};
/// Instantiates `parallel_option<I, Option>` for every option: a static_assert per unknown one.
template <class... Options, std::size_t... I>
constexpr void report_unknown_options(std::index_sequence<I...>) {
  using checked [[maybe_unused]] = std::void_t<decltype(sizeof(parallel_option<I, Options>))...>;
}

template <class... Options>
constexpr bool options_are_known() {
  constexpr std::array<bool, sizeof...(Options) + 1> ok{StrategyOption<Options>..., true};
  for (bool b : ok)
    if (!b) return false;
  return true;
}

template <std::size_t N>
constexpr bool keys_distinct(const std::array<option_key, N>& keys) {
  for (std::size_t i = 0; i < N; ++i)
    for (std::size_t j = i + 1; j < N; ++j)
      if (keys[i] == keys[j] && keys[i] != option_key::custom) return false;
  return true;
}

template <class... Options>
constexpr bool check_parallel() {
  if constexpr (!options_are_known<Options...>()) {
    report_unknown_options<Options...>(std::index_sequence_for<Options...>{});
  } else {
    static_assert(keys_distinct(std::array<option_key, sizeof...(Options)>{Options::key...}),
                  "llmsim::parallel: a setting is given twice (two tp<N>, two recompute options, ...)");
  }
  return true;
}

template <class... Options>
constexpr strategy_spec lower_parallel() {
  strategy_draft d{parallel_defaults, 1};
  if constexpr (options_are_known<Options...>()) {
    [[maybe_unused]] const int applied[] = {0, (Options::apply(d), 0)...};
  }
  const double world = static_cast<double>(d.spec.tp_size) * static_cast<double>(d.spec.pp_size) *
                       static_cast<double>(d.spec.cp_size) * static_cast<double>(d.dp);
  if (d.dp < 1) llmsim::detail::report_error("llmsim::parallel", "dp", "dp<{}> must be at least 1", d.dp);
  if (world > static_cast<double>(max_dimension))
    llmsim::detail::report_error("llmsim::parallel", "strategy.world_size",
                                 "tp*pp*cp*dp={} exceeds the largest supported size {}", world, max_dimension);
  d.spec.world_size = d.spec.tp_size * d.spec.pp_size * d.spec.cp_size * d.dp;
  validate(d.spec);
  return d.spec;
}

}  // namespace detail

/// A strategy as a type; `spec` is its `strategy_spec`. Unknown or repeated options do not compile.
template <class... Options>
struct parallel {
  static_assert(detail::check_parallel<Options...>());
  static constexpr strategy_spec spec = detail::lower_parallel<Options...>();
};

LLMSIM_END_NAMESPACE
