// mlgo runtime_check driver for double-conversion. Two workloads:
//  1. every number token of a JSON document is parsed strictly and printed back in
//     shortest, precision and fixed form;
//  2. a deterministic stream of COUNT doubles (random bit patterns, short decimals,
//     integers, binary fractions, values near powers of ten and the range limits,
//     widened floats, money amounts) is printed in the shortest, exponential,
//     precision and fixed modes of two differently configured converters, and the
//     texts are read back (decimal, hexadecimal floats, octal, digit separators,
//     16-bit text, single precision).
// Exact round trips are checked where they must hold; counts and FNV-1a checksums of
// all produced text are printed. Usage: dconv_run FILE.json COUNT
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "double-conversion/double-conversion.h"

using double_conversion::DoubleToStringConverter;
using double_conversion::StringBuilder;
using double_conversion::StringToDoubleConverter;

namespace {

uint64_t Bits(double d) {
  uint64_t b;
  std::memcpy(&b, &d, sizeof b);
  return b;
}

double FromBits(uint64_t b) {
  double d;
  std::memcpy(&d, &b, sizeof d);
  return d;
}

uint32_t FloatBits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, sizeof b);
  return b;
}

float FloatFromBits(uint32_t b) {
  float f;
  std::memcpy(&f, &b, sizeof f);
  return f;
}

// 64-bit linear congruential generator with an output mix (its low bits alone are weak).
struct Rng {
  uint64_t state;
  explicit Rng(uint64_t seed) : state(seed) {}
  uint64_t Next() {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    uint64_t x = state;
    x ^= x >> 31;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 29;
    return x;
  }
  int Below(int n) { return static_cast<int>((Next() >> 33) % static_cast<uint64_t>(n)); }
};

// FNV-1a over every produced string, each followed by a 0 byte.
struct Checksum {
  uint64_t hash = 1469598103934665603ULL;
  long strings = 0;
  long bytes = 0;
  void Add(const char* s, int n) {
    for (int i = 0; i < n; i++) {
      hash ^= static_cast<unsigned char>(s[i]);
      hash *= 1099511628211ULL;
    }
    hash *= 1099511628211ULL;  // the 0 separator byte
    strings++;
    bytes += n;
  }
  void Add(const char* s) { Add(s, static_cast<int>(std::strlen(s))); }
};

struct Mode {
  const char* name;
  Checksum sum;
  long failed = 0;     // conversions that returned false
  long exact = 0;      // round trips that gave back the same bits
  long inexact = 0;    // round trips that did not (must stay 0 where they must hold)
  long stable = 0;     // re-printing the parsed value gave the same text
  long unstable = 0;
};

bool SameValue(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return Bits(a) == Bits(b);
}

// The EcmaScript converter prints -0 as "0" (UNIQUE_ZERO): what its text must read as.
double EcmaValue(double v) { return v == 0 ? 0.0 : v; }

bool SameFloat(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return FloatBits(a) == FloatBits(b);
}

void Tally(Mode* m, bool same) {
  if (same) m->exact++; else m->inexact++;
}

// Unsigned integer in base 2..16; returns its length.
int FormatUnsigned(uint64_t v, int base, char* out) {
  char tmp[72];
  int n = 0;
  do {
    tmp[n++] = "0123456789abcdef"[v % static_cast<uint64_t>(base)];
    v /= static_cast<uint64_t>(base);
  } while (v);
  for (int i = 0; i < n; i++) out[i] = tmp[n - 1 - i];
  out[n] = 0;
  return n;
}

int FormatSigned(long v, char* out) {
  if (v < 0) {
    out[0] = '-';
    return 1 + FormatUnsigned(static_cast<uint64_t>(-v), 10, out + 1);
  }
  return FormatUnsigned(static_cast<uint64_t>(v), 10, out);
}

