"""A second local C++ toolchain, Bazel's own auto-configuration pointed at Debian's clang-14.

Used only by caf-rdma's --config=asan (.bazelrc: --crosstool_top=@local_config_clang//:toolchain);
every other build, and every workspace that uses caf-rdma, keeps the host's default compiler.
Why clang there: AddressSanitizer + UBSan cost GCC 12 about twice clang-14's compile time on
caf-rdma's CAF-heavy sources (actors/manager/qp_handshakes.cc at -O1: 12.8 s against 8.0 s;
at -O0 7.0 s against 3.8 s), and compiling is most of that lane's time.
"""

load("@bazel_tools//tools/cpp:cc_configure.bzl", "cc_autoconf_impl")

kClang = "/usr/bin/clang-14"  # Debian's clang-14 (third_party/install_deps.sh)

def _clang_cc_autoconf_impl(repository_ctx):
    if not repository_ctx.path(kClang).exists:
        fail("caf-rdma's --config=asan compiles with %s, which is missing: " % kClang +
             "run third_party/install_deps.sh")
    cc_autoconf_impl(repository_ctx, overriden_tools = {"gcc": kClang})

    # Among the compiler's inputs (the generated BUILD globs extra_tools/ into every compile's
    # sandbox): UBSan's ignore list, which .bazelrc's --config=asan names by this path.
    repository_ctx.symlink(
        Label("//tests/sanitizers:ubsan_ignorelist.txt"),
        "extra_tools/ubsan_ignorelist.txt",
    )

clang_cc_autoconf = repository_rule(
    implementation = _clang_cc_autoconf_impl,
    configure = True,
)
