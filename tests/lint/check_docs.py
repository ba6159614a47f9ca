#!/usr/bin/env python3
"""check_docs.py: the links and Bazel labels of README.md and docs/*.md point at what exists.

Run from the repository root (python3 tests/lint/check_docs.py; stdlib only). Exit code 0 when
everything checked out, 1 with one line per problem (FILE:LINE: what is missing), 2 on a usage
error. `-v` also lists the labels accepted only by the fallbacks of (b) below.

(a) Links. Every relative Markdown link, inline `[text](path)`, `[text](path#anchor)`,
    `[text](#anchor)` or a reference definition `[ref]: path`, outside code (fenced blocks and
    inline code spans), points to an existing file or directory, relative to the Markdown file
    (a path starting with `/` is relative to the repository root, as on GitHub). http(s):,
    mailto: and other schemes are not checked. An `#anchor` into a .md file must name one of its
    headings, by GitHub's rule: the heading's text (links reduced to their text) lowercased,
    every character dropped that is not a letter, digit, space, '-' or '_' (GitHub keeps '_',
    a word character: "Is this host ready? `caf_rdma_doctor`" is
    #is-this-host-ready-caf_rdma_doctor), spaces turned into '-'; a repeated heading gets -1,
    -2, ... as on GitHub.

(b) Bazel labels. Every label `//pkg:name`, `//pkg` (that is `//pkg:pkg`), `//pkg/...`, `//...`,
    or the same after `@caf_rdma`, named anywhere in those files (also in code blocks, except
    C/C++ ones, whose `//` starts comments) exists in this repository:
      - `//...` always; `//pkg/...` needs the directory pkg/;
      - `//pkg:name` needs pkg/BUILD.bazel (or pkg/BUILD) declaring `name = "name"`. Targets that
        macros make are accepted so:
          * transport_test (tests/defs.bzl) makes `X_fallback_test`, `X_rdma_test` and
            `X_test_lib` from `transport_test(name = "X")`: accepted when the BUILD file calls
            transport_test and declares `name = "X"`;
          * otherwise a name that appears as a string ("name") in the BUILD file, or a source
            file pkg/name (a file label), is accepted and listed with -v.
    Labels of other repositories (`@zlib//:zlib`, `@gtest//:gtest_main`) are not checked.
    EXTERNAL_WORKSPACE_LABELS below lists the labels the docs name inside examples/external's
    own workspace; they are checked against that workspace's BUILD file instead.

(c) The tour. README.md's code block under "A tour of the API" is exactly the lines between
    `// -- tour begins --` and `// -- tour ends --` of tests/docs/api_tour.cc (less their common
    indentation), a program the native lane compiles against //:caf_rdma alone: the README
    shows only calls that compile.
"""
import os
import re
import sys

ROOT = os.path.realpath(os.path.join(os.path.dirname(os.path.realpath(__file__)), "..", ".."))

# Labels the docs use in the context of examples/external, a workspace of its own (its own
# WORKSPACE; `cd examples/external && bazel run //:buffer_exchange`): resolved there, not in
# caf-rdma's root package. Keep this list to what the docs say in that context.
EXTERNAL_WORKSPACE_LABELS = {
    "//:buffer_exchange": "examples/external",  # docs/examples.md: `bazel run //:buffer_exchange`
}

LINK_RE = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^()\s>]*)>?(?:\s+\"[^\"]*\")?\s*\)")
REFDEF_RE = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+\"[^\"]*\")?\s*$")
CODE_SPAN_RE = re.compile(r"(`+)((?:[^`\n]|\n(?!\s*\n))+?)\1")
HEADING_RE = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
FENCE_RE = re.compile(r"^\s{0,3}(`{3,}|~{3,})\s*([\w+-]*)")
LABEL_RE = re.compile(r"(?<![\w@:/.=-])(?:@caf_rdma)?//[\w\-./:+]*")
LABEL_AFTER_EQ_RE = re.compile(r"(?<==)(?:@caf_rdma)?//[\w\-./:+]*")
C_FENCES = {"c", "cc", "cpp", "c++", "cxx", "h", "hpp", "cuda", "cu"}


def markdown_files():
    files = []
    if os.path.isfile(os.path.join(ROOT, "README.md")):
        files.append("README.md")
    docs = os.path.join(ROOT, "docs")
    if os.path.isdir(docs):
        files += sorted("docs/" + f for f in os.listdir(docs) if f.endswith(".md"))
    return files


