"""The programs runtime_check builds and runs, and their workloads.

PROGRAMS: each built from a Debian source package fetched at run time, with a
deterministic workload. Inputs (runtime_workloads, make_input, the lua script) and
drivers for library packages (runtime_drivers: C/C++ files in drivers/) are
project-written; nothing third-party is committed. Every program has a role:
  model    its profiles may be used to fit a performance model (packages of the
           default corpus set, or others outside @extra/@unseen)
  heldout  never used to train a model or a policy (packages of @unseen or @extra only)
  reserve  held out too, and no policy has been run on them yet: kept to judge a rule
           written down first. `select` leaves them out unless asked for by name or by
           role, so a routine run does not use them up.
`programs(role)` lists them; `describe()` prints the table.
"""
import dataclasses
import os
import pathlib
import random
import re
import shutil

from mlgo.evaluation import runtime_drivers, runtime_workloads
from mlgo.util import cli


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
  # The arguments on a second workload (write_workload(variant=1)) for a program that
  # reads none of the generated files, so that its second run does other work; None:
  # `args` (the generated files differ between the workloads).
  selection_args: list | None = None



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
            gen_files=runtime_drivers.gen_files("cjson_run.c")),
    Program("jansson", "jansson",
            _c("dump error hashtable hashtable_seed load memory pack_unpack strbuffer "
               "strconv utf value version", "src/{}.c") + ["{gen}/jansson_run.c"],
            ["-Isrc", "-DHAVE_STDINT_H=1", "-DHAVE_UNISTD_H=1"], [],
            ["{work}/doc.json", "2"], None, role="model",
            workload="our driver: parse, dump (sorted, ASCII), compare, unpack and index "
                     "the generated JSON document (2 rounds)",
            gen_files=runtime_drivers.gen_files("jansson_run.c", "jansson_config.h",
                                                "jansson_private_config.h")),
    Program("libyaml", "libyaml",
            _c("api dumper emitter loader parser reader scanner writer", "src/{}.c")
            + ["{gen}/yaml_run.c"],
            ["-Iinclude", "-Isrc", "-DYAML_VERSION_MAJOR=0", "-DYAML_VERSION_MINOR=2",
             "-DYAML_VERSION_PATCH=5", '-DYAML_VERSION_STRING="0.2.5"'], [],
            ["{work}/doc.yaml"], None, role="model",
            workload="our driver: re-emit a generated YAML stream event by event, then load "
                     "and dump it canonically",
            gen_files=runtime_drivers.gen_files("yaml_run.c")),
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
            gen_files=runtime_drivers.gen_files("mbedtls_run.c", "mlgo_mbedtls_config.h")),
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
            gen_files=runtime_drivers.gen_files(("config.h", "cmark_config.h"))),
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
            gen_files=runtime_drivers.gen_files("expat_config.h",
                                                ("fixed_salt.c", "expat_fixed_salt.c"))),
    Program("pugixml", "pugixml", ["src/pugixml.cpp", "{gen}/pugixml_run.cpp"],
            ["-Isrc"], [], ["{work}/doc.xml"], None, role="heldout", cxx=True,
            workload="our C++ driver: parse the XML catalog, XPath queries, edit, save",
            gen_files=runtime_drivers.gen_files("pugixml_run.cpp")),
    Program("utf8proc", "utf8proc", ["utf8proc.c", "{gen}/utf8proc_run.c"],
            ["-I."], [], ["{work}/utf8.txt"], None, role="heldout",
            workload="our driver: NFC/NFD/NFKC/case folding, graphemes, widths of a "
                     "generated multi-script UTF-8 text",
            gen_files=runtime_drivers.gen_files("utf8proc_run.c")),
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
            gen_files=runtime_drivers.gen_files("lzo_run.c")),
    Program("gif", "giflib",
            _c("dgif_lib egif_lib gifalloc gif_err gif_font gif_hash openbsd-reallocarray "
               "quantize") + ["{gen}/gif_run.c"],
            ["-I.", "-std=gnu99"], [], ["320", "8"], None, role="heldout",
            selection_args=["256", "6"],
            workload="our driver: quantize, caption and GIF-encode 8 generated frames in "
                     "memory (animation and single images), decode and check them",
            gen_files=runtime_drivers.gen_files("gif_run.c")),
    Program("dconv", "double-conversion",
            _c("bignum bignum-dtoa cached-powers double-to-string fast-dtoa fixed-dtoa "
               "string-to-double strtod", "double-conversion/{}.cc")
            + ["{gen}/dconv_run.cc"],
            ["-I."], [], ["{work}/doc.json", "16000"], None, role="heldout", cxx=True,
            workload="our C++ driver: the JSON document's numbers and 16000 generated "
                     "doubles printed shortest/fixed/precision/exponential and read back",
            gen_files=runtime_drivers.gen_files("dconv_run.cc")),
    # Debian's re2 source lacks the generated Unicode group tables; the driver defines its
    # own (ASCII and Latin-1), enough for its patterns.
    Program("re2grep", "re2",
            _c("bitstate compile dfa nfa onepass parse prog re2 regexp set simplify "
               "stringpiece tostring", "re2/{}.cc")
            + ["util/rune.cc", "util/strutil.cc", "{gen}/re2_run.cc"],
            ["-I.", "-pthread"], ["-lpthread"], ["{input}"], None, role="heldout", cxx=True,
            workload="our C++ driver: a dozen regexes per line (partial, full, consume), "
                     "find/replace/extract over the generated text, RE2::Set per line",
            gen_files=runtime_drivers.gen_files("re2_run.cc")),
    # Reserve (added 2026-11-26, not yet run with any policy): for a rule written first.
    Program("tinyxml", "tinyxml",
            ["tinyxml.cpp", "tinyxmlparser.cpp", "tinyxmlerror.cpp", "{gen}/tinyxml_run.cpp"],
            ["-I.", "-DTIXML_USE_STL"], [], ["{work}/doc.xml", "2"], None, role="reserve",
            cxx=True,
            workload="our C++ driver: the XML catalog parsed, walked, queried, edited, "
                     "printed and parsed back (2 rounds)",
            gen_files=runtime_drivers.gen_files("tinyxml_run.cpp")),
    # About a third of png's instructions are libpng's; the rest is the system zlib.
    Program("png", "libpng1.6",
            _c("png pngerror pngget pngmem pngpread pngread pngrio pngrtran pngrutil pngset "
               "pngtrans pngwio pngwrite pngwtran pngwutil") + ["{gen}/png_run.c"],
            ["-I.", "-DPNG_INTEL_SSE_OPT=0", "-DPNG_ARM_NEON_OPT=0", "-DPNG_MIPS_MSA_OPT=0",
             "-DPNG_POWERPC_VSX_OPT=0"], ["-lz", "-lm"], ["96", "2"], None, role="reserve",
            selection_args=["80", "2"],
            workload="our driver: generated images of every PNG colour type encoded in "
                     "memory with every filter, decoded four ways and checked (2 rounds)",
            gen_files=runtime_drivers.gen_files("png_run.c"),
            gen_copies={"pnglibconf.h": "scripts/pnglibconf.h.prebuilt"}),
    # Reserve (added 2026-12-04, not yet run with any policy): packages of no corpus set
    # (sources.RUNTIME_ONLY_PACKAGES), for stop 75's rule. An interpreter, a C++
    # compressor and floating-point DSP: kinds of code the held-out set has little of.
    Program("mujs", "mujs", ["one.c", "{gen}/mujs_run.c"], ["-I."], ["-lm"],
            ["{work}/doc.json", "1"], None, role="reserve",
            workload="our driver: the MuJS interpreter on a project-written JavaScript "
                     "benchmark (the generated JSON document parsed, walked, transformed, "
                     "stringified and checked; strings and regexes, sorts, closures, "
                     "objects, arithmetic)",
            gen_files=runtime_drivers.gen_files("mujs_run.c")),
    # lzip's own program; PROGVERSION only shows in --version.
    Program("lzip", "lzip",
            _c("arg_parser lzip_index list encoder_base encoder fast_encoder decoder main",
               "{}.cc"),
            ['-DPROGVERSION="1.23"'], [], ["-c", "-6", "{input}"], None,
            role="reserve", cxx=True,
            workload="lzip -6 (the LZMA encoder with optimal parsing) of the generated "
                     "text"),
    Program("samplerate", "libsamplerate",
            [f"src/{f}.c" for f in "samplerate src_linear src_sinc src_zoh".split()]
            + ["{gen}/samplerate_run.c"],
            ["-Iinclude", "-Isrc", "-DHAVE_CONFIG_H"], ["-lm"], ["1", "16000"], None,
            role="reserve", selection_args=["2", "14000"],
            workload="our driver: generated sweeps, tones and noise (1 to 6 channels) "
                     "resampled by every converter (sinc best/medium/fastest, ZOH, "
                     "linear) at several ratios through the simple, streaming "
                     "(random chunks, varying ratio) and callback APIs, checked",
            gen_files=runtime_drivers.gen_files("samplerate_run.c",
                                                ("config.h", "samplerate_config.h"))),
]



