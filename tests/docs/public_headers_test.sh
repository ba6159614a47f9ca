#!/usr/bin/env bash
# public_headers_test.sh TOUR HEADER...: compiles the README's tour (TOUR, a program against
# caf_rdma.h) with only the public headers (//:public_headers, the HEADER arguments) visible,
# copied into an empty include folder: a public header that includes an internal one fails
# with the internal header's name ("No such file or directory"). The system's headers (CAF,
# libibverbs, the C++ library) stay visible, as in a user's build.
set -uo pipefail
[ $# -ge 2 ] || { echo "usage: public_headers_test.sh TOUR HEADER..." >&2; exit 2; }
tour=$1; shift
inc=$(mktemp -d "${TEST_TMPDIR:-/tmp}/public_headers.XXXXXX")
trap 'rm -rf "$inc"' EXIT
for h in "$@"; do
  mkdir -p "$inc/$(dirname "$h")" && cp "$h" "$inc/$h" ||
    { echo "public_headers_test: cannot copy $h" >&2; exit 2; }
done
cxx=${CXX:-g++}
command -v "$cxx" >/dev/null || { echo "public_headers_test: $cxx missing" >&2; exit 2; }
if ! out=$("$cxx" -std=c++17 -fsyntax-only -I "$inc" "$tour" 2>&1); then
  echo "$out" | grep -E 'fatal error|error:' | head -20 >&2
  echo "public_headers_test: FAILED: the tour does not compile with only the $# public headers" \
    "visible (a public header includes one that is not in //:public_headers, BUILD.bazel)" >&2
  exit 1
fi
echo "public_headers_test: the tour compiles with only the $# public headers visible"
