# Variant of server.py for the tests: one 5 MB start-up line (a whole long-context prompt with
# its token ids), its cause-like head first, then a normal server.
import json, sys, time
from http.server import BaseHTTPRequestHandler, HTTPServer
PORT = int(sys.argv[1])
def out(s): print(s, flush=True)
out("INFO 06-01 12:00:00 [logger.py:43] Received request cmpl-000000: prompt: '" + "x" * (5 * 1024 * 1024) + "'")
out("INFO 06-01 12:00:01 [api_server.py:1] after the long line")
def chunk(d): return f"data: {json.dumps({'choices':[{'index':0,'delta':d,'finish_reason':None}]})}\n\n".encode()
class H(BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def reply(self, code, obj):
        b = json.dumps(obj).encode(); self.send_response(code); self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(b))); self.end_headers(); self.wfile.write(b)
    def do_GET(self): self.reply(200, {"object": "list", "data": [{"id": "m"}]} if self.path == "/v1/models" else {})
    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"]))); n = body.get("max_tokens", 16)
        self.send_response(200); self.send_header("Content-Type", "text/event-stream"); self.end_headers()
        for i in range(n):
            time.sleep(0.01); self.wfile.write(chunk({"content": f"{i + 1}, "})); self.wfile.flush()
        self.wfile.write(f"data: {json.dumps({'choices': [{'index': 0, 'delta': {}, 'finish_reason': 'length'}], 'usage': {'prompt_tokens': 9, 'completion_tokens': n, 'total_tokens': n + 9}})}\n\ndata: [DONE]\n\n".encode())
HTTPServer(("127.0.0.1", PORT), H).serve_forever()
