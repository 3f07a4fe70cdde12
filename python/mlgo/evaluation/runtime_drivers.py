"""Project-written driver programs and config headers for runtime_check's programs.

A library package has no program of its own that runs a useful workload, so a small
driver of ours calls it on a generated document and prints what it computed. Where a
package's own program is used (brotli, minigzip, cmark, zopfli, xmlwf, pcre2grep), only
the headers a configure step would have written are here. runtime_check writes these
texts into the program's generated-file directory; nothing here is third-party code.
"""

# Shared by the C drivers: the whole file in memory (exits 2 when it cannot be read).
_READ_FILE = r"""
static char *read_file(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) { perror(path); exit(2); }
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *buf = malloc((size_t)n + 1);
  if (!buf || fread(buf, 1, (size_t)n, f) != (size_t)n) { perror(path); exit(2); }
  buf[n] = 0;
  fclose(f);
  *len = (size_t)n;
  return buf;
}

static unsigned long long fnv1a(const char *s, size_t n) {
  unsigned long long h = 1469598103934665603ULL;
  for (size_t i = 0; i < n; i++) { h ^= (unsigned char)s[i]; h *= 1099511628211ULL; }
  return h;
}
"""

CJSON_DRIVER = r"""/* mlgo runtime_check driver for cJSON: parse a JSON document, print it back
   (formatted and compact), re-parse and compare, walk it, sort and modify a copy,
   diff the two as JSON patches and apply them. Usage: cjson_run FILE.json ROUNDS */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cJSON.h"
#include "cJSON_Utils.h"
""" + _READ_FILE + r"""
static void walk(const cJSON *item, double *sum, long *chars, long *nodes) {
  for (; item; item = item->next) {
    (*nodes)++;
    if (cJSON_IsNumber(item)) *sum += item->valuedouble;
    else if (cJSON_IsString(item)) *chars += (long)strlen(item->valuestring);
    walk(item->child, sum, chars, nodes);
  }
}

int main(int argc, char **argv) {
  if (argc < 2) { fprintf(stderr, "usage: %s FILE.json [ROUNDS]\n", argv[0]); return 2; }
  size_t len;
  char *text = read_file(argv[1], &len);
  int rounds = argc > 2 ? atoi(argv[2]) : 1;
  for (int r = 0; r < rounds; r++) {
    cJSON *doc = cJSON_ParseWithLength(text, len);
    if (!doc) { fprintf(stderr, "parse error near %.40s\n", cJSON_GetErrorPtr()); return 1; }
    char *pretty = cJSON_Print(doc);
    char *compact = cJSON_PrintUnformatted(doc);
    cJSON *again = cJSON_Parse(pretty);
    int same = again && cJSON_Compare(doc, again, 1);
    double sum = 0;
    long chars = 0, nodes = 0;
    walk(doc, &sum, &chars, &nodes);
    cJSON *copy = cJSON_Duplicate(doc, 1);
    cJSON *items = cJSON_GetObjectItemCaseSensitive(copy, "items");
    cJSON *it;
    int k = 0;
    cJSON_ArrayForEach(it, items) {
      cJSONUtils_SortObjectCaseSensitive(it);
      if (k++ % 7 == 0) {
        cJSON *q = cJSON_GetObjectItemCaseSensitive(it, "qty");
        if (cJSON_IsNumber(q)) cJSON_SetNumberValue(q, q->valuedouble + 1);
        cJSON_AddStringToObject(it, "audit", "restocked");
      }
    }
    cJSON *base = cJSON_Duplicate(doc, 1);
    cJSON *patches = cJSONUtils_GeneratePatchesCaseSensitive(base, copy);
    char *ptext = cJSON_PrintUnformatted(patches);
    cJSON *patched = cJSON_Duplicate(doc, 1);
    int applied = cJSONUtils_ApplyPatchesCaseSensitive(patched, patches);
    int patch_ok = applied == 0 && cJSON_Compare(patched, copy, 1);
    const cJSON *p = cJSONUtils_GetPointerCaseSensitive(doc, "/items/17/name");
    if (r == rounds - 1) {
      printf("nodes %ld strings %ld sum %.6f roundtrip %d\n", nodes, chars, sum, same);
      printf("pretty %zu %016llx compact %zu %016llx\n", strlen(pretty),
             fnv1a(pretty, strlen(pretty)), strlen(compact), fnv1a(compact, strlen(compact)));
      printf("patches %d %zu %016llx applied %d\n", cJSON_GetArraySize(patches),
             strlen(ptext), fnv1a(ptext, strlen(ptext)), patch_ok);
      printf("/items/17/name = %s\n", cJSON_IsString(p) ? p->valuestring : "?");
    }
    free(pretty); free(compact); free(ptext);
    cJSON_Delete(again); cJSON_Delete(copy); cJSON_Delete(base); cJSON_Delete(patches);
    cJSON_Delete(patched); cJSON_Delete(doc);
  }
  free(text);
  return 0;
}
"""

