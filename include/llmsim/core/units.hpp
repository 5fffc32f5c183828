/// \file llmsim/core/units.hpp
/// Strong quantity types with literals: `80_GiB`, `312_TFLOPS`, `900_GBps`, `10_us`.
///
/// Each quantity is an aggregate with one public `value` (so it is structural and usable as a
/// template argument) in SI base units: bytes, floating-point operations, seconds. Only arithmetic
/// that keeps dimensions straight compiles: `bytes / bytes_per_second` is `seconds`,
/// `flops / flops_per_second` is `seconds`, `bytes + seconds` does not exist.
/// `bytes` is an int64 count (exact); flops are double because training totals pass 2^63.
#pragma once

#include <llmsim/version.hpp>

#include <compare>
#include <cstdint>
#include <cstdio>
#include <string>

LLMSIM_BEGIN_NAMESPACE

/// A number of bytes (exact, signed so differences are representable).
struct bytes {
  std::int64_t value = 0;
  friend constexpr auto operator<=>(bytes, bytes) = default;
  friend constexpr bytes operator+(bytes a, bytes b) { return {a.value + b.value}; }
  friend constexpr bytes operator-(bytes a, bytes b) { return {a.value - b.value}; }
  friend constexpr bytes operator*(bytes a, std::int64_t n) { return {a.value * n}; }
  friend constexpr bytes operator*(std::int64_t n, bytes a) { return {a.value * n}; }
  /// Integer division (a share of a buffer split n ways, rounded down).
  friend constexpr bytes operator/(bytes a, std::int64_t n) { return {a.value / n}; }
  /// Dimensionless ratio.
  friend constexpr double operator/(bytes a, bytes b) {
    return static_cast<double>(a.value) / static_cast<double>(b.value);
  }
  constexpr bytes& operator+=(bytes b) {
    value += b.value;
    return *this;
  }
  constexpr bytes& operator-=(bytes b) {
    value -= b.value;
    return *this;
  }
  [[nodiscard]] constexpr double gib() const { return static_cast<double>(value) / (1024.0 * 1024.0 * 1024.0); }
  [[nodiscard]] constexpr double mib() const { return static_cast<double>(value) / (1024.0 * 1024.0); }
};

/// A number of floating-point operations (multiply-add = 2).
struct flops {
  double value = 0;
  friend constexpr auto operator<=>(flops, flops) = default;
  friend constexpr flops operator+(flops a, flops b) { return {a.value + b.value}; }
  friend constexpr flops operator-(flops a, flops b) { return {a.value - b.value}; }
  friend constexpr flops operator*(flops a, double k) { return {a.value * k}; }
  friend constexpr flops operator*(double k, flops a) { return {a.value * k}; }
  friend constexpr flops operator/(flops a, double k) { return {a.value / k}; }
  friend constexpr double operator/(flops a, flops b) { return a.value / b.value; }
  constexpr flops& operator+=(flops b) {
    value += b.value;
    return *this;
  }
};

/// A duration in seconds.
struct seconds {
  double value = 0;
  friend constexpr auto operator<=>(seconds, seconds) = default;
  friend constexpr seconds operator+(seconds a, seconds b) { return {a.value + b.value}; }
  friend constexpr seconds operator-(seconds a, seconds b) { return {a.value - b.value}; }
  friend constexpr seconds operator*(seconds a, double k) { return {a.value * k}; }
  friend constexpr seconds operator*(double k, seconds a) { return {a.value * k}; }
  friend constexpr seconds operator/(seconds a, double k) { return {a.value / k}; }
  friend constexpr double operator/(seconds a, seconds b) { return a.value / b.value; }
  constexpr seconds& operator+=(seconds b) {
    value += b.value;
    return *this;
  }
  constexpr seconds& operator-=(seconds b) {
    value -= b.value;
    return *this;
  }
  [[nodiscard]] constexpr double ms() const { return value * 1e3; }
  [[nodiscard]] constexpr double us() const { return value * 1e6; }
};

