/// \file llmsim/spec/fields.hpp
/// Field lists: each spec names its fields once (`field_list<T>::value`), and everything that needs
/// the names — the JSON adapter, `--set key=value` overrides, the printed configs — walks that one
/// list. (Boost.Hana's ADAPT_STRUCT stops at 40 members; strategy_spec has more.)
#pragma once

#include <llmsim/core/fixed_string.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <tuple>

LLMSIM_BEGIN_NAMESPACE

/// Whether a config file must contain the field (otherwise the default is kept).
enum class presence : std::uint8_t { optional, required };

/// One named member of a spec: `field{"tp_size", &strategy_spec::tp_size}`.
template <class Spec, class Member>
struct field {
  std::string_view name;
  Member Spec::*member;
  presence need = presence::optional;
  /// Short description shown by `llmsim check` (empty when the name says it all).
  std::string_view brief = {};
  using spec_type = Spec;
  using value_type = Member;
};
template <class Spec, class Member>
field(std::string_view, Member Spec::*, presence = presence::optional, std::string_view = {}) -> field<Spec, Member>;

/// Specialised next to each spec: `static constexpr auto value = std::tuple{field{...}, ...};`.
template <class Spec>
struct field_list;

/// Calls `fn(field)` for every field of `Spec`, in declaration order.
template <class Spec, class Fn>
constexpr void for_each_field(Fn&& fn) {
  std::apply([&](const auto&... f) { (fn(f), ...); }, field_list<Spec>::value);
}

/// An enumeration's names, written once: `enum_names<dtype_kind>::value` pairs each value with its
/// JSON spelling. The first entry is the `invalid` sentinel and has no spelling.
template <class Enum>
struct enum_names;

/// The JSON spelling of `v` (empty for the invalid sentinel).
template <class Enum>
constexpr std::string_view enum_name(Enum v) {
  for (const auto& [value, name] : enum_names<Enum>::value)
    if (value == v) return name;
  return {};
}

/// The value spelled `name`, or the invalid sentinel.
template <class Enum>
constexpr Enum enum_from_name(std::string_view name) {
  for (const auto& [value, spelling] : enum_names<Enum>::value)
    if (!spelling.empty() && spelling == name) return value;
  return enum_names<Enum>::value[0].first;
}

LLMSIM_END_NAMESPACE
