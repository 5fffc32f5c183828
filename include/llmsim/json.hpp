/// \file llmsim/json.hpp
/// The JSON adapter (target `llmsim::json`): reads SimuMax model, strategy and system files
/// unchanged into the same specs the constexpr API uses, applies overrides, writes specs back.
///
/// ```cpp
/// llmsim::json::load_options opt;                     // unknown keys: warnings (opt.strict: errors)
/// auto model = llmsim::json::load_model("configs/models/llama3-8b.json", opt);
/// auto system = llmsim::json::load_system("configs/system/b200_bf16_ceperm.json", opt);
/// llmsim::validate(model, strategy, system.spec());    // the same constexpr checks
/// auto h100 = llmsim::json::load_system("h100-sxm", opt, {{"accelerator.mem_gbs", 94}});  // catalogue names too
/// ```
/// Every error is an `llmsim::config_error` naming the file, the JSON path and the rule:
/// `strategy.json: /tp_size: expected an integer, got "two"`.
#pragma once

#include <llmsim/llmsim.hpp>
#include <llmsim/spec/field_lists.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <set>
#include <shared_mutex>
#include <sstream>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

LLMSIM_BEGIN_NAMESPACE
namespace json {

using value = nlohmann::ordered_json;  // keeps the file order of keys when printing

/// How strictly a file is read.
struct load_options {
  /// Unknown keys are errors instead of warnings.
  bool strict = false;
  /// Where warnings go (unknown keys); nullptr drops them.
  std::vector<std::string>* warnings = nullptr;
};

namespace detail {

/// Longest key, in bytes, that a message quotes whole: a key of any length still gives a message
/// of bounded size (issue 15: "unknown keys of any length reported in bounded text").
inline constexpr std::size_t max_quoted_key_bytes = 64;

/// `key` as one reference token of a JSON pointer (RFC 6901 section 3: '~' is written "~0" and
/// '/' is written "~1"), with control characters as <0xNN> so that a message stays on one line,
/// cut after `max_quoted_key_bytes` bytes (at a UTF-8 character boundary) with "...".
inline std::string pointer_token(std::string_view key) {
  static constexpr char hex[] = "0123456789ABCDEF";
  std::string out;
  std::size_t i = 0;
  for (; i < key.size() && i < max_quoted_key_bytes; ++i) {
    const auto c = static_cast<unsigned char>(key[i]);
    if (c == '~')
      out += "~0";
    else if (c == '/')
      out += "~1";
    else if (c < 0x20 || c == 0x7F)
      out.append("<0x").append(1, hex[c >> 4]).append(1, hex[c & 0xF]).append(1, '>');
    else
      out += static_cast<char>(c);
  }
  if (i < key.size()) {
    // Back off to the first byte of the character that was cut (continuation bytes are 10xxxxxx).
    while (!out.empty() && (static_cast<unsigned char>(out.back()) & 0xC0) == 0x80) out.pop_back();
    if (!out.empty() && static_cast<unsigned char>(out.back()) >= 0xC0) out.pop_back();
    out += "...";
  }
  return out;
}

/// Where a value sits: the file (or override source) and the JSON pointer inside it.
struct location {
  std::string file;
  std::string path;  ///< JSON pointer, e.g. "/accelerator/op/matmul/tflops"
  [[nodiscard]] location child(std::string_view key) const {
    std::string out = path;
    out.append("/").append(pointer_token(key));  // append: GCC 12 -Wrestrict misfires on "/" + temporary
    return {file, std::move(out)};
  }
  [[nodiscard]] std::string where() const { return path.empty() ? "/" : path; }
};

[[noreturn]] inline void fail(const location& at, const std::string& rule) {
  throw config_error("llmsim::json", at.where(), at.where() + ": " + rule, at.file);
}

/// Appends `v` as compact JSON to `out`, stopping once `out` is longer than `limit`: unlike
/// nlohmann's dump, which recurses once per level, a value nested 100000 deep costs ~limit frames.
inline void show_into(std::string& out, const value& v, std::size_t limit) {
  if (out.size() > limit) return;
  if (v.is_array() || v.is_object()) {
    out += v.is_array() ? '[' : '{';
    bool first = true;
    for (auto it = v.begin(); it != v.end() && out.size() <= limit; ++it) {
      if (!first) out += ',';
      first = false;
      if (v.is_object()) out += value(it.key()).dump(-1, ' ', true, nlohmann::json::error_handler_t::replace) + ":";
      show_into(out, it.value(), limit);
    }
    out += v.is_array() ? ']' : '}';
  } else if (v.is_number_float() && !std::isfinite(v.get<double>())) {
    const double d = v.get<double>();
    out += d > 0 ? "inf" : d < 0 ? "-inf" : "nan";  // dump() would print null
  } else {
    out += v.dump(-1, ' ', true, nlohmann::json::error_handler_t::replace);
  }
}

inline std::string show(const value& v) {
  std::string text;
  show_into(text, v, 60);
  if (text.size() > 60) text = text.substr(0, 57) + "...";
  return text;
}

inline std::string type_name(const value& v) {
  switch (v.type()) {
    case value::value_t::null:
      return "null";
    case value::value_t::boolean:
      return "a boolean";
    case value::value_t::string:
      return "a string";
    case value::value_t::array:
      return "an array";
    case value::value_t::object:
      return "an object";
    case value::value_t::number_float:
      return "a number";
    default:
      return "an integer";
  }
}

/// "a string \"two\"", "an array [1]", or just "null".
inline std::string describe(const value& v) { return v.is_null() ? std::string("null") : type_name(v) + " " + show(v); }

inline void unknown_key(const location& at, const load_options& opt) {
  if (opt.strict) fail(at, "unknown key (refused by --strict)");
  if (opt.warnings)
    opt.warnings->push_back((at.file.empty() ? std::string() : at.file + ": ") + at.where() +
                            ": unknown key (ignored)");
}

template <class T>
struct is_optional : std::false_type {};
template <class T>
struct is_optional<std::optional<T>> : std::true_type {};
template <class T>
struct is_fixed_string : std::false_type {};
template <std::size_t N>
struct is_fixed_string<fixed_string<N>> : std::true_type {};
template <class T>
concept named_enum = std::is_enum_v<T> && requires {
  enum_names<T>::value;
};

// ---- reading one scalar ------------------------------------------------------------------
inline void read(const value& v, const location& at, std::int64_t& out) {
  if (v.is_number_integer() && !v.is_number_unsigned()) {
    out = v.get<std::int64_t>();
    return;
  }
  if (v.is_number_unsigned()) {
    const auto u = v.get<std::uint64_t>();
    if (u > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
      fail(at, "integer " + show(v) + " is out of range");
    out = static_cast<std::int64_t>(u);
    return;
  }
  if (v.is_number_float()) {
    const double d = v.get<double>();
    // Integer literals beyond uint64 reach us as doubles: say so rather than "expected an integer".
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) >= 9.2233720368547758e18)
      fail(at, "integer " + show(v) + " is out of range");
    // 3.2e1 or 32.0 is refused, not rounded: a count written as a real number is a typo or a
    // computed value, and reading 32.5 as 32 would pass silently (issue 15).
    fail(at, "expected an integer, got " + show(v) + " (written with a fraction or an exponent)");
  }
  fail(at, "expected an integer, got " + describe(v));
}
inline void read(const value& v, const location& at, double& out) {
  if (!v.is_number()) fail(at, "expected a number, got " + describe(v));
  out = v.get<double>();
  if (!std::isfinite(out)) fail(at, "expected a finite number, got " + show(v));
}
inline void read(const value& v, const location& at, bool& out) {
  if (!v.is_boolean()) fail(at, "expected true or false, got " + describe(v));
  out = v.get<bool>();
}
template <std::size_t N>
void read(const value& v, const location& at, fixed_string<N>& out) {
  if (v.is_null()) {
    out = {};
    return;
  }
  if (!v.is_string()) fail(at, "expected a string, got " + describe(v));
  const auto& s = v.get_ref<const std::string&>();
  if (s.size() > N)
    fail(at, "string of " + std::to_string(s.size()) + " characters exceeds the limit of " + std::to_string(N));
  out.assign(s);
}
template <named_enum E>
void read(const value& v, const location& at, E& out) {
  std::string allowed;  // built with append: GCC 12 -Wrestrict misfires on `"x" + std::string(...)`
  for (const auto& [e, name] : enum_names<E>::value) {
    if (name.empty()) continue;
    if (!allowed.empty()) allowed.append(", ");
    if (name == "null")
      allowed.append(name);
    else
      allowed.append(1, '"').append(name).append(1, '"');
  }
  if (v.is_null()) {
    const E e = enum_from_name<E>("null");
    if (e != enum_names<E>::value[0].first) {
      out = e;
      return;
    }
  }
  if (!v.is_string()) fail(at, "expected one of " + allowed + ", got " + describe(v));
  // A listed name (empty ones mark an enum's invalid value; "null" is the JSON null, not a string).
  const auto& text = v.get_ref<const std::string&>();
  for (const auto& [e, name] : enum_names<E>::value)
    if (!name.empty() && name == text && text != "null") {
      out = e;
      return;
    }
  fail(at, "expected one of " + allowed + ", got " + show(v));
}
inline void read(const value& v, const location& at, recompute_module_set& out) {
  out = {};
  if (v.is_null()) return;
  if (!v.is_array()) fail(at, "expected an array of module names, got " + describe(v));
  for (std::size_t i = 0; i < v.size(); ++i) {
    recompute_module m{};
    read(v[i], at.child(std::to_string(i)), m);
    out.insert(m);
  }
}
inline void read(const value& v, const location& at, offload_module_set& out) {
  out = {};
  if (v.is_null()) return;
  if (!v.is_array()) fail(at, "expected an array of module names, got " + describe(v));
  for (std::size_t i = 0; i < v.size(); ++i) {
    offload_module m{};
    read(v[i], at.child(std::to_string(i)), m);
    out.insert(m);
  }
}
/// Megatron's hierarchical_context_parallel_sizes: two integers [a2a size, p2p size].
inline void read(const value& v, const location& at, std::array<std::int64_t, 2>& out) {
  if (!v.is_array() || v.size() != 2)
    fail(at, "expected an array of two integers [a2a size, p2p size], got " + describe(v));
  for (std::size_t i = 0; i < 2; ++i) read(v[i], at.child(std::to_string(i)), out[i]);
}
/// Megatron's csa_compress_ratios: an array of integers, one per decoder and MTP layer.
inline void read(const value& v, const location& at, compress_ratio_list& out) {
  out = {};
  if (v.is_null()) return;
  if (!v.is_array()) fail(at, "expected an array of integers (one compression ratio per layer), got " + describe(v));
  if (v.size() > compress_ratio_list::capacity)
    fail(at, "array of " + std::to_string(v.size()) + " ratios exceeds the limit of " +
                 std::to_string(compress_ratio_list::capacity) + " layers");
  for (std::size_t i = 0; i < v.size(); ++i) {
    std::int64_t r = 0;
    read(v[i], at.child(std::to_string(i)), r);
    if (r < 0 || r > 32767) fail(at.child(std::to_string(i)), "expected a ratio in [0, 32767], got " + show(v[i]));
    out.push_back(r);
  }
}
template <class T>
void read(const value& v, const location& at, std::optional<T>& out) {
  if (v.is_null()) {
    out.reset();
    return;
  }
  T t{};
  read(v, at, t);
  out = t;
}

// ---- writing one scalar --------------------------------------------------------------------
inline value write(std::int64_t v) { return v; }
inline value write(double v) { return v; }
inline value write(bool v) { return v; }
template <std::size_t N>
value write(const fixed_string<N>& v) {
  return std::string(v.view());
}
template <named_enum E>
value write(E e) {
  const auto name = enum_name(e);
  if (name == "null") return nullptr;
  return std::string(name);
}
inline value write(const recompute_module_set& set) {
  if (set.empty()) return nullptr;
  value arr = value::array();
  for (const auto& [m, name] : enum_names<recompute_module>::value)
    if (!name.empty() && set.contains(m)) arr.push_back(std::string(name));
  return arr;
}
inline value write(const offload_module_set& set) {
  if (set.empty()) return nullptr;
  value arr = value::array();
  for (const auto& [m, name] : enum_names<offload_module>::value)
    if (!name.empty() && set.contains(m)) arr.push_back(std::string(name));
  return arr;
}
inline value write(const std::array<std::int64_t, 2>& v) { return value::array({v[0], v[1]}); }
inline value write(const compress_ratio_list& list) {
  if (list.empty()) return nullptr;
  value arr = value::array();
  for (std::size_t i = 0; i < list.size(); ++i) arr.push_back(list[i]);
  return arr;
}
template <class T>
value write(const std::optional<T>& v) {
  return v ? write(*v) : value(nullptr);
}

inline void require_object(const value& v, const location& at) {
  if (!v.is_object()) fail(at, "expected an object, got " + describe(v));
}

/// Reads the fields of a spec with a field list; unknown keys are warned about or refused.
template <class Spec>
Spec read_fields(const value& obj, const location& at, const load_options& opt) {
  require_object(obj, at);
  Spec spec{};
  for_each_field<Spec>([&](const auto& f) {
    const auto it = obj.find(std::string(f.name));
    if (it == obj.end()) {
      if (f.need == presence::required) fail(at.child(f.name), "required field is missing");
      return;
    }
    read(*it, at.child(f.name), spec.*(f.member));
  });
  for (const auto& item : obj.items()) {
    bool known = false;
    for_each_field<Spec>([&](const auto& f) { known = known || f.name == item.key(); });
    if (!known) unknown_key(at.child(item.key()), opt);
  }
  return spec;
}

template <class Spec>
value write_fields(const Spec& spec) {
  value out = value::object();
  for_each_field<Spec>([&](const auto& f) { out[std::string(f.name)] = write(spec.*(f.member)); });
  return out;
}

}  // namespace detail

