/* mlgo runtime_check driver for jansson: parse a JSON document, dump it with
   sorted keys and compact/ASCII, re-parse and compare, unpack every item, build a
   per-tag index, deep-copy and update. Usage: jansson_run FILE.json ROUNDS */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <jansson.h>
#include "mlgo_read_file.h"

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
