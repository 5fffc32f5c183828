/// \file llmsim/typed/model.hpp
/// A model as a Boost.Hana sequence of layer kinds, lowered into the `model_spec` every estimate
/// reads. The kinds are checked as types (an embedding first, an lm_head last, decoder layers of
/// one attention, MLP and norm kind in between; an MoE model may start with dense layers); the
/// sizes are checked as data through the one error path, and then by `validate(model_spec)`.
///
/// ```cpp
/// using namespace llmsim::typed;
/// constexpr auto llama3_8b = model("llama3_8b", embedding{.vocab = 128256, .hidden = 4096},
///     repeated{decoder_layer{gqa_attention{.heads = 32, .kv_heads = 8, .head_dim = 128},
///                            swiglu_mlp{.ffn = 14336}, rms_norm{}}, 32},
///     lm_head{});
/// static_assert(to_spec(llama3_8b) == llmsim::catalogue::llama3_8b);
/// ```
#pragma once

#include <llmsim/core/error.hpp>
#include <llmsim/core/fixed_string.hpp>
#include <llmsim/spec/model.hpp>
#include <llmsim/typed/concepts.hpp>
#include <llmsim/typed/layers.hpp>

#include <boost/hana/fold_left.hpp>
#include <boost/hana/tuple.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <type_traits>
#include <utility>

