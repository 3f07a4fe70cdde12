"""Measured execution of programs built with a regalloc policy, against the default.

A static reward can mislead, so this builds real programs from Debian source packages
twice -- once with the default allocator, once with the policy in llc's loop for every
translation unit -- runs both under valgrind's cachegrind with cache and branch
simulation, checks that both produce the same output, and compares:
  instructions (Ir), D1 misses (D1mr + D1mw), LL misses (ILmr + DLmr + DLmw),
  branch mispredictions (Bcm + Bim), and an estimated cycle count
      cycles = Ir + 10 * (I1mr + D1mr + D1mw) + 100 * (ILmr + DLmr + DLmw)
               + 15 * (Bcm + Bim)
  (a simple in-order model: 10 cycles per L1 miss served by LL, 100 per LL miss,
  15 per mispredicted branch; cachegrind counts are deterministic).
Programs: PROGRAMS, each built from a Debian source package fetched at run time, with
a deterministic workload. Inputs (runtime_workloads) and drivers for library packages
(runtime_drivers) are project-written; nothing third-party is committed. Every program
has a role:
  model    its profiles may be used to fit a performance model (packages of the
           default corpus set, or others outside @extra/@unseen)
  heldout  never used to train a model or a policy (packages of @unseen or @extra only)
  reserve  held out too, and no policy has been run on them yet: kept to judge a rule
           written down first. `select` leaves them out unless asked for by name or by
           role, so a routine run does not use them up.
`programs(role)` lists them; `describe()` prints the table.
Hardware counters: when `perf stat` can count instructions (perf_available), each build
also runs once natively under perf; otherwise that is skipped and said so.
"""
import concurrent.futures as cf
import dataclasses
import hashlib
import json
import math
import os
import pathlib
import random
import re
import shutil
import subprocess
import sys
import tempfile

from mlgo import env
from mlgo import problems as problems_lib
from mlgo.evaluation import runtime_drivers, runtime_drivers_heldout, runtime_workloads
from mlgo.policy import policy_io
from mlgo.util import cli, stats
from mlgo.util.toolchain import toolchain

CACHE_MISS_L1 = 10
CACHE_MISS_LL = 100
MISPREDICT = 15

LUA_SCRIPT = r"""
-- mlgo runtime_check workload: tables, strings, closures, arithmetic.
local function fib(n) if n < 2 then return n end return fib(n - 1) + fib(n - 2) end
local t = {}
for i = 1, 20000 do t[i] = (i * 7919) % 10007 end
table.sort(t)
local acc = 0
for i = 1, #t, 3 do acc = (acc + t[i] * i) % 1000003 end
local words = {}
for w in string.gmatch(string.rep("the quick brown fox jumps over the lazy dog ", 400), "%a+") do
  words[w] = (words[w] or 0) + 1
end
local keys = {}
for k in pairs(words) do keys[#keys + 1] = k end
table.sort(keys)
local parts = {}
for _, k in ipairs(keys) do parts[#parts + 1] = k .. "=" .. words[k] end
local function counter() local c = 0 return function() c = c + 1 return c end end
local c = counter()
for _ = 1, 50000 do c() end
local m = {}
for i = 1, 60 do m[i] = {} for j = 1, 60 do m[i][j] = (i * j) % 17 end end
local s = 0
for i = 1, 60 do for j = 1, 60 do for k = 1, 60, 7 do s = s + m[i][k] * m[k][j] end end end
print(fib(22), acc, table.concat(parts, ","), c(), s, string.format("%.3f", math.sqrt(acc)))
"""


ROLES = ("model", "heldout", "reserve")


@dataclasses.dataclass
class Program:
  name: str
  package: str
  sources: list          # relative to the package source root; {gen}/X: a generated file
  cflags: list
  libs: list
  args: list             # with {input} / {script} / {work} placeholders (program_args)
  output_file: str | None
  role: str = "model"    # one of ROLES
  workload: str = ""     # what it runs, one line
  cxx: bool = False      # link with clang++ (.cc/.cpp/.cxx units compile as C++)
  gen_files: dict = dataclasses.field(default_factory=dict)   # name -> text, in {gen}
  gen_copies: dict = dataclasses.field(default_factory=dict)  # name -> source-tree path


def _c(names, fmt="{}.c"):
  return [fmt.format(n) for n in names.split()]


