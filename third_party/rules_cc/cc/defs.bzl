"""Offline stand-in for @rules_cc: Bazel 4.2.3's own tools load this file.

Debian ships no rules_cc that fits Bazel 4.2.3, and the build may not download, so every
symbol forwards to the native rule of the same name.
"""

def cc_binary(**kwargs):
    native.cc_binary(**kwargs)

def cc_library(**kwargs):
    native.cc_library(**kwargs)

def cc_test(**kwargs):
    native.cc_test(**kwargs)

def cc_import(**kwargs):
    native.cc_import(**kwargs)

def cc_proto_library(**kwargs):
    native.cc_proto_library(**kwargs)

def cc_toolchain(**kwargs):
    native.cc_toolchain(**kwargs)

def cc_toolchain_suite(**kwargs):
    native.cc_toolchain_suite(**kwargs)

def fdo_profile(**kwargs):
    native.fdo_profile(**kwargs)

def objc_library(**kwargs):
    native.objc_library(**kwargs)
