// mlgo runtime_check driver for re2: a grep-like workload over a generated word text.
// Compiles a set of varied regular expressions (alternations, classes, captures, anchors,
// case-insensitive, repetition, named groups, Latin-1, longest match), then per line
// PartialMatch/FullMatch/Consume, over the whole text FindAndConsume and GlobalReplace,
// and RE2::Set matching per line and per word. Prints counts and FNV-1a checksums of
// what matched (never addresses). Usage: re2_run FILE
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "re2/re2.h"
#include "re2/set.h"
#include "re2/unicode_casefold.h"
#include "re2/unicode_groups.h"

// ---- re2's generated character tables. Debian's re2 source ships without
// perl_groups.cc, unicode_groups.cc and unicode_casefold.cc (its build generates them from
// system Unicode data), so this driver defines its own, covering only ASCII and Latin-1
// (U+0000-U+00FF), which is all the workload text uses: the Perl classes \d \s \w, the
// POSIX classes, a few general categories and the Latin script, and simple case folding
// of the Latin-1 letters that fold within Latin-1.
namespace re2 {

// ---- Perl classes (ASCII, as in Perl's /a semantics).
static const URange16 kDigit[] = {{'0', '9'}};
static const URange16 kSpace[] = {{'\t', '\n'}, {'\f', '\r'}, {' ', ' '}};
static const URange16 kWord[] = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};

const UGroup perl_groups[] = {
    {"\\d", +1, kDigit, 1, nullptr, 0}, {"\\D", -1, kDigit, 1, nullptr, 0},
    {"\\s", +1, kSpace, 3, nullptr, 0}, {"\\S", -1, kSpace, 3, nullptr, 0},
    {"\\w", +1, kWord, 4, nullptr, 0},  {"\\W", -1, kWord, 4, nullptr, 0},
};
const int num_perl_groups = sizeof(perl_groups) / sizeof(perl_groups[0]);

// ---- POSIX bracket classes (ASCII).
static const URange16 kAlnum[] = {{'0', '9'}, {'A', 'Z'}, {'a', 'z'}};
static const URange16 kAlpha[] = {{'A', 'Z'}, {'a', 'z'}};
static const URange16 kAscii[] = {{0x00, 0x7f}};
static const URange16 kBlank[] = {{'\t', '\t'}, {' ', ' '}};
static const URange16 kCntrl[] = {{0x00, 0x1f}, {0x7f, 0x7f}};
static const URange16 kGraph[] = {{'!', '~'}};
static const URange16 kLower[] = {{'a', 'z'}};
static const URange16 kPrint[] = {{' ', '~'}};
static const URange16 kPunct[] = {{'!', '/'}, {':', '@'}, {'[', '`'}, {'{', '~'}};
static const URange16 kPSpace[] = {{'\t', '\r'}, {' ', ' '}};
static const URange16 kUpper[] = {{'A', 'Z'}};
static const URange16 kXdigit[] = {{'0', '9'}, {'A', 'F'}, {'a', 'f'}};

#define MLGO_POSIX(name, r)                                              \
  {"[:" name ":]", +1, r, sizeof(r) / sizeof(r[0]), nullptr, 0},        \
  {"[:^" name ":]", -1, r, sizeof(r) / sizeof(r[0]), nullptr, 0}

const UGroup posix_groups[] = {
    MLGO_POSIX("alnum", kAlnum), MLGO_POSIX("alpha", kAlpha), MLGO_POSIX("ascii", kAscii),
    MLGO_POSIX("blank", kBlank), MLGO_POSIX("cntrl", kCntrl), MLGO_POSIX("digit", kDigit),
    MLGO_POSIX("graph", kGraph), MLGO_POSIX("lower", kLower), MLGO_POSIX("print", kPrint),
    MLGO_POSIX("punct", kPunct), MLGO_POSIX("space", kPSpace), MLGO_POSIX("upper", kUpper),
    MLGO_POSIX("word", kWord),   MLGO_POSIX("xdigit", kXdigit),
};
#undef MLGO_POSIX
const int num_posix_groups = sizeof(posix_groups) / sizeof(posix_groups[0]);