LLMSIM_BEGIN_NAMESPACE
namespace typed {

namespace detail {

// ---- type-level rules ----------------------------------------------------------------------------

template <std::size_t I, class T>
struct indexed_type {
  using type = T;
};
template <class Indices, class... T>
struct indexed_types;
template <std::size_t... I, class... T>
struct indexed_types<std::index_sequence<I...>, T...> : indexed_type<I, T>... {};
template <std::size_t I, class T>
indexed_type<I, T> pick(const indexed_type<I, T>&);
/// The `I`th type of `T...`.
template <std::size_t I, class... T>
using type_at = typename decltype(detail::pick<I>(indexed_types<std::index_sequence_for<T...>, T...>{}))::type;

/// The sub-kinds of a decoder layer kind (void for other kinds).
template <class T>
struct parts_of {
  using attention = void;
  using mlp = void;
  using norm = void;
  static constexpr bool moe = false;
};
template <DecoderLayer T>
struct parts_of<T> {
  using attention = typename T::attention_type;
  using mlp = typename T::mlp_type;
  using norm = typename T::norm_type;
  static constexpr bool moe = mlp::moe;
};

template <std::size_t N>
constexpr bool all_of(const std::array<bool, N>& a, std::size_t from = 0, std::size_t to = N) {
  for (std::size_t i = from; i < to; ++i)
    if (!a[i]) return false;
  return true;
}

/// Argument `Index` (0-based, after the name) of `llmsim::typed::model(...)` has type `T`.
template <std::size_t Index, class T>
struct model_argument {
  static_assert(Layer<T>,
                "llmsim::typed::model: an argument is not a layer kind (embedding, decoder_layer, repeated, lm_head); "
                "model_argument<index, type> in the notes names it (index 0 is the first layer)");
};
/// Instantiates `model_argument<I, Kind>` for every argument: a static_assert per non-layer.
template <class... Kinds, std::size_t... I>
constexpr void report_non_layers(std::index_sequence<I...>) {
  using checked [[maybe_unused]] = std::void_t<decltype(sizeof(model_argument<I, Kinds>))...>;
}

/// The rules a sequence of kinds must follow to be a model; each broken rule is a static_assert
/// with its text. Returns true so that it can sit in a static_assert itself without a second error.
template <class... Kinds>
constexpr bool check_model() {
  constexpr std::size_t n = sizeof...(Kinds);
  if constexpr (!all_of(std::array<bool, n>{Layer<Kinds>...})) {
    report_non_layers<Kinds...>(std::index_sequence_for<Kinds...>{});
    return true;
  } else {
    static_assert(n >= 3,
                  "llmsim::typed::model: a model is an embedding, at least one decoder layer (decoder_layer or "
                  "repeated) and an lm_head");
    if constexpr (n >= 3) {
      using first = type_at<0, Kinds...>;
      using last = type_at<n - 1, Kinds...>;
      constexpr std::array<bool, n> decoder{DecoderLayer<Kinds>...};
      static_assert(std::is_same_v<first, embedding>, "llmsim::typed::model: the first layer must be an embedding");
      static_assert(std::is_same_v<last, lm_head>, "llmsim::typed::model: the last layer must be an lm_head");
      static_assert(all_of(decoder, 1, n - 1),
                    "llmsim::typed::model: only decoder layers (decoder_layer, repeated) may stand between the "
                    "embedding and the lm_head");
      if constexpr (all_of(decoder, 1, n - 1)) {
        using head_parts = parts_of<type_at<1, Kinds...>>;      // the first decoder layer
        using tail_parts = parts_of<type_at<n - 2, Kinds...>>;  // the last decoder layer
        constexpr std::array<bool, n> same_attention{
            (!DecoderLayer<Kinds> ||
             std::is_same_v<typename parts_of<Kinds>::attention, typename head_parts::attention>)...};
        constexpr std::array<bool, n> same_norm{
            (!DecoderLayer<Kinds> || std::is_same_v<typename parts_of<Kinds>::norm, typename head_parts::norm>)...};
        constexpr std::array<bool, n> moe{parts_of<Kinds>::moe...};
        // Dense layers share the first layer's MLP kind, expert layers the last layer's.
        constexpr std::array<bool, n> same_mlp{
            (!DecoderLayer<Kinds> ||
             std::is_same_v<typename parts_of<Kinds>::mlp,
                            typename std::conditional_t<parts_of<Kinds>::moe, tail_parts, head_parts>::mlp>)...};
        constexpr bool dense_after_moe = [&] {
          for (std::size_t i = 1; i + 1 < n; ++i)
            if (moe[i - 1] && !moe[i]) return true;
          return false;
        }();
        static_assert(all_of(same_attention),
                      "llmsim::typed::model: all decoder layers must use the same attention kind");
        static_assert(all_of(same_norm), "llmsim::typed::model: all decoder layers must use the same norm kind");
        static_assert(!dense_after_moe,
                      "llmsim::typed::model: an MoE model may start with dense layers, but no dense layer may follow "
                      "an MoE layer (model_spec.dense_layers counts the leading ones)");
        static_assert(dense_after_moe || all_of(same_mlp),
                      "llmsim::typed::model: all dense decoder layers must use the same MLP kind");
        static_assert(!tail_parts::moe || head_parts::moe || std::is_same_v<typename head_parts::mlp, swiglu_mlp>,
                      "llmsim::typed::model: the dense layers of an MoE model must be swiglu_mlp (its experts are "
                      "SwiGLU and model_spec.use_swiglu covers both)");
      }
    }
    return true;
  }
}

// ---- data-level rules and lowering ---------------------------------------------------------------

/// The state of lowering a sequence of kinds: the spec so far and the first layer's parts, which
/// every later layer must repeat (a model_spec has one size per field).
struct lowering {
  model_spec spec{};
  std::int64_t layers = 0;        ///< decoder layers so far
  std::int64_t dense_layers = 0;  ///< of which without experts
  std::int64_t first_moe_layer = -1;
  model_spec attention{}, dense_mlp{}, moe_mlp{};
};

constexpr void lower(lowering& st, const embedding& e) { lower_into(st.spec, e); }
constexpr void lower(lowering& st, const lm_head& h) { lower_into(st.spec, h); }

template <class Decoder>
constexpr void lower_decoder(lowering& st, const Decoder& d, std::int64_t count) {
  constexpr std::string_view api = "llmsim::typed::model";
  using llmsim::detail::report_error;
  if (count < 1)
    report_error(api, "repeated.count", "repeated.count={} must be at least 1 (at decoder layer {})", count, st.layers);
  if (count > max_dimension)
    report_error(api, "repeated.count", "repeated.count={} exceeds the largest supported size {}", count,
                 max_dimension);
  if (d.attention.bias != d.mlp.bias)
    report_error(api, "model.add_linear_bias",
                 "decoder layer {}: attention.bias={} and mlp.bias={} must agree (model_spec.add_linear_bias covers "
                 "every linear layer)",
                 st.layers, d.attention.bias, d.mlp.bias);
  model_spec attention{};
  lower_into(attention, d.attention);
  attention.add_linear_bias = d.attention.bias;
  model_spec mlp{};
  lower_into(mlp, d.mlp);
  if (st.layers == 0)
    st.attention = attention;
  else if (attention != st.attention)
    report_error(api, "model.layers",
                 "decoder layer {} has other attention sizes than decoder layer 0 (the decoder layers of a model share "
                 "their sizes)",
                 st.layers);
  if constexpr (Decoder::mlp_type::moe) {
    if (st.first_moe_layer < 0) {
      st.first_moe_layer = st.layers;
      st.moe_mlp = mlp;
    } else if (mlp != st.moe_mlp) {
      report_error(
          api, "model.layers",
          "decoder layer {} has other expert sizes than decoder layer {} (the MoE layers of a model share their sizes)",
          st.layers, st.first_moe_layer);
    }
  } else {
    if (st.dense_layers == 0)
      st.dense_mlp = mlp;
    else if (mlp != st.dense_mlp)
      report_error(
          api, "model.layers",
          "decoder layer {} has another MLP width than decoder layer 0 (the dense layers of a model share their sizes)",
          st.layers);
    st.dense_layers += count;
  }
  lower_into(st.spec, d.attention);
  lower_into(st.spec, d.mlp);
  lower_into(st.spec, d.norm);
  st.spec.add_linear_bias = d.attention.bias;
  st.layers += count;
}
template <class A, class M, class N>
constexpr void lower(lowering& st, const decoder_layer<A, M, N>& d) {
  lower_decoder(st, d, 1);
}
template <class Decoder>
constexpr void lower(lowering& st, const repeated<Decoder>& r) {
  lower_decoder(st, r.layer, r.count);
}

}  // namespace detail

/// A model: its name and its layer kinds in order, as a `boost::hana::tuple`. Made by `model(...)`.
template <class... Kinds>
struct layer_stack {
  static_assert(detail::check_model<Kinds...>());
  fixed_string<64> name{};
  boost::hana::tuple<Kinds...> layers{};
};

/// `model("llama3_8b", embedding{...}, repeated{decoder_layer{...}, 32}, lm_head{})`.
template <class... Kinds>
constexpr layer_stack<Kinds...> model(std::string_view name, const Kinds&... kinds) {
  return {fixed_string<64>(name), boost::hana::tuple<Kinds...>(kinds...)};
}

/// The `model_spec` of a typed model (checks the sizes the kinds share; `validate` does the rest).
template <class... Kinds>
constexpr model_spec to_spec(const layer_stack<Kinds...>& m) {
  detail::lowering st = boost::hana::fold_left(m.layers, detail::lowering{}, [](detail::lowering s, const auto& kind) {
    detail::lower(s, kind);
    return s;
  });
  model_spec out = st.spec;
  out.model_name = m.name;
  out.layer_num = st.layers;
  const bool moe = st.first_moe_layer >= 0;
  out.model_type = moe ? model_kind::moe : model_kind::dense;
  out.dense_layers = moe ? st.dense_layers : 0;
  return out;
}
/// A `model_spec` is its own spec (so the typed entry points also take specs from files).
constexpr const model_spec& to_spec(const model_spec& m) { return m; }

}  // namespace typed
LLMSIM_END_NAMESPACE