PROGRAMS = [
    # role "model": packages of the default corpus set.
    Program("lua", "lua5.4",
            [f"src/{f}.c" for f in (
                "lapi lauxlib lbaselib lcode lcorolib lctype ldblib ldebug ldo ldump lfunc "
                "lgc linit liolib llex lmathlib lmem loadlib lobject lopcodes loslib lparser "
                "lstate lstring lstrlib ltable ltablib ltm lua lundump lutf8lib lvm lzio"
            ).split()],
            # A fixed string-hash seed (lua mixes in time(NULL)): the same work every run.
            ["-DLUA_COMPAT_5_3", "-DLUA_USE_LINUX", "-Isrc", "-Dluai_makeseed(L)=0x6d6c676fu"],
            ["-lm", "-ldl"],
            ["{script}"], None, role="model",
            workload="the lua5.4 interpreter on a project-written benchmark script"),
    Program("bzip2", "bzip2",
            [f"{f}.c" for f in "blocksort huffman crctable randtable compress decompress "
             "bzlib bzip2".split()],
            ["-D_FILE_OFFSET_BITS=64", "-I."], [], ["-c", "-9", "{input}"], None,
            role="model", workload="bzip2 -9 of the generated ~400 KB text"),
    Program("lz4", "lz4",
            ["programs/lz4cli.c", "programs/lz4io.c", "programs/bench.c",
             "programs/datagen.c", "lib/lz4.c", "lib/lz4hc.c", "lib/lz4frame.c",
             "lib/xxhash.c"],
            ["-Ilib", "-Iprograms", "-DXXH_NAMESPACE=LZ4_"], ["-lpthread"],
            ["-9", "-c", "{input}"], None, role="model",
            workload="lz4 -9 of the generated text"),
    Program("brotli", "brotli",
            ["c/tools/brotli.c"]
            + _c("constants context dictionary platform transform", "c/common/{}.c")
            + _c("bit_reader decode huffman state", "c/dec/{}.c")
            + _c("backward_references backward_references_hq bit_cost block_splitter "
                 "brotli_bit_stream cluster command compress_fragment "
                 "compress_fragment_two_pass dictionary_hash encode encoder_dict "
                 "entropy_encode fast_log histogram literal_cost memory metablock "
                 "static_dict utf8_util", "c/enc/{}.c"),
            ["-Ic/include"], ["-lm"], ["-c", "-q", "9", "{input}"], None, role="model",
            workload="brotli -q 9 of the generated text"),
    Program("minigzip", "zlib",
            _c("adler32 compress crc32 deflate gzclose gzlib gzread gzwrite infback "
               "inffast inflate inftrees trees uncompr zutil") + ["test/minigzip.c"],
            ["-I.", "-D_LARGEFILE64_SOURCE=1", "-DHAVE_HIDDEN"], [],
            ["-c", "-9", "{input}"], None, role="model",
            workload="zlib's minigzip -9 of the generated text"),
    Program("cjson", "cjson", ["cJSON.c", "cJSON_Utils.c", "{gen}/cjson_run.c"],
            ["-I."], ["-lm"], ["{work}/doc.json", "2"], None, role="model",
            workload="our driver: parse, print, compare, sort, diff and patch a generated "
                     "JSON document (2 rounds)",
            gen_files={"cjson_run.c": runtime_drivers.CJSON_DRIVER}),
    Program("jansson", "jansson",
            _c("dump error hashtable hashtable_seed load memory pack_unpack strbuffer "
               "strconv utf value version", "src/{}.c") + ["{gen}/jansson_run.c"],
            ["-Isrc", "-DHAVE_STDINT_H=1", "-DHAVE_UNISTD_H=1"], [],
            ["{work}/doc.json", "2"], None, role="model",
            workload="our driver: parse, dump (sorted, ASCII), compare, unpack and index "
                     "the generated JSON document (2 rounds)",
            gen_files={"jansson_run.c": runtime_drivers.JANSSON_DRIVER,
                       "jansson_config.h": runtime_drivers.JANSSON_CONFIG,
                       "jansson_private_config.h": runtime_drivers.JANSSON_PRIVATE_CONFIG}),
    Program("libyaml", "libyaml",
            _c("api dumper emitter loader parser reader scanner writer", "src/{}.c")
            + ["{gen}/yaml_run.c"],
            ["-Iinclude", "-Isrc", "-DYAML_VERSION_MAJOR=0", "-DYAML_VERSION_MINOR=2",
             "-DYAML_VERSION_PATCH=5", '-DYAML_VERSION_STRING="0.2.5"'], [],
            ["{work}/doc.yaml"], None, role="model",
            workload="our driver: re-emit a generated YAML stream event by event, then load "
                     "and dump it canonically",
            gen_files={"yaml_run.c": runtime_drivers.YAML_DRIVER}),
    Program("pcre2grep", "pcre2",
            _c("auto_possess compile config context convert dfa_match error extuni "
               "find_bracket maketables match match_data newline ord2utf pattern_info "
               "script_run serialize string_utils study substitute substring tables ucd "
               "valid_utf xclass", "src/pcre2_{}.c")
            + ["{gen}/pcre2_chartables.c", "src/pcre2grep.c"],
            ["-Isrc", "-DHAVE_CONFIG_H", "-DPCRE2_CODE_UNIT_WIDTH=8", "-DSUPPORT_UNICODE",
             "-DSUPPORT_PCRE2_8", "-DHAVE_STDINT_H=1", "-DHAVE_INTTYPES_H=1",
             "-DHAVE_UNISTD_H=1", "-DHAVE_STRERROR=1", "-DHAVE_MEMMOVE=1"], [],
            ["-n", "-o", "-i", "-e", r"\b(\w+) \1\b", "-e", r"\b[^aeiou\s]{4,}\w*",
             "-e", r"(?:ab|cd|ef)[a-z]{2,}?s\b", "-e", r"^\w+(?= \w{9,})", "{input}"],
            None, role="model",
            workload="pcre2grep (interpreter, no JIT): four regexes over the generated text",
            gen_copies={"config.h": "src/config.h.generic", "pcre2.h": "src/pcre2.h.generic",
                        "pcre2_chartables.c": "src/pcre2_chartables.c.dist"}),
    Program("mbedtls", "mbedtls",
            _c("aes bignum chacha20 chachapoly cipher cipher_wrap constant_time gcm "
               "platform platform_util poly1305 sha256 sha512", "library/{}.c")
            + ["{gen}/mbedtls_run.c"],
            ["-Iinclude", '-DMBEDTLS_CONFIG_FILE="mlgo_mbedtls_config.h"'], [],
            ["{input}", "2"], None, role="model",
            workload="our driver: SHA-2, AES-CBC/CTR/GCM, ChaCha20-Poly1305 over the "
                     "generated text and 1024-bit modular exponentiation (2 rounds)",
            gen_files={"mbedtls_run.c": runtime_drivers.MBEDTLS_DRIVER,
                       "mlgo_mbedtls_config.h": runtime_drivers.MBEDTLS_CONFIG}),
    # role "heldout": @unseen and @extra packages, never trained on.
    Program("xxhsum", "xxhash",
            ["cli/xxhsum.c", "cli/xsum_os_specific.c", "cli/xsum_output.c",
             "cli/xsum_sanity_check.c", "cli/xsum_bench.c", "xxhash.c"],
            ["-I.", "-Icli"], [], ["-H2", "{input}"], None, role="heldout",
            workload="XXH128 of the generated text"),
    Program("libdeflate-gzip", "libdeflate",
            ["programs/gzip.c", "programs/prog_util.c", "programs/tgetopt.c"]
            + [f"lib/{f}.c" for f in "deflate_compress deflate_decompress utils crc32 adler32 "
               "gzip_compress gzip_decompress zlib_compress zlib_decompress".split()]
            + ["lib/x86/cpu_features.c"],
            ["-I.", "-D_FILE_OFFSET_BITS=64"], [], ["-c", "-9", "{input}"], None,
            role="heldout", workload="libdeflate's gzip -9 of the generated text"),
    Program("cmark", "cmark",
            _c("blocks buffer cmark cmark_ctype commonmark houdini_href_e houdini_html_e "
               "houdini_html_u html inlines iterator latex main man node references render "
               "scanners utf8 xml", "src/{}.c"),
            ["-Isrc"], [], ["--smart"] + ["{work}/doc.md"] * 4, None,
            role="heldout",
            workload="cmark --smart: a generated markdown document (4 times) to HTML",
            gen_files={"config.h": runtime_drivers.CMARK_CONFIG}),
    Program("zopfli", "zopfli",
            _c("blocksplitter cache deflate gzip_container hash katajainen lz77 squeeze tree "
               "util zlib_container zopfli_lib zopfli_bin", "src/zopfli/{}.c"),
            [], ["-lm"], ["-c", "--i1", "{work}/doc.md"], None, role="heldout",
            workload="zopfli --i1 (gzip) of the generated markdown document"),
    Program("xmlwf", "expat",
            _c("xmlparse xmlrole xmltok", "expat/lib/{}.c")
            + _c("xmlwf xmlfile codepage unixfilemap", "expat/xmlwf/{}.c")
            + ["{gen}/fixed_salt.c"],
            ["-Iexpat/lib"], [], ["-d", "{work}/xmlwf.out"] + ["{work}/doc.xml"] * 3, None,
            role="heldout",
            workload="expat's xmlwf: a generated XML catalog (3 times) to canonical XML",
            gen_files={"expat_config.h": runtime_drivers.EXPAT_CONFIG,
                       "fixed_salt.c": runtime_drivers.EXPAT_FIXED_SALT}),
    Program("pugixml", "pugixml", ["src/pugixml.cpp", "{gen}/pugixml_run.cpp"],
            ["-Isrc"], [], ["{work}/doc.xml"], None, role="heldout", cxx=True,
            workload="our C++ driver: parse the XML catalog, XPath queries, edit, save",
            gen_files={"pugixml_run.cpp": runtime_drivers.PUGIXML_DRIVER}),
    Program("utf8proc", "utf8proc", ["utf8proc.c", "{gen}/utf8proc_run.c"],
            ["-I."], [], ["{work}/utf8.txt"], None, role="heldout",
            workload="our driver: NFC/NFD/NFKC/case folding, graphemes, widths of a "
                     "generated multi-script UTF-8 text",
            gen_files={"utf8proc_run.c": runtime_drivers.UTF8PROC_DRIVER}),
    # Added 2026-11-26 from @extra packages; first measured with a policy after the rule
    # that judged them was written down.
    Program("lzo", "lzo2",
            _c("lzo_init lzo_util lzo1x_1 lzo1x_1o lzo1x_9x lzo1x_o lzo1x_d2 lzo1b_5 "
               "lzo1b_cc lzo1b_rr lzo1b_d2 lzo1f_1 lzo1f_d2", "src/{}.c")
            + ["{gen}/lzo_run.c"],
            ["-Iinclude", "-Isrc"], [], ["{input}", "2"], None, role="heldout",
            workload="our driver: LZO1X-1, 1X-1(15), 1X-999 (levels 3 and 7, optimized), "
                     "1B-5 and 1F-1 on the generated text in blocks, safe decompression "
                     "and checks (2 rounds)",
            gen_files={"lzo_run.c": runtime_drivers_heldout.LZO_DRIVER}),
    Program("gif", "giflib",
            _c("dgif_lib egif_lib gifalloc gif_err gif_font gif_hash openbsd-reallocarray "
               "quantize") + ["{gen}/gif_run.c"],
            ["-I.", "-std=gnu99"], [], ["320", "8"], None, role="heldout",
            workload="our driver: quantize, caption and GIF-encode 8 generated frames in "
                     "memory (animation and single images), decode and check them",
            gen_files={"gif_run.c": runtime_drivers_heldout.GIF_DRIVER}),
    Program("dconv", "double-conversion",
            _c("bignum bignum-dtoa cached-powers double-to-string fast-dtoa fixed-dtoa "
               "string-to-double strtod", "double-conversion/{}.cc")
            + ["{gen}/dconv_run.cc"],
            ["-I."], [], ["{work}/doc.json", "16000"], None, role="heldout", cxx=True,
            workload="our C++ driver: the JSON document's numbers and 16000 generated "
                     "doubles printed shortest/fixed/precision/exponential and read back",
            gen_files={"dconv_run.cc": runtime_drivers_heldout.DCONV_DRIVER}),
    # Debian's re2 source lacks the generated Unicode group tables; the driver defines its
    # own (ASCII and Latin-1), enough for its patterns.
    Program("re2grep", "re2",
            _c("bitstate compile dfa nfa onepass parse prog re2 regexp set simplify "
               "stringpiece tostring", "re2/{}.cc")
            + ["util/rune.cc", "util/strutil.cc", "{gen}/re2_run.cc"],
            ["-I.", "-pthread"], ["-lpthread"], ["{input}"], None, role="heldout", cxx=True,
            workload="our C++ driver: a dozen regexes per line (partial, full, consume), "
                     "find/replace/extract over the generated text, RE2::Set per line",
            gen_files={"re2_run.cc": runtime_drivers_heldout.RE2_DRIVER}),
    # Reserve (added 2026-11-26, not yet run with any policy): for a rule written first.
    Program("tinyxml", "tinyxml",
            ["tinyxml.cpp", "tinyxmlparser.cpp", "tinyxmlerror.cpp", "{gen}/tinyxml_run.cpp"],
            ["-I.", "-DTIXML_USE_STL"], [], ["{work}/doc.xml", "2"], None, role="reserve",
            cxx=True,
            workload="our C++ driver: the XML catalog parsed, walked, queried, edited, "
                     "printed and parsed back (2 rounds)",
            gen_files={"tinyxml_run.cpp": runtime_drivers_heldout.TINYXML_DRIVER}),
    # About a third of png's instructions are libpng's; the rest is the system zlib.
    Program("png", "libpng1.6",
            _c("png pngerror pngget pngmem pngpread pngread pngrio pngrtran pngrutil pngset "
               "pngtrans pngwio pngwrite pngwtran pngwutil") + ["{gen}/png_run.c"],
            ["-I.", "-DPNG_INTEL_SSE_OPT=0", "-DPNG_ARM_NEON_OPT=0", "-DPNG_MIPS_MSA_OPT=0",
             "-DPNG_POWERPC_VSX_OPT=0"], ["-lz", "-lm"], ["96", "2"], None, role="reserve",
            workload="our driver: generated images of every PNG colour type encoded in "
                     "memory with every filter, decoded four ways and checked (2 rounds)",
            gen_files={"png_run.c": runtime_drivers_heldout.PNG_DRIVER},
            gen_copies={"pnglibconf.h": "scripts/pnglibconf.h.prebuilt"}),
]


