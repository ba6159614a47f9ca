#!/usr/bin/env python3
"""A real Prometheus server (Debian's, fetched by third_party/install_deps.sh) scrapes two nodes
while they move bytes (tests/metrics/metrics_pair), and its query API gives what an operator
would see: the owner's served bytes equal the user's bytes on the fallback exactly, by kind; the
owner's fetch-adds as requests; both sides' rates during the transfers agree; the build-info
series. Writes the series' plot (PNG, docs/operations.md shows one) to
$TEST_UNDECLARED_OUTPUTS_DIR.

usage: prometheus_scrape.py METRICS_PAIR [PROMETHEUS]
Every wait has a deadline; nothing sleeps to synchronise: each step waits for the event it needs
(a line of the pair, which answers a round once the owner counted it; Prometheus's own
"Listening on" line and its readiness; a scrape newer than the last round).
Without a Prometheus server the test is reported skipped (test.xml), unless
CAF_RDMA_REQUIRE_PROMETHEUS=1 (tests/run_tests.sh sets it), which makes that a failure.
"""
import json
import os
import re
import select
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

kPrometheus = "/opt/caf-rdma/prometheus/prometheus"
kRounds = 6
kAtomics = 4


def fail(why):
    print("FAILED: " + why, flush=True)
    sys.exit(1)


def skip(why):
    """A visible skip: the reason in the log and in test.xml (tests/summarize.py lists it)."""
    print("*** SKIPPED: " + why + " ***", flush=True)
    xml = os.environ.get("XML_OUTPUT_FILE")
    if xml:
        with open(xml, "w") as f:
            f.write('<?xml version="1.0" encoding="UTF-8"?>\n<testsuites tests="1" failures="0" '
                    'skipped="1"><testsuite name="PrometheusScrape" tests="1" failures="0" '
                    'skipped="1"><testcase classname="PrometheusScrape" name="TwoNodesScraped" '
                    'status="run" result="skipped"><skipped message="%s"/></testcase>'
                    '</testsuite></testsuites>\n' % why.replace('"', "'"))
    sys.exit(0)


def wait_for_line(path, pattern, proc, deadline, what):
    """The first match of `pattern` in the file `path` (a log `proc` writes) before `deadline`."""
    while True:
        with open(path, errors="replace") as f:
            m = re.search(pattern, f.read())
        if m:
            return m
        if proc.poll() is not None:
            fail("%s: the process ended (exit %s); its log:\n%s" % (what, proc.returncode,
                                                                    open(path).read()[-3000:]))
        if time.monotonic() > deadline:
            fail("no %s within the deadline; the log:\n%s" % (what, open(path).read()[-3000:]))
        time.sleep(0.1)  # polling a log for a line, bounded by the deadline


def read_line(proc, stream, deadline, what):
    """The next line of `stream` (a pipe of `proc`) before `deadline`."""
    line = b""
    while not line.endswith(b"\n"):
        left = deadline - time.monotonic()
        if left <= 0:
            fail("no %s within the deadline (got %r)" % (what, line))
        ready, _, _ = select.select([stream], [], [], left)
        if ready:
            c = os.read(stream.fileno(), 1)
            if not c:
                fail("%s: the process ended (exit %s) after %r" % (what, proc.poll(), line))
            line += c
    return line.decode().rstrip("\n")


class Prom:
    def __init__(self, port):
        self.root = "http://127.0.0.1:%d/" % port
        self.base = self.root + "api/v1/"

    def wait_ready(self, deadline):
        """Waits until the server answers /-/ready (it listens before its storage is open)."""
        while True:
            try:
                with urllib.request.urlopen(self.root + "-/ready", timeout=10) as r:
                    if r.status == 200:
                        return
            except urllib.error.HTTPError as e:
                if e.code != 503:
                    fail("Prometheus's /-/ready answered %d" % e.code)
            except urllib.error.URLError:
                pass  # not answering yet
            if time.monotonic() > deadline:
                fail("Prometheus was not ready within the deadline")
            time.sleep(0.1)  # polling for a condition, bounded by the deadline

    def get(self, path, **params):
        url = self.base + path + ("?" + urllib.parse.urlencode(params) if params else "")
        with urllib.request.urlopen(url, timeout=30) as r:
            body = json.load(r)
        if body.get("status") != "success":
            fail("%s: %s" % (url, body))
        return body["data"]

    def value(self, query):
        """The single value of an instant query (0 when it returns nothing)."""
        result = self.get("query", query=query)["result"]
        if len(result) > 1:
            fail("%s: %d series, expected one: %s" % (query, len(result), result))
        return float(result[0]["value"][1]) if result else 0.0

    def last_scrapes(self):
        """Each job's last scrape time (seconds), for targets that are up."""
        out = {}
        for t in self.get("targets")["activeTargets"]:
            if t["health"] == "up":
                stamp = re.sub(r"(\.\d{6})\d*", r"\1", t["lastScrape"].replace("Z", "+00:00"))
                out[t["labels"]["job"]] = time_of(stamp)
        return out