/// A transfer rate in bytes per second.
struct bytes_per_second {
  double value = 0;
  friend constexpr auto operator<=>(bytes_per_second, bytes_per_second) = default;
  friend constexpr bytes_per_second operator*(bytes_per_second a, double k) { return {a.value * k}; }
  friend constexpr bytes_per_second operator*(double k, bytes_per_second a) { return {a.value * k}; }
  friend constexpr bytes_per_second operator/(bytes_per_second a, double k) { return {a.value / k}; }
  friend constexpr double operator/(bytes_per_second a, bytes_per_second b) { return a.value / b.value; }
};

/// A compute rate in floating-point operations per second.
struct flops_per_second {
  double value = 0;
  friend constexpr auto operator<=>(flops_per_second, flops_per_second) = default;
  friend constexpr flops_per_second operator*(flops_per_second a, double k) { return {a.value * k}; }
  friend constexpr flops_per_second operator*(double k, flops_per_second a) { return {a.value * k}; }
  friend constexpr flops_per_second operator/(flops_per_second a, double k) { return {a.value / k}; }
  friend constexpr double operator/(flops_per_second a, flops_per_second b) { return a.value / b.value; }
};

// Cross-dimension arithmetic: the only ways to change dimension.
constexpr seconds operator/(bytes b, bytes_per_second r) { return {static_cast<double>(b.value) / r.value}; }
constexpr seconds operator/(flops f, flops_per_second r) { return {f.value / r.value}; }
constexpr bytes_per_second operator/(bytes b, seconds t) { return {static_cast<double>(b.value) / t.value}; }
constexpr flops_per_second operator/(flops f, seconds t) { return {f.value / t.value}; }
constexpr flops operator*(flops_per_second r, seconds t) { return {r.value * t.value}; }
constexpr flops operator*(seconds t, flops_per_second r) { return {r.value * t.value}; }

namespace literals {
// clang-format off
constexpr bytes operator""_B(unsigned long long n) { return {static_cast<std::int64_t>(n)}; }
constexpr bytes operator""_KiB(unsigned long long n) { return {static_cast<std::int64_t>(n) << 10}; }
constexpr bytes operator""_MiB(unsigned long long n) { return {static_cast<std::int64_t>(n) << 20}; }
constexpr bytes operator""_GiB(unsigned long long n) { return {static_cast<std::int64_t>(n) << 30}; }
constexpr bytes operator""_TiB(unsigned long long n) { return {static_cast<std::int64_t>(n) << 40}; }
constexpr bytes operator""_KB(unsigned long long n) { return {static_cast<std::int64_t>(n) * 1000}; }
constexpr bytes operator""_MB(unsigned long long n) { return {static_cast<std::int64_t>(n) * 1000000}; }
constexpr bytes operator""_GB(unsigned long long n) { return {static_cast<std::int64_t>(n) * 1000000000}; }
constexpr bytes operator""_GiB(long double n) { return {static_cast<std::int64_t>(n * 1073741824.0L)}; }
constexpr bytes operator""_MiB(long double n) { return {static_cast<std::int64_t>(n * 1048576.0L)}; }

constexpr flops operator""_GFLOP(unsigned long long n) { return {static_cast<double>(n) * 1e9}; }
constexpr flops operator""_TFLOP(unsigned long long n) { return {static_cast<double>(n) * 1e12}; }
constexpr flops operator""_PFLOP(unsigned long long n) { return {static_cast<double>(n) * 1e15}; }

constexpr flops_per_second operator""_GFLOPS(unsigned long long n) { return {static_cast<double>(n) * 1e9}; }
constexpr flops_per_second operator""_TFLOPS(unsigned long long n) { return {static_cast<double>(n) * 1e12}; }
constexpr flops_per_second operator""_TFLOPS(long double n) { return {static_cast<double>(n * 1e12L)}; }
constexpr flops_per_second operator""_PFLOPS(unsigned long long n) { return {static_cast<double>(n) * 1e15}; }

constexpr bytes_per_second operator""_MBps(unsigned long long n) { return {static_cast<double>(n) * 1e6}; }
constexpr bytes_per_second operator""_GBps(unsigned long long n) { return {static_cast<double>(n) * 1e9}; }
constexpr bytes_per_second operator""_GBps(long double n) { return {static_cast<double>(n * 1e9L)}; }
constexpr bytes_per_second operator""_TBps(unsigned long long n) { return {static_cast<double>(n) * 1e12}; }
constexpr bytes_per_second operator""_GiBps(unsigned long long n) { return {static_cast<double>(n) * 1073741824.0}; }

constexpr seconds operator""_s(unsigned long long n) { return {static_cast<double>(n)}; }
constexpr seconds operator""_s(long double n) { return {static_cast<double>(n)}; }
constexpr seconds operator""_ms(unsigned long long n) { return {static_cast<double>(n) / 1e3}; }
constexpr seconds operator""_ms(long double n) { return {static_cast<double>(n / 1e3L)}; }
constexpr seconds operator""_us(unsigned long long n) { return {static_cast<double>(n) / 1e6}; }
constexpr seconds operator""_us(long double n) { return {static_cast<double>(n / 1e6L)}; }
constexpr seconds operator""_ns(unsigned long long n) { return {static_cast<double>(n) / 1e9}; }
// clang-format on
}  // namespace literals
using namespace literals;  // NOLINT(google-build-using-namespace): literals are part of the vocabulary

