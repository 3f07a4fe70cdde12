/* mlgo runtime_check driver for MuJS: runs a project-written JavaScript benchmark on
   a generated JSON document. The script reads the document through our readFile,
   JSON-parses it, walks and transforms it, stringifies it (compact, indented, with a
   replacer; parsed back with a reviver), works on its strings (split, join, regex
   match and replace), sorts arrays, uses closures, churns object properties and runs
   arithmetic loops, then prints counts and checksums. It checks itself (round trips,
   sort orders, a rebuilt index, the same results every round) and throws on a
   mismatch, which makes the driver exit 1. Usage: mujs_run FILE.json [ROUNDS] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "mujs.h"
#include "mlgo_read_file.h"

static const char *BENCH =
"'use strict';\n"
"var path = scriptArgs[0];\n"
"var rounds = scriptArgs.length > 1 ? parseInt(scriptArgs[1], 10) : 1;\n"
"function check(ok, what) { if (!ok) throw new Error('check failed: ' + what); }\n"
"function cmpStr(a, b) { return a < b ? -1 : a > b ? 1 : 0; }\n"
"\n"
"/* 32-bit FNV-1a in the interpreter, for short strings: MuJS indexes a string from its\n"
"   start (UTF-8), so the big ones go to the C hash. */\n"
"function fnv32(s, h) {\n"
"  for (var i = 0, n = s.length; i < n; i++) {\n"
"    h ^= s.charCodeAt(i);\n"
"    h = ((h << 24) + h * 403) >>> 0;\n"
"  }\n"
"  return h;\n"
"}\n"
"\n"
"function walk(v, st) {\n"
"  if (v === null) { st.nulls++; return; }\n"
"  switch (typeof v) {\n"
"  case 'number': st.nums++; st.sum += v; return;\n"
"  case 'string': st.strs++; st.chars += v.length; return;\n"
"  case 'boolean': st.bools++; if (v) st.trues++; return;\n"
"  }\n"
"  if (Array.isArray(v)) {\n"
"    st.arrays++;\n"
"    for (var i = 0; i < v.length; i++) walk(v[i], st);\n"
"  } else {\n"
"    st.objects++;\n"
"    for (var k in v) { st.keys++; st.keychars += k.length; walk(v[k], st); }\n"
"  }\n"
"}\n"
"\n"
"/* Deep equality, numbers within a relative 1e-12. */\n"
"function same(a, b) {\n"
"  if (typeof a === 'number')\n"
"    return typeof b === 'number' && (a === b || Math.abs(a - b) <= 1e-12 * Math.abs(a));\n"
"  if (a === null || typeof a !== 'object') return a === b;\n"
"  if (b === null || typeof b !== 'object' || Array.isArray(a) !== Array.isArray(b)) return false;\n"
"  var ka = Object.keys(a), kb = Object.keys(b);\n"
"  if (ka.length !== kb.length) return false;\n"
"  for (var i = 0; i < ka.length; i++)\n"
"    if (ka[i] !== kb[i] || !same(a[ka[i]], b[ka[i]])) return false;\n"
"  return true;\n"
"}\n"
"\n"
"function transform(items) {\n"
"  var out = [];\n"
"  for (var i = 0; i < items.length; i++) {\n"
"    var it = items[i];\n"
"    var disc = it.discount === null ? 0 : it.discount;\n"
"    var rec = {\n"
"      id: it.id, key: it.sku.toLowerCase(),\n"
"      total: Math.round(it.qty * it.price * (1 - disc) * 100) / 100,\n"
"      volume: Math.floor(it.dims.w * it.dims.h * it.dims.d * 10) / 10,\n"
"      tags: it.tags.map(function (t) { return t.toUpperCase(); }).sort(),\n"
"      hist: it.history.filter(function (x) { return x >= 0; })\n"
"                      .reduce(function (a, b) { return a + b; }, 0),\n"
"      flag: it.active ? 'A' : 'I'\n"
"    };\n"
"    if (rec.tags.length === 0) delete rec.tags;\n"
"    if (i % 3 === 0) rec.extra = { n: i, s: it.name.split(' ').reverse().join('_') };\n"
"    out.push(rec);\n"
"  }\n"
"  return out;\n"
"}\n"
"\n"
"function checkIndex(doc) {\n"
"  var idx = {}, n = 0;\n"
"  doc.items.forEach(function (it) {\n"
"    it.tags.forEach(function (t) {\n"
"      var k = '$' + t;\n"
"      if (!idx.hasOwnProperty(k)) idx[k] = [];\n"
"      idx[k].push(it.id);\n"
"    });\n"
"  });\n"
"  var names = Object.keys(doc.index);\n"
"  for (var i = 0; i < names.length; i++) {\n"
"    var mine = idx['$' + names[i]];\n"
"    check(mine && mine.join(',') === doc.index[names[i]].join(','), 'index ' + names[i]);\n"
"    n += mine.length;\n"
"  }\n"
"  check(Object.keys(idx).length === names.length, 'index size');\n"
"  return n;\n"
"}\n"
"\n"
"function jsonWork(doc, text) {\n"
"  var compact = JSON.stringify(doc);\n"
"  var pretty = JSON.stringify(doc, null, 2);\n"
"  /* MuJS reads some long decimals back a few ulps off: same() allows for that. */\n"
"  check(same(JSON.parse(pretty), doc), 'pretty round trip');\n"
"  var lean = JSON.stringify(doc, function (k, v) {\n"
"    if (k === 'desc' || k === 'history') return undefined;\n"
"    if (typeof v === 'number' && v !== Math.floor(v)) return Math.round(v * 1000) / 1000;\n"
"    return v;\n"
"  });\n"
"  var revived = 0;\n"
"  var back = JSON.parse(lean, function (k, v) {\n"
"    if (k === 'price') { revived++; return Math.round(v * 100); }\n"
"    return v;\n"
"  });\n"
"  var cents = 0;\n"
"  for (var i = 0; i < back.items.length; i++) cents += back.items[i].price;\n"
"  var sel = JSON.stringify(doc.items.slice(0, 200), ['id', 'sku', 'dims', 'w', 'h'], '\\t');\n"
"  return { compact: compact, pretty: pretty, lean: lean, revived: revived, cents: cents,\n"
"           sel: sel, input: text.length };\n"
"}\n"
"\n"
"function stringWork(items) {\n"
"  var descs = items.map(function (it) { return it.desc; }).join('\\n');\n"
"  var words = descs.split(/\\s+/);\n"
"  var freq = {};\n"
"  for (var i = 0; i < words.length; i++) {\n"
"    var w = words[i];\n"
"    if (!w) continue;\n"
"    var k = '$' + w;\n"
"    freq[k] = (freq[k] || 0) + 1;\n"
"  }\n"
"  var keys = Object.keys(freq).sort(function (a, b) {\n"
"    return freq[b] - freq[a] || cmpStr(a, b);\n"
"  });\n"
"  var top = keys.slice(0, 12).map(function (k) { return k.substring(1) + '=' + freq[k]; });\n"
"  var upper = descs.replace(/[aeiou]{2,}/g, function (m) { return m.toUpperCase(); });\n"
"  var swapped = items.map(function (it) { return it.name.replace(/(\\w+) (\\w+)/, '$2 $1'); })\n"
"                     .join('|');\n"
"  var skuLetters = 0;\n"
"  items.forEach(function (it) {\n"
"    var m = /^([A-Z]+)-(\\d+)$/.exec(it.sku);\n"
"    check(m && parseInt(m[2], 10) === it.id, 'sku ' + it.sku);\n"
"    skuLetters += m[1].length;\n"
"  });\n"
"  var starts = (descs.match(/^\\w{3}/gm) || []).length;\n"
"  var ci = (descs.match(/\\b[b-d][a-z]*E\\b/gi) || []).length;\n"
"  var joined = words.join(' ');\n"
"  check(joined.split(' ').length === words.length, 'split/join');\n"
"  var head = descs.substring(0, 20000);\n"
"  var rev = head.split('').reverse().join('');\n"
"  check(rev.split('').reverse().join('') === head, 'reverse');\n"
"  var codes = 0, hits = 0, revhash = 2166136261;\n"
"  items.forEach(function (it, i) {\n"
"    var d = i % 4 ? it.name : it.desc, pos = 0;\n"
"    for (var j = 0, n = d.length; j < n; j++) codes = (codes * 31 + d.charCodeAt(j)) % 1000000007;\n"
"    while ((pos = d.indexOf('a', pos)) >= 0) { hits++; pos++; }\n"
"    revhash = fnv32(it.name.split('').reverse().join(''), fnv32(it.sku, revhash));\n"
"  });\n"
"  var padded = [];\n"
"  for (var q = 0; q < 3000; q++) padded.push(('0000' + (q * 37 % 10007)).slice(-5));\n"
"  return { words: words.length, distinct: keys.length, top: top.join(' '), upper: upper,\n"
"           swapped: swapped, skuLetters: skuLetters, starts: starts, ci: ci,\n"
"           codes: codes, hits: hits, trimmed: padded.join('').trim().length,\n"
"           revhash: revhash, rev: hash(rev) };\n"
"}\n"
"\n"
"function sortWork(items) {\n"
"  var byPrice = items.slice().sort(function (a, b) { return a.price - b.price || a.id - b.id; });\n"
"  for (var i = 1; i < byPrice.length; i++)\n"
"    check(byPrice[i - 1].price <= byPrice[i].price, 'price order');\n"
"  var hist = [];\n"
"  items.forEach(function (it) { Array.prototype.push.apply(hist, it.history); });\n"
"  var nums = hist.slice().sort(function (a, b) { return a - b; });\n"
"  for (var j = 1; j < nums.length; j++) check(nums[j - 1] <= nums[j], 'numeric order');\n"
"  var names = items.map(function (it) { return it.name; }).sort();\n"
"  for (var k = 1; k < names.length; k++) check(names[k - 1] <= names[k], 'string order');\n"
"  var asText = hist.slice(0, 4000).sort();\n"
"  var median = nums.length ? nums[nums.length >> 1] : 0;\n"
"  var ids = byPrice.slice(0, 8).map(function (it) { return it.id; }).join(',');\n"
"  return { n: nums.length, median: median, first: names[0], last: names[names.length - 1],\n"
"           ids: ids, textFirst: asText.slice(0, 3).join(','), rev: nums.reverse()[0] };\n"
"}\n"
"\n"
"function closureWork() {\n"
"  function makeCounter(step) {\n"
"    var c = 0;\n"
"    return { inc: function () { c += step; return c; }, get: function () { return c; } };\n"
"  }\n"
"  function compose(f, g) { return function (x) { return f(g(x)); }; }\n"
"  function memo(f) {\n"
"    var cache = {};\n"
"    return function (n) {\n"
"      var k = 'k' + n;\n"
"      if (k in cache) return cache[k];\n"
"      return (cache[k] = f(n));\n"
"    };\n"
"  }\n"
"  var fibm = memo(function (n) { return n < 2 ? n : (fibm(n - 1) + fibm(n - 2)) % 1000000007; });\n"
"  function fib(n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }\n"
"  var counters = [];\n"
"  for (var i = 0; i < 50; i++) counters.push(makeCounter(i + 1));\n"
"  for (var r = 0; r < 200; r++) for (var j = 0; j < counters.length; j++) counters[j].inc();\n"
"  var f = compose(function (x) { return x * 3 + 1; }, function (x) { return x ^ (x >>> 3); });\n"
"  var acc = 0;\n"
"  for (var k = 0; k < 15000; k++) acc = (acc + f(k)) % 1000003;\n"
"  var total = counters.reduce(function (s, c) { return s + c.get(); }, 0);\n"
"  for (var w = 0; w <= 300; w++) fibm(w);  /* shallow: MuJS has a small stack */\n"
"  return [fib(21), fibm(300), total, acc].join(' ');\n"
"}\n"
"\n"
"function Vec(x, y) { this.x = x; this.y = y; }\n"
"Vec.prototype.add = function (o) { return new Vec(this.x + o.x, this.y + o.y); };\n"
"Vec.prototype.scale = function (s) { return new Vec(this.x * s, this.y * s); };\n"
"Vec.prototype.dot = function (o) { return this.x * o.x + this.y * o.y; };\n"
"\n"
"function objectWork() {\n"
"  var pool = {}, made = 0, dropped = 0;\n"
"  for (var i = 0; i < 8000; i++) {\n"
"    var k = 'p' + ((i * 7919) % 2003);\n"
"    var o = pool[k];\n"
"    if (o) {\n"
"      o.n++;\n"
"      o['f' + (o.n % 7)] = i;\n"
"      if (o.n % 3 === 0) { delete pool[k]; dropped++; }\n"
"    } else { pool[k] = { n: 1, s: k + i }; made++; }\n"
"  }\n"
"  var live = 0, fields = 0;\n"
"  for (var key in pool) { live++; for (var f in pool[key]) fields++; }\n"
"  var v = new Vec(0, 0), d = 0;\n"
"  for (var j = 0; j < 5000; j++) {\n"
"    var w = new Vec(j % 13, j % 7).scale(0.5);\n"
"    v = v.add(w);\n"
"    d += w.dot(v) % 97;\n"
"  }\n"
"  var frozen = Object.freeze({ a: 1 });\n"
"  var desc = Object.getOwnPropertyDescriptor(frozen, 'a');\n"
"  var proto = Object.create({ base: 1 }, { own: { value: 2, enumerable: true } });\n"
"  var inherited = 0;\n"
"  for (var p in proto) inherited++;\n"
"  return [made, dropped, live, fields, v.x, v.y, Math.round(d), desc.writable, inherited].join(' ');\n"
"}\n"
"\n"
"function mathWork() {\n"
"  var n = 15000, sieve = [], primes = 0, last = 0;\n"
"  for (var i = 0; i <= n; i++) sieve.push(true);\n"
"  for (var p = 2; p * p <= n; p++)\n"
"    if (sieve[p]) for (var m = p * p; m <= n; m += p) sieve[m] = false;\n"
"  for (var q = 2; q <= n; q++) if (sieve[q]) { primes++; last = q; }\n"
"  var x = 12345, bits = 0;\n"
"  for (var k = 0; k < 15000; k++) {\n"
"    x ^= x << 13; x ^= x >>> 17; x ^= x << 5;\n"
"    bits = (bits + (x & 0xffff) + ((x >>> 16) & 0xff)) % 2147483647;\n"
"  }\n"
"  var s = 0;\n"
"  for (var t = 1; t < 5000; t++) s += Math.sin(t) * Math.sqrt(t) / (1 + Math.abs(Math.cos(t)));\n"
"  var a = [], b = [], c = 0, N = 24;\n"
"  for (var r = 0; r < N; r++) { a.push([]); b.push([]);\n"
"    for (var cc = 0; cc < N; cc++) { a[r].push((r * cc) % 11 - 5); b[r].push((r + 2 * cc) % 7); } }\n"
"  for (var r2 = 0; r2 < N; r2++) for (var c2 = 0; c2 < N; c2++) {\n"
"    var e = 0;\n"
"    for (var z = 0; z < N; z++) e += a[r2][z] * b[z][c2];\n"
"    c += e * (r2 + 1) - c2;\n"
"  }\n"
"  var fmt = [], back = 0;\n"
"  for (var u = 1; u < 1500; u++) {\n"
"    var y = u * 1.37 / 7;\n"
"    var hex = (u * 2654435761 >>> 0).toString(16);\n"
"    check(parseInt(hex, 16) === (u * 2654435761 >>> 0), 'hex ' + hex);\n"
"    fmt.push(y.toFixed(3), String(y), y.toExponential(4), hex);\n"
"    back += parseFloat(y.toFixed(3)) + Number(String(y)) + parseFloat(y.toExponential(4));\n"
"  }\n"
"  var txt = fmt.join(';');\n"