def time_of(stamp):
    from datetime import datetime
    return datetime.fromisoformat(stamp).timestamp()


def wait_scraped_after(prom, since, deadline):
    """Waits until both jobs were scraped after wall-clock time `since`."""
    while True:
        last = prom.last_scrapes()
        if len(last) == 2 and min(last.values()) > since:
            return
        if time.monotonic() > deadline:
            fail("Prometheus did not scrape both nodes after %.3f (last scrapes: %s)" %
                 (since, last))
        time.sleep(0.1)  # polling the API for a condition, bounded by the deadline


def plot(prom, start, end, out):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("(matplotlib missing: no plot)")
        return
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8))
    queries = [
        ('sum by (path, kind) (caf_rdma_served_bytes_total{job="owner"})',
         "owner: sum by (path, kind) (caf_rdma_served_bytes_total)"),
        ('sum by (path, kind) (caf_rdma_transfer_bytes_total{job="user"})',
         "user: sum by (path, kind) (caf_rdma_transfer_bytes_total)"),
    ]
    for ax, (q, title) in zip(axes, queries):
        data = prom.get("query_range", query=q, start="%.3f" % start, end="%.3f" % end,
                        step="0.25")["result"]
        for n, series in enumerate(data):
            xs = [float(t) - start for t, _ in series["values"]]
            ys = [float(v) / 2**20 for _, v in series["values"]]
            # Equal series (a read and a write of the same bytes) would hide each other.
            ax.step(xs, ys, where="post", linestyle="-" if n % 2 == 0 else "--",
                    linewidth=max(1.0, 3.0 - n), label="{path} {kind}".format(**series["metric"]))
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("seconds (one round of 2 MiB each way per scrape)")
        ax.set_ylabel("MiB")
        if data:
            ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out, dpi=100)
    print("plot: " + out)


