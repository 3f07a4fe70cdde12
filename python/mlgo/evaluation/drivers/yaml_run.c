/* mlgo runtime_check driver for libyaml: parse a YAML stream event by event and
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