// ---- files ---------------------------------------------------------------------------------------

namespace detail {

/// `text` with DEL and every byte outside well-formed UTF-8 written as <0xNN>: parse errors quote
/// raw input ("last read: ..."), and an error message must stay printable and valid UTF-8
/// (`llmsim check --format json` puts it into a JSON report).
inline std::string printable(std::string_view text) {
  static constexpr char hex[] = "0123456789ABCDEF";
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(text[k]); };
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    const unsigned char c = byte(i);
    std::size_t len = 0;
    unsigned char lo = 0x80, hi = 0xBF;  // range of the second byte (RFC 3629)
    if (c < 0x7F)
      len = 1;
    else if (c >= 0xC2 && c <= 0xDF)
      len = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
      if (c == 0xE0) lo = 0xA0;
      if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
      if (c == 0xF0) lo = 0x90;
      if (c == 0xF4) hi = 0x8F;
    }
    bool ok = len != 0 && i + len <= text.size();
    for (std::size_t k = 1; ok && k < len; ++k)
      ok = byte(i + k) >= (k == 1 ? lo : 0x80) && byte(i + k) <= (k == 1 ? hi : 0xBF);
    if (ok) {
      out.append(text.substr(i, len));
      i += len;
    } else {
      out.append("<0x").append(1, hex[c >> 4]).append(1, hex[c & 0xF]).append(1, '>');
      ++i;
    }
  }
  return out;
}

/// Records where the parser gave up: nlohmann throws some errors (number overflow: 1e999) as
/// out_of_range without a position, so the text is parsed once more to find it.
struct error_position final : nlohmann::json_sax<value> {
  std::size_t offset = 0;
  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override { return true; }
  bool key(string_t&) override { return true; }
  bool end_object() override { return true; }
  bool start_array(std::size_t) override { return true; }
  bool end_array() override { return true; }
  bool parse_error(std::size_t position, const std::string&, const nlohmann::json::exception&) override {
    offset = position;
    return false;
  }
};

/// "line 3, column 18" of byte `offset`, counted as nlohmann counts for its parse errors.
inline std::string line_column(std::string_view text, std::size_t offset) {
  const auto head = text.substr(0, std::min(offset, text.size()));
  const auto newline = head.rfind('\n');
  const auto column = newline == std::string_view::npos ? head.size() : head.size() - newline - 1;
  return "line " + std::to_string(std::count(head.begin(), head.end(), '\n') + 1) + ", column " +
         std::to_string(column);
}

}  // namespace detail

namespace detail {
/// Finds the first key that an object repeats. nlohmann keeps the last of duplicate keys and
/// RFC 8259 section 4 leaves the meaning open, so a repeated key (`"tp_size": 2, ... "tp_size": 4`)
/// would pass silently; this SAX pass names it by its JSON pointer instead.
class duplicate_key_finder final : public nlohmann::json_sax<value> {
 public:
  /// Pointer of the repeated key; empty when there is none.
  std::string duplicate;

  bool null() override { return element_done(); }
  bool boolean(bool) override { return element_done(); }
  bool number_integer(number_integer_t) override { return element_done(); }
  bool number_unsigned(number_unsigned_t) override { return element_done(); }
  bool number_float(number_float_t, const string_t&) override { return element_done(); }
  bool string(string_t&) override { return element_done(); }
  bool binary(binary_t&) override { return element_done(); }
  bool start_object(std::size_t) override { return open(true); }
  bool start_array(std::size_t) override { return open(false); }
  bool end_object() override { return close(); }
  bool end_array() override { return close(); }
  bool key(string_t& k) override {
    container& top = stack_.back();
    top.member = k;
    if (top.keys.insert(k).second) return true;
    duplicate = pointer();
    return false;  // stops the parse
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::json::exception&) override { return false; }

 private:
  struct container {
    bool is_object = false;
    std::set<std::string, std::less<>> keys;
    std::string member;     ///< the key being read (objects)
    std::size_t index = 0;  ///< the element being read (arrays)
  };
  std::vector<container> stack_;

  bool open(bool is_object) {
    stack_.push_back({is_object, {}, {}, 0});
    return true;
  }
  bool close() {
    stack_.pop_back();
    return element_done();
  }
  bool element_done() {
    if (!stack_.empty() && !stack_.back().is_object) ++stack_.back().index;
    return true;
  }
  std::string pointer() const {
    std::string out;
    for (const container& c : stack_)
      out.append("/").append(c.is_object ? pointer_token(c.member) : std::to_string(c.index));
    return out;
  }
};

/// Throws a `config_error` naming the first repeated key of `text` (already known to parse).
inline void refuse_duplicate_keys(std::string_view text, const std::string& source) {
  duplicate_key_finder finder;
  value::sax_parse(text.begin(), text.end(), &finder);
  if (!finder.duplicate.empty())
    throw config_error("llmsim::json", finder.duplicate,
                       finder.duplicate + ": duplicate key (an object may name each key once)", source);
}

/// The UTF-8 byte-order mark, which nlohmann's reader skips at the start of the text.
inline constexpr std::string_view utf8_byte_order_mark = "\xEF\xBB\xBF";
}  // namespace detail

/// Parses JSON text; `source` names it in errors. Every failure is a `config_error`.
inline value parse_text(std::string_view text, const std::string& source) {
  const bool has_mark = text.substr(0, 3) == detail::utf8_byte_order_mark;
  const std::string_view body = has_mark ? text.substr(3) : text;
  if (body.find_first_not_of(" \t\r\n") == std::string_view::npos)
    throw config_error("llmsim::json", "/",
                       has_mark ? "/: the file is empty (only a byte-order mark)" : "/: the file is empty", source);
  try {
    value v = value::parse(text.begin(), text.end());
    detail::refuse_duplicate_keys(text, source);
    return v;
  } catch (const nlohmann::json::parse_error& e) {
    std::string what = e.what();
    const auto pos = what.find("parse error");
    throw config_error("llmsim::json", "/",
                       "/: not valid JSON: " + detail::printable(pos == std::string::npos ? what : what.substr(pos)),
                       source);
  } catch (const nlohmann::json::exception& e) {  // out_of_range.406: a number beyond double, e.g. 1e999
    std::string what = e.what();
    const auto bracket = what.find("] ");
    if (bracket != std::string::npos) what = what.substr(bracket + 2);
    detail::error_position where;
    value::sax_parse(text.begin(), text.end(), &where);
    throw config_error(
        "llmsim::json", "/",
        "/: not valid JSON: parse error at " + detail::line_column(text, where.offset) + ": " + detail::printable(what),
        source);
  }
}

/// Largest config file read, in bytes. The largest shipped or SimuMax config is well under 1 MiB;
/// the cap keeps `/dev/zero`-like inputs from growing memory without bound (issue 15).
inline constexpr std::uintmax_t max_config_file_bytes = std::uintmax_t{64} << 20;

/// Reads and parses a JSON file. Only regular files (or links to them) of at most
/// `max_config_file_bytes` are read: a directory, FIFO, device or socket is refused before reading.
inline value read_file(const std::filesystem::path& file) {
  std::error_code ec;
  const auto status = std::filesystem::status(file, ec);
  if (std::filesystem::is_directory(status))
    throw config_error("llmsim::json", "", "is a directory, not a config file", file.string());
  if (std::filesystem::exists(status) && !std::filesystem::is_regular_file(status))
    throw config_error("llmsim::json", "", "is not a regular file (a FIFO, device or socket); configs are files",
                       file.string());
  const auto size = std::filesystem::file_size(file, ec);
  if (!ec && size > max_config_file_bytes)
    throw config_error("llmsim::json", "",
                       "is " + std::to_string(size) + " bytes; config files larger than 64 MiB are refused",
                       file.string());
  std::ifstream in(file, std::ios::binary);
  if (!in) throw config_error("llmsim::json", "", "cannot open the file", file.string());
  std::string text;
  std::array<char, 1 << 16> chunk{};
  while (in && text.size() <= max_config_file_bytes) {  // chunks, so a file that grows is still bounded
    in.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
    text.append(chunk.data(), static_cast<std::size_t>(in.gcount()));
  }
  if (text.size() > max_config_file_bytes)
    throw config_error("llmsim::json", "", "grew beyond 64 MiB while being read; config files larger are refused",
                       file.string());
  return parse_text(text, file.string());
}

namespace detail {
/// The slot at `dotted` (e.g. "accelerator.mem_gbs") in `target`, creating objects on the way
/// (a null on the way becomes an object) and the slot itself as null when absent.
inline value& slot_at(value& target, std::string_view dotted, const std::string& source) {
  value* node = &target;
  std::size_t start = 0;
  while (true) {
    const auto dot = dotted.find('.', start);
    const std::string key(dotted.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start));
    if (key.empty())
      throw config_error("llmsim::json", std::string(dotted),
                         "override key \"" + std::string(dotted) + "\" has an empty component", source);
    if (node->is_null()) *node = value::object();
    if (!node->is_object())
      throw config_error("llmsim::json", std::string(dotted),
                         "override key \"" + std::string(dotted) + "\" descends into a value that is not an object",
                         source);
    node = &(*node)[key];
    if (dot == std::string_view::npos) return *node;
    start = dot + 1;
  }
}
}  // namespace detail

