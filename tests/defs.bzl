"""Test twins: one test source, run on both transports.

transport_test(name = "x", srcs = [...], ...) declares
  x_fallback_test  CAF_RDMA_TRANSPORT=fallback, size medium: the native lane;
  x_rdma_test      CAF_RDMA_TRANSPORT=rdma, size large, tagged "rdma": on the host's RDMA
                   device, or in the Soft-RoCE VM (`bazel test --config=rxe //...`).
A source ending in .sh makes sh_tests, else cc_tests (//:cc.bzl's). Other attributes go to both.
"""

load("//:cc.bzl", "cc_test")

def transport_test(name, srcs, deps = [], data = [], **kwargs):
    is_sh = [s for s in srcs if s.endswith(".sh")] != []
    for mode, size, tags in [("fallback", "medium", []), ("rdma", "large", ["rdma"])]:
        attrs = dict(
            name = "%s_%s_test" % (name, mode),
            size = size,
            srcs = srcs,
            data = data,
            env = {"CAF_RDMA_TRANSPORT": mode},
            tags = tags,
        )
        attrs.update(kwargs)
        if is_sh:
            native.sh_test(**attrs)
        else:
            cc_test(deps = deps, **attrs)
