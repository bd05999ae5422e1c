// A small, strict JSON reader and writer (RFC 8259), for the files the framework reads
// from other tools: safetensors headers, Hugging Face config.json and index files.
// Invariants:
//  - parse() accepts exactly one JSON value surrounded by optional whitespace; anything
//    else (trailing commas, comments, NaN, leading zeros, control characters in strings,
//    unpaired surrogates, duplicate object keys, invalid UTF-8 escapes) is a UserError
//    "<source>: JSON error at byte N: <what>".
//  - Input size and nesting depth are bounded (Limits), so a hostile file cannot exhaust
//    memory or the stack.
//  - Strings are UTF-8; \uXXXX escapes (with surrogate pairs) are decoded to UTF-8.
//  - Numbers are kept as double; a number written without fraction or exponent that fits
//    in int64 is also kept exactly as int64 (is_int()).
//  - Objects keep their members in file order (the writer writes them in that order).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace vlm::json {

enum class Type { Null, Bool, Number, String, Array, Object };
const char* type_name(Type t);

class Value {
 public:
  using Array = std::vector<Value>;
  using Object = std::vector<std::pair<std::string, Value>>;

  Value() = default;  // null
  static Value null() { return Value(); }
  static Value boolean(bool b);
  static Value number(double d);
  // A float as the number of its shortest decimal form (1e-06, not 9.99999997e-07),
  // which reads back to the same float (config.json values written by exports).
  static Value float_number(float f);
  static Value integer(int64_t i);
  static Value string(std::string s);
  static Value array(Array a = {});
  static Value object(Object o = {});

  Type type() const { return type_; }
  bool is_null() const { return type_ == Type::Null; }
  bool is_bool() const { return type_ == Type::Bool; }
  bool is_number() const { return type_ == Type::Number; }
  bool is_int() const { return type_ == Type::Number && is_int_; }
  bool is_string() const { return type_ == Type::String; }
  bool is_array() const { return type_ == Type::Array; }
  bool is_object() const { return type_ == Type::Object; }

  // Typed access; a wrong type throws UserError "<what>: expected T, got U".
  bool as_bool(std::string_view what = "value") const;
  double as_double(std::string_view what = "value") const;
  int64_t as_int(std::string_view what = "value") const;  // must be an exact integer
  const std::string& as_string(std::string_view what = "value") const;
  const Array& as_array(std::string_view what = "value") const;
  const Object& as_object(std::string_view what = "value") const;
  Array& mutable_array();
  Object& mutable_object();

  // Object member lookup: find() returns nullptr when absent (or not an object);
  // at() throws UserError "<what>: missing key 'k'".
  const Value* find(std::string_view key) const;
  const Value& at(std::string_view key, std::string_view what = "object") const;
  // Appends a member to an object (no duplicate check: the writer's caller owns keys).
  Value& set(std::string key, Value v);

 private:
  Type type_ = Type::Null;
  bool b_ = false;
  bool is_int_ = false;
  double d_ = 0.0;
  int64_t i_ = 0;
  std::string s_;
  Array a_;
  Object o_;
};

struct Limits {
  size_t max_bytes = size_t(64) << 20;  // whole document
  int max_depth = 64;                   // nested arrays/objects
};

// Parses `text`; `source` names the file (or "header of X") in error messages.
Value parse(std::string_view text, std::string_view source = "JSON", const Limits& lim = {});
// Reads (read_file_bounded: at most lim.max_bytes) and parses a file.
Value parse_file(const std::string& path, const Limits& lim = {});

// Range-checked numbers, for the sizes and constants of files such as config.json.
// `what` names the value, conventionally "<file>: <key>"; a value of the wrong type,
// not an exact integer (int_in), or outside [lo, hi] throws the one-line UserError
// "<what>=<value as written>: expected an integer in [lo, hi]" (or "a number in").
int64_t int_in(const Value& v, int64_t lo, int64_t hi, std::string_view what);
double double_in(const Value& v, double lo, double hi, std::string_view what);

// Compact serialisation (no whitespace); members in stored order. Non-finite numbers
// are refused (UserError), since JSON cannot represent them.
std::string write(const Value& v);
// Appends the JSON string literal of s (quotes and escapes) to out.
void write_string(std::string& out, std::string_view s);

}  // namespace vlm::json
