# A test peer for redirects and content codings: Python's http.server, HTTP/1.1 with
# keep-alive, on 127.0.0.1 and an ephemeral port (printed as "port N"). With the
# argument "tls" it serves https with chain.pem and key.pem from its directory.
#
#   /chain/N               302 to the relative "/chain/N-1"; /chain/0 is 200 "end of chain"
#   /redirect?code=C&to=U  status C with "Location: U" (U percent-decoded) and a body
#   /gzip /deflate /raw    "hello coded " * 100 as gzip, zlib or raw deflate
#   /cutgzip               a gzip stream cut in the middle, framed by Content-Length
#   /bomb                  1 GiB of zeros gzip'd, compressed as it is sent (chunked)
#   anything else          200: "METHOD TARGET", the header lines as received, an
#                          empty line and the request body
import gzip, ssl, sys, zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit, parse_qs

CODED = b"hello coded " * 100


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def send(self, code, body, headers=()):
        self.send_response(code)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def handle_any(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            while True:
                size = int(self.rfile.readline().split(b";")[0], 16)
                body += self.rfile.read(size)
                self.rfile.readline()
                if size == 0:
                    break
        url = urlsplit(self.path)
        query = parse_qs(url.query)
        if url.path.startswith("/chain/"):
            n = int(url.path[len("/chain/"):])
            if n > 0:
                self.send(302, b"moved", [("Location", "/chain/%d" % (n - 1))])
            else:
                self.send(200, b"end of chain")
        elif url.path == "/redirect":
            self.send(int(query["code"][0]), b"redirect body " * 10,
                      [("Location", query["to"][0])])
        elif url.path == "/gzip":
            self.send(200, gzip.compress(CODED), [("Content-Encoding", "gzip")])
        elif url.path == "/deflate":
            self.send(200, zlib.compress(CODED), [("Content-Encoding", "deflate")])
        elif url.path == "/raw":
            c = zlib.compressobj(wbits=-15)
            self.send(200, c.compress(CODED) + c.flush(), [("Content-Encoding", "deflate")])
        elif url.path == "/cutgzip":
            data = gzip.compress(CODED)
            self.send(200, data[: len(data) // 2], [("Content-Encoding", "gzip")])
        elif url.path == "/bomb":
            self.send_response(200)
            self.send_header("Content-Encoding", "gzip")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            c = zlib.compressobj(wbits=31)
            zeros = bytes(1 << 20)
            try:
                for _ in range(1024):
                    part = c.compress(zeros)
                    if part:
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
                part = c.flush()
                self.wfile.write(b"%x\r\n%s\r\n0\r\n\r\n" % (len(part), part))
            except OSError:
                self.close_connection = True
        else:
            lines = "".join("%s: %s\n" % (k, v) for k, v in self.headers.items())
            echo = ("%s %s\n%s\n" % (self.command, self.path, lines)).encode() + body
            self.send(200, echo)

    do_GET = do_HEAD = do_POST = do_PUT = do_DELETE = handle_any


class Server(ThreadingHTTPServer):
    def handle_error(self, request, client_address):
        pass  # a client that stops reading (the bomb, a refused redirect) is expected


server = Server(("127.0.0.1", 0), Handler)
if sys.argv[1:] == ["tls"]:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain("chain.pem", "key.pem")
    server.socket = ctx.wrap_socket(server.socket, server_side=True)
print("port", server.server_address[1], flush=True)
server.serve_forever()