// ---- Unicode general categories and scripts, restricted to U+0000-U+00FF.
// (The parser validates capture-group names against Lu Ll Lt Lm Lo Nl Mn Mc Nd Pc, so
// every one of those must be present, even where Latin-1 has no member.)
static const URange16 kLu[] = {{0x41, 0x5a}, {0xc0, 0xd6}, {0xd8, 0xde}};
static const URange16 kLl[] = {{0x61, 0x7a}, {0xb5, 0xb5}, {0xdf, 0xf6}, {0xf8, 0xff}};
static const URange16 kLo[] = {{0xaa, 0xaa}, {0xba, 0xba}};
static const URange16 kL[] = {{0x41, 0x5a}, {0x61, 0x7a}, {0xaa, 0xaa}, {0xb5, 0xb5},
                              {0xba, 0xba}, {0xc0, 0xd6}, {0xd8, 0xf6}, {0xf8, 0xff}};
static const URange16 kNd[] = {{0x30, 0x39}};
static const URange16 kNo[] = {{0xb2, 0xb3}, {0xb9, 0xb9}, {0xbc, 0xbe}};
static const URange16 kN[] = {{0x30, 0x39}, {0xb2, 0xb3}, {0xb9, 0xb9}, {0xbc, 0xbe}};
static const URange16 kPc[] = {{0x5f, 0x5f}};
static const URange16 kZs[] = {{0x20, 0x20}, {0xa0, 0xa0}};
static const URange16 kCc[] = {{0x00, 0x1f}, {0x7f, 0x9f}};
static const URange16 kLatin[] = {{0x41, 0x5a}, {0x61, 0x7a}, {0xaa, 0xaa}, {0xba, 0xba},
                                  {0xc0, 0xd6}, {0xd8, 0xf6}, {0xf8, 0xff}};

#define MLGO_GROUP(name, r) {name, +1, r, sizeof(r) / sizeof(r[0]), nullptr, 0}
#define MLGO_EMPTY(name) {name, +1, nullptr, 0, nullptr, 0}

const UGroup unicode_groups[] = {
    MLGO_GROUP("L", kL),   MLGO_GROUP("Lu", kLu), MLGO_GROUP("Ll", kLl),
    MLGO_EMPTY("Lt"),      MLGO_EMPTY("Lm"),      MLGO_GROUP("Lo", kLo),
    MLGO_GROUP("N", kN),   MLGO_GROUP("Nd", kNd), MLGO_EMPTY("Nl"),
    MLGO_GROUP("No", kNo), MLGO_EMPTY("Mn"),      MLGO_EMPTY("Mc"),
    MLGO_GROUP("Pc", kPc), MLGO_GROUP("Zs", kZs), MLGO_GROUP("Cc", kCc),
    MLGO_GROUP("Latin", kLatin),
};
#undef MLGO_GROUP
#undef MLGO_EMPTY
const int num_unicode_groups = sizeof(unicode_groups) / sizeof(unicode_groups[0]);

// ---- Case folding: each entry maps a range of runes to the next rune of its fold
// cycle (sorted by lo, as LookupCaseFold's binary search needs). Latin-1 letters whose
// other case lies outside Latin-1 (micro sign, sharp s, y with diaeresis) are left out,
// so every cycle here is closed: upper <-> lower.
const CaseFold unicode_casefold[] = {
    {0x41, 0x5a, 32},  {0x61, 0x7a, -32}, {0xc0, 0xd6, 32},
    {0xd8, 0xde, 32},  {0xe0, 0xf6, -32}, {0xf8, 0xfe, -32},
};
const int num_unicode_casefold = sizeof(unicode_casefold) / sizeof(unicode_casefold[0]);

// Upper case to lower case (used by the prefilter, outside ASCII only).
const CaseFold unicode_tolower[] = {
    {0x41, 0x5a, 32}, {0xc0, 0xd6, 32}, {0xd8, 0xde, 32},
};
const int num_unicode_tolower = sizeof(unicode_tolower) / sizeof(unicode_tolower[0]);

}  // namespace re2

// ---- The driver.
using re2::RE2;
using re2::StringPiece;

