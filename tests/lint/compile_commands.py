#!/usr/bin/env python3
"""Writes compile_commands.json (at the repository root) from Bazel's own compile actions.

Usage: compile_commands.py [bazel startup options...]
Builds //... (so every package and generated header is in the execution root), then runs
`bazel aquery 'mnemonic("CppCompile", //...)' --output=jsonproto` and keeps, for each of
this repository's sources, the exact gcc command Bazel uses, run from Bazel's execution root
(where `external/...` and `bazel-out/...` resolve). GCC-only flags clang does not know are
dropped (and /usr/include given as -isystem, see drop_system_dirs), so clang-tidy parses every
file as gcc compiles it.
Invariant: one entry per source file of this repository (external sources are left out).
"""
import json
import os
import subprocess
import sys

# Flags of Bazel's gcc toolchain that clang rejects or warns about; meaningless to clang-tidy.
GCC_ONLY = {"-fno-canonical-system-headers", "-Wunused-but-set-parameter",
            "-Wno-free-nonheap-object"}


def drop_system_dirs(args, execroot):
    """Drops `-isystem D` where D is /usr/include (the system-library repositories' include
    dirs): gcc ignores it, but clang then searches /usr/include before libstdc++'s wrappers,
    which breaks their `#include_next` (e.g. 'stdlib.h' file not found in <cstdlib>)."""
    out = []
    skip = False
    for i, a in enumerate(args):
        if skip:
            skip = False
            continue
        if a == "-isystem" and i + 1 < len(args) and \
                os.path.realpath(os.path.join(execroot, args[i + 1])) == "/usr/include":
            skip = True
            continue
        out.append(a)
    return out


def bazel(startup, *args):
    return subprocess.run(["bazel", *startup, *args], check=True, stdout=subprocess.PIPE,
                          stderr=subprocess.DEVNULL, text=True).stdout


def main():
    startup = sys.argv[1:]
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__))))
    os.chdir(root)
    execroot = bazel(startup, "info", "execution_root").strip()
    # Built first: Bazel links into the execution root only the packages the last build needed
    # and writes generated headers only when built; after a partial build (a lane of a few
    # targets) clang-tidy would find no 'examples/...' header.
    bazel(startup, "build", "//...")
    actions = json.loads(bazel(startup, "aquery", 'mnemonic("CppCompile", //...)',
                               "--output=jsonproto"))["actions"]
    entries = {}
    for action in actions:
        args = drop_system_dirs([a for a in action["arguments"] if a not in GCC_ONLY], execroot)
        src = args[args.index("-c") + 1]
        if src.startswith(("external/", "bazel-out/")):
            continue
        entries[src] = {"directory": execroot, "file": os.path.join(root, src),
                        "arguments": args[:args.index("-c") + 1] + [os.path.join(root, src)]}
    with open(os.path.join(root, "compile_commands.json"), "w") as out:
        json.dump(sorted(entries.values(), key=lambda e: e["file"]), out, indent=1)
    print(f"compile_commands.json: {len(entries)} sources")


if __name__ == "__main__":
    main()
