#!/usr/bin/env python3
"""A device authorization server on loopback that always denies: enough for `authflow login --qr`.

usage: device-server.py PORT-FILE

Listens on 127.0.0.1 (a free port, written to PORT-FILE once it listens). POST /device answers an
RFC 8628 device authorization response with a verification_uri_complete (the link login draws as
a QR code); POST /token answers access_denied (RFC 8628 section 3.5), so the login ends at once
with exit status 77. Stops by itself after 120 seconds.
"""
import http.server
import json
import sys
import threading


class Handler(http.server.BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", "0"))
        self.rfile.read(length)
        base = f"http://127.0.0.1:{self.server.server_port}"
        if self.path == "/device":
            status, body = 200, {
                "device_code": "ci-device-code",
                "user_code": "CIQR-CODE",
                "verification_uri": f"{base}/activate",
                "verification_uri_complete": f"{base}/activate?user_code=CIQR-CODE",
                "expires_in": 120,
                "interval": 1,
            }
        elif self.path == "/token":
            status, body = 400, {"error": "access_denied"}
        else:
            status, body = 404, {"error": "not_found"}
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: object) -> None:
        pass


def main() -> None:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Timer(120, server.shutdown).start()
    with open(sys.argv[1], "w") as port_file:
        port_file.write(f"{server.server_port}\n")
    server.serve_forever()


if __name__ == "__main__":
    main()
