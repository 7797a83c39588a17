# Variant of server.py for the tests: /health 200 at once while every POST is held without a byte
# for HOLD_S seconds (argv[3]; "inf": forever). argv[2] says what the log does meanwhile:
# "lively" prints a warm-up progress line every 2 s (CUDA-graph capture, batch by batch);
# "silent" prints nothing (a hung first collective).
import json, sys, threading, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
PORT, MODE, HOLD_S = int(sys.argv[1]), sys.argv[2], float(sys.argv[3])
warm = threading.Event()
def out(s): print(s, flush=True)
def warmup():
    out("Capture cuda graph begin. This can take up to several minutes.")
    t0 = time.monotonic()
    while time.monotonic() - t0 < HOLD_S:
        time.sleep(2.0)
        if MODE == "lively":
            out(f"Capturing batches (bs={int(time.monotonic() - t0)}): still capturing")
    out("The server is fired up and ready to roll!")
    warm.set()
def chunk(d): return f"data: {json.dumps({'choices':[{'index':0,'delta':d,'finish_reason':None}]})}\n\n".encode()
class H(BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def reply(self, code, obj):
        b = json.dumps(obj).encode(); self.send_response(code); self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(b))); self.end_headers(); self.wfile.write(b)
    def do_GET(self): self.reply(200, {"object": "list", "data": [{"id": "m"}]} if self.path == "/v1/models" else {})
    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"]))); n = body.get("max_tokens", 16)
        warm.wait()
        self.send_response(200); self.send_header("Content-Type", "text/event-stream"); self.end_headers()
        for i in range(n):
            time.sleep(0.01); self.wfile.write(chunk({"content": f"{i + 1}, "})); self.wfile.flush()
        self.wfile.write(f"data: {json.dumps({'choices': [{'index': 0, 'delta': {}, 'finish_reason': 'length'}], 'usage': {'prompt_tokens': 9, 'completion_tokens': n, 'total_tokens': n + 9}})}\n\ndata: [DONE]\n\n".encode())
srv = ThreadingHTTPServer(("127.0.0.1", PORT), H)
srv.daemon_threads = True
out(f"INFO:     Uvicorn running on http://127.0.0.1:{PORT} (Press CTRL+C to quit)")
threading.Thread(target=warmup, daemon=True).start()
srv.serve_forever()