def programs(role=None) -> list:
  """The programs of one role (ROLES), or all of them."""
  if role is not None and role not in ROLES:
    raise ValueError(f"unknown role {role!r}; known: {', '.join(ROLES)}")
  return [p for p in PROGRAMS if role is None or p.role == role]


def describe(progs=None) -> str:
  """One line per program: name, role, package, workload."""
  return "\n".join(f"  {p.name:16s} {p.role:8s} {p.package:11s} {p.workload}"
                   for p in (PROGRAMS if progs is None else progs))


def make_input(path, size=400_000, seed=7):
  """Deterministic text-like data (words with skewed frequencies), compressible."""
  rng = random.Random(seed)
  vocab = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 9)))
           for _ in range(2000)]
  weights = [1.0 / (i + 1) for i in range(len(vocab))]
  out = []
  n = 0
  while n < size:
    line = " ".join(rng.choices(vocab, weights, k=rng.randint(4, 14))) + "\n"
    out.append(line)
    n += len(line)
  pathlib.Path(path).write_text("".join(out)[:size])


CXX_EXTS = (".cc", ".cpp", ".cxx")


def _obj_name(rel: str) -> str:
  """Object file name of a unit: its path with / as _ (a generated unit: gen_NAME)."""
  if os.path.isabs(rel):
    return "gen_" + os.path.basename(rel) + ".o"
  return rel.replace("/", "_") + ".o"


