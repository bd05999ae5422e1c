// Strict recursive-descent JSON parser and compact writer (see base/json.h).
// The parser keeps a byte cursor into the input; every error names the source and the
// byte offset where it was detected. Depth is counted on entry to arrays/objects.
#include "base/json.h"

#include <charconv>
#include <cmath>
#include <limits>
#include <system_error>
#include <unordered_set>

#include "base/error.h"
#include "base/file_read.h"

namespace vlm::json {

const char* type_name(Type t) {
  switch (t) {
    case Type::Null: return "null";
    case Type::Bool: return "boolean";
    case Type::Number: return "number";
    case Type::String: return "string";
    case Type::Array: return "array";
    case Type::Object: return "object";
  }
  return "?";
}

// ---- Value -------------------------------------------------------------------------

Value Value::boolean(bool b) { Value v; v.type_ = Type::Bool; v.b_ = b; return v; }
Value Value::number(double d) { Value v; v.type_ = Type::Number; v.d_ = d; return v; }
Value Value::float_number(float f) {
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, f);
  double d = 0;
  std::from_chars(buf, r.ptr, d);
  return number(d);
}
Value Value::integer(int64_t i) {
  Value v;
  v.type_ = Type::Number;
  v.d_ = double(i);
  v.i_ = i;
  v.is_int_ = true;
  return v;
}
Value Value::string(std::string s) { Value v; v.type_ = Type::String; v.s_ = std::move(s); return v; }
Value Value::array(Array a) { Value v; v.type_ = Type::Array; v.a_ = std::move(a); return v; }
Value Value::object(Object o) { Value v; v.type_ = Type::Object; v.o_ = std::move(o); return v; }

static void expect_type(Type have, Type want, std::string_view what) {
  if (have != want)
    throw UserError(cat(what, ": expected a JSON ", type_name(want), ", got ", type_name(have)));
}

bool Value::as_bool(std::string_view what) const { expect_type(type_, Type::Bool, what); return b_; }
double Value::as_double(std::string_view what) const { expect_type(type_, Type::Number, what); return d_; }
int64_t Value::as_int(std::string_view what) const {
  expect_type(type_, Type::Number, what);
  if (!is_int_) throw UserError(cat(what, ": expected an integer, got ", d_));
  return i_;
}
const std::string& Value::as_string(std::string_view what) const { expect_type(type_, Type::String, what); return s_; }
const Value::Array& Value::as_array(std::string_view what) const { expect_type(type_, Type::Array, what); return a_; }
const Value::Object& Value::as_object(std::string_view what) const { expect_type(type_, Type::Object, what); return o_; }
Value::Array& Value::mutable_array() { expect_type(type_, Type::Array, "value"); return a_; }
Value::Object& Value::mutable_object() { expect_type(type_, Type::Object, "value"); return o_; }

const Value* Value::find(std::string_view key) const {
  if (type_ != Type::Object) return nullptr;
  for (const auto& [k, v] : o_)
    if (k == key) return &v;
  return nullptr;
}

const Value& Value::at(std::string_view key, std::string_view what) const {
  expect_type(type_, Type::Object, what);
  const Value* v = find(key);
  if (!v) throw UserError(cat(what, ": missing key '", key, "'"));
  return *v;
}

Value& Value::set(std::string key, Value v) {
  expect_type(type_, Type::Object, "value");
  o_.emplace_back(std::move(key), std::move(v));
  return o_.back().second;
}

// ---- parser ------------------------------------------------------------------------

namespace {

constexpr size_t kScanKeys = 16;

class Parser {
 public:
  Parser(std::string_view text, std::string_view source, const Limits& lim)
      : s_(text), src_(source), lim_(lim) {}

  Value document() {
    if (s_.size() > lim_.max_bytes)
      fail(cat("document of ", s_.size(), " bytes exceeds the limit of ", lim_.max_bytes));
    ws();
    Value v = value(0);
    ws();
    if (p_ != s_.size()) fail("unexpected data after the JSON value");
    return v;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw UserError(cat(src_, ": JSON error at byte ", p_, ": ", what));
  }
  bool eof() const { return p_ >= s_.size(); }
  char peek() const { return eof() ? '\0' : s_[p_]; }
  void ws() {
    while (!eof() && (s_[p_] == ' ' || s_[p_] == '\t' || s_[p_] == '\n' || s_[p_] == '\r')) ++p_;
  }
  void expect(char c) {
    if (peek() != c || eof()) fail(cat("expected '", c, "'"));
    ++p_;
  }
  void literal(std::string_view word) {
    if (s_.substr(p_, word.size()) != word) fail("invalid literal");
    p_ += word.size();
  }

  Value value(int depth) {
    if (eof()) fail("unexpected end of input");
    switch (peek()) {
      case '{': return object(depth + 1);
      case '[': return array(depth + 1);
      case '"': return Value::string(string());
      case 't': literal("true"); return Value::boolean(true);
      case 'f': literal("false"); return Value::boolean(false);
      case 'n': literal("null"); return Value::null();
      default: return number();
    }
  }