// A finite double as a C99-style hexadecimal float ("-0x1.8p+3"); -1 for Inf/NaN.
int FormatHexFloat(double v, char* out) {
  uint64_t b = Bits(v);
  int biased = static_cast<int>((b >> 52) & 0x7ff);
  uint64_t frac = b & ((1ULL << 52) - 1);
  if (biased == 0x7ff) return -1;
  char* p = out;
  if (b >> 63) *p++ = '-';
  *p++ = '0';
  *p++ = 'x';
  *p++ = biased ? '1' : '0';
  int exponent = biased ? biased - 1023 : -1022;
  if (biased == 0 && frac == 0) exponent = 0;
  if (frac) {
    *p++ = '.';
    int digits = 13;
    while ((frac & 0xf) == 0) {
      frac >>= 4;
      digits--;
    }
    for (int i = digits - 1; i >= 0; i--) *p++ = "0123456789abcdef"[(frac >> (4 * i)) & 0xf];
  }
  *p++ = 'p';
  if (exponent >= 0) *p++ = '+';
  p += FormatSigned(exponent, p);
  *p = 0;
  return static_cast<int>(p - out);
}

// A non-negative integer in decimal with a ' between groups of three digits.
int FormatGrouped(uint64_t v, char* out) {
  char plain[32];
  int n = FormatUnsigned(v, 10, plain);
  int k = 0;
  for (int i = 0; i < n; i++) {
    if (i && (n - i) % 3 == 0) out[k++] = '\'';
    out[k++] = plain[i];
  }
  out[k] = 0;
  return k;
}

const int kBuf = 256;

struct Converters {
  // JavaScript-like output: 1e+21, 0.000001, "Infinity".
  const DoubleToStringConverter& ecma = DoubleToStringConverter::EcmaScriptConverter();
  // Another style: 1.5E017, "12.0", %g-like trimming, a minimum exponent width.
  DoubleToStringConverter other{DoubleToStringConverter::EMIT_TRAILING_DECIMAL_POINT |
                                    DoubleToStringConverter::EMIT_TRAILING_ZERO_AFTER_POINT |
                                    DoubleToStringConverter::NO_TRAILING_ZERO,
                                "inf", "nan", 'E', -4, 17, 3, 2, 3};
  StringToDoubleConverter strict{StringToDoubleConverter::NO_FLAGS, 0.0, -1.0, "Infinity",
                                 "NaN"};
  StringToDoubleConverter lenient{StringToDoubleConverter::ALLOW_LEADING_SPACES |
                                      StringToDoubleConverter::ALLOW_TRAILING_SPACES |
                                      StringToDoubleConverter::ALLOW_CASE_INSENSITIVITY,
                                  0.0, -1.0, "inf", "nan"};
  StringToDoubleConverter hex{StringToDoubleConverter::ALLOW_HEX |
                                  StringToDoubleConverter::ALLOW_HEX_FLOATS,
                              0.0, -1.0, nullptr, nullptr};
  StringToDoubleConverter octal{StringToDoubleConverter::ALLOW_OCTALS, 0.0, -1.0, nullptr,
                                nullptr};
  StringToDoubleConverter grouped{StringToDoubleConverter::NO_FLAGS, 0.0, -1.0, nullptr,
                                  nullptr, '\''};
};

enum ModeIndex {
  kShortest, kShortestOther, kExponentialShortest, kPrecision17, kPrecision, kPrecisionLong,
  kFixed, kFixedLong, kExponential, kDigits, kSingle, kHex, kOctal, kGrouped, kUtf16,
  kDecimalInput, kJson, kModes
};

const char* const kModeNames[kModes] = {
    "shortest", "shortest-other", "exponential-shortest", "precision-17", "precision",
    "precision-long", "fixed", "fixed-long", "exponential", "digits", "single", "hex",
    "octal", "grouped", "utf16", "decimal-input", "json"};

struct Driver {
  Converters c;
  Mode modes[kModes];
  char buf[kBuf];

  Driver() {
    for (int i = 0; i < kModes; i++) modes[i].name = kModeNames[i];
  }

  double Parse(const StringToDoubleConverter& conv, const char* s, int n, bool* complete) {
    int used = 0;
    double v = conv.StringToDouble(s, n, &used);
    *complete = used == n;
    return v;
  }