def _compile_tu(src_root, rel, cflags, obj, problem, spec, weights, llvm_version, timeout,
                llc_flags=(), policy=None, clang_flags=(), guarded=False):
  """One translation unit: clang -O2 to bitcode, then llc with the allocator under test
  (`policy`, else the policy of spec/weights, else the default; guarded: a guarded
  compile of it, mlgo.env.guarded). Returns (error | None, the compile's reward dict)."""
  tc = toolchain(llvm_version)
  bc = obj + ".bc"
  cc = tc.clangxx if rel.endswith(CXX_EXTS) else tc.clang
  r = subprocess.run([cc, "-O2", "-fPIC", "-w", "-c", "-emit-llvm"] + cflags +
                     list(clang_flags) + [rel, "-o", bc], cwd=src_root, capture_output=True,
                     text=True,
                     timeout=timeout)
  if r.returncode != 0:
    return f"clang failed on {rel}: {r.stderr[-300:]}", None
  if policy is None:
    policy = (policy_io.Policy(spec, weights) if spec is not None else env.CompilerDefault())
  module = env.LlcModule(rel, bc, ["-O2", "-relocation-model=pic"] + list(llc_flags))
  if guarded:
    from mlgo.env import guarded as guarded_lib  # pylint: disable=import-outside-toplevel
    g = guarded_lib.guarded_compile(module, problem, policy, llvm_version=llvm_version,
                                    timeout=timeout, output_path=obj)
    if not g.ok:
      return f"llc failed on {rel}: {g.result.reason}", None
    return None, {"functions": g.scores, "total": float(sum(g.scores.values()))}
  res = env.compile_module(module, problem, policy, llvm_version=llvm_version,
                           timeout=timeout, output_path=obj)
  if not res.ok:
    return f"llc failed on {rel}: {res.reason}", None
  return None, res.reward


def build_program(prog: Program, src_root, out_dir, problem, spec, weights, *, jobs=2,
                  llvm_version=22, timeout=600.0, llc_flags=(), policy=None, clang_flags=(),
                  link_flags=(), guarded=False):
  """Builds `prog` into out_dir/<name>: every translation unit through llc with the
  allocator under test (policy, or spec/weights, or the default), extra llc_flags (and
  clang_flags for the -O2 bitcode, link_flags for the link, e.g. PGO's). The optimized
  bitcode stays beside each object (OBJ.bc); the per-function scores of `problem`'s
  reward go to out_dir/functions.json."""
  out_dir = pathlib.Path(out_dir)
  out_dir.mkdir(parents=True, exist_ok=True)
  objs, functions = [], {}
  with cf.ProcessPoolExecutor(max_workers=max(1, jobs)) as ex:
    futs = []
    for rel in prog.sources:
      obj = str(out_dir / _obj_name(rel))
      objs.append(obj)
      futs.append(ex.submit(_compile_tu, str(src_root), rel, prog.cflags, obj, problem,
                            spec, weights, llvm_version, timeout, tuple(llc_flags), policy,
                            tuple(clang_flags), guarded))
    for f in futs:
      err, reward = f.result()
      if err:
        raise RuntimeError(f"{prog.name}: {err}")
      functions.update(reward.get("functions", {}))
  (out_dir / "functions.json").write_text(json.dumps(functions, indent=0) + "\n")
  return link_program(prog, objs, out_dir / prog.name, llvm_version, link_flags)


