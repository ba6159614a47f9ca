"""Test twins: one test source, run on both transports.

transport_test(name = "x", srcs = [...], ...) declares
  x_fallback_test  CAF_RDMA_TRANSPORT=fallback, size medium: the native lane;
  x_rdma_test      CAF_RDMA_TRANSPORT=rdma, size large, tagged "rdma": on the host's RDMA
                   device, or in the Soft-RoCE VM (`bazel test --config=rxe //...`).
A source ending in .sh makes sh_tests, else cc_tests (//:cc.bzl's). Other attributes go to both.
C++ twins compile their sources once: both link x_test_lib (testonly, alwayslink: GoogleTest
registers the cases from static initializers), so each lane compiles a twin's sources once,
not once per transport.
"""

load("//:cc.bzl", "cc_library", "cc_test")

def transport_test(name, srcs, deps = [], data = [], **kwargs):
    is_sh = [s for s in srcs if s.endswith(".sh")] != []
    lib = "%s_test_lib" % name
    if not is_sh:
        # What compiles the sources goes to the library (the tests have none of their own).
        compile = {k: kwargs.pop(k) for k in ["copts", "defines", "local_defines", "includes"] if k in kwargs}
        cc_library(
            name = lib,
            testonly = True,
            srcs = srcs,
            deps = deps,
            alwayslink = True,
            **compile
        )
    for mode, size, tags in [("fallback", "medium", []), ("rdma", "large", ["rdma"])]:
        attrs = dict(
            name = "%s_%s_test" % (name, mode),
            size = size,
            data = data,
            env = {"CAF_RDMA_TRANSPORT": mode},
            tags = tags,
        )
        attrs.update(kwargs)
        if is_sh:
            native.sh_test(srcs = srcs, **attrs)
        else:
            cc_test(deps = [":" + lib], **attrs)