/// Sets `path` (dotted, e.g. "accelerator.mem_gbs") in `target` to `v`, creating objects on the way.
inline void set_path(value& target, std::string_view dotted, value v, const std::string& source) {
  detail::slot_at(target, dotted, source) = std::move(v);
}

/// Merges `patch` into `target` as a JSON merge patch (RFC 7396): an object merges key by key into
/// the object at the same place (made an object when it is not one), anything else replaces the
/// value. So `{"accelerator": {"mem_gbs": 141}}` changes the memory and keeps the accelerator's
/// `op`, `bandwidth`, ... .
///
/// One difference from RFC 7396: null is written as null, as if the file said null, instead of
/// deleting the key, so that an override means what the same text in the file means. Deleting a
/// key (= the field's default) and null agree only for the optional numbers (model.topk,
/// model.head_size, strategy.num_layers_in_first_pipeline_stage, ...), model.model_name,
/// strategy.te_version, strategy.recompute_granularity, strategy.megatron_recompute_modules,
/// the optional fields of a collective (efficient_factor, latency_us, fixed_latency_us) and
/// accelerator.op.<kind>.accurate_efficient_factor. They differ for
/// - numbers, booleans and enumerations without a null spelling (strategy.tp_size,
///   model.use_swiglu, system.accelerator.mode, ...): null is an error, deleting restores the default;
/// - the group-size tables (fixed_latency_us_by_comm_num, dp_fixed_bw): null is an error,
///   deleting leaves the table empty;
/// - strings with a non-empty default (strategy.order_of_paralielism, strategy.te_*_min_version,
///   strategy.*_net, system.accelerator.backend): null reads as "", deleting restores
///   "tp-cp-ep-dp-pp", "2.3.0", "auto", "cuda";
/// - required fields: null is a type error, deleting is "required field is missing";
/// - system entries (accelerator.op.<kind>, accelerator.bandwidth.<kind>, networks.<tier>): null
///   is an error, deleting would remove the entry.
/// Iterative, so a deeply nested patch cannot exhaust the stack.
inline void merge_patch(value& target, const value& patch) {
  std::vector<std::pair<value*, const value*>> todo{{&target, &patch}};
  while (!todo.empty()) {
    const auto [t, p] = todo.back();
    todo.pop_back();
    if (!p->is_object()) {
      *t = *p;
      continue;
    }
    if (!t->is_object()) *t = value::object();
    // Insert every key before taking addresses: ordered_json keeps an object's members in a vector.
    for (const auto& item : p->items()) (void)(*t)[item.key()];
    for (const auto& item : p->items()) todo.emplace_back(&(*t)[item.key()], &item.value());
  }
}

/// Merges `patch` (as `merge_patch` does) at the dotted `path` of `target`, creating objects on the way.
inline void merge_path(value& target, std::string_view dotted, const value& patch, const std::string& source) {
  merge_patch(detail::slot_at(target, dotted, source), patch);
}

/// Applies an object of overrides on top of a parsed file: each key (a name, or a dotted path such
/// as "accelerator.mem_gbs") is merged with `merge_path`, so nested objects merge instead of
/// replacing the whole object. Null (`{}` passed for a `const value&`) means no overrides.
inline void merge_overrides(value& target, const value& overrides, const std::string& source) {
  if (overrides.is_null()) return;
  if (!overrides.is_object())
    throw config_error("llmsim::json", "/", "/: overrides must be an object, got " + detail::show(overrides), source);
  for (const auto& item : overrides.items()) merge_path(target, item.key(), item.value(), source);
}

/// Reads `text` of `--set key=text` as JSON when it parses (12, true, "x", null), else as a string.
/// JSON that repeats a key is a `config_error` (source "--set"), as it is in a file.
inline value override_value(std::string_view text) {
  value v;
  try {
    v = value::parse(text.begin(), text.end());
  } catch (const nlohmann::json::exception&) {  // parse_error, or out_of_range for 1e999
    return std::string(text);
  }
  detail::refuse_duplicate_keys(text, "--set");
  return v;
}

// ---- model and strategy ----------------------------------------------------------------------

/// A model from parsed JSON; `source` names the file in errors. Runs `validate(model)`.
inline model_spec parse_model(const value& v, const std::string& source = {}, const load_options& opt = {}) {
  auto m = detail::read_fields<model_spec>(v, {source, ""}, opt);
  try {
    validate(m);
  } catch (const config_error& e) { throw e.in_file(source); }
  return m;
}
/// A strategy from parsed JSON. Runs `validate(strategy)`.
inline strategy_spec parse_strategy(const value& v, const std::string& source = {}, const load_options& opt = {}) {
  auto s = detail::read_fields<strategy_spec>(v, {source, ""}, opt);
  // Megatron-FSDP's sharding strategy decides the ZeRO stage when zero_state is left out.
  if (s.data_parallel_sharding_strategy && v.is_object() && !v.contains("zero_state"))
    s.zero_state = sharding_level_of(*s.data_parallel_sharding_strategy);
  try {
    validate(s);
  } catch (const config_error& e) { throw e.in_file(source); }
  return s;
}
inline value to_json(const model_spec& m) { return detail::write_fields(m); }
inline value to_json(const strategy_spec& s) { return detail::write_fields(s); }

// ---- system --------------------------------------------------------------------------------------

/// A system spec together with the storage its shape-keyed tables view. Copies share the storage.
class system_config {
 public:
  system_config() = default;
  [[nodiscard]] const system_spec& spec() const noexcept { return spec_; }
  operator const system_spec&() const noexcept { return spec_; }  // NOLINT(google-explicit-constructor)

 private:
  /// One table's interpolation memo: shapes asked, under a reader-writer lock (the search's
  /// threads share the system).
  class shape_memo final : public interpolation_memo {
   public:
    [[nodiscard]] std::optional<std::optional<double>> recall(std::string_view shape) const override {
      const std::shared_lock lock(mutex_);
      const auto it = found_.find(shape);
      if (it == found_.end()) return std::nullopt;
      return it->second;
    }
    void remember(std::string_view shape, std::optional<double> found) const override {
      const std::unique_lock lock(mutex_);
      if (found_.size() < capacity) found_.emplace(std::string(shape), found);
    }
    /// Shapes remembered at most (a search asks thousands; past this each is scanned again).
    static constexpr std::size_t capacity = 1 << 16;

   private:
    struct text_hash {
      using is_transparent = void;
      std::size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
    };
    mutable std::shared_mutex mutex_;
    mutable std::unordered_map<std::string, std::optional<double>, text_hash, std::equal_to<>> found_;
  };
  struct storage {
    std::vector<std::string> keys;
    std::vector<shape_efficiency> entries;
    std::vector<std::unique_ptr<shape_memo>> memos;  ///< one per table
  };
  std::shared_ptr<const storage> storage_;
  system_spec spec_;
  friend system_config parse_system(const value&, const std::string&, const load_options&);
};

namespace detail {

inline void read_group_table(const value& v, const location& at, group_size_table& out) {
  require_object(v, at);
  for (const auto& e : v.items()) {
    const auto here = at.child(e.key());
    const value key = value::parse(e.key(), nullptr, false);
    if (!key.is_number_integer() || key.get<std::int64_t>() < 1 || key.get<std::int64_t>() > max_dimension)
      fail(here, "group-size key must be a positive integer");
    double x = 0;
    read(e.value(), here, x);
    if (out.count == group_size_table::capacity && !out.find(key.get<std::int64_t>()))
      fail(here, "at most " + std::to_string(group_size_table::capacity) + " group sizes are supported");
    out.set(key.get<std::int64_t>(), x);
  }
}

inline bandwidth_spec read_bandwidth(const value& v, const location& at, const load_options& opt, bool network_tier) {
  require_object(v, at);
  bandwidth_spec bw{};
  bw.present = true;
  bool has_gbps = false, has_eff = false, has_latency = false;
  for (const auto& item : v.items()) {
    const auto& k = item.key();
    const auto here = at.child(k);
    if (k == "gbps") {
      read(item.value(), here, bw.gbps);
      has_gbps = true;
    } else if (k == "efficient_factor") {
      read(item.value(), here, bw.efficient_factor);
      has_eff = true;
    } else if (k == "latency_us") {
      read(item.value(), here, bw.latency_us);
      has_latency = true;
    } else if (k == "fixed_latency" && network_tier)
      read(item.value(), here, bw.fixed_latency);
    else if (k == "fixed_latency_us_by_comm_num" && network_tier)
      read_group_table(item.value(), here, bw.fixed_latency_us_by_comm_num);
    else
      unknown_key(here, opt);
  }
  if (!has_gbps) fail(at.child("gbps"), "required field is missing");
  if (!has_eff) fail(at.child("efficient_factor"), "required field is missing");
  if (!has_latency) fail(at.child("latency_us"), "required field is missing");
  return bw;
}

inline collective_spec read_collective(const value& v, const location& at, const load_options& opt) {
  require_object(v, at);
  collective_spec c{};
  c.present = true;
  bool has_scale = false, has_offset = false;
  for (const auto& item : v.items()) {
    const auto& k = item.key();
    const auto here = at.child(k);
    if (k == "scale") {
      read(item.value(), here, c.scale);
      has_scale = true;
    } else if (k == "offset") {
      read(item.value(), here, c.offset);
      has_offset = true;
    } else if (k == "efficient_factor")
      read(item.value(), here, c.efficient_factor);
    else if (k == "latency_us")
      read(item.value(), here, c.latency_us);
    else if (k == "fixed_latency_us")
      read(item.value(), here, c.fixed_latency_us);
    else if (k == "fixed_latency_us_by_comm_num")
      read_group_table(item.value(), here, c.fixed_latency_us_by_comm_num);
    else if (k == "dp_fixed_bw")
      read_group_table(item.value(), here, c.dp_fixed_bw);
    else
      unknown_key(here, opt);
  }
  if (!has_scale) fail(at.child("scale"), "required field is missing");
  if (!has_offset) fail(at.child("offset"), "required field is missing");
  return c;
}

template <class Array>
std::optional<std::size_t> index_of(const Array& names, std::string_view name) {
  for (std::size_t i = 0; i < names.size(); ++i)
    if (names[i] == name) return i;
  return std::nullopt;
}

inline value write_bandwidth(const bandwidth_spec& bw, bool network_tier) {
  value out = {{"gbps", bw.gbps}, {"efficient_factor", bw.efficient_factor}, {"latency_us", bw.latency_us}};
  if (network_tier && bw.fixed_latency != 0) out["fixed_latency"] = bw.fixed_latency;
  if (network_tier && !bw.fixed_latency_us_by_comm_num.empty()) {
    value t = value::object();
    for (std::size_t i = 0; i < bw.fixed_latency_us_by_comm_num.count; ++i)
      t[std::to_string(bw.fixed_latency_us_by_comm_num.entries[i].first)] =
          bw.fixed_latency_us_by_comm_num.entries[i].second;
    out["fixed_latency_us_by_comm_num"] = t;
  }
  return out;
}
inline value write_group_table(const group_size_table& t) {
  value out = value::object();
  for (std::size_t i = 0; i < t.count; ++i) out[std::to_string(t.entries[i].first)] = t.entries[i].second;
  return out;
}

}  // namespace detail

