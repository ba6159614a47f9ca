#!/usr/bin/env bash
# Mutation check: breaks one production line at a time in a scratch copy of the tree (a git
# worktree of HEAD plus the working tree's changes) and runs the native tests that should catch
# it. Every mutant must make them fail; a mutant that survives is a blind spot of the suite.
# Usage: tests/mutation/run_mutants.sh [MUTANT_NAME...]   (default: all; list: --list)
# Takes a few minutes per mutant (an incremental build of the scratch copy).
set -uo pipefail
cd "$(dirname "$(realpath "$0")")/../.."
root=$PWD

# name | file | exact line (substring, from which the rest of the line is replaced; no '|' in
# it: write C++'s `or` instead) | replacement | test targets that must fail
mutants=(
  "write_span_check|actors/transfer_checks.cc|    if (!reading && remote_span < local_span)|    if (false)|//tests/actors:manager_fallback_test"
  "read_span_check|actors/transfer_checks.cc|    if (reading && local_span < remote_span)|    if (false)|//tests/actors:manager_fallback_test"
  "stream_stop_no_wake|components/stream_server.cc|        c->socket.shutdown_both();|        (void) c;|//tests/components:stream_channel_test"
  "released_is_live|actors/manager/buffer_table.cc|  if (it->second.released)|  if (false)|//tests/actors:revocation_fallback_test //tests/actors:manager_fallback_test"
  "peer_down_keeps_questions|actors/manager/link_recovery.cc|    fail(err);|    (void) fail;|//tests/actors:revocation_fallback_test"
  "release_does_not_wait|actors/manager/buffer_table.cc|  if (buf->in_use == 0 && lanes_idle) {|  if (true) {|//tests/actors:manager_fallback_test //tests/actors:direct_lane_fallback_test"
  "secret_unchecked|actors/manager/buffer_table.cc|  if (!secrets_equal(b->secret_hi, b->secret_lo, ref.secret_hi, ref.secret_lo))|  if (false)|//tests/security:hostile_peer_fallback_test"
  "remote_is_local|actors/rdma_manager_actor.cc|  if (sender && sender->node() == self_->node() && !proxy && !via_facade)|  if (true)|//tests/security:hostile_peer_fallback_test //tests/actors:request_audience_test"
  "proxy_is_local|actors/rdma_manager_actor.cc|  if (sender && sender->node() == self_->node() && !proxy && !via_facade)|  if (sender && sender->node() == self_->node() && !via_facade)|//tests/security:hostile_peer_fallback_test"
  "local_request_unchecked|actors/rdma_manager_actor.cc|        if (auto err = refused(a))|        if (caf::error err{})|//tests/actors:request_audience_test"
  "grant_timeout_uncapped|actors/manager/stream_grants.cc|  const uint32_t limit_ms = m_.capped(timeout_ms);|  const uint32_t limit_ms = timeout_ms;|//tests/security:hostile_peer_fallback_test"
  "no_header_deadline|components/stream_server.cc|      if (!c->busy && c->header_deadline <= now)|      if (false)|//tests/security:stream_server_limits_test"
  "flood_refuses_newcomers|components/stream_server.cc|      make_room_locked(ip);|      if (unauthenticated_per_host_[ip] >= limits_.max_unauthenticated_per_host) continue;|//tests/security:stream_server_limits_test"
  "lost_connection_not_retried|components/stream_client.cc|  if (lost(st, reach)) {|  if (false) {|//tests/components:stream_channel_test"
  "forged_answer_taken|actors/peer_facade.cc|    if (!same(n, a->nonce)|    if (false)|//tests/security:forged_sender_fallback_test"
  "unsealed_error_taken|actors/peer_facade.cc|            if (err == caf::sec::request_timeout && self->clock().now() >= a->due)|            if (true)|//tests/security:forged_sender_fallback_test"
  "client_takes_forged_answer|actors/rdma_client.cc|            if (((n.hi ^ nonce.hi)|            if (false)|//tests/security:forged_sender_fallback_test"
  "kill_reaches_facade|actors/peer_facade.cc|  if (ptr != nullptr && ptr->content().match_elements<caf::exit_msg>()) {|  if (false) {|//tests/security:forged_sender_fallback_test"
  "grants_outlive_release|actors/manager/buffer_table.cc|  m_.grants.revoke_unclaimed_grants(id);|  (void)id;|//tests/security:hostile_peer_fallback_test"
  "span_one_past|actors/manager/buffer_table.cc|  if (offset > b.size |  if (offset > b.size or length > b.size - offset + 1)|//tests/security:hostile_peer_fallback_test"
  "chunk_local_offset|actors/transfer/chunk_path.cc|  const uint64_t local_off = op.local_offset + off;|  const uint64_t local_off = off;|//tests/actors:fallback_edges_test"
  "overlap_takes_rdma|actors/transfer/path_choice.cc|  if (f.same_node && f.ranges_overlap)|  if (false)|//tests/actors/transfer:path_choice_test"
  "refused_stream_fails_op|actors/transfer/stream_path.cc|  if (refused && !down && !lost) {|  if (false) {|//tests/actors/transfer:stream_path_test"
)

if [ "${1:-}" = --list ]; then
  for m in "${mutants[@]}"; do echo "${m%%|*}"; done
  exit 0
fi
want=("$@")
scratch=$(mktemp -d /tmp/caf-rdma-mutants.XXXXXX)
trap 'git -C "$root" worktree remove --force "$scratch/tree" >/dev/null 2>&1; rm -rf "$scratch"' EXIT
git worktree add -q --detach "$scratch/tree" HEAD || exit 2
git diff HEAD | git -C "$scratch/tree" apply --allow-empty 2>/dev/null || git diff HEAD | (cd "$scratch/tree" && patch -p1 -s)
cd "$scratch/tree"
survived=0; caught=0
for m in "${mutants[@]}"; do
  IFS='|' read -r name file line repl targets <<<"$m"
  if [ ${#want[@]} -gt 0 ] && [[ ! " ${want[*]} " =~ " $name " ]]; then continue; fi
  if ! grep -qF -- "$line" "$file"; then
    echo "mutant $name: line not found in $file (the code moved: update this script)"; survived=$((survived + 1)); continue
  fi
  cp "$file" "$scratch/orig"
  python3 - "$file" "$line" "$repl" <<'PY'
import sys
path, line, repl = sys.argv[1:]
s = open(path).read()
i = s.index(line)
j = s.index("\n", i)
open(path, "w").write(s[:i] + repl + s[j:])
PY
  echo "=== mutant $name: $file: '$(echo "$line" | sed 's/^ *//')' -> '$(echo "$repl" | sed 's/^ *//')'"
  # shellcheck disable=SC2086
  if bazel test --test_output=summary $targets > "$scratch/$name.log" 2>&1; then
    echo "mutant $name SURVIVED: $targets passed"; survived=$((survived + 1))
  elif grep -q "FAILED TO BUILD\|Build did NOT complete" "$scratch/$name.log"; then
    echo "mutant $name: does not build (not a valid mutant: update this script)"; survived=$((survived + 1))
  else
    echo "mutant $name caught: $(grep -E 'FAILED|TIMEOUT' "$scratch/$name.log" | grep '//' | tr -s ' ' | head -3 | tr '\n' ' ')"
    caught=$((caught + 1))
  fi
  cp "$scratch/orig" "$file"
done
echo "mutants: $caught caught, $survived survived"
[ $survived -eq 0 ]
