"""caf-rdma's C++ rules: Bazel's cc_library, cc_binary and cc_test with what each of caf-rdma's
targets must carry itself, since a workspace that uses caf-rdma does not read caf-rdma's .bazelrc.
Every BUILD file of caf-rdma loads them from here (tests/lint/check_format.sh checks it):

    load("//:cc.bzl", "cc_binary", "cc_library", "cc_test")
"""

# Every compile of caf-rdma's sources: C++17 (Bazel 4.2.3's default toolchain says -std=c++0x,
# under which caf-rdma's headers do not compile: `'optional' in namespace 'std' does not name a
# template type`). The one place caf-rdma's language level is set. A workspace's own targets that
# include caf-rdma's headers need it too (caf_rdma.h says so with an #error).
COPTS = ["-std=c++17"]

def cc_library(copts = [], **kwargs):
    """A cc_library with COPTS, linked only statically (no per-library .so in any link mode).

    Why static: in Bazel's default --dynamic_mode a cc_test (and a cc_binary with
    linkstatic = False) links against one .so per cc_library, and Bazel links each of those .so
    files with the library's own objects and linkopts only, not with its deps' linkopts. The
    -libverbs of @ibverbs (a library without sources, so without a .so) is then missing from the
    .so of every library that calls libibverbs: that .so has no NEEDED libibverbs.so.1, and its
    ibv_* references carry no symbol version. ld.so binds an unversioned reference to the oldest
    version libibverbs defines: ibv_open_device@IBVERBS_1.0, the compat ABI, whose contexts crash
    the current calls (SIGSEGV in ibv_query_gid_table, only on a host with a device). A static
    library's objects go into the program's own link, which has -libverbs (and the other
    libraries' linkopts) and binds every reference to its current version (@IBVERBS_1.1 and
    later). tests/link:symbol_versions_test checks the result.
    """
    native.cc_library(copts = COPTS + copts, linkstatic = True, **kwargs)

def cc_binary(copts = [], **kwargs):
    """A cc_binary with COPTS."""
    native.cc_binary(copts = COPTS + copts, **kwargs)

def cc_test(copts = [], **kwargs):
    """A cc_test with COPTS."""
    native.cc_test(copts = COPTS + copts, **kwargs)