/// A system from parsed JSON. Runs `validate(system)`.
inline system_config parse_system(const value& v, const std::string& source = {}, const load_options& opt = {}) {
  using namespace detail;
  const location root{source, ""};
  require_object(v, root);
  system_config out;
  system_spec& sys = out.spec_;
  auto store = std::make_shared<system_config::storage>();
  struct pending {
    std::size_t kind;
    std::size_t first_key;
    std::size_t count;
  };
  std::vector<pending> tables;
  std::vector<double> efficiencies;
  bool has_name = false, has_nodes = false, has_acc = false, has_net = false;

  // First pass: count table entries so key strings never move once views point at them.
  std::size_t total_keys = 0;
  if (v.contains("accelerator") && v["accelerator"].is_object() && v["accelerator"].contains("op") &&
      v["accelerator"]["op"].is_object())
    for (const auto& op : v["accelerator"]["op"].items())
      if (op.value().is_object() && op.value().contains("accurate_efficient_factor") &&
          op.value()["accurate_efficient_factor"].is_object())
        total_keys += op.value()["accurate_efficient_factor"].size();
  store->keys.reserve(total_keys);

  for (const auto& item : v.items()) {
    const auto& k = item.key();
    const auto at = root.child(k);
    if (k == "sys_name") {
      read(item.value(), at, sys.sys_name);
      has_name = true;
    } else if (k == "num_per_node") {
      read(item.value(), at, sys.num_per_node);
      has_nodes = true;
    } else if (k == "FC8")
      read(item.value(), at, sys.FC8);
    else if (k == "accelerator") {
      has_acc = true;
      require_object(item.value(), at);
      bool has_mem = false, has_op = false, has_bw = false;
      for (const auto& a : item.value().items()) {
        const auto& ak = a.key();
        const auto aat = at.child(ak);
        if (ak == "backend")
          read(a.value(), aat, sys.accelerator.backend);
        else if (ak == "mem_gbs") {
          read(a.value(), aat, sys.accelerator.mem_gbs);
          has_mem = true;
        } else if (ak == "mode")
          read(a.value(), aat, sys.accelerator.mode);
        else if (ak == "compute_capability")
          read(a.value(), aat, sys.accelerator.compute_capability);
        else if (ak == "kernel_model")
          read(a.value(), aat, sys.accelerator.kernel_model);
        else if (ak == "sm_count")
          read(a.value(), aat, sys.accelerator.sm_count);
        else if (ak == "gemm_sustained_scale")
          read(a.value(), aat, sys.accelerator.gemm_sustained_scale);
        else if (ak == "host_link_gbs")
          read(a.value(), aat, sys.accelerator.host_link_gbs);
        else if (ak == "op") {
          has_op = true;
          require_object(a.value(), aat);
          for (const auto& op : a.value().items()) {
            const auto oat = aat.child(op.key());
            const auto kind = index_of(compute_kind_names, op.key());
            if (!kind) {
              unknown_key(oat, opt);
              continue;
            }
            require_object(op.value(), oat);
            compute_op_spec spec{};
            spec.present = true;
            bool has_tflops = false, has_eff = false;
            for (const auto& f : op.value().items()) {
              const auto fat = oat.child(f.key());
              if (f.key() == "tflops") {
                read(f.value(), fat, spec.tflops);
                has_tflops = true;
              } else if (f.key() == "efficient_factor") {
                read(f.value(), fat, spec.efficient_factor);
                has_eff = true;
              } else if (f.key() == "accurate_efficient_factor") {
                if (f.value().is_null()) continue;
                require_object(f.value(), fat);
                pending p{*kind, store->keys.size(), 0};
                for (const auto& e : f.value().items()) {
                  double eff = 0;
                  read(e.value(), fat.child(e.key()), eff);
                  store->keys.push_back(e.key());
                  efficiencies.push_back(eff);
                  ++p.count;
                }
                tables.push_back(p);
              } else
                unknown_key(fat, opt);
            }
            if (!has_tflops) fail(oat.child("tflops"), "required field is missing");
            if (!has_eff) fail(oat.child("efficient_factor"), "required field is missing");
            sys.accelerator.op[*kind] = spec;
          }
        } else if (ak == "bandwidth") {
          has_bw = true;
          require_object(a.value(), aat);
          for (const auto& bw : a.value().items()) {
            const auto bat = aat.child(bw.key());
            const auto kind = index_of(memory_kind_names, bw.key());
            if (!kind) {
              unknown_key(bat, opt);
              continue;
            }
            sys.accelerator.bandwidth[*kind] = read_bandwidth(bw.value(), bat, opt, false);
          }
        } else
          unknown_key(aat, opt);
      }
      if (!has_mem) fail(at.child("mem_gbs"), "required field is missing");
      if (!has_op) fail(at.child("op"), "required field is missing");
      if (!has_bw) fail(at.child("bandwidth"), "required field is missing");
    } else if (k == "networks") {
      has_net = true;
      require_object(item.value(), at);
      for (const auto& n : item.value().items()) {
        const auto nat = at.child(n.key());
        if (n.key() == "intra_with_pcie") {
          read(n.value(), nat, sys.intra_with_pcie);
          continue;
        }
        if (sys.network_count == system_spec::max_networks)
          fail(nat, "at most " + std::to_string(system_spec::max_networks) + " network tiers are supported");
        if (n.key().size() > 32) fail(nat, "network tier name exceeds 32 characters");
        require_object(n.value(), nat);
        network_tier tier{};
        tier.name.assign(n.key());
        bool has_bw = false, has_op = false;
        for (const auto& f : n.value().items()) {
          const auto fat = nat.child(f.key());
          if (f.key() == "processor_usage")
            read(f.value(), fat, tier.processor_usage);
          else if (f.key() == "nccl_link")
            read(f.value(), fat, tier.nccl_link);
          else if (f.key() == "shared_link")
            read(f.value(), fat, tier.shared_link);
          else if (f.key() == "bandwidth") {
            tier.bandwidth = read_bandwidth(f.value(), fat, opt, true);
            has_bw = true;
          } else if (f.key() == "op") {
            has_op = true;
            require_object(f.value(), fat);
            for (const auto& c : f.value().items()) {
              const auto cat = fat.child(c.key());
              const auto kind = index_of(collective_kind_names, c.key());
              if (!kind) {
                unknown_key(cat, opt);
                continue;
              }
              tier.op[*kind] = read_collective(c.value(), cat, opt);
            }
          } else
            unknown_key(fat, opt);
        }
        if (!has_bw) fail(nat.child("bandwidth"), "required field is missing");
        if (!has_op) fail(nat.child("op"), "required field is missing");
        sys.networks[sys.network_count++] = tier;
      }
    } else
      unknown_key(at, opt);
  }
  if (!has_name) fail(root.child("sys_name"), "required field is missing");
  if (!has_nodes) fail(root.child("num_per_node"), "required field is missing");
  if (!has_acc) fail(root.child("accelerator"), "required field is missing");
  if (!has_net) fail(root.child("networks"), "required field is missing");

  // Views into the now-complete key storage, each table sorted for binary search.
  store->entries.reserve(store->keys.size());
  for (std::size_t i = 0; i < store->keys.size(); ++i) store->entries.push_back({store->keys[i], efficiencies[i]});
  for (const auto& p : tables) {
    auto* first = store->entries.data() + p.first_key;
    std::sort(first, first + p.count,
              [](const shape_efficiency& a, const shape_efficiency& b) { return a.shape < b.shape; });
    store->memos.push_back(std::make_unique<system_config::shape_memo>());
    sys.accelerator.op[p.kind].accurate_efficient_factor = {first, p.count, store->memos.back().get()};
  }
  out.storage_ = std::move(store);
  try {
    validate(sys);
  } catch (const config_error& e) { throw e.in_file(source); }
  return out;
}

inline value to_json(const system_spec& sys) {
  using namespace detail;
  value acc = {{"backend", std::string(sys.accelerator.backend.view())},
               {"mem_gbs", sys.accelerator.mem_gbs},
               {"mode", write(sys.accelerator.mode)}};
  if (sys.accelerator.compute_capability != 0) acc["compute_capability"] = sys.accelerator.compute_capability;
  if (sys.accelerator.kernel_model != kernel_architecture::none)
    acc["kernel_model"] = std::string(enum_name(sys.accelerator.kernel_model));
  if (sys.accelerator.sm_count != 0) acc["sm_count"] = sys.accelerator.sm_count;
  if (sys.accelerator.gemm_sustained_scale != 1) acc["gemm_sustained_scale"] = sys.accelerator.gemm_sustained_scale;
  if (sys.accelerator.host_link_gbs != 0) acc["host_link_gbs"] = sys.accelerator.host_link_gbs;
  acc["op"] = value::object();
  for (std::size_t k = 0; k < compute_kind_names.size(); ++k) {
    const auto& op = sys.accelerator.op[k];
    if (!op.present) continue;
    value o = {{"tflops", op.tflops}, {"efficient_factor", op.efficient_factor}};
    if (!op.accurate_efficient_factor.empty()) {
      value t = value::object();
      for (const auto& e : op.accurate_efficient_factor) t[std::string(e.shape)] = e.efficiency;
      o["accurate_efficient_factor"] = t;
    }
    acc["op"][std::string(compute_kind_names[k])] = o;
  }
  acc["bandwidth"] = value::object();
  for (std::size_t k = 0; k < memory_kind_names.size(); ++k)
    if (sys.accelerator.bandwidth[k].present)
      acc["bandwidth"][std::string(memory_kind_names[k])] = write_bandwidth(sys.accelerator.bandwidth[k], false);
  value nets = {{"intra_with_pcie", sys.intra_with_pcie}};
  for (std::size_t i = 0; i < sys.network_count; ++i) {
    const auto& tier = sys.networks[i];
    value t = {{"processor_usage", tier.processor_usage}, {"bandwidth", write_bandwidth(tier.bandwidth, true)}};
    if (tier.nccl_link != nccl_link_kind::none) t["nccl_link"] = std::string(enum_name(tier.nccl_link));
    if (tier.shared_link) t["shared_link"] = true;
    t["op"] = value::object();
    for (std::size_t c = 0; c < collective_kind_names.size(); ++c) {
      const auto& op = tier.op[c];
      if (!op.present) continue;
      value o = {{"scale", op.scale}, {"offset", op.offset}};
      if (op.efficient_factor) o["efficient_factor"] = *op.efficient_factor;
      if (op.latency_us) o["latency_us"] = *op.latency_us;
      if (op.fixed_latency_us) o["fixed_latency_us"] = *op.fixed_latency_us;
      if (!op.fixed_latency_us_by_comm_num.empty())
        o["fixed_latency_us_by_comm_num"] = write_group_table(op.fixed_latency_us_by_comm_num);
      if (!op.dp_fixed_bw.empty()) o["dp_fixed_bw"] = write_group_table(op.dp_fixed_bw);
      t["op"][std::string(collective_kind_names[c])] = o;
    }
    nets[std::string(tier.name.view())] = t;
  }
  return {{"sys_name", std::string(sys.sys_name.view())},
          {"num_per_node", sys.num_per_node},
          {"FC8", sys.FC8},
          {"accelerator", acc},
          {"networks", nets}};
}

// ---- files or catalogue names, with overrides -----------------------------------------------------

