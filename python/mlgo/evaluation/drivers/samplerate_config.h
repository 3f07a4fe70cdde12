/* mlgo runtime_check: the config.h libsamplerate's configure step would write for an
   x86-64 Linux build, with all three sinc converters (best, medium, fastest) compiled
   in. x86 does not clip on float to int conversion, so the library clips itself. */
#ifndef MLGO_SAMPLERATE_CONFIG_H
#define MLGO_SAMPLERATE_CONFIG_H
#define PACKAGE "libsamplerate"
#define VERSION "0.2.2"
#define CPU_CLIPS_NEGATIVE 0
#define CPU_CLIPS_POSITIVE 0
#define CPU_IS_BIG_ENDIAN 0
#define CPU_IS_LITTLE_ENDIAN 1
#define HAVE_LRINT 1
#define HAVE_LRINTF 1
#define HAVE_STDBOOL_H 1
#define HAVE_STDINT_H 1
#define HAVE_UNISTD_H 1
#define HAVE_VISIBILITY 1
#define ENABLE_SINC_FAST_CONVERTER 1
#define ENABLE_SINC_MEDIUM_CONVERTER 1
#define ENABLE_SINC_BEST_CONVERTER 1
#define SIZEOF_INT 4
#define SIZEOF_LONG 8
#endif
