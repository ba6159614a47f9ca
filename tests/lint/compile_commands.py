#!/usr/bin/env python3
"""Writes compile_commands.json (at the repository root) from Bazel's own compile actions.

For editors' clang tooling (clangd, clang-tidy by hand); CI's clang-tidy runs as Bazel actions
(tests/lint/tidy.bzl), which take GCC_ONLY and drop_system_dirs from here.
Usage: compile_commands.py [bazel startup options...]
Needs the tree built (`bazel build //...`: see main()); runs
`bazel aquery 'mnemonic("CppCompile", //...)' --output=jsonproto` and keeps, for each of
this repository's sources, the exact gcc command Bazel uses, run from Bazel's execution root
(where `external/...` and `bazel-out/...` resolve). GCC-only flags clang does not know are
dropped (and /usr/include given as -isystem, see drop_system_dirs), so clang-tidy parses every
file as gcc compiles it.
The commands run from a mirror of the execution root (tidy_root), not from it: Bazel re-plants
the execution root's links at every command, so a tool run beside a Bazel command could find
them moving; the mirror's links point at what they resolve to (the sources, the external
repositories, bazel-out), which those commands do not move.
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


def has_build_file(directory):
    """True when `directory` or a directory below it is a Bazel package."""
    for _, _, files in os.walk(directory):
        if "BUILD.bazel" in files or "BUILD" in files:
            return True
    return False


def tidy_root(execroot, output_base):
    """A directory beside the execution root that links each of its entries to what it
    resolves to now: where clang-tidy's commands run (module docstring)."""
    mirror = os.path.join(output_base, "caf_rdma_tidy_root")
    os.makedirs(mirror, exist_ok=True)
    for entry in os.listdir(mirror):
        os.unlink(os.path.join(mirror, entry))
    for entry in os.listdir(execroot):
        os.symlink(os.path.realpath(os.path.join(execroot, entry)), os.path.join(mirror, entry))
    return mirror


def bazel(startup, *args):
    return subprocess.run(["bazel", *startup, *args], check=True, stdout=subprocess.PIPE,
                          stderr=subprocess.DEVNULL, text=True).stdout


def main():
    startup = sys.argv[1:]
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__))))
    os.chdir(root)
    execroot = bazel(startup, "info", "execution_root").strip()
    # Bazel links into the execution root only the top-level directories the last build
    # needed: after a partial build (a lane of a few targets) clang-tidy would find no
    # 'support/...' header. The build is not run from here: Python (pyenv) changes PATH,
    # which is part of every action's environment, so a build from here would rebuild the
    # whole tree, and the next build from a shell all of it again. check_tidy.sh builds first.
    missing = [d for d in sorted(os.listdir(root))
               if not d.startswith((".", "bazel-")) and os.path.isdir(os.path.join(root, d))
               and has_build_file(os.path.join(root, d))
               and not os.path.exists(os.path.join(execroot, d))]
    if missing:
        sys.exit(f"compile_commands: {', '.join(missing)} not in Bazel's execution root; "
                 "run `bazel build //...` first (tests/lint/check_tidy.sh does)")
    actions = json.loads(bazel(startup, "aquery", 'mnemonic("CppCompile", //...)',
                               "--output=jsonproto"))["actions"]
    directory = tidy_root(execroot, bazel(startup, "info", "output_base").strip())
    entries = {}
    for action in actions:
        args = drop_system_dirs([a for a in action["arguments"] if a not in GCC_ONLY], execroot)
        src = args[args.index("-c") + 1]
        if src.startswith(("external/", "bazel-out/")):
            continue
        entries[src] = {"directory": directory, "file": os.path.join(root, src),
                        "arguments": args[:args.index("-c") + 1] + [os.path.join(root, src)]}
    with open(os.path.join(root, "compile_commands.json"), "w") as out:
        json.dump(sorted(entries.values(), key=lambda e: e["file"]), out, indent=1)
    print(f"compile_commands.json: {len(entries)} sources")


if __name__ == "__main__":
    main()