namespace detail {
inline bool is_regular_file(const std::filesystem::path& file) {
  std::error_code ec;
  return std::filesystem::is_regular_file(file, ec);
}

/// The names of a catalogue list, space separated.
template <class List>
std::string names_of(const List& list) {
  std::string out;
  for (const auto& entry : list) {
    if (!out.empty()) out.append(1, ' ');
    out.append(entry.name);
  }
  return out;
}

/// What a path that is neither a file nor a name says about the names `kind` accepts.
inline std::string catalogue_names(std::string_view kind) {
  if (kind == "model") return "catalogue models: " + names_of(catalogue::models);
  if (kind == "system") return "catalogue systems: " + names_of(catalogue::systems);
  std::string tokens;
  for (const auto& t : catalogue::strategy_name_tokens) tokens.append(tokens.empty() ? "" : " ").append(t.token);
  return "strategy names are compact, e.g. tp2_pp1_dp4 or pp16_dp8_ep8_mbc32_first1, from the tokens " + tokens +
         " separated by '_' or '-'";
}

/// The JSON object of a config file. A path that does not exist is neither a file nor a catalogue
/// name (the caller has looked the name up): the error lists the names of `kind`.
inline value read_config(const std::filesystem::path& file, std::string_view kind) {
  std::error_code ec;
  if (!std::filesystem::exists(file, ec))
    throw config_error("llmsim::json", "",
                       "is neither a file nor a catalogue " + std::string(kind) + " name; " + catalogue_names(kind),
                       file.string());
  value v = read_file(file);
  if (!v.is_object())
    throw config_error("llmsim::json", "/", "/: expected an object, got " + type_name(v), file.string());
  return v;
}
}  // namespace detail

