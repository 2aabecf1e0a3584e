"""A stand-in OpenAI-compatible chat server on 127.0.0.1 (random port) for user-simulator tests.

``UserServer(reply)`` answers every POST with one choice whose message is ``{"role": "assistant",
**reply(body)}``; it records ``{"path", "auth", "body"}`` of each request in ``requests``.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class UserServer:
    def __init__(self, reply):
        requests = self.requests = []

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                requests.append({"path": self.path, "auth": self.headers.get("Authorization"), "body": body})
                payload = json.dumps({"choices": [{"index": 0, "finish_reason": "stop",
                                                   "message": {"role": "assistant", **reply(body)}}]}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()