def link_program(prog: Program, objs, exe, llvm_version=22, link_flags=(), layout=0):
  """Links `objs` into `exe`. layout 0: the objects in source order, nothing added.
  layout i > 0: the same objects in a shuffled order after a padding object that moves
  the code, constants and data by a few bytes to a few KB (layout_padding; run() also
  moves the stack): every address changes, no instruction does. Cachegrind's caches and branch predictor are indexed by
  address, so a one-layout comparison mixes the code's effect with where it landed."""
  exe = pathlib.Path(exe)
  exe.parent.mkdir(parents=True, exist_ok=True)
  objs = [str(o) for o in objs]
  tc = toolchain(llvm_version)
  if layout:
    rng = random.Random(f"mlgo-layout-{layout}")
    rng.shuffle(objs)
    text_pad, rodata_pad, data_pad, _ = layout_padding(layout)
    pad_s = exe.parent / "layout_pad.s"
    # No symbols: the padding adds nothing a program could clash with.
    pad_s.write_text(f".text\n.p2align 4\n.skip {text_pad}, 0xcc\n"
                     f".section .rodata\n.p2align 4\n.skip {rodata_pad}, 0\n"
                     f".data\n.p2align 4\n.skip {data_pad}, 0\n"
                     f'.section .note.GNU-stack,"",@progbits\n')
    pad_o = exe.parent / "layout_pad.o"
    r = subprocess.run([tc.clang, "-c", str(pad_s), "-o", str(pad_o)], capture_output=True,
                       text=True)
    if r.returncode != 0:
      raise RuntimeError(f"{prog.name}: layout {layout}: padding object: {r.stderr[-300:]}")
    objs = [str(pad_o)] + objs
  r = subprocess.run([tc.clangxx if prog.cxx else tc.clang, "-pie", "-o", str(exe)]
                     + list(link_flags) + objs + prog.libs,
                     capture_output=True, text=True)
  if r.returncode != 0:
    raise RuntimeError(f"{prog.name}: link failed: {r.stderr[-500:]}")
  return exe


def layout_padding(layout: int) -> tuple:
  """(code, read-only data, data, stack) bytes by which layout `layout` (> 0) moves the
  program: the first three placed before its own sections by link_program, the last
  as cachegrind's stack_shift. Deterministic, spread over a page so that cache sets,
  cache lines and the predictor's index bits all move."""
  rng = random.Random(f"mlgo-layout-pad-{layout}")
  return tuple(rng.randrange(16, 4096, 16) for _ in range(3)) + (rng.randrange(8, 4096),)


# Part of the default build's cache key, bumped whenever how a run is set up or what a
# layout varies changes: a default measured under an older recipe is built and measured
# again.
LAYOUT_RECIPE = 3


def relink_layout(prog: Program, build_dir, layout: int, llvm_version=22, link_flags=()):
  """build_dir's objects (from build_program) linked again in `layout`, into
  build_dir/layout-<i>/<program>."""
  build_dir = pathlib.Path(build_dir)
  objs = [build_dir / _obj_name(rel) for rel in prog.sources]
  missing = [str(o) for o in objs if not o.exists()]
  if missing:
    raise FileNotFoundError(f"{prog.name}: objects to relink are missing: {missing[:3]}")
  return link_program(prog, objs, build_dir / f"layout-{layout}" / prog.name, llvm_version,
                      link_flags, layout=layout)


# The environment of every measured run. The process start copies the environment and
# the arguments above the stack, so their size moves the stack: a fixed environment
# keeps the caller's shell out of the figures. (Where the output dir lies still moves
# the counts a little, through valgrind's own mappings; the layouts average that out.)
RUN_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LC_ALL": "C"}


def cachegrind(exe, args, cwd, out_file, stack_shift: int = 0):
  """Runs `exe args` under cachegrind in RUN_ENV; returns (stdout bytes, {event: count}).
  stack_shift: bytes of one extra environment variable, so the stack (spill slots
  included) starts that much lower."""
  vg = shutil.which("valgrind")
  if not vg:
    raise RuntimeError("valgrind not found; `apt-get install valgrind`")
  run_env = dict(RUN_ENV)
  if stack_shift:
    run_env["MLGO_LAYOUT_STACK"] = "x" * stack_shift
  r = subprocess.run([vg, "--tool=cachegrind", "--cache-sim=yes", "--branch-sim=yes",
                      f"--cachegrind-out-file={out_file}", str(exe)] + list(args),
                     cwd=cwd, capture_output=True, timeout=3600, env=run_env)
  if r.returncode != 0:
    raise RuntimeError(f"{exe} exited with {r.returncode}: "
                       f"{r.stderr.decode('utf-8', 'replace')[-500:]}")
  events = summary = None
  for line in pathlib.Path(out_file).read_text().splitlines():
    if line.startswith("events:"):
      events = line.split()[1:]
    elif line.startswith("summary:"):
      summary = [int(x) for x in line.split()[1:]]
  if not events or not summary:
    raise RuntimeError(f"{out_file}: no cachegrind summary")
  return r.stdout, dict(zip(events, summary))


def metrics(ev: dict) -> dict:
  g = lambda k: ev.get(k, 0)
  d1 = g("D1mr") + g("D1mw")
  ll = g("ILmr") + g("DLmr") + g("DLmw")
  br = g("Bcm") + g("Bim")
  cycles = g("Ir") + CACHE_MISS_L1 * (g("I1mr") + d1) + CACHE_MISS_LL * ll + MISPREDICT * br
  return {"instructions": g("Ir"), "d1_misses": d1, "ll_misses": ll, "mispredicts": br,
          "cycles": cycles}


def write_workload(out: pathlib.Path):
  """The programs' inputs under `out`: (text input, lua script). The same directory (a
  program's {work}) also gets the generated documents (runtime_workloads): doc.md,
  doc.xml, doc.json, doc.yaml, utf8.txt; and xmlwf.out/doc.xml, a link to /dev/stdout,
  so that xmlwf, which writes its output to DIR/<input name>, prints it."""
  out = pathlib.Path(out)
  out.mkdir(parents=True, exist_ok=True)
  inp = out / "input.txt"
  make_input(inp)
  script = out / "bench.lua"
  script.write_text(LUA_SCRIPT)
  runtime_workloads.make_markdown(out / "doc.md")
  runtime_workloads.make_xml(out / "doc.xml")
  runtime_workloads.make_json(out / "doc.json")
  runtime_workloads.make_yaml(out / "doc.yaml")
  runtime_workloads.make_utf8(out / "utf8.txt")
  link = out / "xmlwf.out" / "doc.xml"
  link.parent.mkdir(exist_ok=True)
  if not link.is_symlink() or os.readlink(link) != "/dev/stdout":
    if link.exists() or link.is_symlink():
      link.unlink()
    link.symlink_to("/dev/stdout")
  return inp, script