def main():
    if len(sys.argv) < 2:
        fail(__doc__)
    pair_bin = sys.argv[1]
    prometheus = sys.argv[2] if len(sys.argv) > 2 else os.environ.get("CAF_RDMA_PROMETHEUS",
                                                                       kPrometheus)
    if not os.access(prometheus, os.X_OK):
        why = ("no Prometheus server at %s: run third_party/install_deps.sh (it unpacks Debian's "
               "prometheus package there), or name one in CAF_RDMA_PROMETHEUS" % prometheus)
        if os.environ.get("CAF_RDMA_REQUIRE_PROMETHEUS") == "1":
            fail(why + " (CAF_RDMA_REQUIRE_PROMETHEUS=1)")
        skip(why)
    tmp = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))
    deadline = time.monotonic() + 60
    pair = subprocess.Popen([pair_bin], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    prom_proc = None
    try:
        ports = {}
        for _ in range(2):
            line = read_line(pair, pair.stdout, deadline, "node line of metrics_pair")
            m = re.fullmatch(r"(owner|user) (\S+) metrics (\d+)", line)
            if not m:
                fail("metrics_pair said %r" % line)
            ports[m.group(1)] = int(m.group(3))
        print("nodes' metrics ports: %s" % ports, flush=True)
        config = os.path.join(tmp, "prometheus.yml")
        with open(config, "w") as f:
            f.write("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n")
            for job, port in ports.items():
                f.write("  - job_name: %s\n    static_configs:\n      - targets: ['127.0.0.1:%d']\n"
                        % (job, port))
        # Port 0: Prometheus binds a free one itself and names it in its "Listening on" line.
        prom_log = os.path.join(tmp, "prometheus.log")
        with open(prom_log, "w") as log:
            prom_proc = subprocess.Popen(
                [prometheus, "--config.file=" + config, "--storage.tsdb.path=" + tmp + "/data",
                 "--web.listen-address=127.0.0.1:0", "--log.level=info"],
                stdout=log, stderr=subprocess.STDOUT)
        m = wait_for_line(prom_log, r'msg="Listening on" address=127\.0\.0\.1:(\d+)', prom_proc,
                          deadline, "Prometheus's listening line")
        prom = Prom(int(m.group(1)))
        port = int(m.group(1))
        prom.wait_ready(deadline)
        print("prometheus on 127.0.0.1:%d, ready" % port, flush=True)
        wait_scraped_after(prom, time.time(), time.monotonic() + 30)
        start = time.time()  # both nodes scraped once, before any transfer
        written = read = atomics = 0
        for r in range(kRounds):
            pair.stdin.write(b"round\n")
            pair.stdin.flush()
            line = read_line(pair, pair.stdout, time.monotonic() + 60, "round %d's answer" % r)
            m = re.fullmatch(r"round (\d+) (\d+) (\S+) (\S+)", line)
            if not m:
                fail("round %d: metrics_pair said %r" % (r, line))
            written, read = int(m.group(1)), int(m.group(2))
            print(line, flush=True)
            if r < kAtomics:
                pair.stdin.write(b"atomic\n")
                pair.stdin.flush()
                line = read_line(pair, pair.stdout, time.monotonic() + 30, "atomic's answer")
                if not line.startswith("atomic "):
                    fail("atomic: metrics_pair said %r" % line)
                atomics = int(line.split()[1])
            # The next round starts once both nodes were scraped after this one.
            wait_scraped_after(prom, time.time(), time.monotonic() + 30)
        end = time.time()

        checks = []

        def expect(what, got, want):
            ok = got == want
            checks.append(ok)
            print("%s %s: %s (expected %s)" % ("ok  " if ok else "FAIL", what, got, want))

        transport = prom.get("query", query='caf_rdma_build_info{job="owner"}')["result"]
        if not transport:
            fail("no caf_rdma_build_info series of the owner")
        print("owner build info: %s" % transport[0]["metric"])
        q = 'sum(caf_rdma_transfer_bytes_total{job="user",kind="%s"})'
        expect("user's bytes written (every path)", prom.value(q % "write"), written)
        expect("user's bytes read (every path)", prom.value(q % "read"), read)
        for kind in ("write", "read"):
            user_fallback = prom.value(
                'sum(caf_rdma_transfer_bytes_total{job="user",path="fallback",kind="%s"})' % kind)
            served = prom.value('sum(caf_rdma_served_bytes_total{job="owner",kind="%s"})' % kind)
            expect("owner's served %s bytes = the user's on the fallback" % kind, served,
                   user_fallback)
        atomic_path = prom.get("query", query='caf_rdma_transfer_ops_total{job="user",'
                               'kind="fetch-add"}')["result"]
        on_fallback = atomics if atomic_path and atomic_path[0]["metric"]["path"] == "fallback" \
            else 0
        expect("owner's served fetch-add requests", prom.value(
            'sum(caf_rdma_served_requests_total{job="owner",kind="fetch-add"})'), on_fallback)
        # Rates over the whole run: the same bytes at the same times on both sides, so they
        # agree up to Prometheus's extrapolation at the window's ends (a scrape interval or two
        # of the run's six or more).
        window = "[%ds]" % (int(end - start) + 5)
        served_rate = prom.value('sum(rate(caf_rdma_served_bytes_total{job="owner"}%s))' % window)
        user_rate = prom.value('sum(rate(caf_rdma_transfer_bytes_total{job="user",'
                               'path="fallback"}%s))' % window)
        print("rates over %s: owner served %.0f B/s, user on the fallback %.0f B/s" %
              (window, served_rate, user_rate))
        if user_rate > 0:
            ratio = served_rate / user_rate
            ok = 0.67 <= ratio <= 1.5
            checks.append(ok)
            print("%s served / transferred rate ratio %.3f (expected 0.67-1.5)" %
                  ("ok  " if ok else "FAIL", ratio))
        else:
            print("the user moved nothing on the fallback (every op on RDMA): no rate to compare")
        out_dir = os.environ.get("TEST_UNDECLARED_OUTPUTS_DIR", tmp)
        plot(prom, start - 1.5, end + 1, os.path.join(out_dir, "metrics_scrape.png"))
        # The pair ends cleanly (a sanitizer's report at exit makes its code non-zero).
        pair.stdin.write(b"quit\n")
        pair.stdin.flush()
        try:
            rc = pair.wait(timeout=60)
        except subprocess.TimeoutExpired:
            rc = "none: it did not end within 60 s"
        checks.append(rc == 0)
        print("%s metrics_pair exit code %s" % ("ok  " if rc == 0 else "FAIL", rc))
        if not all(checks):
            fail("%d of %d checks failed" % (checks.count(False), len(checks)))
        print("PASSED: %d checks" % len(checks))
    finally:
        if pair.poll() is None:
            pair.kill()
            pair.wait()
        if prom_proc is not None:
            prom_proc.terminate()
            try:
                prom_proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                prom_proc.kill()


if __name__ == "__main__":
    main()