namespace detail {
inline std::string format_scaled(double v, const char* const* units, int unit_count, double step, int decimals) {
  int i = 0;
  const double sign = v < 0 ? -1.0 : 1.0;
  v *= sign;
  while (i + 1 < unit_count && v >= step) {
    v /= step;
    ++i;
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f %s", decimals, sign * v, units[i]);
  return buf;
}
}  // namespace detail

/// `to_string(1.5_GiB) == "1.50 GiB"` (binary prefixes, two decimals).
inline std::string to_string(bytes b) {
  static const char* const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  return detail::format_scaled(static_cast<double>(b.value), units, 6, 1024.0,
                               b.value < 1024 && b.value > -1024 ? 0 : 2);
}
/// `to_string(0.4567_s) == "456.7 ms"` (four significant digits).
inline std::string to_string(seconds t) {
  const double a = t.value < 0 ? -t.value : t.value;
  double v = t.value;
  const char* unit = "s";
  if (a != 0 && a < 1e-6) {
    v *= 1e9;
    unit = "ns";
  } else if (a != 0 && a < 1e-3) {
    v *= 1e6;
    unit = "us";
  } else if (a != 0 && a < 1.0) {
    v *= 1e3;
    unit = "ms";
  }
  const double av = v < 0 ? -v : v;
  const int decimals = av >= 1000 ? 0 : av >= 100 ? 1 : av >= 10 ? 2 : 3;
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f %s", decimals, v, unit);
  return buf;
}
/// `to_string(312_TFLOPS) == "312.0 TFLOP/s"`.
inline std::string to_string(flops_per_second r) {
  static const char* const units[] = {"FLOP/s", "KFLOP/s", "MFLOP/s", "GFLOP/s", "TFLOP/s", "PFLOP/s", "EFLOP/s"};
  return detail::format_scaled(r.value, units, 7, 1000.0, 1);
}
/// `to_string(6_PFLOP) == "6.00 PFLOP"`.
inline std::string to_string(flops f) {
  static const char* const units[] = {"FLOP", "KFLOP", "MFLOP", "GFLOP", "TFLOP", "PFLOP", "EFLOP", "ZFLOP", "YFLOP"};
  return detail::format_scaled(f.value, units, 9, 1000.0, 2);
}
/// `to_string(900_GBps) == "900.0 GB/s"` (decimal prefixes, as data sheets quote links).
inline std::string to_string(bytes_per_second r) {
  static const char* const units[] = {"B/s", "KB/s", "MB/s", "GB/s", "TB/s", "PB/s"};
  return detail::format_scaled(r.value, units, 6, 1000.0, 1);
}

LLMSIM_END_NAMESPACE