  // Records the builder's text in mode m; returns its length, or -1 if it failed.
  int Finish(Mode* m, bool ok, StringBuilder* sb) {
    if (!ok) {
      m->failed++;
      sb->Reset();
      return -1;
    }
    int n = sb->position();
    sb->Finalize();
    m->sum.Add(buf, n);
    return n;
  }

  // Shortest text must give back exactly v, in either style.
  void Shortest(double v, char* keep) {
    {
      Mode* m = &modes[kShortest];
      StringBuilder sb(buf, kBuf);
      int n = Finish(m, c.ecma.ToShortest(v, &sb), &sb);
      if (n < 0) return;
      bool complete;
      double back = Parse(c.strict, buf, n, &complete);
      Tally(m, complete && SameValue(back, EcmaValue(v)));
      if (keep) std::memcpy(keep, buf, static_cast<size_t>(n) + 1);
      // The same text as 16-bit characters must read the same.
      Mode* u = &modes[kUtf16];
      uint16_t wide[kBuf];
      for (int i = 0; i < n; i++) wide[i] = static_cast<unsigned char>(buf[i]);
      int used = 0;
      double back16 = c.strict.StringToDouble(wide, n, &used);
      u->sum.Add(buf, used);
      Tally(u, used == n && SameValue(back16, back));
    }
    {
      Mode* m = &modes[kShortestOther];
      StringBuilder sb(buf, kBuf);
      int n = Finish(m, c.other.ToShortest(v, &sb), &sb);
      if (n < 0) return;
      // with padding spaces for the lenient reader
      char padded[kBuf + 4];
      padded[0] = ' ';
      std::memcpy(padded + 1, buf, static_cast<size_t>(n));
      padded[n + 1] = ' ';
      bool complete;
      double back = Parse(c.lenient, padded, n + 2, &complete);
      Tally(m, complete && SameValue(back, v));
    }
    {
      Mode* m = &modes[kExponentialShortest];
      StringBuilder sb(buf, kBuf);
      int n = Finish(m, c.ecma.ToExponential(v, -1, &sb), &sb);
      if (n < 0) return;
      bool complete;
      double back = Parse(c.strict, buf, n, &complete);
      Tally(m, complete && SameValue(back, EcmaValue(v)));
    }
  }

  // Fixed digit counts: 17 significant digits always read back exactly; fewer are
  // checked for being stable under a second print.
  void Precision(double v, Rng* rng, char* keep) {
    {
      Mode* m = &modes[kPrecision17];
      StringBuilder sb(buf, kBuf);
      int n = Finish(m, c.other.ToPrecision(v, 17, &sb), &sb);
      if (n >= 0) {
        bool complete;
        double back = Parse(c.lenient, buf, n, &complete);
        Tally(m, complete && SameValue(back, v));
      }
    }
    {
      Mode* m = &modes[kPrecision];
      int digits = 1 + rng->Below(16);
      StringBuilder sb(buf, kBuf);
      int n = Finish(m, c.ecma.ToPrecision(v, digits, &sb), &sb);
      if (n >= 0) {
        if (keep) std::memcpy(keep, buf, static_cast<size_t>(n) + 1);
        bool complete;
        double back = Parse(c.strict, buf, n, &complete);
        char first[kBuf];
        std::memcpy(first, buf, static_cast<size_t>(n) + 1);
        StringBuilder again(buf, kBuf);
        c.ecma.ToPrecision(back, digits, &again);
        bool same = complete && std::strcmp(again.Finalize(), first) == 0;
        if (same) m->stable++; else m->unstable++;
      }
    }
  }

  void Fixed(double v, Rng* rng, char* keep) {
    Mode* m = &modes[kFixed];
    int digits = rng->Below(24);  // past 20 the slower exact path takes over
    StringBuilder sb(buf, kBuf);
    int n = Finish(m, c.ecma.ToFixed(v, digits, &sb), &sb);
    if (n < 0) return;
    if (keep) std::memcpy(keep, buf, static_cast<size_t>(n) + 1);
    bool complete;
    double back = Parse(c.strict, buf, n, &complete);
    char first[kBuf];
    std::memcpy(first, buf, static_cast<size_t>(n) + 1);
    StringBuilder again(buf, kBuf);
    c.ecma.ToFixed(back, digits, &again);
    bool same = complete && std::strcmp(again.Finalize(), first) == 0;
    if (same) m->stable++; else m->unstable++;
  }

