"""caf-rdma's external repositories, for its own WORKSPACE and for the workspaces that use it.

A workspace that depends on caf-rdma (Bazel 4.2.3, WORKSPACE mode; see README.md, "Use caf-rdma
in your project", and examples/external/WORKSPACE):

    local_repository(name = "caf_rdma", path = "/path/to/caf-rdma")
    load("@caf_rdma//:deps.bzl", "caf_rdma_deps")
    caf_rdma_deps()

Bazel does not read an external repository's WORKSPACE, so every repository caf-rdma's BUILD
files name is declared here, once: the system libraries from Debian's packages
(third_party/install_deps.sh), each wrapped by a BUILD file in third_party/, and the offline
stand-ins Bazel 4.2.3 itself needs (it would otherwise download rules_cc, rules_java,
remote_coverage_tools and platforms). A repository the workspace declared before the call is
left as it is (it must then provide the same targets, e.g. `@zlib//:zlib`).
"""

def _caf_rdma_shim_impl(rctx):
    # The folder third_party/<dir> of caf-rdma, wherever caf-rdma is: found from a file of the
    # package //third_party (a folder with its own WORKSPACE is not a package of caf-rdma).
    folder = rctx.path(rctx.attr._third_party).dirname.get_child(rctx.attr.dir)
    for child in folder.readdir():
        rctx.symlink(child, child.basename)

# One of caf-rdma's offline stand-ins (third_party/rules_cc, third_party/remote_coverage_tools)
# as a repository, by its place inside caf-rdma: a local_repository path would be taken
# relative to the workspace that calls caf_rdma_deps(), not to caf-rdma.
_caf_rdma_shim = repository_rule(
    implementation = _caf_rdma_shim_impl,
    attrs = {
        "dir": attr.string(mandatory = True),
        "_third_party": attr.label(default = Label("//third_party:install_deps.sh")),
    },
    local = True,
)

def _system_library(name, path, build_file):
    """new_local_repository over a system folder, with its BUILD file from caf-rdma's
    third_party/ (a label of caf-rdma's, so it resolves from any workspace)."""
    native.new_local_repository(
        name = name,
        path = path,
        build_file = str(Label("//third_party:" + build_file)),
    )

def _have(name):
    return native.existing_rule(name) != None

def caf_rdma_deps():
    """Declares every repository caf-rdma needs that the workspace has not declared yet."""

    # Offline stand-ins for what Bazel 4.2.3 would download. Its own @bazel_tools//tools/cpp
    # loads @rules_cc//cc:defs.bzl; every *_test depends on @remote_coverage_tools.
    if not _have("rules_cc"):
        _caf_rdma_shim(name = "rules_cc", dir = "rules_cc")
    if not _have("remote_coverage_tools"):
        _caf_rdma_shim(name = "remote_coverage_tools", dir = "remote_coverage_tools")

    # Debian's bazel-platforms and bazel-rules-java.
    if not _have("platforms"):
        native.local_repository(name = "platforms", path = "/usr/share/bazel/tools/platforms")
    if not _have("rules_java"):
        native.local_repository(name = "rules_java", path = "/usr/share/bazel/rules/java")

    # System libraries (Debian's -dev packages).
    for name, path, build_file in [
        ("caf", "/usr", "caf.BUILD"),
        # CAF 0.17.6 built with -fsanitize=thread by tests/sanitizers/build_caf_tsan.sh, used
        # only under --config=tsan (a ThreadSanitizer run needs every library that synchronizes
        # our threads instrumented: CAF's mailboxes and scheduler are). Nothing reads the
        # folder unless that configuration asks for it.
        ("caf_tsan", "/var/tmp/caf-rdma-tsan-caf", "caf_tsan.BUILD"),
        ("ibverbs", "/usr", "ibverbs.BUILD"),
        ("zlib", "/usr", "zlib.BUILD"),
        ("openssl", "/usr", "openssl.BUILD"),
        # prometheus-cpp (Debian's prometheus-cpp-dev): a node's metrics over HTTP.
        ("prometheus", "/usr", "prometheus.BUILD"),
        # GoogleTest: caf-rdma's tests, and a using workspace's (@gtest//:gtest_main; README).
        ("gtest", "/usr", "gtest.BUILD"),
        # CUDA Toolkit headers, only used under --config=cuda (--define=cuda=true; the driver
        # is dlopen'ed at run time).
        ("cuda", "/usr/local/cuda", "cuda.BUILD"),
    ]:
        if not _have(name):
            _system_library(name, path, build_file)