def program_args(prog: Program, inp, script, relative: bool = False) -> list:
  """prog.args with {input}, {script} and {work} (the workload directory) filled in;
  other braces (a regex's {4,}) stay as they are. relative: paths relative to the
  workload directory, for a run from there (the same argument bytes wherever it is)."""
  work = pathlib.Path(inp).parent
  rel = (lambda x: os.path.relpath(x, work)) if relative else str
  values = {"{input}": rel(inp), "{script}": rel(script), "{work}": rel(work)}
  return [re.sub(r"\{(?:input|script|work)\}", lambda m: values[m.group(0)], a)
          for a in prog.args]


def prepare_program(prog: Program, out: pathlib.Path):
  """(prog with its generated-file dir in cflags and {gen} in sources resolved, source
  root): the package's Debian source (fetched once), and under out/<program>/gen the
  headers a Debian build generates first (e.g. lua's multiarch header), the program's
  own generated files (drivers, config headers) and its copies of source-tree files
  (e.g. pcre2's config.h.generic as config.h)."""
  from mlgo.corpus import source_tree, sources  # pylint: disable=import-outside-toplevel
  src = sources.fetch_source(prog.package, cli.mlgo_home() / "sources")
  gen = (pathlib.Path(out) / prog.name / "gen").resolve()
  gen.mkdir(parents=True, exist_ok=True)
  for hname, text in source_tree.PACKAGE_HEADERS.get(prog.package, {}).items():
    (gen / hname).write_text(text)
  for name, text in prog.gen_files.items():
    (gen / name).write_text(text)
  for name, rel in prog.gen_copies.items():
    shutil.copyfile(src / rel, gen / name)
  return dataclasses.replace(prog, cflags=prog.cflags + [f"-I{gen}"],
                             sources=[s.format(gen=gen) for s in prog.sources]), src


def perf_available() -> tuple:
  """(True, how) when `perf stat -e instructions` counts on this machine, else (False,
  why not): no perf, no permission, or no hardware counters (a VM without a PMU)."""
  perf = shutil.which("perf")
  if not perf:
    return False, "perf is not installed"
  try:
    r = subprocess.run([perf, "stat", "-x,", "-e", "instructions", "true"],
                       capture_output=True, text=True, timeout=60)
  except (OSError, subprocess.SubprocessError) as e:
    return False, f"perf stat could not run: {e}"
  err = r.stderr.strip()
  if r.returncode != 0:
    return False, f"perf stat -e instructions failed: {(err.splitlines() or ['?'])[-1]}"
  counts = _perf_counts(err)
  if not counts.get("instructions"):
    return False, ("perf stat cannot count instructions here (no hardware counters, "
                   f"or perf_event_paranoid): {(err.splitlines() or ['?'])[-1]}")
  return True, f"perf stat counts instructions ({perf})"


def _perf_counts(csv_text: str) -> dict:
  """{event: count} from `perf stat -x,` output; unsupported events are left out."""
  out = {}
  for line in csv_text.splitlines():
    f = line.split(",")
    if len(f) >= 3 and f[0].strip().isdigit():
      out[f[2].split(":")[0].strip()] = int(f[0])
  return out


def perf_stat(exe, args, cwd, events=("instructions", "cycles")) -> dict:
  """Runs `exe args` natively under perf stat; returns {event: count}."""
  r = subprocess.run([shutil.which("perf") or "perf", "stat", "-x,", "-e", ",".join(events),
                      "--", str(exe)] + list(args), cwd=cwd, capture_output=True,
                     timeout=3600)
  if r.returncode != 0:
    raise RuntimeError(f"{exe} under perf stat exited with {r.returncode}: "
                       f"{r.stderr.decode('utf-8', 'replace')[-500:]}")
  return _perf_counts(r.stderr.decode("utf-8", "replace"))


def select(names=None, role=None) -> list:
  """PROGRAMS restricted to `names` (unknown names are an error) and to `role`; with
  neither, every program but the reserve."""
  known = {p.name for p in PROGRAMS}
  unknown = [n for n in (names or ()) if n not in known]
  if unknown:
    raise ValueError(f"unknown programs {unknown}; known: {', '.join(sorted(known))}")
  if names:
    return [p for p in programs(role) if p.name in names]
  return [p for p in programs(role) if role is not None or p.role != "reserve"]


