/// \file llmsim/core/checked.hpp
/// Conversions out of `double` that refuse what they cannot represent instead of wrapping.
///
/// Byte counts are summed in double (products of sizes) and stored as exact int64 `bytes`.
/// Converting a double outside int64's range is undefined behaviour (C++20 [conv.fpint]); on x86 it
/// gives INT64_MIN, which printed a weight of -8192 PiB (issue 15). `bytes_from` reports instead.
#pragma once

#include <llmsim/core/error.hpp>
#include <llmsim/core/units.hpp>

#include <cstdint>

LLMSIM_BEGIN_NAMESPACE

/// 2^63 as a double: the first value past int64's range.
inline constexpr double int64_limit_as_double = 9223372036854775808.0;

/// `count` bytes, truncated toward zero as the cast it replaces; a count that is not finite or lies
/// outside int64 (±8 EiB) is a `config_error` at run time and a compile error in a constant expression.
constexpr bytes bytes_from(double count) {
  if (!(count > -int64_limit_as_double && count < int64_limit_as_double))  // also false for NaN
    detail::report_error("llmsim::estimate", "model",
                         "a byte count of {} is beyond 8 EiB: the job is larger than llmsim represents (check the "
                         "model sizes, the sequence length and the micro-batch size)",
                         count);
  return bytes{static_cast<std::int64_t>(count)};
}

LLMSIM_END_NAMESPACE
