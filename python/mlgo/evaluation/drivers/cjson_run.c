/* mlgo runtime_check driver for cJSON: parse a JSON document, print it back
   (formatted and compact), re-parse and compare, walk it, sort and modify a copy,
   diff the two as JSON patches and apply them. Usage: cjson_run FILE.json ROUNDS */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cJSON.h"
#include "cJSON_Utils.h"
#include "mlgo_read_file.h"

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
