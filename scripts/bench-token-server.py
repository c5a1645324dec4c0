"""A loopback token endpoint for the benchmark scripts (bench.sh, bench-agent.sh).

usage: bench-token-server.py PORT_FILE TOKEN [--once]

Answers every POST with a Bearer TOKEN valid for 300 days, on 127.0.0.1 and a free port, which it
writes to PORT_FILE. With --once it answers one request and exits (or gives up after 30 s);
otherwise it serves until killed, a thread per request.
"""
import http.server, json, sys

port_file, token = sys.argv[1], sys.argv[2]
once = "--once" in sys.argv[3:]


class Token(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        body = json.dumps({"access_token": token, "token_type": "Bearer", "expires_in": 86400 * 300}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


server = (http.server.HTTPServer if once else http.server.ThreadingHTTPServer)(("127.0.0.1", 0), Token)
server.timeout = 30
open(port_file, "w").write(str(server.server_address[1]))
if once:
    server.handle_request()   # one login, then exit (or give up after 30 s)
else:
    server.serve_forever()