  void Exponential(double v, Rng* rng, char* keep) {
    Mode* m = &modes[kExponential];
    int digits = rng->Below(20);
    StringBuilder sb(buf, kBuf);
    int n = Finish(m, c.other.ToExponential(v, digits, &sb), &sb);
    if (n < 0) return;
    if (keep) std::memcpy(keep, buf, static_cast<size_t>(n) + 1);
    bool complete;
    double back = Parse(c.lenient, buf, n, &complete);
    if (digits >= 16) Tally(m, complete && SameValue(back, v));
  }

  // Long expansions: many digits, read back through the long-input path.
  void Long(double v, Rng* rng) {
    {
      Mode* m = &modes[kPrecisionLong];
      int digits = 18 + rng->Below(100);
      StringBuilder sb(buf, kBuf);
      int n = Finish(m, c.ecma.ToPrecision(v, digits, &sb), &sb);
      if (n >= 0) {
        bool complete;
        double back = Parse(c.strict, buf, n, &complete);
        Tally(m, complete && SameValue(back, EcmaValue(v)));
      }
    }
    {
      Mode* m = &modes[kFixedLong];
      int digits = 30 + rng->Below(71);
      StringBuilder sb(buf, kBuf);
      int n = Finish(m, c.other.ToFixed(v, digits, &sb), &sb);
      if (n >= 0) {
        bool complete;
        double back = Parse(c.strict, buf, n, &complete);
        // exact once the digits reach the value's last binary place
        char first[kBuf];
        std::memcpy(first, buf, static_cast<size_t>(n) + 1);
        StringBuilder again(buf, kBuf);
        c.other.ToFixed(back, digits, &again);
        bool same = complete && std::strcmp(again.Finalize(), first) == 0;
        if (same) m->stable++; else m->unstable++;
      }
    }
  }

  // The raw digit generator in its three modes.
  void Digits(double v, Rng* rng) {
    if (!std::isfinite(v)) return;
    Mode* m = &modes[kDigits];
    char digits[kBuf];
    char tail[32];
    bool sign;
    int length, point;
    DoubleToStringConverter::DoubleToAscii(v, DoubleToStringConverter::SHORTEST, 0, digits,
                                           kBuf, &sign, &length, &point);
    m->sum.Add(digits, length);
    FormatSigned(point, tail);
    m->sum.Add(tail);
    int requested = 1 + rng->Below(30);
    DoubleToStringConverter::DoubleToAscii(v, DoubleToStringConverter::PRECISION, requested,
                                           digits, kBuf, &sign, &length, &point);
    m->sum.Add(digits, length);
    FormatSigned(point, tail);
    m->sum.Add(tail);
    if (std::fabs(v) < 1e20) {
      requested = rng->Below(20);
      DoubleToStringConverter::DoubleToAscii(v, DoubleToStringConverter::FIXED, requested,
                                             digits, kBuf, &sign, &length, &point);
      m->sum.Add(digits, length);
      FormatSigned(point, tail);
      m->sum.Add(tail);
    }
  }

  void Single(double v) {
    float f = static_cast<float>(v);
    Mode* m = &modes[kSingle];
    StringBuilder sb(buf, kBuf);
    int n = Finish(m, c.ecma.ToShortestSingle(f, &sb), &sb);
    if (n < 0) return;
    int used = 0;
    float back = c.strict.StringToFloat(buf, n, &used);
    Tally(m, used == n && SameFloat(back, static_cast<float>(EcmaValue(f))));
  }

  void Hex(double v) {
    // double-conversion 3.2.1 reads some hexadecimal floats of 2^1019 and more as
    // infinity; those are left out.
    if (std::fabs(v) >= 0x1p1000) return;
    Mode* m = &modes[kHex];
    int n = FormatHexFloat(v, buf);
    if (n < 0) return;
    m->sum.Add(buf, n);
    bool complete;
    double back = Parse(c.hex, buf, n, &complete);
    Tally(m, complete && SameValue(back, v));
  }