JANSSON_DRIVER = r"""/* mlgo runtime_check driver for jansson: parse a JSON document, dump it with
   sorted keys and compact/ASCII, re-parse and compare, unpack every item, build a
   per-tag index, deep-copy and update. Usage: jansson_run FILE.json ROUNDS */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <jansson.h>
""" + _READ_FILE + r"""
int main(int argc, char **argv) {
  if (argc < 2) { fprintf(stderr, "usage: %s FILE.json [ROUNDS]\n", argv[0]); return 2; }
  json_object_seed(0x6d6c676f);  /* fixed hash seed: the same work on every run */
  size_t len;
  char *text = read_file(argv[1], &len);
  int rounds = argc > 2 ? atoi(argv[2]) : 1;
  for (int r = 0; r < rounds; r++) {
    json_error_t err;
    json_t *doc = json_loadb(text, len, 0, &err);
    if (!doc) { fprintf(stderr, "line %d: %s\n", err.line, err.text); return 1; }
    char *sorted = json_dumps(doc, JSON_INDENT(2) | JSON_SORT_KEYS);
    char *ascii = json_dumps(doc, JSON_COMPACT | JSON_ENSURE_ASCII);
    json_t *again = json_loads(ascii, 0, &err);
    int same = again && json_equal(doc, again);
    json_t *items = json_object_get(doc, "items");
    json_t *index = json_object();
    double value = 0;
    long long qty_total = 0;
    size_t i;
    json_t *item;
    json_array_foreach(items, i, item) {
      const char *name;
      json_int_t qty;
      double price;
      json_t *tags;
      if (json_unpack(item, "{s:s, s:I, s:f, s:o}", "name", &name, "qty", &qty, "price",
                      &price, "tags", &tags) != 0)
        continue;
      qty_total += qty;
      value += (double)qty * price;
      size_t j;
      json_t *tag;
      json_array_foreach(tags, j, tag) {
        const char *t = json_string_value(tag);
        if (!t) continue;
        json_t *list = json_object_get(index, t);
        if (!list) { list = json_array(); json_object_set_new(index, t, list); }
        json_array_append_new(list, json_pack("{s:I, s:s}", "qty", qty, "name", name));
      }
    }
    json_t *copy = json_deep_copy(doc);
    json_object_set_new(copy, "index", index);
    json_object_update(copy, json_pack("{s:s, s:i}", "generator", "mlgo-driver", "round", r));
    char *out = json_dumps(copy, JSON_COMPACT | JSON_SORT_KEYS);
    if (r == rounds - 1) {
      printf("items %zu qty %lld value %.4f roundtrip %d tags %zu\n", json_array_size(items),
             qty_total, value, same, json_object_size(index));
      printf("sorted %zu %016llx ascii %zu %016llx copy %zu %016llx\n", strlen(sorted),
             fnv1a(sorted, strlen(sorted)), strlen(ascii), fnv1a(ascii, strlen(ascii)),
             strlen(out), fnv1a(out, strlen(out)));
    }
    free(sorted); free(ascii); free(out);
    json_decref(again); json_decref(copy); json_decref(doc);
  }
  free(text);
  return 0;
}
"""