namespace {

struct Fnv {
  uint64_t h = 1469598103934665603ull;
  void Add(const void* p, size_t n) {
    const unsigned char* b = static_cast<const unsigned char*>(p);
    for (size_t i = 0; i < n; i++) {
      h ^= b[i];
      h *= 1099511628211ull;
    }
  }
  void Add(StringPiece s) { Add(s.data(), s.size()); Add("\x1f", 1); }
  void Add(const std::string& s) { Add(StringPiece(s)); }
  void Add(long v) { Add(&v, sizeof v); }
};

std::string ReadFile(const char* path) {
  FILE* f = std::fopen(path, "rb");
  if (!f) { std::perror(path); std::exit(2); }
  std::string out;
  char buf[65536];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
  std::fclose(f);
  return out;
}

void Check(const RE2& re) {
  if (!re.ok()) {
    std::fprintf(stderr, "bad pattern %s: %s\n", re.pattern().c_str(), re.error().c_str());
    std::exit(1);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s FILE\n", argv[0]);
    return 2;
  }
  const std::string text = ReadFile(argv[1]);
  std::vector<StringPiece> lines;
  for (size_t start = 0; start < text.size();) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    lines.emplace_back(text.data() + start, end - start);
    start = end + 1;
  }
  std::printf("bytes %zu lines %zu\n", text.size(), lines.size());

  // 1. Per-line PartialMatch with a dozen patterns of different shapes.
  const char* partial[] = {
      R"(\b(?:qu|x|zh|kw)[a-z]*\b)",             // literal alternation prefix
      R"(\b[aeiou][a-z]*[aeiou]\b)",            // classes, word boundaries
      R"([^aeiou\s]{4,})",                      // negated class, counted repetition
      R"((?i)\b[JKQ][AEIOU][A-Z]{3})",          // case-insensitive
      R"(^\w{8,} )",                            // anchored start
      R"( (\w{2}) \w+ (\w{2})$)",               // anchored end with captures
      R"((?:[b-df-hj-np-tv-z][aeiou]){3})",     // repeated pair
      R"(\b(\w+) (\w+) (\w+)\b.*\b\w{9}\b)",    // captures before a long word
      R"((?:ab|bc|cd|de|ef|fg)+[xyz])",         // alternation under +
      R"(\b\w*(?:ing|ion|est|ly)\b)",           // suffix alternation
      R"([[:lower:]]{3}[[:blank:]][[:alpha:]]{9}\b)", // POSIX classes
      R"(\b(\w)\w{2,}(e|a)\b)",                 // captures of single letters
  };
  Fnv h1;
  for (const char* pat : partial) {
    RE2 re(pat);
    Check(re);
    int n = re.NumberOfCapturingGroups();
    long hits = 0;
    std::vector<StringPiece> cap(n > 0 ? n : 0);
    std::vector<RE2::Arg> args(cap.size());
    std::vector<const RE2::Arg*> argp(cap.size());
    for (size_t i = 0; i < cap.size(); i++) { args[i] = &cap[i]; argp[i] = &args[i]; }
    for (const StringPiece& line : lines) {
      if (RE2::PartialMatchN(line, re, argp.data(), n)) {
        hits++;
        for (const StringPiece& c : cap) h1.Add(c);
      }
    }
    h1.Add(hits);
    std::printf("partial %-40s %6ld\n", pat, hits);
  }
  std::printf("partial checksum %016llx\n", (unsigned long long)h1.h);

  // 2. Per-line FullMatch: first and last word, and lines of short words only.
  RE2 first_last(R"((\w+)(?: \w+)* (\w+))");
  RE2 short_words(R"((?:\w{2,5} )*\w{2,5})");
  RE2 some_long(R"((?:\w+ )*?(\w{9,})(?: \w+)*)");
  Check(first_last); Check(short_words); Check(some_long);
  Fnv h2;
  long fl = 0, sw = 0, sl = 0;
  for (const StringPiece& line : lines) {
    std::string a, b;
    if (RE2::FullMatch(line, first_last, &a, &b)) { fl++; h2.Add(a); h2.Add(b); }
    if (RE2::FullMatch(line, short_words)) { sw++; h2.Add(line); }
    StringPiece lw;
    if (RE2::FullMatch(line, some_long, &lw)) { sl++; h2.Add(lw); }
  }
  std::printf("fullmatch first_last %ld short_words %ld first_long %ld checksum %016llx\n",
              fl, sw, sl, (unsigned long long)h2.h);