def scan(text):
    """Yields (line number, line, fence language or None when not in a fenced block)."""
    fence = None  # (marker, language) while inside a fenced block
    for number, line in enumerate(text.split("\n"), 1):
        m = FENCE_RE.match(line)
        if fence is None and m:
            fence = (m.group(1), m.group(2).lower())
            continue
        if fence is not None and m and m.group(1)[0] == fence[0][0] and len(m.group(1)) >= len(
            fence[0]
        ) and not m.group(2):
            fence = None
            continue
        yield number, line, (fence[1] if fence else None)


def github_anchor(heading):
    text = re.sub(r"!?\[((?:[^\[\]]|\[[^\[\]]*\])*)\]\([^)]*\)", r"\1", heading)  # links: text
    text = re.sub(r"<[^>]+>", "", text)  # inline HTML tags
    text = text.strip().lower()
    text = "".join(c for c in text if c.isalnum() or c in " -_")
    return text.replace(" ", "-")


_anchor_cache = {}


def anchors_of(path):
    if path not in _anchor_cache:
        seen = {}
        anchors = set()
        with open(path, encoding="utf-8") as f:
            for _, line, lang in scan(f.read()):
                if lang is not None:
                    continue
                m = HEADING_RE.match(line)
                if not m:
                    continue
                base = github_anchor(m.group(2))
                n = seen.get(base, 0)
                anchors.add(base if n == 0 else "%s-%d" % (base, n))
                seen[base] = n + 1
        _anchor_cache[path] = anchors
    return _anchor_cache[path]


def check_link(md, number, target, problems, counts):
    if re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", target):  # http:, https:, mailto:, ...
        return
    counts["links"] += 1
    path, _, anchor = target.partition("#")
    if path == "":
        resolved = os.path.join(ROOT, md)
    elif path.startswith("/"):
        resolved = os.path.join(ROOT, path.lstrip("/"))
    else:
        resolved = os.path.normpath(os.path.join(ROOT, os.path.dirname(md), path))
    if not os.path.exists(resolved):
        problems.append("%s:%d: link to %s: no such file or directory (%s)" % (
            md, number, target, os.path.relpath(resolved, ROOT)))
        return
    if anchor and resolved.endswith(".md") and os.path.isfile(resolved):
        if anchor not in anchors_of(resolved):
            problems.append("%s:%d: link to %s: %s has no heading with anchor #%s" % (
                md, number, target, os.path.relpath(resolved, ROOT), anchor))


def build_file(pkg_dir):
    for name in ("BUILD.bazel", "BUILD"):
        p = os.path.join(pkg_dir, name)
        if os.path.isfile(p):
            return p
    return None


def check_label(md, number, label, problems, counts, fallbacks):
    counts["labels"] += 1
    bare = label[len("@caf_rdma"):] if label.startswith("@caf_rdma") else label
    if bare == "//...":
        return
    if bare.endswith("/..."):
        pkg = bare[2:-4]
        if not os.path.isdir(os.path.join(ROOT, pkg)):
            problems.append("%s:%d: label %s: no directory %s/" % (md, number, label, pkg))
        return
    pkg, colon, name = bare[2:].partition(":")
    if not colon:
        name = os.path.basename(pkg)
    root = ROOT
    if bare in EXTERNAL_WORKSPACE_LABELS:
        root = os.path.join(ROOT, EXTERNAL_WORKSPACE_LABELS[bare])
    pkg_dir = os.path.join(root, pkg)
    build = build_file(pkg_dir)
    where = os.path.relpath(pkg_dir, ROOT)
    if build is None:
        problems.append("%s:%d: label %s: no BUILD.bazel or BUILD in %s/" % (
            md, number, label, where))
        return
    with open(build, encoding="utf-8") as f:
        text = f.read()
    if re.search(r'\bname\s*=\s*"%s"' % re.escape(name), text):
        return
    m = re.match(r"^(.+?)_(?:(?:fallback|rdma)_test|test_lib)$", name)
    if m and "transport_test(" in text and re.search(
            r'\bname\s*=\s*"%s"' % re.escape(m.group(1)), text):
        return
    if '"%s"' % name in text:
        fallbacks.append("%s:%d: %s: only as a string in %s (a macro's target?)" % (
            md, number, label, os.path.relpath(build, ROOT)))
        return
    if os.path.isfile(os.path.join(pkg_dir, name)):
        fallbacks.append("%s:%d: %s: the source file %s" % (
            md, number, label, os.path.relpath(os.path.join(pkg_dir, name), ROOT)))
        return
    problems.append('%s:%d: label %s: %s declares no target named "%s"' % (
        md, number, label, os.path.relpath(build, ROOT), name))