# jansson's configure output (amd64, glibc).
JANSSON_CONFIG = """#ifndef JANSSON_CONFIG_H
#define JANSSON_CONFIG_H
#ifdef __cplusplus
#define JSON_INLINE inline
#else
#define JSON_INLINE inline
#endif
#define JSON_INTEGER_IS_LONG_LONG 1
#define JSON_HAVE_LOCALECONV 1
#define JSON_HAVE_ATOMIC_BUILTINS 1
#define JSON_HAVE_SYNC_BUILTINS 1
#define JSON_PARSER_MAX_DEPTH 2048
#endif
"""

# jansson's CMake output for its private config (amd64, glibc); the driver seeds the
# hash itself, so the urandom seeding is never used.
JANSSON_PRIVATE_CONFIG = """#define HAVE_ENDIAN_H 1
#define HAVE_FCNTL_H 1
#define HAVE_SCHED_H 1
#define HAVE_UNISTD_H 1
#define HAVE_SYS_PARAM_H 1
#define HAVE_SYS_STAT_H 1
#define HAVE_SYS_TIME_H 1
#define HAVE_SYS_TYPES_H 1
#define HAVE_STDINT_H 1
#define HAVE_CLOSE 1
#define HAVE_GETPID 1
#define HAVE_GETTIMEOFDAY 1
#define HAVE_OPEN 1
#define HAVE_READ 1
#define HAVE_SCHED_YIELD 1
#define HAVE_SYNC_BUILTINS 1
#define HAVE_ATOMIC_BUILTINS 1
#define HAVE_LOCALE_H 1
#define HAVE_SETLOCALE 1
#define HAVE_INT32_T 1
#define HAVE_UINT32_T 1
#define HAVE_UINT16_T 1
#define HAVE_UINT8_T 1
#define HAVE_SSIZE_T 1
#define USE_URANDOM 1
#define INITIAL_HASHTABLE_ORDER 3
"""

YAML_DRIVER = r"""/* mlgo runtime_check driver for libyaml: parse a YAML stream event by event and
   emit it again (block style, to stdout), then load it as documents and dump them in
   canonical form. Usage: yaml_run FILE.yaml */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

static int fail(const char *what, const char *problem) {
  fprintf(stderr, "%s error: %s\n", what, problem ? problem : "?");
  return 1;
}

int main(int argc, char **argv) {
  if (argc < 2) { fprintf(stderr, "usage: %s FILE.yaml\n", argv[0]); return 2; }
  FILE *f = fopen(argv[1], "rb");
  if (!f) { perror(argv[1]); return 2; }
  long counts[16] = {0};
  yaml_parser_t parser;
  yaml_emitter_t emitter;
  yaml_event_t event;
  yaml_parser_initialize(&parser);
  yaml_parser_set_input_file(&parser, f);
  yaml_emitter_initialize(&emitter);
  yaml_emitter_set_output_file(&emitter, stdout);
  yaml_emitter_set_unicode(&emitter, 1);
  yaml_emitter_set_width(&emitter, 72);
  for (int done = 0; !done;) {
    if (!yaml_parser_parse(&parser, &event)) return fail("parser", parser.problem);
    if (event.type < 16) counts[event.type]++;
    done = event.type == YAML_STREAM_END_EVENT;
    if (!yaml_emitter_emit(&emitter, &event)) return fail("emitter", emitter.problem);
  }
  yaml_parser_delete(&parser);
  yaml_emitter_delete(&emitter);

  rewind(f);
  yaml_parser_initialize(&parser);
  yaml_parser_set_input_file(&parser, f);
  yaml_emitter_initialize(&emitter);
  yaml_emitter_set_output_file(&emitter, stdout);
  yaml_emitter_set_canonical(&emitter, 1);
  yaml_emitter_open(&emitter);
  long docs = 0, nodes = 0;
  for (;;) {
    yaml_document_t doc;
    if (!yaml_parser_load(&parser, &doc)) return fail("loader", parser.problem);
    yaml_node_t *root = yaml_document_get_root_node(&doc);
    if (!root) { yaml_document_delete(&doc); break; }
    docs++;
    nodes += (long)(doc.nodes.top - doc.nodes.start);
    if (!yaml_emitter_dump(&emitter, &doc)) return fail("dumper", emitter.problem);
  }
  yaml_emitter_close(&emitter);
  yaml_parser_delete(&parser);
  yaml_emitter_delete(&emitter);
  fclose(f);
  printf("# events:");
  for (int i = 1; i < 11; i++) printf(" %ld", counts[i]);
  printf("\n# documents %ld nodes %ld\n", docs, nodes);
  return 0;
}
"""

