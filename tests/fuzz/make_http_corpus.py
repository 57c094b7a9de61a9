#!/usr/bin/env python3
"""Writes the seed corpus of http_parse_fuzz into tests/fuzz/corpus/http_parse/.

Each seed is a byte string the parser sees: request heads (with and without bodies,
pipelined, chunked with extensions and trailers), near-misses of each rejection class,
a response head and a URL. The files are committed; rerun this after changing the list.
"""

import os

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "http_parse")

SEEDS = {
    "get": b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n",
    "get_query": b"GET /a/b%20c?x=1&y=2 HTTP/1.1\r\nHost: h:80\r\nAccept: */*\r\n\r\n",
    "http10": b"GET /index.html HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
    "post_length": b"POST /echo HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\nhello",
    "post_chunked": b"POST /u HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"
                    b"5;ext=\"q \\\" v\"\r\nhello\r\n0\r\nTrailer: x\r\n\r\n",
    "pipelined": b"GET /1 HTTP/1.1\r\nHost: h\r\n\r\nPOST /2 HTTP/1.1\r\nHost: h\r\n"
                 b"Content-Length: 2\r\n\r\nokGET /3 HTTP/1.1\r\nHost: h\r\n\r\n",
    "absolute": b"GET http://example.com:8080/p?q HTTP/1.1\r\nHost: example.com:8080\r\n\r\n",
    "options": b"OPTIONS * HTTP/1.1\r\nHost: h\r\n\r\n",
    "connect": b"CONNECT h:443 HTTP/1.1\r\nHost: h:443\r\n\r\n",
    "leading_crlf": b"\r\n\r\nGET / HTTP/1.1\r\nHost: h\r\nX-Empty:\r\nX-Ws: \t a b \t\r\n\r\n",
    "dup_fields": b"GET / HTTP/1.1\r\nHost: h\r\nA: 1\r\na: 2\r\nContent-Length: 0\r\n"
                  b"Content-Length: 0\r\n\r\n",
    "obs_fold": b"GET / HTTP/1.1\r\nHost: h\r\nX: a\r\n b\r\n\r\n",
    "space_colon": b"GET / HTTP/1.1\r\nHost : h\r\n\r\n",
    "te_cl": b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n"
             b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
    "http2": b"GET / HTTP/2.0\r\nHost: h\r\n\r\n",
    "partial": b"GET /partial HTTP/1.1\r\nHost: h\r\nUser-Agent: x",
    "chunks_only": b"a\r\n0123456789\r\n3\r\nabc\r\n0\r\n\r\n",
    "response": b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nServer: x\r\n\r\nok",
    "url": b"http://[::1]:8080/path?query=1",
}


def main():
    os.makedirs(OUT, exist_ok=True)
    for name, data in SEEDS.items():
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()