"  return { line: [primes, last, bits, s.toFixed(6), c].join(' '), fmt: txt,\n"
"           parsed: back.toFixed(4) };\n"
"}\n"
"\n"
"function dateWork(items) {\n"
"  var out = [];\n"
"  for (var i = 0; i < items.length; i += 4) {\n"
"    var t = Date.UTC(2020, items[i].qty % 12, 1 + items[i].id % 28, items[i].dims.w % 24);\n"
"    out.push(new Date(t).toISOString());\n"
"  }\n"
"  return out.join(',');\n"
"}\n"
"\n"
"var text = readFile(path), first = null, lines = null;\n"
"for (var round = 0; round < rounds; round++) {\n"
"  var doc = JSON.parse(text);\n"
"  var st = { nulls: 0, nums: 0, sum: 0, strs: 0, chars: 0, bools: 0, trues: 0,\n"
"             arrays: 0, objects: 0, keys: 0, keychars: 0 };\n"
"  walk(doc, st);\n"
"  var indexed = checkIndex(doc);\n"
"  var tr = transform(doc.items);\n"
"  var trText = JSON.stringify(tr);\n"
"  var js = jsonWork(doc, text);\n"
"  var sw = stringWork(doc.items);\n"
"  var so = sortWork(doc.items);\n"
"  var mw = mathWork();\n"
"  lines = [\n"
"    'items ' + doc.items.length + ' indexed ' + indexed + ' input ' + js.input,\n"
"    'walk ' + [st.nulls, st.nums, st.sum.toFixed(4), st.strs, st.chars, st.bools, st.trues,\n"
"               st.arrays, st.objects, st.keys, st.keychars].join(' '),\n"
"    'transform ' + trText.length + ' ' + hash(trText),\n"
"    'compact ' + js.compact.length + ' ' + hash(js.compact) + ' pretty ' + js.pretty.length +\n"
"      ' ' + hash(js.pretty),\n"
"    'lean ' + js.lean.length + ' ' + hash(js.lean) + ' revived ' + js.revived + ' cents ' +\n"
"      js.cents + ' sel ' + hash(js.sel),\n"
"    'words ' + sw.words + ' distinct ' + sw.distinct + ' top ' + sw.top,\n"
"    'regex ' + hash(sw.upper) + ' ' + hash(sw.swapped) + ' ' + [sw.skuLetters, sw.starts,\n"
"      sw.ci, sw.codes, sw.hits, sw.trimmed, sw.revhash, sw.rev].join(' '),\n"
"    'sort ' + [so.n, so.median, so.first, so.last, so.ids, so.textFirst, so.rev].join(' '),\n"
"    'closures ' + closureWork(),\n"
"    'objects ' + objectWork(),\n"
"    'math ' + mw.line + ' fmt ' + mw.fmt.length + ' ' + hash(mw.fmt) + ' ' + mw.parsed,\n"
"    'dates ' + hash(dateWork(doc.items))\n"
"  ];\n"
"  if (first === null) first = lines.join('\\n');\n"
"  else check(lines.join('\\n') === first, 'round ' + round + ' differs');\n"
"}\n"
"for (var li = 0; li < lines.length; li++) print(lines[li]);\n"
"print('rounds ' + rounds);\n";