# mbedtls: only the modules the driver uses (mbedtls 2.28's MBEDTLS_CONFIG_FILE); no
# AES-NI, so the AES rounds are compiled code.
MBEDTLS_CONFIG = """#ifndef MLGO_MBEDTLS_CONFIG_H
#define MLGO_MBEDTLS_CONFIG_H
#define MBEDTLS_HAVE_ASM
#define MBEDTLS_CIPHER_MODE_CBC
#define MBEDTLS_CIPHER_MODE_CTR
#define MBEDTLS_AES_C
#define MBEDTLS_CIPHER_C
#define MBEDTLS_GCM_C
#define MBEDTLS_CHACHA20_C
#define MBEDTLS_POLY1305_C
#define MBEDTLS_CHACHAPOLY_C
#define MBEDTLS_SHA256_C
#define MBEDTLS_SHA512_C
#define MBEDTLS_BIGNUM_C
#define MBEDTLS_PLATFORM_C
#include "mbedtls/check_config.h"
#endif
"""

MBEDTLS_DRIVER = r"""/* mlgo runtime_check driver for mbedtls: SHA-256/512 of a file, AES-256-CBC,
   AES-128-CTR, AES-GCM and ChaCha20-Poly1305 over it, and modular exponentiation
   on a 1024-bit modulus derived from it. Usage: mbedtls_run FILE ROUNDS */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "mbedtls/aes.h"
#include "mbedtls/bignum.h"
#include "mbedtls/chachapoly.h"
#include "mbedtls/gcm.h"
#include "mbedtls/sha256.h"
#include "mbedtls/sha512.h"
""" + _READ_FILE + r"""
static void hex(const char *label, const unsigned char *b, size_t n) {
  printf("%s ", label);
  for (size_t i = 0; i < n; i++) printf("%02x", b[i]);
  printf("\n");
}

#define CHECK(x) do { int rc_ = (x); if (rc_ != 0) { \
  fprintf(stderr, "%s failed: -0x%04x\n", #x, (unsigned)-rc_); return 1; } } while (0)

int main(int argc, char **argv) {
  if (argc < 2) { fprintf(stderr, "usage: %s FILE [ROUNDS]\n", argv[0]); return 2; }
  size_t len;
  char *text = read_file(argv[1], &len);
  int rounds = argc > 2 ? atoi(argv[2]) : 1;
  size_t n = len & ~(size_t)15;
  unsigned char *buf = malloc(n + 16), *out = malloc(n + 16);
  unsigned char d256[32], d512[64], tag[16], key[32], iv[16], nonce[12];
  for (int r = 0; r < rounds; r++) {
    CHECK(mbedtls_sha256_ret((const unsigned char *)text, len, d256, 0));
    CHECK(mbedtls_sha512_ret((const unsigned char *)text, len, d512, 0));
    memcpy(key, d512, 32);
    memcpy(iv, d512 + 32, 16);
    memcpy(nonce, d512 + 48, 12);
    memcpy(buf, text, n);

    mbedtls_aes_context aes;
    mbedtls_aes_init(&aes);
    CHECK(mbedtls_aes_setkey_enc(&aes, key, 256));
    unsigned char civ[16];
    memcpy(civ, iv, 16);
    CHECK(mbedtls_aes_crypt_cbc(&aes, MBEDTLS_AES_ENCRYPT, n, civ, buf, out));
    unsigned char dcbc[32];
    CHECK(mbedtls_sha256_ret(out, n, dcbc, 0));
    CHECK(mbedtls_aes_setkey_dec(&aes, key, 256));
    memcpy(civ, iv, 16);
    CHECK(mbedtls_aes_crypt_cbc(&aes, MBEDTLS_AES_DECRYPT, n, civ, out, buf));
    int cbc_ok = memcmp(buf, text, n) == 0;
    CHECK(mbedtls_aes_setkey_enc(&aes, key, 128));
    size_t off = 0;
    unsigned char ctr[16], block[16];
    memcpy(ctr, iv, 16);
    CHECK(mbedtls_aes_crypt_ctr(&aes, n, &off, ctr, block, buf, out));
    unsigned char dctr[32];
    CHECK(mbedtls_sha256_ret(out, n, dctr, 0));
    mbedtls_aes_free(&aes);

    mbedtls_gcm_context gcm;
    mbedtls_gcm_init(&gcm);
    CHECK(mbedtls_gcm_setkey(&gcm, MBEDTLS_CIPHER_ID_AES, key, 128));
    CHECK(mbedtls_gcm_crypt_and_tag(&gcm, MBEDTLS_GCM_ENCRYPT, n, nonce, 12, d256, 32,
                                    buf, out, 16, tag));
    unsigned char gcm_tag[16];
    memcpy(gcm_tag, tag, 16);
    mbedtls_gcm_free(&gcm);

    mbedtls_chachapoly_context cp;
    mbedtls_chachapoly_init(&cp);
    CHECK(mbedtls_chachapoly_setkey(&cp, key));
    CHECK(mbedtls_chachapoly_encrypt_and_tag(&cp, n, nonce, d256, 32, buf, out, tag));
    int cp_ok = mbedtls_chachapoly_auth_decrypt(&cp, n, nonce, d256, 32, tag, out, buf) == 0
                && memcmp(buf, text, n) == 0;
    mbedtls_chachapoly_free(&cp);

    /* X = G^E mod M for a 1024-bit odd M and 512-bit E taken from the digests. */
    mbedtls_mpi m, e, g, x;
    mbedtls_mpi_init(&m); mbedtls_mpi_init(&e); mbedtls_mpi_init(&g); mbedtls_mpi_init(&x);
    unsigned char mb[128];
    for (int i = 0; i < 128; i++) mb[i] = d512[i % 64] ^ (unsigned char)(i * 29);
    mb[0] |= 0x80;
    mb[127] |= 1;
    CHECK(mbedtls_mpi_read_binary(&m, mb, 128));
    CHECK(mbedtls_mpi_read_binary(&e, d512, 64));
    CHECK(mbedtls_mpi_read_binary(&g, d256, 32));
    for (int i = 0; i < 8; i++) {
      CHECK(mbedtls_mpi_exp_mod(&x, &g, &e, &m, NULL));
      CHECK(mbedtls_mpi_add_int(&g, &x, i + 2));
    }
    unsigned char xb[128];
    CHECK(mbedtls_mpi_write_binary(&x, xb, 128));
    mbedtls_mpi_free(&m); mbedtls_mpi_free(&e); mbedtls_mpi_free(&g); mbedtls_mpi_free(&x);

    if (r == rounds - 1) {
      hex("sha256", d256, 32);
      hex("sha512", d512, 64);
      hex("aes256-cbc/sha256", dcbc, 32);
      hex("aes128-ctr/sha256", dctr, 32);
      hex("aes128-gcm tag", gcm_tag, 16);
      hex("chacha20-poly1305 tag", tag, 16);
      hex("modexp", xb, 128);
      printf("cbc roundtrip %d chachapoly roundtrip %d\n", cbc_ok, cp_ok);
    }
  }
  free(buf); free(out); free(text);
  return 0;
}
"""