  void check_depth(int depth) {
    if (depth > lim_.max_depth) fail(cat("nesting deeper than ", lim_.max_depth));
  }

  Value object(int depth) {
    check_depth(depth);
    expect('{');
    Value v = Value::object();
    auto& members = v.mutable_object();
    // Duplicate keys: a scan while the object is small, a hash set beyond (a vocabulary
    // of 150k entries would otherwise cost 10^10 comparisons).
    std::unordered_set<std::string> keys;
    ws();
    if (peek() == '}') { ++p_; return v; }
    for (;;) {
      ws();
      if (peek() != '"') fail("expected a string key");
      size_t key_at = p_;
      std::string key = string();
      bool dup = false;
      if (members.size() < kScanKeys) {
        for (const auto& m : members) dup = dup || m.first == key;
      } else {
        if (keys.empty())
          for (const auto& m : members) keys.insert(m.first);
        dup = !keys.insert(key).second;
      }
      if (dup) { p_ = key_at; fail(cat("duplicate key '", key, "'")); }
      ws();
      expect(':');
      ws();
      members.emplace_back(std::move(key), value(depth));
      ws();
      if (peek() == ',') { ++p_; continue; }
      if (peek() == '}') { ++p_; return v; }
      fail("expected ',' or '}' in object");
    }
  }

  Value array(int depth) {
    check_depth(depth);
    expect('[');
    Value v = Value::array();
    auto& items = v.mutable_array();
    ws();
    if (peek() == ']') { ++p_; return v; }
    for (;;) {
      ws();
      items.push_back(value(depth));
      ws();
      if (peek() == ',') { ++p_; continue; }
      if (peek() == ']') { ++p_; return v; }
      fail("expected ',' or ']' in array");
    }
  }

  unsigned hex4() {
    if (p_ + 4 > s_.size()) fail("truncated \\u escape");
    unsigned u = 0;
    for (int k = 0; k < 4; ++k) {
      char c = s_[p_++];
      u <<= 4;
      if (c >= '0' && c <= '9') u |= unsigned(c - '0');
      else if (c >= 'a' && c <= 'f') u |= unsigned(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F') u |= unsigned(c - 'A' + 10);
      else { --p_; fail("bad hex digit in \\u escape"); }
    }
    return u;
  }

  static void put_utf8(std::string& out, unsigned cp) {
    if (cp < 0x80) {
      out += char(cp);
    } else if (cp < 0x800) {
      out += char(0xC0 | (cp >> 6));
      out += char(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += char(0xE0 | (cp >> 12));
      out += char(0x80 | ((cp >> 6) & 0x3F));
      out += char(0x80 | (cp & 0x3F));
    } else {
      out += char(0xF0 | (cp >> 18));
      out += char(0x80 | ((cp >> 12) & 0x3F));
      out += char(0x80 | ((cp >> 6) & 0x3F));
      out += char(0x80 | (cp & 0x3F));
    }
  }

  // Copies one raw UTF-8 sequence starting at p_, validating it (no overlongs,
  // no surrogates, <= U+10FFFF).
  void raw_utf8(std::string& out) {
    auto b0 = static_cast<unsigned char>(s_[p_]);
    int n = 0;
    unsigned cp = 0, min = 0;
    if (b0 < 0x80) { out += char(b0); ++p_; return; }
    if ((b0 & 0xE0) == 0xC0) { n = 1; cp = b0 & 0x1F; min = 0x80; }
    else if ((b0 & 0xF0) == 0xE0) { n = 2; cp = b0 & 0x0F; min = 0x800; }
    else if ((b0 & 0xF8) == 0xF0) { n = 3; cp = b0 & 0x07; min = 0x10000; }
    else fail("invalid UTF-8 lead byte");
    if (p_ + size_t(n) >= s_.size()) fail("truncated UTF-8 sequence");
    for (int k = 1; k <= n; ++k) {
      auto b = static_cast<unsigned char>(s_[p_ + size_t(k)]);
      if ((b & 0xC0) != 0x80) fail("invalid UTF-8 continuation byte");
      cp = (cp << 6) | (b & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) fail("invalid UTF-8 code point");
    out.append(s_.substr(p_, size_t(n) + 1));
    p_ += size_t(n) + 1;
  }

  std::string string() {
    expect('"');
    std::string out;
    for (;;) {
      if (eof()) fail("unterminated string");
      char c = s_[p_];
      if (c == '"') { ++p_; return out; }
      if (static_cast<unsigned char>(c) < 0x20) fail("control character in string");
      if (c != '\\') { raw_utf8(out); continue; }
      ++p_;
      if (eof()) fail("unterminated escape");
      char e = s_[p_++];
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          unsigned cp = hex4();
          if (cp >= 0xDC00 && cp <= 0xDFFF) fail("unpaired low surrogate");
          if (cp >= 0xD800 && cp <= 0xDBFF) {
            if (s_.substr(p_, 2) != "\\u") fail("high surrogate not followed by \\u");
            p_ += 2;
            unsigned lo = hex4();
            if (lo < 0xDC00 || lo > 0xDFFF) fail("high surrogate not followed by a low surrogate");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          }
          put_utf8(out, cp);
          break;
        }
        default: --p_; fail(cat("invalid escape '\\", e, "'"));
      }
    }
  }

  static bool digit(char c) { return c >= '0' && c <= '9'; }

  Value number() {
    size_t start = p_;
    bool integral = true;
    if (peek() == '-') ++p_;
    if (!digit(peek()) || eof()) fail("invalid value");
    if (peek() == '0') {
      ++p_;
      if (digit(peek()) && !eof()) fail("leading zero in number");
    } else {
      while (!eof() && digit(peek())) ++p_;
    }
    if (!eof() && peek() == '.') {
      integral = false;
      ++p_;
      if (eof() || !digit(peek())) fail("expected a digit after '.'");
      while (!eof() && digit(peek())) ++p_;
    }
    if (!eof() && (peek() == 'e' || peek() == 'E')) {
      integral = false;
      ++p_;
      if (!eof() && (peek() == '+' || peek() == '-')) ++p_;
      if (eof() || !digit(peek())) fail("expected a digit in the exponent");
      while (!eof() && digit(peek())) ++p_;
    }
    const char* b = s_.data() + start;
    const char* e = s_.data() + p_;
    if (integral) {
      int64_t i = 0;
      auto r = std::from_chars(b, e, i);
      if (r.ec == std::errc() && r.ptr == e) return Value::integer(i);
      // Out of int64 range: keep it as a double only.
    }
    double d = 0.0;
    auto r = std::from_chars(b, e, d);
    if (r.ec == std::errc::result_out_of_range) { p_ = start; fail("number out of range"); }
    if (r.ec != std::errc() || r.ptr != e) { p_ = start; fail("invalid number"); }
    return Value::number(d);
  }

  std::string_view s_;
  std::string_view src_;
  Limits lim_;
  size_t p_ = 0;
};

}  // namespace

Value parse(std::string_view text, std::string_view source, const Limits& lim) {
  return Parser(text, source, lim).document();
}

Value parse_file(const std::string& path, const Limits& lim) {
  return parse(read_file_bounded(path, lim.max_bytes, "JSON file"), path, lim);
}

// ---- writer ------------------------------------------------------------------------

void write_string(std::string& out, std::string_view s) {
  static const char* hex = "0123456789abcdef";
  out += '"';
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out += "\\u00";
          out += hex[(c >> 4) & 0xF];
          out += hex[c & 0xF];
        } else {
          out += c;
        }
    }
  }
  out += '"';
}

