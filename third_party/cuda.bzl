"""What --config=cuda (--define=cuda=true) changes in a compile, in one place.

Only the sources that read CAF_RDMA_WITH_CUDA take the define and cuda.h: cuda_driver.cc in
//primitives:cuda_driver_with_cuda, whose archive //primitives:cuda links as a source, and the
GPU tests (tests/gpu/, programs: nothing depends on them). A C++ dependency would pass more to its
dependants than its objects: its headers (even private ones) go into the action key of every
compile that depends on it, and a target of another repository (@cuda) adds `-iquote external/cuda`
to their command lines, so --config=cuda would compile all of caf-rdma again. This way the config
shares the default build's output directory and recompiles only those sources, then relinks:
what the cuda lane of tests/run_tests.sh relies on.
"""

# A label string (select takes no Label) naming this repository, wherever the macros are called.
_ENABLED = str(Label("//third_party:cuda_enabled"))

def cuda_copts():
    """The define, under the config."""
    return select({
        _ENABLED: ["-DCAF_RDMA_WITH_CUDA"],
        "//conditions:default": [],
    })

def cuda_srcs():
    """cuda.h as "third_party/cuda/cuda.h" (//third_party:cuda_h), under the config: a private
    header of the target that lists it."""
    return select({
        _ENABLED: [str(Label("//third_party:cuda_h"))],
        "//conditions:default": [],
    })
