#!/usr/bin/env python3
"""One clang-tidy action of tests/lint/tidy.bzl: clang-tidy-14 over one source, with the gcc
command Bazel compiles it with.

Usage: tidy_action.py OUT CONFIG GCC_ARGV...  (run by Bazel in the execution root)
Runs clang-tidy with CONFIG (.clang-tidy) on the source after GCC_ARGV's "-c", with GCC_ARGV's
flags less what clang does not know (compile_commands.GCC_ONLY, drop_system_dirs) and less its
outputs (-o, -MD/-MF: gcc's, not clang-tidy's). No finding: writes OUT (empty), exits 0.
Findings: prints them, writes nothing, exits 1 (Bazel then names the source).
"""
import os
import re
import subprocess
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree (the action is unsandboxed)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compile_commands import GCC_ONLY, drop_system_dirs  # noqa: E402

FINDING = re.compile(r"^[^ :]+:\d+:\d+: (warning|error):")


def clang_flags(argv):
    """argv[1:] up to "-c", without gcc's outputs and the flags clang does not know."""
    flags, skip = [], False
    for a in argv[1:argv.index("-c")]:
        if skip:
            skip = False
        elif a in ("-MF", "-o"):
            skip = True
        elif a != "-MD" and a not in GCC_ONLY:
            flags.append(a)
    return drop_system_dirs(flags, os.getcwd())


def main():
    out, config, argv = sys.argv[1], sys.argv[2], sys.argv[3:]
    src = argv[argv.index("-c") + 1]
    run = subprocess.run(["clang-tidy-14", "--quiet", f"--config-file={config}", src, "--",
                          *clang_flags(argv)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True)
    report = re.sub(r"\x1b\[[0-9;]*m", "", run.stdout)
    findings = [line for line in report.splitlines() if FINDING.match(line)]
    if run.returncode != 0 or findings:
        sys.stderr.write(report)
        sys.stderr.write(f"tidy: {src}: {len(findings)} finding(s) (clang-tidy exit {run.returncode})\n")
        return 1
    open(out, "w").close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