UTF8PROC_DRIVER = r"""/* mlgo runtime_check driver for utf8proc: per line of a UTF-8 text, NFC, NFD,
   NFKC and NFKC case folding, grapheme clusters, display width and general categories;
   prints the case-folded text and the totals. Usage: utf8proc_run FILE */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "utf8proc.h"
""" + _READ_FILE + r"""
static utf8proc_ssize_t norm(const utf8proc_uint8_t *s, utf8proc_ssize_t n,
                             utf8proc_option_t opt, utf8proc_uint8_t **out) {
  utf8proc_ssize_t r = utf8proc_map(s, n, out, opt);
  if (r < 0) { fprintf(stderr, "utf8proc_map: %s\n", utf8proc_errmsg(r)); exit(1); }
  return r;
}

int main(int argc, char **argv) {
  if (argc < 2) { fprintf(stderr, "usage: %s FILE\n", argv[0]); return 2; }
  size_t len;
  char *text = read_file(argv[1], &len);
  long cats[32] = {0};
  long long nfc = 0, nfd = 0, nfkc = 0, folded = 0, graphemes = 0, width = 0, upper = 0;
  unsigned long long h = 1469598103934665603ULL;
  char *line = text, *end = text + len;
  while (line < end) {
    char *nl = memchr(line, '\n', (size_t)(end - line));
    utf8proc_ssize_t n = (nl ? nl : end) - line;
    const utf8proc_uint8_t *s = (const utf8proc_uint8_t *)line;
    utf8proc_uint8_t *o;
    nfc += norm(s, n, UTF8PROC_STABLE | UTF8PROC_COMPOSE, &o); free(o);
    nfd += norm(s, n, UTF8PROC_STABLE | UTF8PROC_DECOMPOSE, &o); free(o);
    nfkc += norm(s, n, UTF8PROC_STABLE | UTF8PROC_COMPOSE | UTF8PROC_COMPAT, &o); free(o);
    utf8proc_ssize_t m = norm(s, n, UTF8PROC_STABLE | UTF8PROC_COMPOSE | UTF8PROC_COMPAT |
                              UTF8PROC_CASEFOLD | UTF8PROC_IGNORE | UTF8PROC_STRIPCC, &o);
    folded += m;
    fwrite(o, 1, (size_t)m, stdout);
    fputc('\n', stdout);
    h = (h ^ fnv1a((const char *)o, (size_t)m)) * 1099511628211ULL;
    free(o);
    utf8proc_int32_t prev = -1, state = 0;
    for (utf8proc_ssize_t i = 0; i < n;) {
      utf8proc_int32_t c;
      utf8proc_ssize_t k = utf8proc_iterate(s + i, n - i, &c);
      if (k < 0) { fprintf(stderr, "bad UTF-8 at %ld\n", (long)(line - text + i)); return 1; }
      i += k;
      cats[utf8proc_category(c) & 31]++;
      width += utf8proc_charwidth(c);
      upper += utf8proc_toupper(c) != c;
      if (prev < 0 || utf8proc_grapheme_break_stateful(prev, c, &state)) graphemes++;
      prev = c;
    }
    line += n + 1;
  }
  printf("# nfc %lld nfd %lld nfkc %lld folded %lld graphemes %lld width %lld upper %lld "
         "hash %016llx\n# categories", nfc, nfd, nfkc, folded, graphemes, width, upper, h);
  for (int i = 0; i < 30; i++) printf(" %ld", cats[i]);
  printf("\n");
  free(text);
  return 0;
}
"""