/* readFile(path): the file's text (exits 2 when it cannot be read). */
static void read_file_js(js_State *J) {
  size_t len;
  char *text = read_file(js_tostring(J, 1), &len);
  js_pushlstring(J, text, (int)len);
  free(text);
}

/* hash(s): the FNV-1a hash of the string's UTF-8 bytes, 16 hex digits. */
static void hash_js(js_State *J) {
  const char *s = js_tostring(J, 1);
  char buf[24];
  snprintf(buf, sizeof buf, "%016llx", fnv1a(s, strlen(s)));
  js_pushstring(J, buf);
}

/* print(...): the arguments separated by spaces, then a newline. */
static void print_js(js_State *J) {
  int top = js_gettop(J);
  for (int i = 1; i < top; i++) {
    if (i > 1) putchar(' ');
    fputs(js_tostring(J, i), stdout);
  }
  putchar('\n');
  js_pushundefined(J);
}

static void report(js_State *J, const char *message) {
  fprintf(stderr, "mujs: %s\n", message);
}

int main(int argc, char **argv) {
  if (argc < 2) { fprintf(stderr, "usage: %s FILE.json [ROUNDS]\n", argv[0]); return 2; }
  js_State *J = js_newstate(NULL, NULL, JS_STRICT);
  if (!J) { fprintf(stderr, "mujs: cannot create a state\n"); return 1; }
  js_setreport(J, report);
  js_newcfunction(J, read_file_js, "readFile", 1);
  js_setglobal(J, "readFile");
  js_newcfunction(J, hash_js, "hash", 1);
  js_setglobal(J, "hash");
  js_newcfunction(J, print_js, "print", 0);
  js_setglobal(J, "print");
  js_newarray(J);
  for (int i = 1; i < argc; i++) {
    js_pushstring(J, argv[i]);
    js_setindex(J, -2, i - 1);
  }
  js_setglobal(J, "scriptArgs");
  if (js_ploadstring(J, "bench.js", BENCH)) {
    fprintf(stderr, "mujs: %s\n", js_trystring(J, -1, "load error"));
    js_freestate(J);
    return 1;
  }
  js_pushundefined(J);
  if (js_pcall(J, 0)) {
    fprintf(stderr, "mujs: %s\n", js_trystring(J, -1, "error"));
    js_freestate(J);
    return 1;
  }
  js_pop(J, 1);
  js_freestate(J);
  return fflush(stdout) == 0 ? 0 : 1;
}