  // Integral values: octal and grouped decimal text.
  void Integral(double v) {
    if (!(v >= 1.0 && v < 18446744073709551616.0) || std::floor(v) != v) return;
    uint64_t u = static_cast<uint64_t>(v);
    {
      Mode* m = &modes[kOctal];
      buf[0] = '0';
      int n = 1 + FormatUnsigned(u, 8, buf + 1);
      m->sum.Add(buf, n);
      bool complete;
      double back = Parse(c.octal, buf, n, &complete);
      Tally(m, complete && SameValue(back, v));
    }
    {
      Mode* m = &modes[kGrouped];
      int n = FormatGrouped(u, buf);
      m->sum.Add(buf, n);
      bool complete;
      double back = Parse(c.grouped, buf, n, &complete);
      Tally(m, complete && SameValue(back, v));
    }
  }

  void All(double v, Rng* rng, bool sample, long index) {
    char s1[kBuf] = "", s2[kBuf] = "", s3[kBuf] = "", s4[kBuf] = "";
    Shortest(v, sample ? s1 : nullptr);
    Precision(v, rng, sample ? s2 : nullptr);
    Fixed(v, rng, sample ? s3 : nullptr);
    Exponential(v, rng, sample ? s4 : nullptr);
    if (rng->Below(8) == 0) Long(v, rng);
    Digits(v, rng);
    Single(v);
    Hex(v);
    Integral(v);
    if (sample) std::printf("#%ld %s | %s | %s | %s\n", index, s1, s2, s3, s4);
  }

  // A decimal literal "[-]MANTISSA[.FRACTION]e[-]EXP" read with the strict reader.
  double Decimal(Rng* rng) {
    char text[96];
    int k = 0;
    if (rng->Below(4) == 0) text[k++] = '-';
    int digits = 1 + rng->Below(rng->Below(5) == 0 ? 40 : 17);
    int point = rng->Below(digits + 1);
    for (int i = 0; i < digits; i++) {
      if (i == point && i) text[k++] = '.';
      text[k++] = static_cast<char>('0' + (i == 0 ? 1 + rng->Below(9) : rng->Below(10)));
    }
    if (rng->Below(3)) {
      text[k++] = rng->Below(2) ? 'e' : 'E';
      k += FormatSigned(rng->Below(80) - 40 + (rng->Below(16) == 0 ? rng->Below(600) - 300 : 0),
                        text + k);
    }
    text[k] = 0;
    Mode* m = &modes[kDecimalInput];
    m->sum.Add(text, k);
    bool complete;
    double v = Parse(c.strict, text, k, &complete);
    if (!complete) m->failed++;
    return v;
  }

  double Generate(Rng* rng) {
    switch (rng->Below(9)) {
      case 0:
      case 1:
        return FromBits(rng->Next());  // any bit pattern, NaN and Inf included
      case 2:
      case 3:
        return Decimal(rng);
      case 4: {  // integers of any magnitude up to 2^64
        int bits = 1 + rng->Below(64);
        uint64_t u = rng->Next() >> (64 - bits);
        return rng->Below(2) ? static_cast<double>(u) : -static_cast<double>(u);
      }
      case 5: {  // binary fractions
        double x = static_cast<double>(rng->Next() >> 40);
        return std::ldexp(x, -rng->Below(60));
      }
      case 6: {  // near powers of ten, subnormals, near the largest double
        int pick = rng->Below(3);
        if (pick == 0) {
          double p = 1.0;
          int e = rng->Below(40) - 20;
          for (int i = 0; i < (e < 0 ? -e : e); i++) p = e < 0 ? p / 10.0 : p * 10.0;
          return FromBits(Bits(p) + static_cast<uint64_t>(rng->Below(7)) - 3);
        }
        if (pick == 1) return FromBits(rng->Next() >> (12 + rng->Below(52)));
        return FromBits(0x7fefffffffffffffULL - (rng->Next() >> (12 + rng->Below(40))));
      }
      case 7:  // widened single-precision values
        return static_cast<double>(FloatFromBits(static_cast<uint32_t>(rng->Next() >> 32)));
      default:  // money amounts
        return static_cast<double>(static_cast<long>(rng->Next() % 10000000) - 2000000) / 100.0;
    }
  }
};

