/// \file llmsim/core/fixed_string.hpp
/// A string of bounded capacity that is a literal and structural type, so names can live in
/// `constexpr` specs (and in template arguments) as well as in specs loaded from JSON.
#pragma once

#include <llmsim/core/error.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

LLMSIM_BEGIN_NAMESPACE

/// `fixed_string<64> name{"llama3_8b"}`; `name.view() == "llama3_8b"`.
template <std::size_t Capacity>
struct fixed_string {
  char chars[Capacity + 1]{};  // public so the type is structural; always NUL-terminated
  std::size_t length = 0;

  constexpr fixed_string() = default;
  template <std::size_t N>
  requires(N - 1 <= Capacity) constexpr fixed_string(
      const char (&literal)[N]) {  // NOLINT(google-explicit-constructor): literals read as names
    assign(std::string_view(literal, N - 1));
  }
  /// From any text; refuses text longer than the capacity.
  constexpr explicit fixed_string(std::string_view text) { assign(text); }

  constexpr void assign(std::string_view text) {
    if (text.size() > Capacity)
      detail::report_error("llmsim::fixed_string", "", "text of {} characters exceeds the capacity of {}", text.size(),
                           Capacity);
    length = text.size();
    for (std::size_t i = 0; i < Capacity + 1; ++i) chars[i] = i < length ? text[i] : '\0';
  }
  [[nodiscard]] constexpr std::string_view view() const { return {chars, length}; }
  [[nodiscard]] constexpr bool empty() const { return length == 0; }
  [[nodiscard]] static constexpr std::size_t capacity() { return Capacity; }

  friend constexpr bool operator==(const fixed_string& a, const fixed_string& b) { return a.view() == b.view(); }
  friend constexpr bool operator==(const fixed_string& a, std::string_view b) { return a.view() == b; }
};

namespace detail {
/// The count `digits` spells in decimal ("4096"): nullopt when it is empty, holds anything but
/// digits, or passes 10^15 (no count in a name or a shape key comes near).
constexpr std::optional<std::int64_t> decimal_count(std::string_view digits) {
  if (digits.empty()) return std::nullopt;
  std::int64_t n = 0;
  for (const char c : digits) {
    if (c < '0' || c > '9' || n > 100'000'000'000'000) return std::nullopt;
    n = n * 10 + (c - '0');
  }
  return n;
}
}  // namespace detail

LLMSIM_END_NAMESPACE
