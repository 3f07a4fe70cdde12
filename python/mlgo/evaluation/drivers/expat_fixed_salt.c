/* mlgo runtime_check: a fixed hash salt for expat (see expat_config.h). */
#include <stddef.h>
#include <string.h>
void mlgo_fixed_salt(void *buf, size_t n) { memset(buf, 0x5a, n); }
