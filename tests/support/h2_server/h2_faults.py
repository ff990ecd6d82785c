#!/usr/bin/python3
"""A hostile HTTP/2 server over TLS on loopback, for the transport's tests.

Each scenario misbehaves in one way that an outside trial found the transport handling badly; the tests in
tests/unit/transport/transport_h2_faults_test.cpp drive it. It speaks only HTTP/2 (ALPN h2), with the python3 `h2`
library (Debian: python3-h2, see scripts/install-deps.sh).

usage: h2_faults.py SCENARIO CERT KEY LOG

  SCENARIO  refuse      every stream is reset with REFUSED_STREAM (7) once its request has arrived
            cl_dup      a 200 response with two different content-length values
            connection  a 200 response with a `connection: close` header (not allowed in HTTP/2)
            silent      requests are read whole (the window is granted) and never answered
            no_window   on the first connection no WINDOW_UPDATE is sent and nothing answered; on later ones
                        each request is answered with a 200
  CERT KEY  the PEM certificate and key (the nginx fixture's cert.pem and key.pem)
  LOG       a file that gets one line per connection ("CONN <n>") and one per request
            ("REQ conn=<n> stream=<id> <method> <path> idempotency-key=<key or ->")

It listens on 127.0.0.1, on a port the kernel picks, and writes that port on the first line of its standard
output. It ends on SIGTERM (the default action), when its standard input closes (the test that started it has
gone), or after two minutes. It accepts at most 32 connections; a connection idle for 10 s is closed.
"""
import os
import socket
import ssl
import sys
import threading
import time

import h2.config
import h2.connection
import h2.errors
import h2.events

MAX_CONNECTIONS = 32
IDLE_SECONDS = 10
LIFETIME_SECONDS = 120
BODY = b'{"ok":true}'

scenario, cert, key, log_path = sys.argv[1:5]
log_lock = threading.Lock()
log_file = open(log_path, "a", encoding="utf-8")


def log(line):
    """Writes a line to the log before anything is sent back, so a test that has its answer finds the line."""
    with log_lock:
        log_file.write(line + "\n")
        log_file.flush()


def respond(conn, stream_id, extra=()):
    headers = [(":status", "200"), ("content-type", "application/json"), ("content-length", str(len(BODY)))]
    conn.send_headers(stream_id, headers + list(extra))
    conn.send_data(stream_id, BODY, end_stream=True)


def on_request_complete(conn, number, stream_id):
    """The whole request (headers and body) has arrived on `stream_id`: answer as the scenario says."""
    if scenario == "refuse":
        conn.reset_stream(stream_id, h2.errors.ErrorCodes.REFUSED_STREAM)
    elif scenario == "cl_dup":
        respond(conn, stream_id, [("content-length", str(len(BODY) + 5))])
    elif scenario == "connection":
        respond(conn, stream_id, [("connection", "close")])
    elif scenario == "no_window" and number > 1:
        respond(conn, stream_id)
    # silent, and no_window's first connection: never answered


def serve(tls, number):
    # Validation off, so that the malformed headers of cl_dup and connection go out as written.
    config = h2.config.H2Configuration(client_side=False, header_encoding="utf-8", validate_outbound_headers=False,
                                       normalize_outbound_headers=False, validate_inbound_headers=False)
    conn = h2.connection.H2Connection(config=config)
    conn.initiate_connection()
    tls.sendall(conn.data_to_send())
    grant_window = not (scenario == "no_window" and number == 1)
    tls.settimeout(IDLE_SECONDS)
    deadline = time.monotonic() + LIFETIME_SECONDS
    while time.monotonic() < deadline:
        data = tls.recv(65536)
        if not data:
            return
        for event in conn.receive_data(data):
            if isinstance(event, h2.events.RequestReceived):
                h = dict(event.headers)
                log(f"REQ conn={number} stream={event.stream_id} {h.get(':method')} {h.get(':path')} "
                    f"idempotency-key={h.get('idempotency-key', '-')}")
            elif isinstance(event, h2.events.DataReceived) and grant_window:
                conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
            elif isinstance(event, h2.events.StreamEnded):
                on_request_complete(conn, number, event.stream_id)
        outgoing = conn.data_to_send()
        if outgoing:
            tls.sendall(outgoing)


def handle(raw, number, context):
    try:
        with context.wrap_socket(raw, server_side=True) as tls:
            serve(tls, number)
    except Exception as e:  # a client that went away, a timeout: this connection ends, the server goes on
        log(f"END conn={number} {e!r}")
    finally:
        raw.close()


def accept_loop(listener, context):
    for number in range(1, MAX_CONNECTIONS + 1):
        raw, _ = listener.accept()
        log(f"CONN {number}")
        threading.Thread(target=handle, args=(raw, number, context), daemon=True).start()


def main():
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    context.set_alpn_protocols(["h2"])
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    print(listener.getsockname()[1], flush=True)
    threading.Thread(target=accept_loop, args=(listener, context), daemon=True).start()
    lifetime = threading.Timer(LIFETIME_SECONDS, lambda: os._exit(0))
    lifetime.daemon = True
    lifetime.start()
    sys.stdin.buffer.read()  # until the test closes its end (or ends)
    os._exit(0)


main()
