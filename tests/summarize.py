#!/usr/bin/env python3
"""Prints what a `bazel test` run did, test case by test case, from bazel-testlogs/**/test.xml.

Usage: summarize.py LANE TESTLOGS_DIR [TARGET ...]
With TARGETs (labels like //tests/x:y_test), only those binaries are summarized.
Prints one line per test case (PASSED / FAILED / SKIPPED with the reason) and a totals line:
  lane <LANE>: <binaries> binaries, <cases> test cases: <p> passed, <f> failed, <s> skipped
Exits 1 when a case failed.
"""
import glob
import os
import re
import sys
import xml.etree.ElementTree as ET


def main():
    lane, logs = sys.argv[1], sys.argv[2]
    only = set(sys.argv[3:])
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
        for tc in root.iter("testcase"):
            cases += 1
            name = f"{tc.get('classname')}.{tc.get('name')}"
            fail = tc.find("failure")
            skip = tc.find("skipped")
            if fail is not None or tc.find("error") is not None:
                failed += 1
                print(f"  {lane}  FAILED   {target} {name}")
            elif skip is not None or tc.get("result") == "skipped":
                skipped += 1
                reason = (skip.get("message") if skip is not None else "") or ""
                reason = reason.strip().splitlines()[-1] if reason.strip() else "no reason given"
                print(f"  {lane}  SKIPPED  {target} {name}: {reason[:160]}")
            else:
                passed += 1
                print(f"  {lane}  PASSED   {target} {name}")
    if only and binaries != len(only):
        print(f"  {lane}  MISSING  {len(only) - binaries} of {len(only)} expected binaries left no test.xml")
        failed += 1
    print(f"lane {lane}: {binaries} binaries, {cases} test cases: "
          f"{passed} passed, {failed} failed, {skipped} skipped")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
