#!/usr/bin/env python3
"""The soak test's driver (scripts/soak runs it; docs/testing.md has the rule).

It starts a real HTTP server on 127.0.0.1, then a live `lifeline run` with the plugin in
scripts/soak.d/plugins/soak, and drives it at random for --minutes: lifecycle signals, every
`lifeline ctl` action that leaves the app running, and silent pushes whose payload asks the plugin
to write the store and files, make HTTP requests to the server, and start and cancel transfers.
The plugin logs an acknowledgement for each; this driver keeps what it was told was written.

Every second it samples the host's RSS, open descriptors and threads. After a warm-up, none may
grow more than 10 %. Then it ends the app in every way there is (ctl terminate, kill, force-quit;
SIGTERM, SIGINT, a second SIGINT, SIGQUIT; SIGKILL), starting a new host on the same state dir
after each, and checks at the end that nothing was lost. Exit 0 when all holds, 1 when not.
"""
import argparse
import hashlib
import http.server
import json
import math
import os
import random
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
PLUGINS = os.path.join(HERE, "plugins")
GROWTH_LIMIT = 0.10


def data(seed, length):
    """The bytes the plugin makes for (seed, length): seed's 8 hex digits, repeated."""
    unit = "%08x" % seed
    return (unit * (length // 8 + 1))[:length].encode()


# ---------------------------------------------------------------------------------------------
# The HTTP server the plugin talks to.

class Server:
    def __init__(self):
        self.lock = threading.Lock()
        self.uploads = {}  # op id -> the bytes' SHA-256 and length
        self.dumps = {}  # op id -> the JSON the plugin posted
        self.requests = 0
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def body(self):
                if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                    out = b""
                    while True:
                        size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                        if size == 0:
                            while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                                pass
                            return out
                        out += self.rfile.read(size)
                        self.rfile.readline()
                return self.rfile.read(int(self.headers.get("Content-Length") or 0))

            def answer(self, status, payload=b"", extra=()):
                self.send_response(status)
                self.send_header("Content-Length", str(len(payload)))
                for name, value in extra:
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(payload)

            def route(self):
                with server.lock:
                    server.requests += 1
                url = urllib.parse.urlsplit(self.path)
                query = {k: int(v[0]) for k, v in urllib.parse.parse_qs(url.query).items()}
                parts = url.path.strip("/").split("/")
                return parts[0], parts[1] if len(parts) > 1 else "", query

            def do_GET(self):
                try:
                    kind, op, q = self.route()
                    if kind == "echo":
                        time.sleep(q.get("delay", 0) / 1000)
                        self.answer(200, data(q["seed"], q["len"]))
                    elif kind == "blob":
                        # Sent in pieces with pauses, so that a transfer is under way long enough
                        # to be cancelled or cut by an ending.
                        payload = data(q["seed"], q["len"])
                        self.send_response(200)
                        self.send_header("Content-Length", str(len(payload)))
                        self.send_header("ETag", '"%d-%d"' % (q["seed"], q["len"]))
                        self.end_headers()
                        for start in range(0, len(payload), 16384):
                            self.wfile.write(payload[start:start + 16384])
                            self.wfile.flush()
                            time.sleep(0.02)
                    else:
                        self.answer(404)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def do_POST(self):
                try:
                    kind, op, q = self.route()
                    payload = self.body()
                    if kind == "echo":
                        self.answer(200 if payload == data(q["seed"], q["len"]) else 400, payload)
                    elif kind == "dump":
                        with server.lock:
                            server.dumps[op] = json.loads(payload)
                        self.answer(200)
                    else:
                        self.answer(404)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def do_PUT(self):
                try:
                    kind, op, q = self.route()
                    payload = self.body()
                    if kind == "upload":
                        with server.lock:
                            server.uploads[op] = (hashlib.sha256(payload).hexdigest(), len(payload))
                        self.answer(201)
                    else:
                        self.answer(404)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()


# ---------------------------------------------------------------------------------------------
# The host: one `lifeline run` at a time on one state dir.

LINE = re.compile(r"plugin\.soak: (.*)$")
TROUBLE = re.compile(r"\b(pluginError|terminated|watchdog|endUnknownTask)\b")


class Host:
    def __init__(self, soak, generation):
        self.soak = soak
        self.generation = generation
        self.ready = threading.Event()
        log = open(os.path.join(soak.work, "host-%d.log" % generation), "w")
        self.process = subprocess.Popen(
            [soak.binary, "run", "--plugins", PLUGINS, "--state-dir", soak.state,
             "--config", "soak.port=%d" % soak.server.port],
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.PIPE,
            env=dict(os.environ, NO_COLOR="1"))
        self.pid = self.process.pid
        self.reader = threading.Thread(target=self.read, args=(log,), daemon=True)
        self.reader.start()

    def read(self, log):
        for raw in self.process.stderr:
            text = raw.decode("utf-8", "replace").rstrip("\n")
            log.write(text + "\n")
            log.flush()
            match = LINE.search(text)
            if match:
                self.soak.heard(match.group(1).split("\t"), self)
            elif TROUBLE.search(text) and " -- " not in text:
                self.soak.problem("host %d: %s" % (self.generation, text.strip()))
        log.close()

    def alive(self):
        return self.process.poll() is None

    def wait_ready(self, seconds=60):
        deadline = time.time() + seconds
        while time.time() < deadline:
            if not self.alive():
                return False
            if self.ready.wait(0.1) and os.path.exists(self.soak.socket_path):
                return True
        return False


# ---------------------------------------------------------------------------------------------
# The soak.

LIFECYCLE = ["resign", "activate", "background", "foreground", "memory-warning", "launch",
             "launch background"]
SYSTEM = ["fetch", "push", "run-tasks", "run-tasks refresh", "run-tasks processing",
          "run-tasks soak.refresh", "charging on", "charging off", "network on", "network off"]
ENDINGS = ["ctl terminate", "ctl kill", "ctl force-quit", "SIGTERM", "SIGINT", "SIGINT SIGINT",
           "SIGQUIT", "SIGKILL"]


class Soak:
    def __init__(self, args):
        self.args = args
        self.rng = random.Random(args.seed)
        self.binary = args.binary
        self.work = tempfile.mkdtemp(prefix="lifeline-soak-")
        self.state = os.path.join(self.work, "state")
        self.socket_path = os.path.join(self.state, "control.sock")
        self.files_dir = os.path.join(self.state, "files", "soak")
        self.server = Server()
        self.lock = threading.RLock()  # problem() is called with it held, too
        self.problems = []
        self.next_id = 0
        # What the host acknowledged.
        self.acked = set()
        self.sent = {}  # op id -> the op, for every op in a push the host answered ok
        self.store = {}  # key -> (seed, len), or None once deleted
        self.files = {}  # name -> (seed, len), or None once removed
        self.checks = {}  # op id -> "ok" / "bad ..."
        self.http = {}  # op id -> "ok" / "failed KIND" / "bad ..."
        self.transfers = {}  # transfer id -> {"op": the dl/up op, "end": None, "finished" or "failed REASON"}
        self.pending = {}  # op id -> the op, for the push under way (its acks come before its answer)
        self.tidy = []  # finished transfers' files, for the next pushes to remove
        self.cut = set()  # http op ids whose host ended before they answered
        self.cancelled = 0
        self.counts = {"signals": 0, "ctl": 0, "ctl binary": 0, "pushes": 0, "ops": 0, "refused": 0}
        self.samples = []  # (seconds into the driving, rss kB, fds, threads)
        self.endings = []
        self.network = True
        self.host = None
        self.generation = 0

    # -- what the host says -----------------------------------------------------------------

    def problem(self, text):
        with self.lock:
            if len(self.problems) < 50:
                self.problems.append(text)

    def heard(self, words, host):
        kind = words[0]
        with self.lock:
            if kind == "ready":
                host.ready.set()
            elif kind == "ack":
                self.acked.add(words[1])
                op = self.sent.get(words[1]) or self.pending.get(words[1])
                if op and op["op"] in ("dl", "up") and len(words) > 2:
                    self.transfers[words[2]] = {"op": op, "end": None}
                elif op and op["op"] == "cancel" and words[2:] == ["true"]:
                    self.cancelled += 1
            elif kind == "check":
                self.checks[words[1]] = " ".join(words[2:])
            elif kind == "http":
                self.http[words[1]] = " ".join(words[2:])
            elif kind == "transfer":
                self.transfer_ended(words[1], words[2], words[3:])

    def transfer_ended(self, tid, how, rest):
        record = self.transfers.setdefault(tid, {"op": None, "end": None})
        end = how if how == "finished" else "failed " + " ".join(rest)
        if record["end"] is not None and record["end"].split()[0] != how:
            self.problems.append("transfer %s ended twice, differently: %s, then %s" % (tid, record["end"], end))
        if record["end"] is None and how == "finished" and record["op"] is not None:
            op = record["op"]
            if op["op"] == "dl":
                path = os.path.join(self.files_dir, "dl", op["id"])
                try:
                    with open(path, "rb") as f:
                        whole = f.read() == data(op["seed"], op["len"])
                except OSError as e:
                    whole = False
                    rest = [str(e)]
                if not whole:
                    self.problems.append("download %s finished, but dl/%s is not whole (%s)" % (tid, op["id"], " ".join(rest)))
            else:
                got = self.server.uploads.get(op["id"])
                want = (hashlib.sha256(data(op["seed"], op["len"])).hexdigest(), op["len"])
                if got != want:
                    self.problems.append("upload %s finished, but the server got %s, not %s" % (tid, got, want))
            # The finished file is removed by a later push, so the files folder stays small.
            self.tidy.append(("dl/" if op["op"] == "dl" else "up/") + op["id"])
        record["end"] = record["end"] or end

    # -- talking to the host ----------------------------------------------------------------

    def ctl(self, action):
        """Sends one action; returns the answer line, or None when there was none."""
        self.counts["ctl"] += 1
        if self.rng.random() < 0.2:
            # Sometimes through `lifeline ctl` itself.
            self.counts["ctl binary"] += 1
            done = subprocess.run([self.binary, "ctl", "--state-dir", self.state] + action.split(" "),
                                  capture_output=True, timeout=90)
            if done.returncode == 0:
                answer = done.stdout.decode().strip()
            elif done.returncode == 65:
                answer = "error: " + done.stderr.decode().strip().split("error: ", 1)[-1]
            else:
                answer = None
                self.problem("lifeline ctl %s: exit %d: %s" % (action, done.returncode, done.stderr.decode().strip()))
        else:
            try:
                with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                    s.settimeout(60)
                    s.connect(self.socket_path)
                    s.sendall(action.encode() + b"\n")
                    answer = b""
                    while True:
                        piece = s.recv(4096)
                        if not piece:
                            break
                        answer += piece
                answer = answer.decode().strip()
            except OSError as e:
                answer = None
                self.problem("ctl %s: %s" % (action[:60], e))
        if answer is not None and answer != "ok" and not answer.startswith("error: "):
            self.problem("ctl %s: an answer that is neither ok nor an error: %r" % (action[:60], answer))
        if answer is not None and "did not answer" in answer:
            self.problem("ctl %s: %s" % (action[:60], answer))
            return None
        if answer is not None and answer != "ok":
            self.counts["refused"] += 1
        return answer

    def new_id(self):
        self.next_id += 1
        return "s%d" % self.next_id

    def push(self, ops):
        payload = json.dumps({"aps": {"content-available": 1}, "soak": ops}, separators=(",", ":"))
        with self.lock:
            self.pending = {op["id"]: op for op in ops}
        answer = self.ctl("push " + payload)
        self.counts["pushes"] += 1
        self.counts["ops"] += len(ops)
        if answer == "ok":
            with self.lock:
                for op in ops:
                    self.sent[op["id"]] = op
                    if op["op"] == "set":
                        self.store[op["key"]] = (op["seed"], op["len"])
                    elif op["op"] == "del":
                        self.store[op["key"]] = None
                    elif op["op"] == "tx":
                        for w in op["writes"]:
                            self.store[w["key"]] = (w["seed"], w["len"])
                    elif op["op"] == "fwrite":
                        self.files[op["name"]] = (op["seed"], op["len"])
                    elif op["op"] == "frm" and op["name"] in self.files:
                        self.files[op["name"]] = None
        elif answer is not None:
            self.problem("a push was refused: %s" % answer)
        return answer

    def unsettled(self):
        with self.lock:
            return [t for t, r in self.transfers.items() if r["end"] is None]

    def random_ops(self):
        rng = self.rng
        ops = []
        batch = {}  # the keys this batch writes, as a read-back after them must see them
        with self.lock:
            tidy, self.tidy = self.tidy[:4], self.tidy[4:]
        for name in tidy:
            ops.append({"op": "frm", "id": self.new_id(), "name": name})
        for _ in range(rng.randint(1, 5)):
            op = {"id": self.new_id()}
            pick = rng.choices(["set", "del", "tx", "check", "fwrite", "frm", "http", "dl", "up", "cancel"],
                               [30, 5, 5, 15, 15, 3, 15, 4, 3, 6])[0]
            key = "k%d" % rng.randint(1, 300)
            name = "f/%d" % rng.randint(1, 40)
            op["op"] = pick
            if pick == "set":
                op.update(key=key, seed=rng.randint(0, 2**31), len=rng.randint(1, 2000))
                batch[key] = (op["seed"], op["len"])
            elif pick == "del":
                op["key"] = key
                batch[key] = None
            elif pick == "tx":
                op["writes"] = [{"key": "k%d" % rng.randint(1, 300), "seed": rng.randint(0, 2**31),
                                 "len": rng.randint(1, 500)} for _ in range(rng.randint(2, 4))]
                for w in op["writes"]:
                    batch[w["key"]] = (w["seed"], w["len"])
            elif pick == "check":
                op["key"] = key
                with self.lock:
                    want = batch[key] if key in batch else self.store.get(key)
                if want:
                    op.update(seed=want[0], len=want[1])
            elif pick == "fwrite":
                op.update(name=name, seed=rng.randint(0, 2**31), len=rng.randint(0, 65536))
            elif pick == "frm":
                op["name"] = name
            elif pick == "http":
                op.update(method=rng.choice(["GET", "POST"]), seed=rng.randint(0, 2**31),
                          len=rng.randint(0, 100000), delay=rng.choice([0, 0, 0, 50, 500]))
            elif pick in ("dl", "up"):
                if len(self.unsettled()) >= 8:
                    continue
                op.update(seed=rng.randint(0, 2**31), len=rng.randint(1024, 512 * 1024))
                if pick == "dl":
                    op["sha256"] = hashlib.sha256(data(op["seed"], op["len"])).hexdigest()
            elif pick == "cancel":
                choices = self.unsettled()
                # Mostly the newest unfinished one, which is the likeliest to be still running.
                op["transfer"] = choices[-1] if choices and rng.random() < 0.9 else "nosuch"
            ops.append(op)
        return ops

    def random_action(self):
        rng = self.rng
        pick = rng.choices(["push", "signal", "lifecycle", "system"], [45, 10, 20, 25])[0]
        if pick == "push":
            self.push(self.random_ops())
        elif pick == "signal":
            self.counts["signals"] += 1
            os.kill(self.host.pid, rng.choice([signal.SIGUSR1, signal.SIGUSR2]))
        elif pick == "lifecycle":
            self.ctl(rng.choice(LIFECYCLE))
        else:
            action = rng.choice(SYSTEM)
            if action.startswith("network"):
                # Mostly on, so that most requests reach the server; off a quarter of the time.
                action = "network on" if rng.random() < 0.75 else "network off"
            if action == "push":
                action = rng.choice(["push", 'push {"aps":{"content-available":1},"note":"soak"}'])
            if action.startswith("network"):
                self.network = action == "network on"
            self.ctl(action)

    # -- sampling ----------------------------------------------------------------------------

    def sample(self, pid, start, stop):
        while not stop.is_set():
            try:
                with open("/proc/%d/status" % pid) as f:
                    status = dict(line.split(":", 1) for line in f if ":" in line)
                rss = int(status["VmRSS"].split()[0])
                threads = len(os.listdir("/proc/%d/task" % pid))
                fds = len(os.listdir("/proc/%d/fd" % pid))
                self.samples.append((time.time() - start, rss, fds, threads))
            except (OSError, KeyError, ValueError):
                pass
            stop.wait(1)

    # -- the phases ---------------------------------------------------------------------------

    def start_host(self):
        self.generation += 1
        self.host = Host(self, self.generation)
        if not self.host.wait_ready():
            raise SystemExit(self.fail_now("host %d did not start (see %s)" % (
                self.generation, os.path.join(self.work, "host-%d.log" % self.generation))))
        # A new host starts with the network on.
        self.network = True

    def fail_now(self, text):
        self.problem(text)
        self.report()
        return 1

    def drive(self, seconds):
        deadline = time.time() + seconds
        while time.time() < deadline:
            if not self.host.alive():
                self.problem("host %d ended during the driving, exit %s" % (self.generation, self.host.process.returncode))
                return False
            self.random_action()
            time.sleep(self.rng.uniform(0.02, 0.2))
        return True

    def end_host(self, how):
        host = self.host
        if how.startswith("ctl"):
            answer = self.ctl(how.split(" ", 1)[1])
        else:
            answer = "signal"
            for i, name in enumerate(how.split(" ")):
                if i:
                    time.sleep(0.05)
                os.kill(host.pid, getattr(signal, name))
                self.counts["signals"] += 1
        try:
            code = host.process.wait(60)
        except subprocess.TimeoutExpired:
            self.problem("host %d did not end within 60 s after %s" % (host.generation, how))
            host.process.kill()
            code = host.process.wait()
        host.reader.join(10)
        # A request this host had not answered when it ended is cut short, not lost.
        with self.lock:
            for op_id, op in self.sent.items():
                if op["op"] == "http" and op_id not in self.http:
                    self.cut.add(op_id)
        expected = [-9] if how == "SIGKILL" else [0]
        if code not in expected:
            self.problem("host %d ended by %s with exit %s (answer: %s)" % (host.generation, how, code, answer))
        self.endings.append("%s: exit %s" % (how, code))

    def settle(self, seconds=90):
        """Waits for every transfer to end and every request to answer, in the foreground."""
        self.ctl("network on")
        self.ctl("foreground")
        self.ctl("activate")
        deadline = time.time() + seconds
        while time.time() < deadline:
            with self.lock:
                http_open = [i for i, op in self.sent.items()
                             if op["op"] == "http" and i not in self.http and i not in self.cut]
                tidy = list(self.tidy)
            if not self.unsettled() and not http_open and not tidy:
                return
            if tidy:
                with self.lock:
                    tidy, self.tidy = self.tidy[:8], self.tidy[8:]
                self.push([{"op": "frm", "id": self.new_id(), "name": n} for n in tidy])
            time.sleep(0.5)

    def run(self):
        minutes = self.args.minutes
        driving = minutes * 60
        warmup = min(0.2 * driving, 30)
        print("soak: %g min of random driving (warm-up %g s), seed %d, in %s" % (
            minutes, warmup, self.args.seed, self.work), flush=True)
        self.start_host()
        stop = threading.Event()
        start = time.time()
        sampler = threading.Thread(target=self.sample, args=(self.host.pid, start, stop), daemon=True)
        sampler.start()
        survived = self.drive(driving)
        stop.set()
        sampler.join()
        if survived:
            self.settle()
        # Then every way of ending the app, each followed by a new host on the same state dir.
        endings = list(ENDINGS)
        self.rng.shuffle(endings)
        for how in endings:
            if not self.host.alive():
                break
            self.drive(self.rng.uniform(1, 3))
            self.end_host(how)
            self.start_host()
        if self.host.alive():
            self.settle()
            self.verify()
            self.end_host("ctl terminate")
        self.verify_files()
        self.check_growth(warmup, driving)
        return self.report()

    # -- the checks ---------------------------------------------------------------------------

    def verify(self):
        op_id = self.new_id()
        self.push([{"op": "dump", "id": op_id}])
        deadline = time.time() + 30
        while op_id not in self.server.dumps and time.time() < deadline:
            time.sleep(0.2)
        dump = self.server.dumps.get(op_id)
        if dump is None:
            self.problem("the plugin's dump of its store never came")
            return
        stored = dump["store"]
        with self.lock:
            self.verified_keys = 0
            for key, want in sorted(self.store.items()):
                got = stored.get(key)
                if want is None:
                    if got is not None:
                        self.problem("store key %s was deleted, but reads %d bytes" % (key, len(got)))
                elif got is None or got.encode() != data(*want):
                    self.problem("store key %s: written %d bytes (seed %d), reads %s" % (
                        key, want[1], want[0], "nothing" if got is None else "%d other bytes" % len(got)))
                else:
                    self.verified_keys += 1
            for key in stored:
                if key not in self.store:
                    self.problem("store key %s was never written" % key)

    def verify_files(self):
        self.verified_files = 0
        for name, want in sorted(self.files.items()):
            path = os.path.join(self.files_dir, name)
            if want is None:
                if os.path.exists(path):
                    self.problem("file %s was removed, but is there" % name)
                continue
            try:
                with open(path, "rb") as f:
                    got = f.read()
            except OSError as e:
                self.problem("file %s (%d bytes) is gone: %s" % (name, want[1], e))
                continue
            if got != data(*want):
                self.problem("file %s: written %d bytes, holds %d other bytes" % (name, want[1], len(got)))
            else:
                self.verified_files += 1

    def check_growth(self, warmup, driving):
        after = [s for s in self.samples if s[0] >= warmup]
        # Each window is a quarter of the time after the warm-up: long enough that a transfer or
        # a connection open at one moment does not move the median, short enough that a steady
        # leak shows as the difference between the two.
        window = max(5.0, 0.25 * (driving - warmup))
        with open(os.path.join(self.work, "samples.csv"), "w") as f:
            f.write("seconds,rss_kb,fds,threads\n")
            for s in self.samples:
                f.write("%.1f,%d,%d,%d\n" % s)
        first = [s for s in after if s[0] < warmup + window]
        last = [s for s in after if s[0] >= driving - window]
        self.growth = []
        if len(first) < 3 or len(last) < 3:
            self.problem("too few samples to judge growth (%d, %d)" % (len(first), len(last)))
            return
        # The RSS is compared by each window's median. Descriptors and threads rise and fall by a
        # few with every request, ctl connection and transfer in flight, so they are compared by
        # each window's least value: what the host holds at rest, which a leak raises for good.
        for column, name, unit, measure in ((1, "RSS", " kB", "median"), (2, "descriptors", "", "least"),
                                            (3, "threads", "", "least")):
            pick = statistics.median if measure == "median" else min
            a = pick([s[column] for s in first])
            b = pick([s[column] for s in last])
            peak = max(s[column] for s in after)
            grew = (b - a) / a
            self.growth.append((name, measure, a, b, peak, grew, unit))
            # A count is whole: its 10 % is rounded up to a whole descriptor or thread, so that
            # 6 threads may become 7 (one more in flight at rest), and 26 descriptors 29.
            allowed = a * (1 + GROWTH_LIMIT) if measure == "median" else a + math.ceil(a * GROWTH_LIMIT)
            if b > allowed:
                self.problem("%s grew %.1f %%: %s %g%s in the first window, %g%s in the last" % (
                    name, 100 * grew, measure, a, unit, b, unit))
        self.window = window

    def report(self):
        with self.lock:
            never_acked = [i for i, op in self.sent.items() if op["op"] not in ("check", "dump") and i not in self.acked]
            unanswered = [i for i, op in self.sent.items()
                          if op["op"] == "http" and i not in self.http and i not in self.cut]
            bad_http = {i: r for i, r in self.http.items() if not (r == "ok" or r.startswith("failed"))}
            bad_checks = {i: r for i, r in self.checks.items() if r != "ok"}
            unchecked = [i for i, op in self.sent.items() if op["op"] == "check" and i not in self.checks]
            unsettled = [t for t, r in self.transfers.items() if r["end"] is None]
            ended = [r["end"] for r in self.transfers.values() if r["end"]]
        for i in never_acked[:10]:
            self.problem("op %s (%s) was answered ok but never acknowledged" % (i, self.sent[i]["op"]))
        for i in unanswered[:10]:
            self.problem("HTTP request %s never answered nor failed" % i)
        for i, r in list(bad_http.items())[:10]:
            self.problem("HTTP request %s: %s" % (i, r))
        for i, r in list(bad_checks.items())[:10]:
            self.problem("read-back %s of key %s: %s" % (i, self.sent.get(i, {}).get("key"), r))
        for i in unchecked[:10]:
            self.problem("read-back %s never reported" % i)
        for t in unsettled[:10]:
            self.problem("transfer %s neither finished nor failed" % t)
        c = self.counts
        ops = [op["op"] for op in self.sent.values()]
        failed = [e for e in ended if e != "finished"]
        print("soak summary")
        print("  driving: %d actions: %d pushes carrying %d operations, %d signals, %d ctl actions "
              "(%d through `lifeline ctl`, %d refused as not allowed now)" % (
                  c["signals"] + c["ctl"], c["pushes"], c["ops"], c["signals"],
                  c["ctl"], c["ctl binary"], c["refused"]))
        print("  store: %d writes and deletes acknowledged, %d read back during the run (%d wrong), "
              "%d keys whole at the end" % (
                  sum(ops.count(k) for k in ("set", "del", "tx")), len(self.checks), len(bad_checks),
                  getattr(self, "verified_keys", 0)))
        print("  files: %d writes and removals acknowledged, %d files whole at the end" % (
            ops.count("fwrite") + ops.count("frm"), getattr(self, "verified_files", 0)))
        print("  http: %d requests: %d ok, %d failed (network off or cut by an ending: %d), %d wrong, "
              "%d lost; the server saw %d requests" % (
                  ops.count("http"), list(self.http.values()).count("ok"),
                  sum(1 for r in self.http.values() if r.startswith("failed")), len(self.cut),
                  len(bad_http), len(unanswered), self.server.requests))
        reasons = {}
        for e in failed:
            reasons[e] = reasons.get(e, 0) + 1
        print("  transfers: %d started, %d finished whole, %d failed (%s), %d cancel calls took, %d lost" % (
            len(self.transfers), len(ended) - len(failed), len(failed),
            ", ".join("%s %d" % (k[7:] or "?", v) for k, v in sorted(reasons.items())) or "none",
            self.cancelled, len(unsettled)))
        for name, measure, a, b, peak, grew, unit in getattr(self, "growth", []):
            print("  %s: %s %g%s in the first window after the warm-up, %g%s in the last "
                  "(%+.1f %%; limit +10 %%%s); peak %g%s" % (
                      name, measure, a, unit, b, unit, 100 * grew,
                      "" if measure == "median" else ", rounded up to %d" % (a + math.ceil(a * GROWTH_LIMIT)), peak, unit))
        if getattr(self, "growth", None):
            print("  samples: %d, one a second; windows of %.0f s" % (len(self.samples), self.window))
        print("  endings: " + "; ".join(self.endings))
        if self.problems:
            print("soak: FAILED (logs in %s)" % self.work)
            for p in self.problems:
                print("  - " + p)
            return 1
        print("soak: passed")
        if not self.args.keep:
            shutil.rmtree(self.work, ignore_errors=True)
        return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=1.0, help="how long to drive the host at random")
    parser.add_argument("--seed", type=int, default=None, help="the random seed (printed; default: from the clock)")
    parser.add_argument("--keep", action="store_true", help="keep the state dir and host logs when it passes")
    parser.add_argument("--binary", default=os.environ.get("LIFELINE_BIN", ".build/debug/lifeline"))
    args = parser.parse_args()
    if args.minutes <= 0:
        parser.error("--minutes takes a number above 0")
    if args.seed is None:
        args.seed = int(time.time())
    soak = Soak(args)
    # A CI timeout's SIGTERM ends the driver through the finally below, so no host is left behind.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    try:
        return soak.run()
    finally:
        if soak.host and soak.host.alive():
            soak.host.process.kill()


if __name__ == "__main__":
    sys.exit(main())
