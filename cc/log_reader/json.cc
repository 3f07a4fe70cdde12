#include "cc/log_reader/json.h"

#include <cstring>

namespace mlgo::logreader {

const JsonValue* JsonValue::Find(const std::string& key) const {
  for (const auto& kv : object)
    if (kv.first == key) return &kv.second;
  return nullptr;
}

bool IsValidUtf8(const char* data, size_t size) {
  const auto* s = reinterpret_cast<const unsigned char*>(data);
  size_t i = 0;
  while (i < size) {
    unsigned c = s[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t len;
    uint32_t cp;
    if (c >= 0xC2 && c <= 0xDF) {
      len = 2;
      cp = c & 0x1F;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
      cp = c & 0x0F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (size - i < len) return false;
    for (size_t k = 1; k < len; ++k) {
      unsigned cc = s[i + k];
      if ((cc & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3F);
    }
    if ((len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) || cp > 0x10FFFF ||
        (cp >= 0xD800 && cp <= 0xDFFF))
      return false;
    i += len;
  }
  return true;
}

namespace {

class Parser {
 public:
  Parser(const char* data, size_t size) : p_(data), end_(data + size) {}

  JsonValue ParseDocument() {
    SkipWs();
    JsonValue v = ParseValue(0);
    SkipWs();
    if (p_ != end_) Fail("extra data after the JSON value");
    return v;
  }

 private:
  [[noreturn]] void Fail(const char* what) { throw JsonError(what); }

  void SkipWs() {
    while (p_ != end_ && (*p_ == ' ' || *p_ == '\t' || *p_ == '\n' || *p_ == '\r')) ++p_;
  }

  bool Literal(const char* word) {
    size_t n = std::strlen(word);
    if (static_cast<size_t>(end_ - p_) >= n && std::memcmp(p_, word, n) == 0) {
      p_ += n;
      return true;
    }
    return false;
  }

  JsonValue ParseValue(int depth) {
    if (p_ == end_) Fail("unexpected end of JSON");
    JsonValue v;
    switch (*p_) {
      case '{':
        if (depth + 1 > kMaxJsonDepth) Fail("JSON nested too deeply");
        ParseObject(&v, depth + 1);
        return v;
      case '[':
        if (depth + 1 > kMaxJsonDepth) Fail("JSON nested too deeply");
        ParseArray(&v, depth + 1);
        return v;
      case '"':
        v.kind = JsonValue::Kind::kString;
        ParseString(&v.str, &v.lone_surrogate);
        return v;
      case 't':
        if (!Literal("true")) Fail("invalid literal");
        v.kind = JsonValue::Kind::kBool;
        v.boolean = true;
        return v;
      case 'f':
        if (!Literal("false")) Fail("invalid literal");
        v.kind = JsonValue::Kind::kBool;
        return v;
      case 'n':
        if (!Literal("null")) Fail("invalid literal");
        return v;
      default:
        if (*p_ == '-' || (*p_ >= '0' && *p_ <= '9')) {
          ParseNumber(&v);
          return v;
        }
        Fail("unexpected character in JSON");
    }
  }

  void ParseObject(JsonValue* v, int depth) {
    v->kind = JsonValue::Kind::kObject;
    ++p_;  // '{'
    SkipWs();
    if (p_ != end_ && *p_ == '}') {
      ++p_;
      return;
    }
    while (true) {
      SkipWs();
      if (p_ == end_ || *p_ != '"') Fail("expected a string key");
      std::string key;
      bool lone = false;
      ParseString(&key, &lone);
      for (const auto& kv : v->object)
        if (kv.first == key) Fail("duplicate key");
      SkipWs();
      if (p_ == end_ || *p_ != ':') Fail("expected ':'");
      ++p_;
      SkipWs();
      JsonValue member = ParseValue(depth);
      v->object.emplace_back(std::move(key), std::move(member));
      SkipWs();
      if (p_ == end_) Fail("unterminated object");
      if (*p_ == ',') {
        ++p_;
        continue;
      }
      if (*p_ == '}') {
        ++p_;
        return;
      }
      Fail("expected ',' or '}'");
    }
  }

  void ParseArray(JsonValue* v, int depth) {
    v->kind = JsonValue::Kind::kArray;
    ++p_;  // '['
    SkipWs();
    if (p_ != end_ && *p_ == ']') {
      ++p_;
      return;
    }
    while (true) {
      SkipWs();
      v->array.push_back(ParseValue(depth));
      SkipWs();
      if (p_ == end_) Fail("unterminated array");
      if (*p_ == ',') {
        ++p_;
        continue;
      }
      if (*p_ == ']') {
        ++p_;
        return;
      }
      Fail("expected ',' or ']'");
    }
  }

  static void AppendUtf8(std::string* out, uint32_t cp) {
    if (cp < 0x80) {
      out->push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
      out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
      out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
      out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
  }

  uint32_t Hex4() {
    if (end_ - p_ < 4) Fail("truncated \\u escape");
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) {
      char c = *p_++;
      v <<= 4;
      if (c >= '0' && c <= '9') v |= c - '0';
      else if (c >= 'a' && c <= 'f') v |= c - 'a' + 10;
      else if (c >= 'A' && c <= 'F') v |= c - 'A' + 10;
      else Fail("invalid \\u escape");
    }
    return v;
  }

  void ParseString(std::string* out, bool* lone) {
    ++p_;  // opening quote
    while (true) {
      if (p_ == end_) Fail("unterminated string");
      unsigned char c = static_cast<unsigned char>(*p_);
      if (c == '"') {
        ++p_;
        return;
      }
      if (c < 0x20) Fail("control character in string");
      if (c != '\\') {
        out->push_back(static_cast<char>(c));
        ++p_;
        continue;
      }
      ++p_;
      if (p_ == end_) Fail("unterminated string");
      char e = *p_++;
      switch (e) {
        case '"': out->push_back('"'); break;
        case '\\': out->push_back('\\'); break;
        case '/': out->push_back('/'); break;
        case 'b': out->push_back('\b'); break;
        case 'f': out->push_back('\f'); break;
        case 'n': out->push_back('\n'); break;
        case 'r': out->push_back('\r'); break;
        case 't': out->push_back('\t'); break;
        case 'u': {
          uint32_t cp = Hex4();
          if (cp >= 0xD800 && cp <= 0xDBFF && end_ - p_ >= 6 && p_[0] == '\\' &&
              p_[1] == 'u') {
            // A high surrogate followed by an escaped low one is one code point.
            const char* save = p_;
            p_ += 2;
            uint32_t lo = Hex4();
            if (lo >= 0xDC00 && lo <= 0xDFFF) {
              cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            } else {
              p_ = save;
            }
          }
          if (cp >= 0xD800 && cp <= 0xDFFF) *lone = true;
          AppendUtf8(out, cp);
          break;
        }
        default:
          Fail("invalid escape in string");
      }
    }
  }

  void ParseNumber(JsonValue* v) {
    const char* start = p_;
    bool neg = false;
    if (*p_ == '-') {
      neg = true;
      ++p_;
    }
    if (p_ == end_ || *p_ < '0' || *p_ > '9') Fail("invalid number");
    const char* digits = p_;
    if (*p_ == '0') {
      ++p_;
    } else {
      while (p_ != end_ && *p_ >= '0' && *p_ <= '9') ++p_;
    }
    size_t ndigits = p_ - digits;
    bool is_float = false;
    if (p_ != end_ && *p_ == '.' && end_ - p_ >= 2 && p_[1] >= '0' && p_[1] <= '9') {
      is_float = true;
      ++p_;
      while (p_ != end_ && *p_ >= '0' && *p_ <= '9') ++p_;
    }
    if (p_ != end_ && (*p_ == 'e' || *p_ == 'E')) {
      const char* q = p_ + 1;
      if (q != end_ && (*q == '+' || *q == '-')) ++q;
      if (q != end_ && *q >= '0' && *q <= '9') {
        is_float = true;
        p_ = q;
        while (p_ != end_ && *p_ >= '0' && *p_ <= '9') ++p_;
      }
    }
    (void)start;
    if (is_float) {
      v->kind = JsonValue::Kind::kFloat;
      return;
    }
    if (ndigits > kMaxIntDigits) Fail("integer literal too long");
    // Accumulate as a negative number so INT64_MIN fits.
    int64_t acc = 0;
    bool overflow = false;
    for (const char* d = digits; d != digits + ndigits; ++d) {
      int dv = *d - '0';
      if (acc < (INT64_MIN + dv) / 10) {
        overflow = true;
        break;
      }
      acc = acc * 10 - dv;
    }
    if (!overflow && !neg && acc == INT64_MIN) overflow = true;
    if (overflow) {
      v->kind = JsonValue::Kind::kBigInt;
      v->negative = neg;
      return;
    }
    v->kind = JsonValue::Kind::kInt;
    v->integer = neg ? acc : -acc;
  }

  const char* p_;
  const char* end_;
};

}  // namespace

JsonValue ParseJson(const char* data, size_t size) {
  return Parser(data, size).ParseDocument();
}

}  // namespace mlgo::logreader
