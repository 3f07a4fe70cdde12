"""Repository rule: the LLVM sources the release-mode relink recompiles, fetched at run time.

    debian_llvm_sources(name = "debian_llvm22")

Runs `llvm_patches/release_prefix.py extract` with the system python3: downloads the
pinned llvm-toolchain-22 orig tarball (debian_pins.json; ~200 MB, resumable, sha256
checked against the pin and apt's signed Sources index) into $MLGO_HOME/debian_llvm once,
extracts (once, cached) only the ML advisor sources, their private headers and the sources
mlgo edits (unedited: source_edits.py applies the edits at build time), and exposes them
as `@debian_llvm22//:advisor_sources`. Nothing third-party is committed.

It also records the installed versions of the pinned Debian packages in
`installed_versions.txt`, an input of the prefix build, so that a Debian update re-runs
that build (which then stops with a clear error until the pin is moved). The rule is
`local`: it is re-evaluated when Bazel's server restarts and by `bazel sync --configure`
(about a second once the sources are cached); after an `apt-get upgrade`, run one of them.
"""

def _home(ctx):
    home = ctx.os.environ.get("MLGO_HOME", "")
    if not home:
        home = ctx.os.environ.get("HOME", "/root") + "/.cache/mlgo"
    return home

def _impl(ctx):
    script = ctx.path(Label("//llvm_patches:release_prefix.py"))
    ctx.path(Label("//llvm_patches:source_edits.py"))  # imported by the script: re-run on change
    pins = ctx.path(Label("//llvm_patches:debian_pins.json"))
    home = _home(ctx)
    res = ctx.execute(
        ["python3", str(script), "extract", "--pins", str(pins), "--cache_dir", home],
        timeout = 3600,
        quiet = False,
    )
    if res.return_code != 0:
        fail("fetching the LLVM advisor sources failed:\n" + res.stderr + res.stdout)
    src = res.stdout.strip().splitlines()[-1]
    ctx.symlink(src + "/llvm", "llvm")

    pin = json.decode(ctx.read(pins))
    lines = []
    for p in pin["binary_packages"]:
        r = ctx.execute(["dpkg-query", "-W", "-f=${Version}", p])
        lines.append("%s=%s" % (p, r.stdout.strip() if r.return_code == 0 else "NOT-INSTALLED"))
    ctx.file("installed_versions.txt", "\n".join(lines) + "\n")
    ctx.file("WORKSPACE", 'workspace(name = "%s")\n' % ctx.name)
    ctx.file("BUILD", "\n".join([
        'package(default_visibility = ["//visibility:public"])',
        "# LLVM's ML advisor sources + private headers from %s (sha256 %s)." % (
            pin["files"]["orig"]["name"],
            pin["files"]["orig"]["sha256"],
        ),
        "filegroup(",
        '    name = "advisor_sources",',
        '    srcs = glob(["llvm/**"]),',
        ")",
        'exports_files(["installed_versions.txt"])',
        "",
    ]))

debian_llvm_sources = repository_rule(
    implementation = _impl,
    environ = ["MLGO_HOME", "HOME"],
    local = True,
    configure = True,
)