PUGIXML_DRIVER = r"""// mlgo runtime_check driver for pugixml: parse an XML document, run XPath
// queries over it, modify it (attributes computed per item, items out of stock removed) and
// write it back indented. Usage: pugixml_run FILE.xml
#include <cstdio>
#include <iostream>
#include <string>

#include "pugixml.hpp"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s FILE.xml\n", argv[0]);
    return 2;
  }
  pugi::xml_document doc;
  pugi::xml_parse_result res =
      doc.load_file(argv[1], pugi::parse_default | pugi::parse_comments | pugi::parse_pi);
  if (!res) {
    std::fprintf(stderr, "%s at offset %ld\n", res.description(), (long)res.offset);
    return 1;
  }
  const char* numbers[] = {
      "count(//item)", "sum(//item/@stock)", "sum(//item/price)",
      "count(//item[@stock > 40])", "count(//item[contains(name, 'an')])",
      "count(//category[count(item) > 10])", "sum(//item[tags/tag = 'blue']/price)",
      "count(//description//b)", "string-length(normalize-space(string(/catalog)))"};
  for (const char* q : numbers)
    std::printf("%s = %.4f\n", q, pugi::xpath_query(q).evaluate_number(doc));
  pugi::xpath_query first_word("substring-before(concat(normalize-space(name), ' '), ' ')");
  pugi::xpath_node_set expensive = doc.select_nodes("//item[price > 90]");
  std::printf("expensive %zu:", expensive.size());
  for (const pugi::xpath_node& n : expensive)
    std::printf(" %s", first_word.evaluate_string(n.node()).c_str());
  std::printf("\n");
  long removed = 0;
  for (pugi::xml_node cat : doc.child("catalog").children("category")) {
    for (pugi::xml_node item = cat.child("item"); item;) {
      pugi::xml_node next = item.next_sibling("item");
      int stock = item.attribute("stock").as_int();
      double price = item.child("price").text().as_double();
      if (stock == 0) {
        cat.remove_child(item);
        removed++;
      } else {
        item.append_attribute("value").set_value(stock * price);
        item.child("name").text().set((std::string(item.child_value("name")) + " #" +
                                       item.attribute("id").value()).c_str());
      }
      item = next;
    }
  }
  std::printf("removed %ld\n", removed);
  doc.save(std::cout, "  ", pugi::format_indent | pugi::format_no_declaration);
  return 0;
}
"""