def run(problem: str, policy_dir, out_dir, *, programs=None, role=None, jobs: int = 2,
        llvm_version: int = 22, stream=sys.stderr, guarded: bool = False,
        pgo: bool = False, layouts: int = 0) -> list:
  """guarded: the policy side is built with guarded compiles (mlgo.env.guarded; its
  build dir is <program>/guarded), its figures still under "policy" in the rows.
  pgo: both sides are PGO builds (-fprofile-instr-use with a profile of the program's
  own workload, taken once per output dir), so llc's block frequencies are measured;
  the comparison is then policy-with-profile against default-with-profile.
  layouts: each side is also linked in `layouts` more memory layouts (link_program) and
  run in each; the row's "layouts" entry then holds every layout's metrics per side
  and layout_summary's verdict (a change within what moving the code produces is no
  change)."""
  pol = policy_io.load_policy(policy_dir)
  if not problems_lib.same_decisions(pol.problem, problem):
    raise ValueError(f"{policy_dir}: policy is for {pol.problem}, not {problem}")
  out = pathlib.Path(out_dir)
  out.mkdir(parents=True, exist_ok=True)
  inp, script = write_workload(out)
  use_perf, why = perf_available()
  print(f"runtime_check: hardware counters {'used' if use_perf else 'skipped'}: {why}"
        + ("" if use_perf else "; cachegrind's simulated counts only"), file=stream,
        flush=True)
  rows = []
  for prog in select(programs, role):
    prog, src = prepare_program(prog, out)
    res, hw = {}, {}
    clang_flags = []
    if pgo:
      from mlgo.evaluation import profiled_corpus  # pylint: disable=import-outside-toplevel
      print(f"runtime_check: {prog.name}: profiling its workload", file=stream, flush=True)
      prof = profiled_corpus.profile_program(prog, src, out / f"pgo-{prog.name}", inp,
                                             script, jobs, llvm_version)
      clang_flags = [f"-fprofile-instr-use={prof}"]
    # The default build does not depend on the policy: reused from an earlier run into
    # the same output dir when the program, its flags and the compiler are the same.
    key = hashlib.sha256(json.dumps([prog.package, prog.sources, prog.cflags, prog.args,
                                     llvm_version, use_perf, pgo, LAYOUT_RECIPE]
                                    ).encode()).hexdigest()[:16]
    cached = out / prog.name / "default" / "result.json"
    lay = {"default": [], "policy": []}  # metrics in layouts 1..layouts
    if cached.exists():
      c = json.loads(cached.read_text())
      if c.get("key") == key:
        res["default"] = tuple(c["result"])
        lay["default"] = list(c.get("layouts", []))[:layouts]
        if c.get("perf"):
          hw["default"] = c["perf"]
        print(f"runtime_check: {prog.name} (default) from {cached}", file=stream, flush=True)
    args = program_args(prog, inp, script, relative=True)
    build_dirs = {}
    for variant, spec, w in (("default", None, None), ("policy", pol.spec, pol.arch.w)):
      g = guarded and variant == "policy"
      build_dirs[variant] = out / prog.name / ("guarded" if g else variant)
      if variant not in res:
        print(f"runtime_check: building {prog.name} ({'guarded' if g else variant})",
              file=stream, flush=True)
        build_program(prog, src, build_dirs[variant], problem, spec, w, jobs=jobs,
                      llvm_version=llvm_version, guarded=g, clang_flags=clang_flags)
    # Every run still to make, both sides and every layout, `jobs` at a time: cachegrind
    # is single-threaded and its counts do not depend on what else runs.
    todo = [(v, 0) for v in ("default", "policy") if v not in res]
    todo += [(v, i) for v in ("default", "policy")
             for i in range(len(lay[v]) + 1, layouts + 1)]
    runs = _measure(prog, out, build_dirs, todo, args, layouts, llvm_version, jobs, stream)
    for v in ("default", "policy"):
      if (v, 0) in runs:
        res[v] = runs[v, 0]
        if use_perf:   # natively, one at a time
          hw[v] = perf_stat(build_dirs[v] / prog.name, args, out)
      for i in range(len(lay[v]) + 1, layouts + 1):
        if runs[v, i][0] != res[v][0]:
          raise RuntimeError(f"{prog.name}: the {v} build's output changes with its memory "
                             f"layout ({build_dirs[v] / f'layout-{i}'}); refusing to report "
                             f"numbers")
        lay[v].append(runs[v, i][1])
    cached.write_text(json.dumps({"key": key, "result": list(res["default"]),
                                  "perf": hw.get("default"), "layouts": lay["default"]})
                      + "\n")
    same = res["default"][0] == res["policy"][0]
    if not same:
      raise RuntimeError(f"{prog.name}: the policy build's output differs from the default "
                         f"build's; refusing to report numbers")
    rows.append({"program": prog.name, "role": prog.role, "output_bytes": res["default"][2],
                 "default": res["default"][1], "policy": res["policy"][1]})
    if layouts:
      rows[-1]["layouts"] = {v: [res[v][1]] + lay[v] for v in ("default", "policy")}
      rows[-1]["over_layouts"] = layout_summary(rows[-1])   # the verdict, in the JSON too
    if hw:
      rows[-1]["perf"] = hw
  return rows


def _measure(prog, out, build_dirs, todo, args, layouts, llvm_version, jobs,
             stream) -> dict:
  """{(variant, layout): (output sha256, metrics, output bytes)} for each run in `todo`,
  `jobs` at a time: layout 0 is the plain link, layout i > 0 a relink (relink_layout) run
  with its stack shift."""
  def one(task):
    variant, i = task
    if i:
      exe = relink_layout(prog, build_dirs[variant], i, llvm_version)
      what, name = f"in layout {i}/{layouts}", f"cachegrind.{variant}.layout-{i}"
    else:
      exe = build_dirs[variant] / prog.name
      what, name = "under cachegrind", f"cachegrind.{variant}"
    print(f"runtime_check: running {prog.name} ({variant}) {what}", file=stream, flush=True)
    stdout, ev = cachegrind(_run_path(out, prog, variant, i, exe), args, out,
                            out / prog.name / name,
                            stack_shift=layout_padding(i)[3] if i else 0)
    return hashlib.sha256(stdout).hexdigest(), metrics(ev), len(stdout)
  with cf.ThreadPoolExecutor(max_workers=max(1, jobs)) as ex:
    return dict(zip(todo, ex.map(one, todo)))


def _run_path(out, prog: Program, variant: str, layout: int, exe) -> str:
  """A path to `exe`, relative to `out` (the runs' working directory), of the same length
  for both sides and every layout: out/<program>/run/<d|p><layout>, a symbolic link.
  Program arguments start with it, and their size moves the stack."""
  link = pathlib.Path(out) / prog.name / "run" / f"{variant[0]}{layout:02d}"
  link.parent.mkdir(parents=True, exist_ok=True)
  if link.is_symlink() or link.exists():
    link.unlink()
  link.symlink_to(pathlib.Path(exe).resolve())
  return os.path.relpath(link, out)


SIGNIFICANCE = 0.05