char* ReadFile(const char* path, long* len) {
  FILE* f = std::fopen(path, "rb");
  if (!f) {
    std::perror(path);
    std::exit(2);
  }
  std::fseek(f, 0, SEEK_END);
  long n = std::ftell(f);
  std::fseek(f, 0, SEEK_SET);
  char* text = static_cast<char*>(std::malloc(static_cast<size_t>(n) + 1));
  if (!text || std::fread(text, 1, static_cast<size_t>(n), f) != static_cast<size_t>(n)) {
    std::perror(path);
    std::exit(2);
  }
  text[n] = 0;
  std::fclose(f);
  *len = n;
  return text;
}

// Every number token outside strings: read strictly, printed back three ways.
void Json(Driver* d, const char* text, long len) {
  Mode* m = &d->modes[kJson];
  long integers = 0;
  for (long i = 0; i < len;) {
    char ch = text[i];
    if (ch == '"') {
      for (i++; i < len && text[i] != '"'; i++)
        if (text[i] == '\\') i++;
      i++;
      continue;
    }
    if (ch != '-' && (ch < '0' || ch > '9')) {
      i++;
      continue;
    }
    long j = i + 1;
    while (j < len && text[j] && std::strchr("0123456789.eE+-", text[j])) j++;
    int n = static_cast<int>(j - i);
    bool complete;
    double v = d->Parse(d->c.strict, text + i, n, &complete);
    i = j;
    if (!complete) {
      m->failed++;
      continue;
    }
    if (std::floor(v) == v) integers++;
    StringBuilder sb(d->buf, kBuf);
    d->c.ecma.ToShortest(v, &sb);
    int k = sb.position();
    int used = 0;
    double back = d->c.strict.StringToDouble(sb.Finalize(), k, &used);
    m->sum.Add(d->buf);
    Tally(m, used == k && SameValue(back, EcmaValue(v)));
    StringBuilder p(d->buf, kBuf);
    d->c.other.ToPrecision(v, 6, &p);
    m->sum.Add(p.Finalize());
    StringBuilder f(d->buf, kBuf);
    if (std::fabs(v) < 1e21) {
      d->c.ecma.ToFixed(v, 2, &f);
      m->sum.Add(f.Finalize());
    }
  }
  std::printf("json: %ld numbers, %ld integral\n", m->exact + m->inexact + m->failed,
              integers);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s FILE.json COUNT\n", argv[0]);
    return 2;
  }
  long len;
  char* text = ReadFile(argv[1], &len);
  long count = std::atol(argv[2]);
  static Driver d;
  Json(&d, text, len);
  std::free(text);
  Rng rng(0x6d6c676f64636e76ULL);
  long every = count / 40 > 0 ? count / 40 : 1;
  for (long i = 0; i < count; i++) {
    double v = d.Generate(&rng);
    d.All(v, &rng, i % every == 0, i);
  }
  Checksum total;
  long bad = 0;
  std::printf("%-21s %9s %9s %9s %9s %9s %9s %9s %16s\n", "mode", "strings", "bytes",
              "failed", "exact", "inexact", "stable", "unstable", "fnv1a");
  for (int i = 0; i < kModes; i++) {
    const Mode& m = d.modes[i];
    std::printf("%-21s %9ld %9ld %9ld %9ld %9ld %9ld %9ld %016llx\n", m.name, m.sum.strings,
                m.sum.bytes, m.failed, m.exact, m.inexact, m.stable, m.unstable,
                static_cast<unsigned long long>(m.sum.hash));
    char h[24];
    FormatUnsigned(m.sum.hash, 16, h);
    total.Add(h);
    bad += m.inexact;
  }
  std::printf("values %ld, round-trip failures %ld, total %016llx\n", count, bad,
              static_cast<unsigned long long>(total.hash));
  return 0;
}