# expat's configure output (amd64, glibc), except the hash salt: expat reads it from
# arc4random_buf, here a fixed one (below) so every run hashes names the same way.
EXPAT_CONFIG = """#ifndef EXPAT_CONFIG_H
#define EXPAT_CONFIG_H 1
#define BYTEORDER 1234
#define HAVE_ARC4RANDOM_BUF 1
#define arc4random_buf mlgo_fixed_salt
#define HAVE_DLFCN_H 1
#define HAVE_FCNTL_H 1
#define HAVE_GETPAGESIZE 1
#define HAVE_INTTYPES_H 1
#define HAVE_MEMORY_H 1
#define HAVE_MMAP 1
#define HAVE_STDINT_H 1
#define HAVE_STDLIB_H 1
#define HAVE_STRINGS_H 1
#define HAVE_STRING_H 1
#define HAVE_SYS_STAT_H 1
#define HAVE_SYS_TYPES_H 1
#define HAVE_UNISTD_H 1
#define PACKAGE "expat"
#define PACKAGE_NAME "expat"
#define PACKAGE_VERSION "2.5.0"
#define STDC_HEADERS 1
#define XML_CONTEXT_BYTES 1024
#define XML_DTD 1
#define XML_NS 1
#endif
"""

EXPAT_FIXED_SALT = r"""/* mlgo runtime_check: a fixed hash salt for expat (see expat_config.h). */
#include <stddef.h>
#include <string.h>
void mlgo_fixed_salt(void *buf, size_t n) { memset(buf, 0x5a, n); }
"""

# cmark's CMake output (the export and version headers are source_tree.PACKAGE_HEADERS).
CMARK_CONFIG = """#ifndef CMARK_CONFIG_H
#define CMARK_CONFIG_H
#include <stdbool.h>
#define HAVE_STDBOOL_H
#define HAVE___BUILTIN_EXPECT
#define HAVE___ATTRIBUTE__
#define CMARK_ATTRIBUTE(list) __attribute__ (list)
#ifndef CMARK_INLINE
#define CMARK_INLINE inline
#endif
#endif
"""
