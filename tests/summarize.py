#!/usr/bin/env python3
"""Prints what a `bazel test` run did, test case by test case, from bazel-testlogs/**/test.xml.

Usage: summarize.py [--fail-on-skip] LANE TESTLOGS_DIR [TARGET ...]
With TARGETs (labels like //tests/x:y_test), only those binaries are summarized.
Prints one line per test case (PASSED / FAILED / SKIPPED with the reason / NOTRUN) and a totals
line:
  lane <LANE>: <binaries> binaries, <cases> test cases: <p> passed, <f> failed, <s> skipped
A case passes only when it ran and completed (gtest status="run", result "completed" or
"passed"); a case that was not run (status="notrun", e.g. disabled) is listed as NOTRUN and
counted as skipped; a binary that ran no test case at all (zero cases, or only
--gtest_list_tests) counts as failed. With --fail-on-skip (the VM lane, where every rdma test
must run) a skipped or not-run case counts as failed too.
For a binary with a failed case, the first sanitizer report in its test.log (ThreadSanitizer,
AddressSanitizer, LeakSanitizer, UBSan), with the test case it ran in, is printed shortened
(frames as `#N function file:line`): CI keeps only the end of the output, where this summary is.
Exits 1 when anything failed.
"""
import glob
import os
import re
import sys
import xml.etree.ElementTree as ET


SANITIZER_START = re.compile(
    r"WARNING: ThreadSanitizer|ERROR: AddressSanitizer|ERROR: LeakSanitizer|runtime error:")
FRAME = re.compile(r"^\s*(#\d+) (?:0x[0-9a-f]+ in )?(.*?) (\S+:\d+)(?::\d+)? \(.*\)\s*$")


def sanitizer_excerpt(log_path, max_lines=80, max_frames=16):
    """The first sanitizer report of a test log, shortened; [] when there is none."""
    try:
        with open(log_path, errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return []
    case = "before any test case"
    for i, line in enumerate(lines):
        if line.startswith("[ RUN      ]"):
            case = line[len("[ RUN      ]"):].strip()
        if SANITIZER_START.search(line):
            out = [f"in test case {case}:"]
            frames = 0  # of the current stack; its first max_frames are kept
            for raw in lines[i:]:
                m = FRAME.match(raw) or re.match(r"^\s*(#\d+) ()(.*)$", raw)
                if m:
                    frames += 1
                    if frames > max_frames:
                        continue
                    func = m.group(2)
                    func = func if len(func) <= 100 else func[:97] + "..."
                    out.append(f"  {m.group(1)} {func} {os.path.basename(m.group(3))}"[:200])
                    continue
                if frames > max_frames:
                    out.append(f"  ... {frames - max_frames} more frames")
                frames = 0
                out.append(raw[:200])
                if len(out) >= max_lines or raw.startswith("SUMMARY:"):
                    break
            return out
    return []


def main():
    args = sys.argv[1:]
    fail_on_skip = "--fail-on-skip" in args
    args = [a for a in args if a != "--fail-on-skip"]
    lane, logs = args[0], args[1]
    only = set(args[2:])
    binaries = cases = passed = failed = skipped = 0
    for xml_path in sorted(glob.glob(os.path.join(logs, "**", "test.xml"), recursive=True)):
        if re.search(r"/(run|shard)_\d+_of_\d+/", xml_path):
            continue  # left by an earlier --runs_per_test or sharded run, not by this one
        target = "//" + os.path.relpath(os.path.dirname(xml_path), logs)
        target = target[: target.rfind("/")] + ":" + target[target.rfind("/") + 1:]
        if only and target not in only:
            continue
        try:
            root = ET.parse(xml_path).getroot()
        except ET.ParseError as e:
            print(f"  {lane}  {target}: unreadable test.xml ({e})")
            failed += 1
            continue
        binaries += 1
        ran = 0
        failed_before = failed
        for tc in root.iter("testcase"):
            cases += 1
            name = f"{tc.get('classname')}.{tc.get('name')}"
            fail = tc.find("failure")
            skip = tc.find("skipped")
            status, result = tc.get("status"), tc.get("result")
            if fail is not None or tc.find("error") is not None or result == "failed":
                failed += 1
                ran += 1
                print(f"  {lane}  FAILED   {target} {name}")
            elif skip is not None or result == "skipped":
                ran += 1
                reason = (skip.get("message") if skip is not None else "") or ""
                reason = reason.strip().splitlines()[-1] if reason.strip() else "no reason given"
                if fail_on_skip:
                    failed += 1
                    print(f"  {lane}  FAILED   {target} {name}: skipped in a lane where it must run: {reason[:160]}")
                else:
                    skipped += 1
                    print(f"  {lane}  SKIPPED  {target} {name}: {reason[:160]}")
            elif status == "run" and result in (None, "completed", "passed"):
                passed += 1
                ran += 1
                print(f"  {lane}  PASSED   {target} {name}")
            else:
                what = f"status {status!r}, result {result!r}"
                if fail_on_skip:
                    failed += 1
                    print(f"  {lane}  FAILED   {target} {name}: not run ({what})")
                else:
                    skipped += 1
                    print(f"  {lane}  NOTRUN   {target} {name}: {what}")
        if ran == 0:
            failed += 1
            print(f"  {lane}  FAILED   {target}: ran no test case")
        if failed > failed_before:
            for line in sanitizer_excerpt(os.path.join(os.path.dirname(xml_path), "test.log")):
                print(f"  {lane}    | {line}")
    if only and binaries != len(only):
        print(f"  {lane}  MISSING  {len(only) - binaries} of {len(only)} expected binaries left no test.xml")
        failed += 1
    print(f"lane {lane}: {binaries} binaries, {cases} test cases: "
          f"{passed} passed, {failed} failed, {skipped} skipped")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
