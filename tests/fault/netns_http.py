#!/usr/bin/env python3
"""The receiver of tests/fault/netns.sh's http jobs.

    netns_http.py ADDRESS PORT LEDGER

Answers every POST with 200 and a small JSON body, after appending one line
"idempotency_key client_address" to LEDGER: the test counts the requests of
each job, and the client address names the host that sent it.  A body is
read up to its Content-Length, at most 1 MiB (a longer one is refused with
413 and not recorded).  It runs until killed.
"""
import http.server
import sys
import threading

MAX_BODY = 1 << 20
lock = threading.Lock()


class Handler(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        try:
            length = int(self.headers.get("Content-Length", "0"))
        except ValueError:
            length = -1
        if length < 0 or length > MAX_BODY:
            self.send_error(413)
            return
        self.rfile.read(length)
        key = self.headers.get("Idempotency-Key", "-")
        # The key is pgjobd's job id; anything else is written escaped.
        if not key.isdigit():
            key = repr(key)
        with lock:
            with open(sys.argv[3], "a") as f:
                f.write("%s %s\n" % (key, self.client_address[0]))
        body = b'{"ok": true}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, fmt, *args):
        pass


if __name__ == "__main__":
    server = http.server.ThreadingHTTPServer((sys.argv[1], int(sys.argv[2])),
                                             Handler)
    server.serve_forever()