def programs(role=None) -> list:
  """The programs of one role (ROLES), or all of them."""
  if role is not None and role not in ROLES:
    raise ValueError(f"unknown role {role!r}; known: {', '.join(ROLES)}")
  return [p for p in PROGRAMS if role is None or p.role == role]



def describe(progs=None) -> str:
  """One line per program: name, role, package, workload."""
  progs = PROGRAMS if progs is None else progs
  width = max((len(p.package) for p in progs), default=0)  # the longest name sets it
  return "\n".join(f"  {p.name:16s} {p.role:8s} {p.package:{width}s} {p.workload}"
                   for p in progs)



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



def write_workload(out: pathlib.Path, variant: int = 0):
  """The programs' inputs under `out`: (text input, lua script). The same directory (a
  program's {work}) also gets the generated documents (runtime_workloads): doc.md,
  doc.xml, doc.json, doc.yaml, utf8.txt; and xmlwf.out/doc.xml, a link to /dev/stdout,
  so that xmlwf, which writes its output to DIR/<input name>, prints it.
  variant 0 is the workload every measurement runs; variant k > 0 makes every generated
  input with other seeds (same sizes and kinds): a second workload to choose on
  (runtime_check's measured guard) that the measurement never sees."""
  if variant < 0:
    raise ValueError(f"write_workload: variant must be >= 0, not {variant}")
  off = 1000 * variant
  out = pathlib.Path(out)
  out.mkdir(parents=True, exist_ok=True)
  inp = out / "input.txt"
  make_input(inp, seed=7 + off)
  script = out / "bench.lua"
  script.write_text(LUA_SCRIPT)
  runtime_workloads.make_markdown(out / "doc.md", seed=11 + off)
  runtime_workloads.make_xml(out / "doc.xml", seed=13 + off)
  runtime_workloads.make_json(out / "doc.json", seed=17 + off)
  runtime_workloads.make_yaml(out / "doc.yaml", seed=19 + off)
  runtime_workloads.make_utf8(out / "utf8.txt", seed=23 + off)
  link = out / "xmlwf.out" / "doc.xml"
  link.parent.mkdir(exist_ok=True)
  if not link.is_symlink() or os.readlink(link) != "/dev/stdout":
    if link.exists() or link.is_symlink():
      link.unlink()
    link.symlink_to("/dev/stdout")
  return inp, script



def program_args(prog: Program, inp, script, relative: bool = False,
                 selection: bool = False) -> list:
  """prog.args with {input}, {script} and {work} (the workload directory) filled in;
  other braces (a regex's {4,}) stay as they are. relative: paths relative to the
  workload directory, for a run from there (the same argument bytes wherever it is).
  selection: the arguments for the second workload (prog.selection_args if set)."""
  work = pathlib.Path(inp).parent
  rel = (lambda x: os.path.relpath(x, work)) if relative else str
  values = {"{input}": rel(inp), "{script}": rel(script), "{work}": rel(work)}
  args = prog.selection_args if selection and prog.selection_args is not None else prog.args
  return [re.sub(r"\{(?:input|script|work)\}", lambda m: values[m.group(0)], a)
          for a in args]



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

