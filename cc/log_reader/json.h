// A small strict JSON parser for the lines of LLVM's training-log stream.
//
// It accepts exactly what Python's json module accepts when called the way
// mlgo/log/pyreader.py calls it (no NaN/Infinity, no duplicate keys, nesting at
// most kMaxDepth, integer literals of at most kMaxIntDigits digits), so the native
// and the reference reader agree on every input. Strings are kept as WTF-8: an
// escaped lone surrogate is encoded as its 3-byte sequence and flagged.
#ifndef MLGO_CC_LOG_READER_JSON_H_
#define MLGO_CC_LOG_READER_JSON_H_

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace mlgo::logreader {

inline constexpr int kMaxJsonDepth = 64;
inline constexpr size_t kMaxIntDigits = 4300;

struct JsonError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct JsonValue {
  enum class Kind { kNull, kBool, kInt, kBigInt, kFloat, kString, kArray, kObject };
  Kind kind = Kind::kNull;
  bool boolean = false;
  int64_t integer = 0;        // kInt
  bool negative = false;      // kBigInt: sign of an integer outside int64
  std::string str;            // kString (WTF-8)
  bool lone_surrogate = false;  // kString contains an escaped lone surrogate
  std::vector<JsonValue> array;
  std::vector<std::pair<std::string, JsonValue>> object;

  bool is_int() const { return kind == Kind::kInt; }
  // Member of an object, or nullptr.
  const JsonValue* Find(const std::string& key) const;
};

// True if [data, data+size) is valid UTF-8 (no overlongs, no surrogates,
// nothing above U+10FFFF), the rule Python's strict utf-8 codec applies.
bool IsValidUtf8(const char* data, size_t size);

// Parses one complete JSON text. Throws JsonError with a short description.
JsonValue ParseJson(const char* data, size_t size);

}  // namespace mlgo::logreader

#endif  // MLGO_CC_LOG_READER_JSON_H_