def layout_summary(row, metric: str = "cycles"):
  """None for a row without layouts, else {"layouts": n, "change": policy mean /
  default mean - 1 in percent, "noise": the default's own spread over its layouts (max -
  min, percent of its mean), "p_slower"/"p_faster": one-sided rank-sum p-values,
  "verdict": "slower" / "faster" when that p is below SIGNIFICANCE, else "within layout
  noise"}."""
  lay = row.get("layouts")
  if not lay:
    return None
  d = [m[metric] for m in lay["default"]]
  p = [m[metric] for m in lay["policy"]]
  md, mp = sum(d) / len(d), sum(p) / len(p)
  p_slower, p_faster = stats.rank_sum_p(p, d)
  change = (mp / md - 1) * 100 if md else 0.0
  verdict = "within layout noise"
  if p_slower < SIGNIFICANCE and mp > md:
    verdict = "slower"
  elif p_faster < SIGNIFICANCE and mp < md:
    verdict = "faster"
  return {"layouts": len(d), "change": change,
          "noise": (max(d) - min(d)) / md * 100 if md else 0.0,
          "p_slower": p_slower, "p_faster": p_faster, "verdict": verdict}


def format_table(rows) -> str:
  keys = ("instructions", "d1_misses", "ll_misses", "mispredicts", "cycles")
  lines = [f"{'program':8s} {'metric':13s} {'default':>14s} {'policy':>14s} {'change':>8s}"]
  for r in rows:
    for k in keys:
      d, p = r["default"][k], r["policy"][k]
      ch = (p / d - 1) * 100 if d else 0.0
      lines.append(f"{r['program']:8s} {k:13s} {d:14d} {p:14d} {ch:+7.2f}%")
    for k in sorted(r.get("perf", {}).get("default", {})):
      d, p = r["perf"]["default"][k], r["perf"]["policy"].get(k, 0)
      ch = (p / d - 1) * 100 if d else 0.0
      lines.append(f"{r['program']:8s} {'hw_' + k:13s} {d:14d} {p:14d} {ch:+7.2f}%")
  worse = [r["program"] for r in rows if r["policy"]["cycles"] > r["default"]["cycles"]]
  better = [r["program"] for r in rows if r["policy"]["cycles"] < r["default"]["cycles"]]
  lines.append(f"outputs identical on all {len(rows)} programs; estimated cycles better on "
               f"{len(better)} ({', '.join(better) or '-'}), worse on {len(worse)} "
               f"({', '.join(worse) or '-'}); geomean change {geomean_change(rows):+.2f}%"
               + (" (one layout)" if any(r.get("layouts") for r in rows) else ""))
  summaries = [(r["program"], layout_summary(r)) for r in rows]
  summaries = [(n, x) for n, x in summaries if x]
  if summaries:
    lines.append("")
    lines.append(f"estimated cycles over {summaries[0][1]['layouts']} memory layouts per side "
                 f"(mean; noise: the default's own max-min over its layouts; p: rank-sum)")
    lines.append(f"{'program':16s} {'change':>8s} {'noise':>7s} {'p_slower':>9s} "
                 f"{'p_faster':>9s}  verdict")
    for n, x in summaries:
      lines.append(f"{n:16s} {x['change']:+7.3f}% {x['noise']:6.3f}% {x['p_slower']:9.4f} "
                   f"{x['p_faster']:9.4f}  {x['verdict']}")
    by = {v: [n for n, x in summaries if x["verdict"] == v]
          for v in ("faster", "slower", "within layout noise")}
    lines.append(f"over layouts: faster on {len(by['faster'])} ({', '.join(by['faster']) or '-'})"
                 f", slower on {len(by['slower'])} ({', '.join(by['slower']) or '-'}), within "
                 f"layout noise on {len(by['within layout noise'])} "
                 f"({', '.join(by['within layout noise']) or '-'}); geomean change "
                 f"{geomean_change(rows, over_layouts=True):+.2f}%")
  return "\n".join(lines)


def geomean_change(rows, metric: str = "cycles", over_layouts: bool = False) -> float:
  """Geometric mean over programs of policy / default - 1, in percent (over_layouts:
  of the two sides' means over their layouts, for rows that have them)."""
  ratios = []
  for r in rows:
    if over_layouts and r.get("layouts"):
      d, p = ([m[metric] for m in r["layouts"][side]] for side in ("default", "policy"))
      d, p = sum(d) / len(d), sum(p) / len(p)
    else:
      d, p = r["default"][metric], r["policy"][metric]
    if d:
      ratios.append(p / d)
  if not ratios:
    return 0.0
  return (math.exp(sum(math.log(x) for x in ratios) / len(ratios)) - 1) * 100


def plot(rows, path, metric: str = "cycles"):
  """A PNG of each program's change: with layouts, every layout of each side as a dot
  against the default's mean (the default's dots show the noise) and the policy's mean
  as a bar; without, one bar per program."""
  import matplotlib  # pylint: disable=import-outside-toplevel
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # pylint: disable=import-outside-toplevel
  fig, ax = plt.subplots(figsize=(max(6.0, 1.1 * len(rows) + 2), 4.5))
  for i, r in enumerate(rows):
    lay = r.get("layouts")
    if lay:
      md = sum(m[metric] for m in lay["default"]) / len(lay["default"])
      for side, color, dx in (("default", "tab:gray", -0.15), ("policy", "tab:blue", 0.15)):
        ys = [(m[metric] / md - 1) * 100 for m in lay[side]]
        ax.scatter([i + dx] * len(ys), ys, s=14, color=color,
                   label=side + " (each layout)" if i == 0 else None, zorder=3)
      change = layout_summary(r, metric)["change"]
    else:
      change = (r["policy"][metric] / r["default"][metric] - 1) * 100
    ax.bar(i, change, width=0.6, color="tab:blue", alpha=0.35,
           label="policy mean" if i == 0 else None)
  ax.axhline(0, color="black", linewidth=0.8)
  ax.set_xticks(range(len(rows)))
  ax.set_xticklabels([r["program"] for r in rows], rotation=30, ha="right")
  ax.set_ylabel(f"{metric} vs default (%)")
  ax.set_title(f"runtime_check: estimated {metric}, policy vs default")
  ax.legend(fontsize=8)
  fig.tight_layout()
  fig.savefig(path, dpi=100)
  plt.close(fig)