// ---- Hugging Face config.json -----------------------------------------------------------------
/// A Hugging Face `config.json` as a model (`--model path/to/config.json`, `llmsim import-hf`): the
/// architectural fields of transformers' config classes mapped to the SimuMax model format.
namespace hf {

/// A Hugging Face config: `model_type` names a transformers architecture and the sizes use its
/// names (`num_hidden_layers`), unlike the SimuMax format's `model_type` dense / moe and `layer_num`.
/// A multimodal config (Gemma 3) holds its language model's sizes in `text_config`.
inline bool is_hf_config(const value& v) {
  if (!v.is_object() || !v.contains("model_type") || !v["model_type"].is_string()) return false;
  return v.contains("num_hidden_layers") ||
         (v.contains("text_config") && v["text_config"].is_object() && v["text_config"].contains("num_hidden_layers"));
}

/// The model_type values this importer maps.
inline constexpr std::array<std::string_view, 13> supported_types{
    "llama",       "mistral", "mixtral", "qwen2",  "qwen3",       "qwen3_moe", "deepseek_v2",
    "deepseek_v3", "phi3",    "gemma2",  "gemma3", "gemma3_text", "gpt_oss"};

namespace detail {
using json::detail::location;
/// An integer field: required, or `fallback` when absent or null.
inline std::int64_t integer(const value& v, const location& at, const char* key, std::optional<std::int64_t> fallback) {
  if (!v.contains(key) || v[key].is_null()) {
    if (fallback) return *fallback;
    json::detail::fail(at.child(key), "required field is missing (Hugging Face config)");
  }
  std::int64_t out = 0;
  json::detail::read(v[key], at.child(key), out);
  return out;
}
inline bool flag(const value& v, const location& at, const char* key, bool fallback) {
  if (!v.contains(key) || v[key].is_null()) return fallback;
  bool out = false;
  json::detail::read(v[key], at.child(key), out);
  return out;
}
/// A text field: `fallback` when absent or null, else it must be a string.
inline std::string word(const value& v, const location& at, const char* key, const std::string& fallback) {
  if (!v.contains(key) || v[key].is_null()) return fallback;
  if (!v[key].is_string())
    json::detail::fail(at.child(key), "expected a string, got " + json::detail::describe(v[key]));
  return v[key].get<std::string>();
}
/// The last path component of `path`, at most 63 bytes cut on a UTF-8 character boundary.
inline std::string short_name(const std::string& path, const std::string& fallback) {
  const auto slash = path.find_last_of('/');
  std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  if (name.size() > 63) {
    std::size_t end = 63;
    while (end > 0 && (static_cast<unsigned char>(name[end]) & 0xC0) == 0x80) --end;  // not inside a character
    name.resize(end);
  }
  return name.empty() ? fallback : name;
}
/// Notes what the config states that the estimate does not model, with its size where it has one.
inline void note(std::vector<std::string>* notes, const std::string& source, const std::string& what) {
  if (notes) notes->push_back(source + ": " + what);
}
/// Notes what `v` states that the estimate of model `m` leaves out, with the weights it leaves out.
inline void note_unmodelled(const value& v, const location& at, const std::string& type, const value& m,
                            std::vector<std::string>* notes) {
  // (In doubles: the sizes are not validated yet and may be huge.)
  const auto number = [&](const char* key) { return static_cast<double>(m[key].get<std::int64_t>()); };
  const double layers = number("layer_num"), heads = number("head_num");
  const double head = number("head_size"), hidden = number("hidden_size");
  const auto count = [](double x) {
    char text[32];
    std::snprintf(text, sizeof text, "%.0f", x);
    return std::string(text);
  };
  const std::string src = at.file;
  // q, k, v modelled (add_qkv_bias); gpt-oss: every bias (add_linear_bias, see to_model_json)
  if (type != "qwen2" && type != "gpt_oss" && flag(v, at, "attention_bias", false))
    note(notes, src,
         "attention_bias: the o projection's bias is not modelled (" + count(layers * hidden) + " parameters)");
  if (flag(v, at, "mlp_bias", false)) note(notes, src, "mlp_bias: the MLP projections' biases are not modelled");
  if (type == "qwen3" || type == "qwen3_moe")
    note(notes, src,
         "the per-head q and k RMSNorms are not modelled (" + count(layers * 2 * head) +
             " parameters and their small kernels)");
  const bool qwen = type == "qwen2" || type == "qwen3" || type == "qwen3_moe";
  if (qwen && flag(v, at, "use_sliding_window", false))  // max_window_layers: which layers, not modelled
    note(notes, src,
         "use_sliding_window (layers from max_window_layers on) is not modelled: attention spans the "
         "whole sequence");
  const bool gemma = type == "gemma2" || type == "gemma3_text";
  if (gemma)
    note(notes, src,
         "the post-attention and post-feedforward RMSNorms (Gemma's sandwich norms) are not modelled (" +
             count(layers * 2 * hidden) + " parameters and their kernels)");
  if (type == "gemma3_text")
    note(notes, src, "the per-head q and k RMSNorms are not modelled (" + count(layers * 2 * head) + " parameters)");
  if (v.contains("attn_logit_softcapping") && v["attn_logit_softcapping"].is_number())
    note(notes, src, "attn_logit_softcapping (tanh on the scores) is not priced: FlashAttention applies it in-kernel");
  if (v.contains("final_logit_softcapping") && v["final_logit_softcapping"].is_number())
    note(notes, src, "final_logit_softcapping (tanh on the logits) is not priced: one elementwise pass");
  if (type == "gpt_oss")
    note(notes, src,
         "the attention sinks (" + count(layers * heads) + " parameters, one logit per head) are not modelled");
  // YaRN on MHA / GQA changes Megatron's RoPE kernels (model_spec::yarn_rotary_scaling_factor); MLA's do not.
  const bool mla = m.contains("attention_type") && m["attention_type"] == "mla";
  if (v.contains("rope_scaling") && v["rope_scaling"].is_object() && (mla || !m.contains("yarn_rotary_scaling_factor")))
    note(notes, src, "rope_scaling changes no FLOPs or bytes (positions only)");
  if (v.contains("quantization_config") && v["quantization_config"].is_object())
    note(notes, src,
         "quantization_config (" +
             word(v["quantization_config"], at.child("quantization_config"), "quant_method", "?") +
             "): the model is imported with 16-bit weights; training takes the strategy's precision, "
             "serving its --weights");
}
/// A number field, or nothing when absent or null.
inline std::optional<double> real(const value& v, const location& at, const char* key) {
  if (!v.contains(key) || v[key].is_null()) return std::nullopt;
  double out = 0;
  json::detail::read(v[key], at.child(key), out);
  return out;
}
/// YaRN from `rope_scaling` (rope_type, or the older type, "yarn") into `m`'s
/// yarn_rotary_scaling_factor (its `factor`), as Megatron-Bridge's bridges map it
/// (conversion/model_bridge.py: position_embedding_type "yarn" on a GPT provider); other scalings
/// change positions only and are noted (note_unmodelled).
inline void yarn_into(const value& v, const location& at, value& m) {
  if (!v.contains("rope_scaling") || !v["rope_scaling"].is_object()) return;
  const value& r = v["rope_scaling"];
  const location here = at.child("rope_scaling");
  if (word(r, here, "rope_type", word(r, here, "type", "")) != "yarn") return;
  const std::optional<double> factor = real(r, here, "factor");
  if (!factor) json::detail::fail(here.child("factor"), "required field is missing (YaRN's scaling factor)");
  m["yarn_rotary_scaling_factor"] = *factor;
}

/// Which layers of `layer_types` keep full attention, as model.sliding_window_pattern: 0 every
/// layer windowed, N every N-th (1-based N, 2N, ...); -1 none windowed. Other layouts are refused.
inline std::int64_t pattern_of_layer_types(const value& types, const location& at, std::int64_t layers) {
  if (!types.is_array() || static_cast<std::int64_t>(types.size()) != layers)
    json::detail::fail(at, "expected a list of num_hidden_layers=" + std::to_string(layers) + " attention kinds");
  std::vector<bool> full;
  for (std::size_t i = 0; i < types.size(); ++i) {
    const value& t = types[i];
    if (!t.is_string() || (t != "full_attention" && t != "sliding_attention"))
      json::detail::fail(at.child(std::to_string(i)), "expected \"full_attention\" or \"sliding_attention\"");
    full.push_back(t == "full_attention");
  }
  const auto first_full = std::find(full.begin(), full.end(), true);
  if (first_full == full.end()) return 0;
  const std::int64_t n = (first_full - full.begin()) + 1;
  for (std::size_t i = 0; i < full.size(); ++i)
    if (full[i] != ((static_cast<std::int64_t>(i) + 1) % n == 0))
      json::detail::fail(at, "only every N-th layer keeping full attention (and the others windowed) is modelled");
  return n == 1 ? -1 : n;
}

/// The sliding window of a config into `m`: `sliding_window` (null: none; absent: transformers'
/// default for the type: Mistral, Gemma 2 / 3 4096, gpt-oss 128) and which layers keep full
/// attention (`layer_types`, else Gemma 3's `sliding_window_pattern`, else the type's own: Gemma 2
/// and gpt-oss alternate starting windowed, Gemma 3 every 6th full, Mistral, Mixtral, Phi-3 none).
inline void window_into(const value& v, const location& at, const std::string& type, value& m) {
  const bool own = type == "mistral" || type == "mixtral" || type == "phi3" || type == "gemma2" ||
                   type == "gemma3_text" || type == "gpt_oss";
  if (!own) return;  // Qwen's use_sliding_window is noted (note_unmodelled)
  std::optional<std::int64_t> window;
  if (v.contains("sliding_window") && !v["sliding_window"].is_null())
    window = integer(v, at, "sliding_window", {});
  else if (!v.contains("sliding_window") && type != "mixtral" && type != "phi3")
    window = type == "gpt_oss" ? 128 : 4096;
  if (!window) return;
  if (*window < 1) json::detail::fail(at.child("sliding_window"), "sliding_window must be at least 1");
  std::int64_t pattern = type == "gemma2" || type == "gpt_oss" ? 2 : 0;
  if (type == "gemma3_text") pattern = integer(v, at, "sliding_window_pattern", 6);
  if (pattern < 0) json::detail::fail(at.child("sliding_window_pattern"), "sliding_window_pattern must be at least 1");
  if (type == "gemma3_text" && pattern == 1) return;  // transformers: (i + 1) % 1 == 0, every layer full
  if (v.contains("layer_types") && !v["layer_types"].is_null())
    pattern = pattern_of_layer_types(v["layer_types"], at.child("layer_types"), m["layer_num"].get<std::int64_t>());
  if (pattern < 0) return;  // every layer full
  m["sliding_window"] = *window;
  if (pattern > 0) m["sliding_window_pattern"] = pattern;
}
}  // namespace detail

/// The SimuMax-format model JSON of Hugging Face config `v` (read from `source`). Fields the
/// estimate does not model (biases on q/k/v only, q/k norms, sliding windows, RoPE scaling) are
/// listed in `notes`; an architecture outside `supported_types` is refused naming model_type.
inline value to_model_json(const value& v, const std::string& source, std::vector<std::string>* notes = nullptr);

namespace detail {
/// The model JSON of config `v` found at `at` (a multimodal config's `text_config`, or the file).
inline value model_json_at(const value& v, const location& at, std::vector<std::string>* notes);
}  // namespace detail

inline value to_model_json(const value& v, const std::string& source, std::vector<std::string>* notes) {
  const json::detail::location at{source, ""};
  if (!is_hf_config(v))
    json::detail::fail(at.child("model_type"), "not a Hugging Face config (needs model_type and num_hidden_layers)");
  if (v["model_type"] == "gemma3") {
    // Gemma3ForConditionalGeneration: the language model is text_config (a gemma3_text).
    const bool nested = v.contains("text_config") && v["text_config"].is_object();
    value text = nested ? v["text_config"] : v;
    text["model_type"] = "gemma3_text";
    if (!text.contains("_name_or_path") && v.contains("_name_or_path")) text["_name_or_path"] = v["_name_or_path"];
    if (v.contains("vision_config"))
      detail::note(notes, source, "vision_config: the vision encoder and the multimodal projector are not modelled");
    return detail::model_json_at(text, nested ? at.child("text_config") : at, notes);
  }
  return detail::model_json_at(v, at, notes);
}

inline value detail::model_json_at(const value& v, const location& at, std::vector<std::string>* notes) {
  using detail::flag;
  using detail::integer;
  using json::detail::fail;
  const std::string& source = at.file;
  const std::string type = v["model_type"].get<std::string>();
  if (std::find(supported_types.begin(), supported_types.end(), type) == supported_types.end()) {
    std::string list;
    for (const auto t : supported_types) list.append(list.empty() ? "" : ", ").append(t);
    fail(at.child("model_type"), "model_type \"" + type + "\" is not one llmsim imports (" + list + ")");
  }
  const bool gemma = type == "gemma2" || type == "gemma3_text";
  // Gemma 3's multimodal configs (gemma-3-4b-it and larger) leave their text_config's head counts
  // and head_dim at Gemma3TextConfig's defaults (transformers configuration_gemma3.py): the
  // fallbacks below, each noted when used.
  const auto gemma3_default = [&](const char* key, std::int64_t fallback) -> std::optional<std::int64_t> {
    if (type != "gemma3_text") return std::nullopt;
    if (!v.contains(key) || v[key].is_null())
      detail::note(notes, source, std::string(key) + " absent: Gemma3TextConfig's default " + std::to_string(fallback));
    return fallback;
  };
  const std::optional<std::int64_t> default_heads = gemma3_default("num_attention_heads", 8),
                                    default_kv_heads = gemma3_default("num_key_value_heads", 4),
                                    default_head_dim = gemma3_default("head_dim", 256);
  // Gemma's MLPs are gated with tanh-GELU (GeGLU, `hidden_activation`): SwiGLU's GEMM shapes.
  const char* act_key = gemma && v.contains("hidden_activation") ? "hidden_activation" : "hidden_act";
  const std::string act = detail::word(v, at, act_key, gemma ? "gelu_pytorch_tanh" : "silu");
  const bool gelu = act == "gelu_pytorch_tanh" || act == "gelu" || act == "gelu_new";
  if (act != "silu" && act != "swish" && !(gemma && gelu))
    fail(at.child(act_key), "\"" + act + "\": llmsim imports gated SiLU MLPs (Gemma: gated GELU) only");
  const bool deepseek = type == "deepseek_v2" || type == "deepseek_v3";
  const bool qwen3 = type == "qwen3" || type == "qwen3_moe";
  // Where transformers' default head_dim is not hidden_size / heads (Qwen3 128, Gemma 256, gpt-oss
  // 64) the config must say it; released configs do.
  const bool head_dim_required = qwen3 || gemma || type == "gpt_oss";
  const std::int64_t hidden = integer(v, at, "hidden_size", {});
  const std::int64_t heads = integer(v, at, "num_attention_heads", default_heads);
  // transformers' class defaults differ by type (mistral and mixtral 8 KV heads, qwen2 and qwen3 32,
  // qwen3_moe 4, DeepSeek 128; Qwen3 head_dim 128): where the default is not "as many as the query
  // heads" the config must say it; released configs do.
  const bool kv_defaults_to_heads = type == "llama" || type == "phi3";
  const std::int64_t kv =
      integer(v, at, "num_key_value_heads", kv_defaults_to_heads ? std::optional(heads) : default_kv_heads);
  value m = {{"model_name", detail::short_name(detail::word(v, at, "_name_or_path", type), type)},
             {"hidden_size", hidden},
             {"layer_num", integer(v, at, "num_hidden_layers", {})},
             {"head_num", heads},
             {"kv_head_num", kv},
             {"vocab_size",
              integer(v, at, "vocab_size", type == "gemma3_text" ? std::optional<std::int64_t>(262208) : std::nullopt)},
             {"use_swiglu", true},
             {"tie_word_embeddings", flag(v, at, "tie_word_embeddings", gemma)}};  // Gemma ties by default
  if (type == "gemma3_text" && (!v.contains("vocab_size") || v["vocab_size"].is_null()))
    detail::note(notes, source, "vocab_size absent: Gemma3TextConfig's default 262208");
  if (v.contains("intermediate_size") && !v["intermediate_size"].is_null())
    m["intermediate_size"] = integer(v, at, "intermediate_size", {});
  // head_dim absent: hidden_size / num_attention_heads, as transformers' attention modules take it.
  const bool has_head_dim = v.contains("head_dim") && !v["head_dim"].is_null();
  if (!has_head_dim && head_dim_required && !default_head_dim)
    fail(at.child("head_dim"), "required field is missing (" + type + "'s default is not hidden_size / heads)");
  if (!has_head_dim && !default_head_dim && (heads <= 0 || hidden % heads != 0))
    fail(at.child("num_attention_heads"), "num_attention_heads=" + std::to_string(heads) + " must divide hidden_size=" +
                                              std::to_string(hidden) + " when head_dim is absent");
  m["head_size"] = has_head_dim       ? integer(v, at, "head_dim", {})
                   : default_head_dim ? *default_head_dim
                                      : hidden / heads;
  const auto at_least = [&](const char* key, std::int64_t value, std::int64_t minimum) {
    if (value < minimum)
      fail(at.child(key),
           std::string(key) + "=" + std::to_string(value) + " must be at least " + std::to_string(minimum));
    return value;
  };
  if (type == "mixtral" || type == "gpt_oss") {
    m["model_type"] = "moe";
    m["expert_num"] = integer(v, at, "num_local_experts", {});
    m["topk"] = integer(v, at, "num_experts_per_tok", {});
    m["moe_ffn_hidden_size"] = integer(v, at, "intermediate_size", {});
  } else if (type == "qwen3_moe") {
    if (integer(v, at, "decoder_sparse_step", 1) != 1)
      fail(at.child("decoder_sparse_step"), "MoE layers every other layer (decoder_sparse_step > 1) are not imported");
    if (v.contains("mlp_only_layers") && !v["mlp_only_layers"].is_null()) {
      if (!v["mlp_only_layers"].is_array()) fail(at.child("mlp_only_layers"), "expected a list of layer indices");
      if (!v["mlp_only_layers"].empty())
        fail(at.child("mlp_only_layers"), "dense layers among the MoE layers are not imported");
    }
    m["model_type"] = "moe";
    // transformers' newer saved configs name it num_local_experts.
    m["expert_num"] =
        v.contains("num_experts") ? integer(v, at, "num_experts", {}) : integer(v, at, "num_local_experts", {});
    m["topk"] = integer(v, at, "num_experts_per_tok", {});
    m["moe_ffn_hidden_size"] = integer(v, at, "moe_intermediate_size", {});
  } else if (deepseek) {
    const std::int64_t expert = at_least("moe_intermediate_size", integer(v, at, "moe_intermediate_size", {}), 1);
    m["model_type"] = "moe";
    m["attention_type"] = "mla";
    m["expert_num"] = integer(v, at, "n_routed_experts", {});
    m["topk"] = integer(v, at, "num_experts_per_tok", {});
    m["moe_ffn_hidden_size"] = expert;
    if (const std::int64_t shared = at_least("n_shared_experts", integer(v, at, "n_shared_experts", {}), 0);
        shared > 0) {
      if (shared > std::numeric_limits<std::int64_t>::max() / expert)
        fail(at.child("n_shared_experts"), "n_shared_experts x moe_intermediate_size is out of range");
      m["moe_shared_expert_intermediate_size"] = shared * expert;
    }
    m["dense_layers"] = at_least("first_k_dense_replace", integer(v, at, "first_k_dense_replace", {}), 0);
    if (integer(v, at, "moe_layer_freq", 1) != 1)
      fail(at.child("moe_layer_freq"), "MoE layers every other layer are not imported");
    m["q_lora_rank"] = v.contains("q_lora_rank") && !v["q_lora_rank"].is_null()
                           ? value(integer(v, at, "q_lora_rank", {}))
                           : value(nullptr);
    m["kv_lora_rank"] = integer(v, at, "kv_lora_rank", {});
    m["qk_head_dim"] = integer(v, at, "qk_nope_head_dim", {});
    m["qk_pos_emb_head_dim"] = integer(v, at, "qk_rope_head_dim", {});
    m["v_head_dim"] = integer(v, at, "v_head_dim", {});
    m["head_size"] = m["qk_head_dim"];
    // Routing (modeling_deepseek.py MoEGate): DeepSeek-V3 scores with a sigmoid and the
    // aux-loss-free bias (topk_method noaux_tc, its only method); V2 with a softmax, limited to
    // topk_group of n_group groups under topk_method group_limited_greedy.
    const std::string scoring = detail::word(v, at, "scoring_func", type == "deepseek_v3" ? "sigmoid" : "softmax");
    const std::string method = detail::word(v, at, "topk_method", type == "deepseek_v3" ? "noaux_tc" : "greedy");
    if (scoring != "softmax" && scoring != "sigmoid")
      fail(at.child("scoring_func"), "scoring_func \"" + scoring + "\" must be softmax or sigmoid");
    if (method != "greedy" && method != "group_limited_greedy" && method != "noaux_tc")
      fail(at.child("topk_method"), "topk_method \"" + method + "\" must be greedy, group_limited_greedy or noaux_tc");
    if (scoring == "sigmoid") m["moe_router_score_function"] = "sigmoid";
    if (method == "noaux_tc") m["moe_router_enable_expert_bias"] = true;
    if (method != "greedy") {
      const std::int64_t groups = at_least("n_group", integer(v, at, "n_group", {}), 1);
      if (groups > 1) {
        m["moe_router_num_groups"] = groups;
        m["moe_router_group_topk"] = at_least("topk_group", integer(v, at, "topk_group", {}), 1);
      }
    }
    if (const std::int64_t mtp = at_least("num_nextn_predict_layers", integer(v, at, "num_nextn_predict_layers", 0), 0);
        mtp > 0)
      m["mtp_num_layers"] = mtp;
  } else {
    m["model_type"] = "dense";
  }
  if (!m.contains("intermediate_size") && !deepseek)
    fail(at.child("intermediate_size"), "required field is missing (Hugging Face config)");
  // Qwen2's q, k, v projections always carry biases (modeling_qwen2.py); attention_bias puts them
  // on q, k, v and o (the o bias is noted). gpt-oss: q, k, v, o, the router and the experts carry
  // biases (modeling_gpt_oss.py; Megatron-Bridge gpt_oss_bridge.py sets add_bias_linear=True).
  if (type == "gpt_oss") {
    m["add_linear_bias"] = true;
    // modeling_gpt_oss.py GptOssExperts: gate·σ(1.702 gate)·(up + 1) after clamping at swiglu_limit
    // (Megatron-Bridge gpt_oss_bridge.py: quick_gelu, glu_linear_offset 1, clamp 7.0).
    m["use_quick_geglu"] = true;
    if (const auto limit = real(v, at, "swiglu_limit")) m["activation_func_clamp_value"] = *limit;
  } else if (type == "qwen2" || flag(v, at, "attention_bias", false)) {
    if (deepseek) fail(at.child("attention_bias"), "biases on MLA's projections are not imported");
    m["add_qkv_bias"] = true;
  }
  detail::window_into(v, at, type, m);
  detail::yarn_into(v, at, m);
  detail::note_unmodelled(v, at, type, m, notes);
  return m;
}

}  // namespace hf