  // 3. Consume: tokenize every line word by word (anchored matching).
  RE2 token(R"((\w+)\s*)");
  Check(token);
  std::map<std::string, long> freq;
  long words = 0;
  for (const StringPiece& line : lines) {
    StringPiece rest = line;
    StringPiece w;
    while (RE2::Consume(&rest, token, &w)) {
      freq[std::string(w)]++;
      words++;
    }
  }
  std::vector<std::pair<long, std::string>> top;
  for (const auto& kv : freq) top.emplace_back(-kv.second, kv.first);
  std::sort(top.begin(), top.end());
  std::printf("consume words %ld distinct %zu top:", words, freq.size());
  for (size_t i = 0; i < 8 && i < top.size(); i++)
    std::printf(" %s=%ld", top[i].second.c_str(), -top[i].first);
  std::printf("\n");

  // 4. A literal alternation of 80 frequent words (ranks 10-89, escaped with QuoteMeta)
  // counted with FindAndConsume: with a capture; case-insensitive with a capture; and
  // longest-match in Latin-1 without one (the position after each match is hashed).
  std::string alt = "\\b(";
  for (size_t i = 10; i < 90 && i < top.size(); i++) {
    if (i > 10) alt += "|";
    alt += RE2::QuoteMeta(top[i].second);
  }
  alt += ")\\b";
  RE2::Options ci;
  ci.set_case_sensitive(false);
  RE2::Options longest_l1;
  longest_l1.set_longest_match(true);
  longest_l1.set_encoding(RE2::Options::EncodingLatin1);
  RE2 alt_re(alt), alt_ci(alt, ci), alt_long(alt, longest_l1);
  Check(alt_re); Check(alt_ci); Check(alt_long);
  Fnv h4;
  for (const RE2* re : {&alt_re, &alt_ci, &alt_long}) {
    StringPiece in(text);
    StringPiece w;
    long n = 0;
    if (re == &alt_long) {
      while (RE2::FindAndConsume(&in, *re)) { n++; h4.Add((long)in.size()); }
    } else {
      while (RE2::FindAndConsume(&in, *re, &w)) { n++; h4.Add(w); }
    }
    std::printf("alternation of 80 words: %ld hits (program size %d)\n", n,
                re->ProgramSize());
  }
  std::printf("alternation checksum %016llx\n", (unsigned long long)h4.h);

  // 5. FindAndConsume over the whole text with captures, typed args, named groups.
  RE2 pairs(R"((?P<left>\w*[xz]\w*) (?P<right>\w+))");
  RE2 ends(R"((\w+) (\w+)\n)");
  RE2 lengths(R"(\b([b-df-hj-np-tv-z]{2})([a-z]{3,}))");
  Check(pairs); Check(ends); Check(lengths);
  Fnv h5;
  for (const auto& kv : pairs.NamedCapturingGroups()) { h5.Add(kv.first); h5.Add((long)kv.second); }
  long np = 0, ne = 0, nl = 0, total_len = 0;
  {
    StringPiece in(text), l, r;
    while (RE2::FindAndConsume(&in, pairs, &l, &r)) { np++; h5.Add(l); h5.Add(r); }
  }
  {
    StringPiece in(text);
    std::string a, b;
    while (RE2::FindAndConsume(&in, ends, &a, &b)) { ne++; h5.Add(b); }
  }
  {
    StringPiece in(text), head;
    std::string tail;
    while (RE2::FindAndConsume(&in, lengths, &head, &tail)) {
      nl++;
      total_len += (long)tail.size();
      h5.Add(head);
    }
  }
  std::printf("find pairs %ld line_ends %ld consonant_heads %ld tail_len %ld checksum %016llx\n",
              np, ne, nl, total_len, (unsigned long long)h5.h);

  // 6. Unanchored matching with submatches over long spans (the NFA's territory): the
  // text before and after the first q-word of each 16 KB chunk.
  RE2 around(R"((?s)(.*?)\b(q\w*)\b(.*))");
  Check(around);
  Fnv h6;
  long found = 0;
  for (size_t off = 0; off + 16384 <= text.size() && off < 4 * 16384; off += 16384) {
    StringPiece chunk(text.data() + off, 16384), pre, q, post;
    if (RE2::PartialMatch(chunk, around, &pre, &q, &post)) {
      found++;
      h6.Add((long)pre.size()); h6.Add(q); h6.Add((long)post.size());
    }
  }
  std::printf("chunks with a q-word %ld checksum %016llx\n", found,
              (unsigned long long)h6.h);