static void write_to(std::string& out, const Value& v) {
  switch (v.type()) {
    case Type::Null: out += "null"; break;
    case Type::Bool: out += v.as_bool() ? "true" : "false"; break;
    case Type::Number: {
      char buf[64];
      std::to_chars_result r{};
      if (v.is_int()) {
        r = std::to_chars(buf, buf + sizeof buf, v.as_int());
      } else {
        double d = v.as_double();
        if (!std::isfinite(d)) throw UserError(cat("JSON writer: cannot write the number ", d));
        r = std::to_chars(buf, buf + sizeof buf, d);  // shortest round-trip form
      }
      out.append(buf, r.ptr);
      break;
    }
    case Type::String: write_string(out, v.as_string()); break;
    case Type::Array: {
      out += '[';
      bool first = true;
      for (const auto& x : v.as_array()) {
        if (!first) out += ',';
        first = false;
        write_to(out, x);
      }
      out += ']';
      break;
    }
    case Type::Object: {
      out += '{';
      bool first = true;
      for (const auto& [k, x] : v.as_object()) {
        if (!first) out += ',';
        first = false;
        write_string(out, k);
        out += ':';
        write_to(out, x);
      }
      out += '}';
      break;
    }
  }
}

std::string write(const Value& v) {
  std::string out;
  write_to(out, v);
  return out;
}

// ---- range-checked numbers -----------------------------------------------------------

// The value as written in JSON, shortened for one-line messages.
static std::string shown(const Value& v) {
  if (v.is_number() && !std::isfinite(v.as_double())) return cat(v.as_double());
  std::string s = write(v);
  return s.size() > 40 ? s.substr(0, 37) + "..." : s;
}

int64_t int_in(const Value& v, int64_t lo, int64_t hi, std::string_view what) {
  if (!v.is_int() || v.as_int() < lo || v.as_int() > hi)
    throw UserError(cat(what, "=", shown(v), ": expected an integer in [", lo, ", ", hi, "]"));
  return v.as_int();
}

double double_in(const Value& v, double lo, double hi, std::string_view what) {
  // JSON has no NaN or infinity; the check still guards values built in code.
  if (!v.is_number() || !std::isfinite(v.as_double()) || v.as_double() < lo || v.as_double() > hi)
    throw UserError(cat(what, "=", shown(v), ": expected a number in [", lo, ", ", hi, "]"));
  return v.as_double();
}

}  // namespace vlm::json