/// Loads a model: a file (SimuMax's format or a Hugging Face config.json, whose unmodelled fields
/// become warnings), or, when `file` is not an existing regular file, a catalogue name
/// (`load_model("llama3-70b")`, see `catalogue::models`). `overrides` (an object; keys may be
/// dotted paths) merge in before parsing, as `merge_overrides` does.
inline model_spec load_model(const std::filesystem::path& file, const load_options& opt = {},
                             const value& overrides = value::object()) {
  const std::string name = file.string();
  const model_spec* entry = detail::is_regular_file(file) ? nullptr : catalogue::find_model(name);
  const std::string source = entry ? "catalogue model " + name : name;
  value v = entry ? to_json(*entry) : detail::read_config(file, "model");
  if (hf::is_hf_config(v)) v = hf::to_model_json(v, source, opt.warnings);  // a Hugging Face config.json
  merge_overrides(v, overrides, source + " (with overrides)");
  return parse_model(v, source, opt);
}
/// Loads a strategy: a file, or, when `file` is not an existing regular file, a compact strategy
/// name (`load_strategy("tp8_pp2_dp4_mbc16")`, see `catalogue::parse_strategy_name`); overrides as for `load_model`.
inline strategy_spec load_strategy(const std::filesystem::path& file, const load_options& opt = {},
                                   const value& overrides = value::object()) {
  const std::string name = file.string();
  strategy_spec named{};
  const bool is_name = !detail::is_regular_file(file) && catalogue::parse_strategy_name(name, named);
  const std::string source = is_name ? "strategy " + name : name;
  value v = is_name ? to_json(named) : detail::read_config(file, "strategy");
  merge_overrides(v, overrides, source + " (with overrides)");
  return parse_strategy(v, source, opt);
}
/// The system a validation row is priced on, given the catalogue system its recipe names (the
/// `llmsim validate --system` replacements); empty: the recipe's own.
using system_choice = std::function<std::string(const std::string& recipe_system)>;

/// Loads a system: a file, or, when `file` is not an existing regular file, a catalogue name
/// (`load_system("h100-sxm")`, see `catalogue::systems`); overrides as for `load_model`.
inline system_config load_system(const std::filesystem::path& file, const load_options& opt = {},
                                 const value& overrides = value::object()) {
  const std::string name = file.string();
  const system_spec* entry = detail::is_regular_file(file) ? nullptr : catalogue::find_system(name);
  const std::string source = entry ? "catalogue system " + name : name;
  value v = entry ? to_json(*entry) : detail::read_config(file, "system");
  merge_overrides(v, overrides, source + " (with overrides)");
  return parse_system(v, source, opt);
}

/// Validates a model and a strategy together (the rules that need no system); an error about
/// `model.*` names the model file, any other the strategy file.
inline void validate_files(const model_spec& m, const std::string& model_file, const strategy_spec& s,
                           const std::string& strategy_file) {
  try {
    validate(m, s);
  } catch (const config_error& e) {
    if (e.field().rfind("model.", 0) == 0) throw e.in_file(model_file);
    throw e.in_file(strategy_file);
  }
}

/// Validates the three together; an error about `model.*` or `strategy.*` names that file.
inline void validate_files(const model_spec& m, const std::string& model_file, const strategy_spec& s,
                           const std::string& strategy_file, const system_spec& sys, const std::string& system_file) {
  try {
    validate(m, s, sys);
  } catch (const config_error& e) {
    const auto& f = e.field();
    if (f.rfind("model.", 0) == 0) throw e.in_file(model_file);
    if (f.rfind("system.", 0) == 0) throw e.in_file(system_file);
    throw e.in_file(strategy_file);
  }
}

// ---- results -------------------------------------------------------------------------------------

namespace detail {
inline value to_json(const time_breakdown& b) {
  auto ms = [](seconds t) { return t.ms(); };
  return {{"fwd_compute_time", ms(b.fwd_compute_time)},     {"bwd_compute_time", ms(b.bwd_compute_time)},
          {"recompute_time", ms(b.recompute_time)},         {"intra_exposed_time", ms(b.intra_exposed_time)},
          {"inter_exposed_time", ms(b.inter_exposed_time)}, {"bubble_time", ms(b.bubble_time)},
          {"dp_exposed_time", ms(b.dp_exposed_time)},       {"optim_time", ms(b.optim_time)},
          {"straggler_time", ms(b.straggler_time)}};
}
/// Which ranks a stage stands for and what they hold.
inline value stage_ranks(const stage_result& st) {
  return {{"rank", st.rank},
          {"last_rank", st.last_rank},
          {"rank_count", st.rank_count},
          {"layers", st.layers},
          {"dense_layers", st.layout.dense_layers},
          {"moe_layers", st.layers - st.layout.dense_layers},
          {"embedding", st.layout.embedding},
          {"head", st.layout.head}};
}
inline value stage_time_json(const stage_result& st) {
  auto ms = [](seconds t) { return t.ms(); };
  value v = stage_ranks(st);
  v.update({{"fwd_compute_time", ms(st.fwd_compute_time)},
            {"bwd_compute_time", ms(st.bwd_compute_time)},
            {"bwd_weight_time", ms(st.bwd_weight_time)},
            {"recompute_time", ms(st.recompute_time)},
            {"fwd_tp_comm_time", ms(st.fwd_tp_comm_time)},
            {"bwd_tp_comm_time", ms(st.bwd_tp_comm_time)},
            {"p2p_time", ms(st.p2p_time)},
            {"chunk_time", ms(st.chunk_time)},
            {"dp_time", ms(st.dp_time)},
            {"dp_exposed_time", ms(st.dp_exposed_time)},
            {"optim_time", ms(st.optim_time)},
            {"dp_buckets", st.dp_buckets},
            {"breakdown_result", to_json(st.breakdown)}});
  // ZeRO-2/3 and optimizer offload only (the keys of other jobs stay as they were).
  if (st.fwd_shard_comm_time.value + st.bwd_shard_comm_time.value > 0)
    v.update({{"fwd_shard_comm_time", ms(st.fwd_shard_comm_time)},
              {"bwd_shard_comm_time", ms(st.bwd_shard_comm_time)},
              {"fwd_shard_exposed_time", ms(st.fwd_shard_exposed_time)},
              {"bwd_shard_exposed_time", ms(st.bwd_shard_exposed_time)},
              {"dp_comm_bytes", st.dp_comm_bytes}});
  if (st.host_optimizer_time.value > 0) v["host_optimizer_time"] = ms(st.host_optimizer_time);
  if (st.muon_ns_time.value > 0) {
    v["muon_ns_time"] = ms(st.muon_ns_time);
    v["muon_params"] = st.muon_params;
  }
  return v;
}
inline value stage_memory_json(const estimate_result& r, std::size_t i) {
  auto gib = [](bytes b) { return b.gib(); };
  const auto& st = r.stages[i];
  value v = stage_ranks(st);
  v.update({{"params", st.params},
            {"model_mem", gib(st.model_mem)},
            {"weight_mem", gib(st.weight_mem)},
            {"grad_mem", gib(st.grad_mem)},
            {"optimizer_state_mem", gib(st.optimizer_state_mem)},
            {"te_dummy_wgrad_mem", gib(st.te_dummy_wgrad_mem)},
            {"workspace_mem", gib(st.workspace_mem)},
            {"fwd_activation_cache_per_micro_batch", gib(st.fwd_activation_cache_per_micro_batch)},
            {"peak_activation_mem_in_1F1B", gib(st.peak_activation_mem_in_1F1B)},
            {"micro_batches_in_flight", st.micro_batches_in_flight},
            {"fwd_peak_allocated_mem", gib(st.fwd_peak_allocated_mem)},
            {"bwd_peak_allocated_mem", gib(st.bwd_peak_allocated_mem)},
            {"peak_mem", gib(st.peak_mem)},
            {"peak_mem_with_reserved", gib(st.peak_mem_with_reserved)},
            {"memory_reserved_ratio", r.mem.memory_reserved_ratio},
            {"peak_path", format_peak_path(r, i)}});
  if (st.gathered_param_mem.value + st.unsharded_grad_mem.value > 0)
    v.update({{"gathered_param_mem", gib(st.gathered_param_mem)}, {"unsharded_grad_mem", gib(st.unsharded_grad_mem)}});
  return v;
}
}  // namespace detail

/// A training run's cost (`training_cost`): null dollars when no price was given.
inline value to_json(const training_run_cost& c) {
  auto optional = [](const std::optional<double>& v) { return v ? value(*v) : value(nullptr); };
  return {{"tokens", c.tokens},
          {"tokens_per_step", c.tokens_per_step},
          {"steps", c.steps},
          {"seconds", c.seconds},
          {"days", c.days},
          {"gpu_hours", c.gpu_hours},
          {"usd_per_gpu_hour", optional(c.usd_per_gpu_hour)},
          {"usd", optional(c.usd)}};
}