def clean_label(raw):
    label = raw
    if label.endswith("/...") or label.endswith("//..."):
        return label
    label = label.rstrip(".:/")  # sentence punctuation after a label
    return label


TOUR_SOURCE = "tests/docs/api_tour.cc"


def check_tour(problems):
    """(c): README's tour block is the compiled program's tour."""
    with open(os.path.join(ROOT, TOUR_SOURCE), encoding="utf-8") as f:
        src = f.read().split("\n")
    try:
        begin = next(i for i, l in enumerate(src) if l.strip() == "// -- tour begins --")
        end = next(i for i, l in enumerate(src) if l.strip() == "// -- tour ends --")
    except StopIteration:
        problems.append("%s:1: no `// -- tour begins --` / `// -- tour ends --` markers" %
                        TOUR_SOURCE)
        return
    body = src[begin + 1:end]
    indent = min(len(l) - len(l.lstrip()) for l in body if l.strip())
    body = [l[indent:] for l in body]
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        readme = f.read().split("\n")
    try:
        heading = next(i for i, l in enumerate(readme) if l.strip() == "## A tour of the API")
        start = next(i for i in range(heading, len(readme)) if readme[i].startswith("```cpp"))
        stop = next(i for i in range(start + 1, len(readme)) if readme[i].startswith("```"))
    except StopIteration:
        problems.append("README.md:1: no ```cpp block under \"## A tour of the API\"")
        return
    shown = readme[start + 1:stop]
    if shown != body:
        k = next((i for i, (a, b) in enumerate(zip(shown, body)) if a != b),
                 min(len(shown), len(body)))
        problems.append("README.md:%d: the tour differs from %s (lines %d-%d) from here on: "
                        "README %r, program %r" % (
                            start + 2 + k, TOUR_SOURCE, begin + 2, end,
                            shown[k] if k < len(shown) else "(end)",
                            body[k] if k < len(body) else "(end)"))


def main(argv):
    verbose = "-v" in argv[1:]
    if any(a not in ("-v",) for a in argv[1:]):
        print("usage: python3 tests/lint/check_docs.py [-v]", file=sys.stderr)
        return 2
    problems, fallbacks = [], []
    counts = {"links": 0, "labels": 0}
    files = markdown_files()
    if not files:
        print("check_docs: no README.md or docs/*.md under %s" % ROOT, file=sys.stderr)
        return 1
    for md in files:
        with open(os.path.join(ROOT, md), encoding="utf-8") as f:
            text = f.read()
        # Links, whose text may run over several lines: the text outside fenced blocks (their
        # lines left empty, so that offsets still give line numbers).
        prose = []
        for number, line, lang in scan(text):
            while len(prose) < number - 1:
                prose.append("")  # a fence line
            prose.append(line if lang is None else "")
            if lang is None:
                m = REFDEF_RE.match(line)
                if m:
                    check_link(md, number, m.group(1), problems, counts)
        prose = "\n".join(prose)
        spans = [(m.start(), m.end()) for m in CODE_SPAN_RE.finditer(prose)]
        for m in LINK_RE.finditer(prose):
            if not any(a <= m.start() < b for a, b in spans):
                check_link(md, prose.count("\n", 0, m.start()) + 1, m.group(1), problems, counts)
        for number, line, lang in scan(text):
            if lang in C_FENCES:
                continue
            labels = [m.group(0) for m in LABEL_RE.finditer(line)]
            labels += [m.group(0) for m in LABEL_AFTER_EQ_RE.finditer(line)]
            for raw in labels:
                label = clean_label(raw)
                if label in ("//", "@caf_rdma//"):
                    continue
                check_label(md, number, label, problems, counts, fallbacks)
    check_tour(problems)
    if verbose:
        for f in fallbacks:
            print("check_docs: accepted " + f)
    if problems:
        def where(p):
            f, line, _ = p.split(":", 2)
            return (f, int(line))

        for p in sorted(problems, key=where):
            print(p)
        print("check_docs: %d problem(s) in %s (%d links, %d labels checked)" % (
            len(problems), ", ".join(files), counts["links"], counts["labels"]))
        return 1
    print("check_docs: OK: %d files, %d links and %d Bazel labels checked" % (
        len(files), counts["links"], counts["labels"]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