  // 7. GlobalReplace, Replace and Extract on copies of the text.
  std::string t1 = text, t2 = text, t3 = text;
  RE2 swap(R"(\b([a-h])(\w*)(\w)\b)");
  RE2 vowels(R"([aeiou]+)");
  RE2 qz(R"((?i)\b([qz]\w*))");
  Check(swap); Check(vowels); Check(qz);
  int r1 = RE2::GlobalReplace(&t1, swap, "\\3\\2\\1");
  int r2 = RE2::GlobalReplace(&t2, vowels, "_");
  int r3 = RE2::GlobalReplace(&t3, qz, "<\\1>");
  Fnv h7;
  h7.Add(t1); h7.Add(t2); h7.Add(t3);
  long replaced = 0, extracted = 0;
  RE2 first_two(R"(^(\w+) (\w+))");
  Check(first_two);
  for (size_t i = 0; i < lines.size(); i += 4) {
    std::string s(lines[i]), out;
    if (RE2::Replace(&s, first_two, "\\2 \\1")) { replaced++; h7.Add(s); }
    if (RE2::Extract(lines[i], pairs, "\\2-\\1", &out)) { extracted++; h7.Add(out); }
  }
  std::printf("replace swap %d vowels %d qz %d lines %ld extract %ld sizes %zu %zu %zu "
              "checksum %016llx\n", r1, r2, r3, replaced, extracted, t1.size(), t2.size(),
              t3.size(), (unsigned long long)h7.h);

  // 8. RE2::Set: which of a dozen patterns each line contains; which shapes each word has.
  const char* line_pats[] = {
      R"(\bq)", R"(x\w*y)", R"(\b\w{9}\b)", R"(^\w{2} )", R"( \w{2}$)",
      R"((?i)ZZ|JJ|VV)", R"((?:\bt\w* ){2})",
      R"([aeiou]{3})", R"([^aeiou ]{5})", R"(\b(?:a|e|i|o|u)\w*\b \b(?:a|e|i|o|u))",
      R"(ab.*ba)", R"(\b(\w)\w*\b\s+\b[xyz])"};
  RE2::Set line_set(RE2::DefaultOptions, RE2::UNANCHORED);
  for (const char* p : line_pats) {
    std::string err;
    if (line_set.Add(p, &err) < 0) { std::fprintf(stderr, "set: %s\n", err.c_str()); return 1; }
  }
  if (!line_set.Compile()) { std::fprintf(stderr, "set compile failed\n"); return 1; }
  const char* word_pats[] = {R"([a-e]\w*)", R"(\w*[aeiou])", R"(\w{1,3})", R"(\w{8,})",
                             R"((?:[^aeiou][aeiou])+)", R"(\w*(?:ss|ll|ee|oo)\w*)"};
  RE2::Set word_set(RE2::DefaultOptions, RE2::ANCHOR_BOTH);
  int word_pat_n = 0;
  for (const char* p : word_pats) {
    std::string err;
    if (word_set.Add(p, &err) < 0) { std::fprintf(stderr, "set: %s\n", err.c_str()); return 1; }
    word_pat_n++;
  }
  if (!word_set.Compile()) { std::fprintf(stderr, "set compile failed\n"); return 1; }
  std::vector<long> line_counts(sizeof line_pats / sizeof *line_pats);
  std::vector<long> word_counts(word_pat_n);
  Fnv h8;
  std::vector<int> v;
  for (const StringPiece& line : lines) {
    if (line_set.Match(line, &v)) {
      std::sort(v.begin(), v.end());
      for (int i : v) { line_counts[i]++; h8.Add((long)i); }
    }
    h8.Add(-1L);
  }
  for (const auto& kv : freq) {
    for (long rep = 0; rep < 2; rep++) {
      if (word_set.Match(kv.first, &v)) {
        std::sort(v.begin(), v.end());
        for (int i : v) word_counts[i] += kv.second;
      }
    }
  }
  std::printf("set lines:");
  for (long c : line_counts) std::printf(" %ld", c);
  std::printf("\nset words (%d patterns):", word_pat_n);
  for (long c : word_counts) std::printf(" %ld", c);
  std::printf("\nset checksum %016llx\n", (unsigned long long)h8.h);

  Fnv all;
  for (uint64_t x : {h1.h, h2.h, h4.h, h5.h, h6.h, h7.h, h8.h}) all.Add(&x, sizeof x);
  std::printf("checksum %016llx\n", (unsigned long long)all.h);
  return 0;
}