/// An estimate as JSON with SimuMax's field names; times in milliseconds, memory in GiB (2^30
/// bytes). Stages are keyed by `stage_name` (first_stage, middle_stage or middle_stage[a-b],
/// last_stage); `breakdown_result` is the bounding stage's, and every stage has its own.
inline value to_json(const estimate_result& r) {
  auto ms = [](seconds t) { return t.ms(); };
  auto gib = [](bytes b) { return b.gib(); };
  const auto& c = r.cost;
  value cost = value::object();
  cost["duration_time_per_iter"] = ms(c.duration_time_per_iter);
  cost["pipeline_time"] = ms(c.pipeline_time);
  cost["mfu"] = c.mfu;
  cost["mfu_6nd_with_attn"] = c.mfu_6nd_with_attn;
  cost["throughput_per_accelerator"] = c.throughput_per_accelerator;
  cost["all_tokens_per_iter"] = c.all_tokens_per_iter;
  cost["model_flops_per_accelerator"] = c.model_flops_per_iter.value;
  cost["bounding_stage"] = stage_name(r, static_cast<std::size_t>(c.bounding_stage));
  cost["critical_rank"] = c.critical_rank;
  cost["critical_stream"] = std::string(critical_stream_names[static_cast<std::size_t>(c.critical_stream)]);
  cost["breakdown_result"] = detail::to_json(c.breakdown_result);
  cost["comm_result"] = {{"tp_net", std::string(c.comm_result.tp_net)},
                         {"pp_net", std::string(c.comm_result.pp_net)},
                         {"dp_net", std::string(c.comm_result.dp_net)},
                         {"ep_net", std::string(c.comm_result.ep_net)},
                         {"tp_time_per_iter", ms(c.comm_result.tp_time_per_iter)},
                         {"p2p_time_per_transfer", ms(c.comm_result.p2p_time_per_transfer)},
                         {"dp_time", ms(c.comm_result.dp_time)}};
  if (!c.comm_result.cp_a2a_net.empty()) {  // context parallelism only (cp_size > 1)
    cost["comm_result"]["cp_a2a_net"] = std::string(c.comm_result.cp_a2a_net);
    cost["comm_result"]["cp_ring_net"] = std::string(c.comm_result.cp_ring_net);
  }
  cost["compute_details"] = {{"efficiency_lookups", c.efficiency_lookups},
                             {"efficiency_misses", c.efficiency_misses},
                             {"efficiency_interpolated", c.efficiency_interpolated},
                             {"efficiency_modelled", c.efficiency_modelled}};
  value chunks = value::object(), mem = value::object();
  for (std::size_t i = 0; i < r.stage_count; ++i) {
    const std::string name = stage_name(r, i);
    chunks[name] = detail::stage_time_json(r.stages[i]);
    mem[name] = detail::stage_memory_json(r, i);
  }
  cost["chunk_time"] = chunks;
  mem["peak_mem"] = gib(r.mem.peak_mem);
  mem["peak_mem_with_reserved"] = gib(r.mem.peak_mem_with_reserved);
  mem["memory_reserved_ratio"] = r.mem.memory_reserved_ratio;
  mem["peak_stage"] = stage_name(r, static_cast<std::size_t>(r.mem.peak_stage));
  mem["device_mem"] = gib(r.mem.device_mem);
  mem["fits"] = r.mem.fits;
  mem["over_by"] = gib(r.mem.over_by);
  mem["verdict"] = memory_verdict(r);
  return {{"units", {{"time", "ms"}, {"memory", "GiB"}}},
          {"param_count", r.param_count},
          {"active_param_count", r.active_param_count},
          {"padded_vocab", r.padded_vocab},
          {"compute_capability", r.compute_capability},
          {"notes", notes_of(r)},
          {"cost_result", cost},
          {"mem_result", mem}};
}

namespace detail {
/// Writes `text` as a JSON string.
inline void write_json_string(std::ostream& out, std::string_view text) {
  out << '"';
  for (const char ch : text) {
    if (ch == '"' || ch == '\\') {
      out << '\\' << ch;
    } else if (static_cast<unsigned char>(ch) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(static_cast<unsigned char>(ch)));
      out << buf;
    } else {
      out << ch;
    }
  }
  out << '"';
}
/// Writes `x` as the shortest JSON number that reads back as it.
inline void write_json_number(std::ostream& out, double x) {
  char buf[32];
  const auto res = std::to_chars(buf, buf + sizeof buf, std::isfinite(x) ? x : 0.0);
  out.write(buf, res.ptr - buf);
}
/// The metadata of a rank: its process name (rank and stage) and a named thread per stream.
inline void write_trace_rank(std::ostream& out, const iteration_trace& t, std::int64_t rank) {
  const std::string process = "rank " + std::to_string(rank) + " (" +
                              stage_name(t.estimate, t.rank_stage[static_cast<std::size_t>(rank)]) + ")";
  out << "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":" << rank << ",\"args\":{\"name\":";
  write_json_string(out, process);
  out << "}},\n{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":" << rank << ",\"args\":{\"sort_index\":" << rank
      << "}}";
  // The context-parallel thread only for jobs that use it (cp_size > 1).
  const bool context_parallel = std::any_of(
      t.spans.begin(), t.spans.end(), [](const trace_span& sp) { return sp.stream == trace_stream::context_parallel; });
  for (std::size_t k = 0; k < trace_stream_names.size(); ++k) {
    if (k == static_cast<std::size_t>(trace_stream::context_parallel) && !context_parallel) continue;
    out << ",\n{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":" << rank << ",\"tid\":" << k << ",\"args\":{\"name\":";
    write_json_string(out, trace_stream_names[k]);
    out << "}},\n{\"ph\":\"M\",\"name\":\"thread_sort_index\",\"pid\":" << rank << ",\"tid\":" << k
        << ",\"args\":{\"sort_index\":" << k << "}}";
  }
}
/// The arguments of an op span: its module and kind, pass, shape key, group, FLOPs (compute ops),
/// bytes, micro-batch, chunk, layer (and with interleaving its own priced time).
inline void write_op_args(std::ostream& out, const iteration_trace& t, const trace_span& sp) {
  const trace_op& o = t.ops[static_cast<std::size_t>(sp.op)];
  out << ",\"args\":{\"module\":";
  write_json_string(out, sp.name);
  out << ",\"kind\":\"" << op_kind_name(o.o) << "\",\"pass\":\"" << trace_pass_names[sp.pass] << '"';
  if (!o.shape.empty()) {
    out << ",\"shape\":";
    write_json_string(out, o.shape);
  }
  if (o.o.kind == op_kind::collective)
    out << ",\"group\":\"" << comm_group_names[static_cast<std::size_t>(o.o.group)] << '"';
  if (o.o.flops > 0) {
    out << ",\"flops\":";
    write_json_number(out, o.o.flops);
  }
  out << ",\"bytes\":";
  write_json_number(out, o.o.bytes);
  if (t.max_time_rescale > 0) {  // interleaved: spans scaled to the chunk's share; the op's own time
    out << ",\"priced_us\":";
    write_json_number(out, o.time.value * 1e6);
  }
  out << ",\"micro_batch\":" << sp.micro_batch << ",\"chunk\":" << sp.chunk << ",\"layer\":" << sp.layer << '}';
}
/// One span as a complete event ("X"), times in microseconds.
inline void write_trace_span(std::ostream& out, const iteration_trace& t, const trace_span& sp) {
  out << ",\n{\"ph\":\"X\",\"name\":";
  if (sp.op >= 0) {
    write_json_string(out,
                      std::string(sp.name) + " " + std::string(op_kind_name(t.ops[static_cast<std::size_t>(sp.op)].o)));
  } else {
    write_json_string(out, sp.name);
  }
  out << ",\"pid\":" << sp.rank << ",\"tid\":" << static_cast<int>(sp.stream) << ",\"ts\":";
  write_json_number(out, sp.start * 1e6);
  out << ",\"dur\":";
  write_json_number(out, (sp.end - sp.start) * 1e6);
  if (sp.op >= 0) {
    write_op_args(out, t, sp);
  } else if (sp.micro_batch >= 0) {
    out << ",\"args\":{\"micro_batch\":" << sp.micro_batch << ",\"chunk\":" << sp.chunk << '}';
  }
  out << '}';
}
}  // namespace detail

/// Writes a timeline in Chrome's trace-event format (opens in Perfetto and chrome://tracing),
/// streamed (a large job has millions of op spans): a process per pipeline rank, a thread per
/// stream (trace_stream_names), a complete event per span (times in microseconds) — passes with
/// their micro-batch and chunk, ops named "<module> <kind>" with their pass, shape key, FLOPs,
/// bytes, micro-batch, chunk and layer — and a counter track of each rank's allocated
/// memory in GiB. `otherData` holds the iteration time, the peak and the critical path.
inline void write_chrome_trace(std::ostream& out, const iteration_trace& t) {
  const auto& c = t.estimate.cost;
  out << "{\"displayTimeUnit\":\"ms\",\"otherData\":{\"duration_time_per_iter_ms\":";
  detail::write_json_number(out, c.duration_time_per_iter.ms());
  out << ",\"peak_mem_gib\":";
  detail::write_json_number(out, t.estimate.mem.peak_mem.gib());
  out << ",\"critical_rank\":" << c.critical_rank << ",\"critical_stream\":\""
      << critical_stream_names[static_cast<std::size_t>(c.critical_stream)] << "\",\"max_time_rescale\":";
  detail::write_json_number(out, t.max_time_rescale);
  out << "},\n\"traceEvents\":[\n";
  for (std::size_t rank = 0; rank < t.rank_stage.size(); ++rank) {
    if (rank > 0) out << ",\n";
    detail::write_trace_rank(out, t, static_cast<std::int64_t>(rank));
  }
  for (const auto& sp : t.spans) detail::write_trace_span(out, t, sp);
  for (const auto& m : t.memory) {
    out << ",\n{\"ph\":\"C\",\"name\":\"allocated memory (GiB)\",\"pid\":" << m.rank << ",\"ts\":";
    detail::write_json_number(out, m.time * 1e6);
    out << ",\"args\":{\"GiB\":";
    detail::write_json_number(out, m.bytes / 1073741824.0);
    out << "}}";
  }
  out << "\n]}\n";
}

/// The same timeline as a JSON value (small jobs; files are better streamed by write_chrome_trace).
inline value to_chrome_trace(const iteration_trace& t) {
  std::ostringstream out;
  write_chrome_trace(out, t);
  return value::parse(out.str());
}

/// `llmsim::perf_llm` that also takes file paths and owns what it loaded.
class perf_llm : public llmsim::perf_llm {
 public:
  /// Configures from specs: no strategy file to name in the estimate's refusals.
  void configure(const strategy_spec& strategy, const model_spec& model, const system_spec& system) {
    llmsim::perf_llm::configure(strategy, model, system);
    strategy_file_.clear();
  }
  /// Loads the three files or catalogue names (with optional overrides, merged as
  /// `merge_overrides` does: keys may be dotted, `{"accelerator.mem_gbs": 141}`) and configures.
  void configure(const std::filesystem::path& strategy_file, const std::filesystem::path& model_file,
                 const std::filesystem::path& system_file, const load_options& opt = {},
                 const value& strategy_overrides = value::object(), const value& model_overrides = value::object(),
                 const value& system_overrides = value::object()) {
    const auto strategy = load_strategy(strategy_file, opt, strategy_overrides);
    const auto model = load_model(model_file, opt, model_overrides);
    system_ = load_system(system_file, opt, system_overrides);
    validate_files(model, model_file.string(), strategy, strategy_file.string(), system_.spec(), system_file.string());
    configure(strategy, model, system_.spec());
    strategy_file_ = strategy_file.string();
  }
  /// Keeps a loaded system alive and configures with it.
  void configure(const strategy_spec& strategy, const model_spec& model, const system_config& system) {
    system_ = system;
    configure(strategy, model, system_.spec());
  }
  /// Runs the estimate. Its refusals (a feature the strategy asks for that this model or schedule
  /// cannot run) name a strategy field but no file: they are reported against `strategy_file`.
  void run_estimate(const std::string& strategy_file) {
    try {
      llmsim::perf_llm::run_estimate();
    } catch (const config_error& e) {
      if (!e.file().empty() || strategy_file.empty()) throw;
      throw e.in_file(strategy_file);
    }
  }
  /// ... against the strategy file `configure` read (none after configuring from specs).
  void run_estimate() { run_estimate(strategy_file_); }

 private:
  system_config system_;
  std::string strategy_file_;
};

/// What `llmsim perf --format json` prints of an estimated job (the CLI adds training_cost and
/// exit_status): the result, its model and strategy, the system's name, the configs' warnings.
inline value perf_document(const llmsim::perf_llm& perf, const std::vector<std::string>& warnings) {
  value out = to_json(perf.result());
  out["model"] = to_json(perf.model());
  out["strategy"] = to_json(perf.strategy());
  out["system"] = std::string(perf.system().sys_name.view());
  out["warnings"] = warnings;
  return out;
}

}  // namespace json
LLMSIM_END_NAMESPACE
