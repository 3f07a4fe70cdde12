/* Needs a header a configure step would generate: make_corpus must list it as skipped. */
#include "generated_by_configure.h"
int broken(void) { return GENERATED_VALUE; }
