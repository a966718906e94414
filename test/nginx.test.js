// The public front as a client meets it at the byte level: every answer nginx makes itself is the JSON error
// shape with a request id, slow clients are cut off by explicit timeouts, the TLS listener serves HTTP/2,
// and client addresses come from X-Forwarded-For only when a trusted proxy sends it. Its stack also has a
// list of allowed sizes (ALLOWED_SIZES) and a low MAX_DIMENSION: any size asked is one of the made ones.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import tls from 'node:tls';
import { decode, solid } from './support/images.js';
import { metricValue } from './support/metrics.js';
import { waitFor } from './support/ports.js';
import { startStack } from './support/stack.js';

/** @type {Awaited<ReturnType<typeof startStack>>} */
let stack;
let certDir = '';

before(async () => {
  certDir = fs.mkdtempSync(path.join(os.tmpdir(), 'tls-'));
  execFileSync(
    'openssl',
    [
      'req',
      '-x509',
      '-newkey',
      'rsa:2048',
      '-nodes',
      '-days',
      '1',
      '-subj',
      '/CN=localhost',
      '-keyout',
      path.join(certDir, 'key.pem'),
      '-out',
      path.join(certDir, 'cert.pem'),
    ],
    { stdio: 'ignore' },
  );
  stack = await startStack({
    NGINX_TLS_CERT: path.join(certDir, 'cert.pem'),
    NGINX_TLS_KEY: path.join(certDir, 'key.pem'),
    NGINX_CLIENT_HEADER_TIMEOUT_S: '2',
    NGINX_CLIENT_BODY_TIMEOUT_S: '2',
    UPLOAD_TOKENS: 'nginx-token',
    MAX_DIMENSION: '1200',
    ALLOWED_SIZES: '300,100,1000',
    NGINX_RATE_LIMIT: '100000',
    NGINX_RATE_BURST: '100000',
    VARNISH_MISS_LIMIT: '0',
    NGINX_TRUSTED_PROXIES: '127.0.0.1/32',
    NGINX_UPLOAD_DEADLINE_S: '5',
    // short idle times, so that the test of who closes an idle connection first waits seconds
    VARNISH_IDLE_S: '6',
    VARNISH_BACKEND_IDLE_S: '2',
  });
});
after(async () => {
  await stack?.stop();
  fs.rmSync(certDir, { recursive: true, force: true });
});

/**
 * Sends `chunks` (a pause of `pauseMs` after each but the last) and reads until nginx closes the connection.
 * `halfClose`: then says it has nothing more to send (so nginx's lingering close does not wait for a body).
 * @param {string[]} chunks
 * @param {{ port?: number, secure?: boolean, pauseMs?: number, localAddress?: string, halfClose?: boolean }} [options]
 */
function exchange(
  chunks,
  { port = Number(stack.env.NGINX_PORT), secure = false, pauseMs = 0, localAddress, halfClose = false } = {},
) {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const socket = secure
      ? tls.connect({ port, host: '127.0.0.1', rejectUnauthorized: false, ALPNProtocols: ['http/1.1'] })
      : net.connect({ port, host: '127.0.0.1', localAddress });
    let received = Buffer.alloc(0);
    socket.on('data', (chunk) => {
      received = Buffer.concat([received, chunk]);
    });
    socket.on('error', reject);
    socket.on('close', () => resolve(parse(received, performance.now() - started)));
    socket.once(secure ? 'secureConnect' : 'connect', async () => {
      for (const [i, chunk] of chunks.entries()) {
        if (socket.destroyed) return;
        socket.write(chunk);
        if (i < chunks.length - 1) await new Promise((done) => setTimeout(done, pauseMs));
      }
      if (halfClose) socket.end();
    });
    socket.setTimeout(30_000, () => socket.destroy(new Error('no close after 30 s')));
  });
}

/** @param {Buffer} raw @param {number} ms */
function parse(raw, ms) {
  const text = raw.toString('latin1');
  const end = text.indexOf('\r\n\r\n');
  if (end < 0) return { status: 0, headers: {}, body: '', ms };
  const [statusLine, ...lines] = text.slice(0, end).split('\r\n');
  /** @type {Record<string, string>} */
  const headers = {};
  for (const line of lines)
    headers[line.slice(0, line.indexOf(':')).toLowerCase()] = line.slice(line.indexOf(':') + 1).trim();
  return { status: Number(statusLine.split(' ')[1]), headers, body: text.slice(end + 4), ms };
}

/** @param {{ status: number, headers: Record<string, string>, body: string }} answer @param {number} status @param {string} name */
function assertJsonError(answer, status, name) {
  assert.equal(answer.status, status, `${name}: ${answer.status} ${answer.body.slice(0, 200)}`);
  assert.match(answer.headers['content-type'] || '', /^application\/json/, `${name}: content type`);
  assert.match(answer.headers['x-request-id'] || '', /^[0-9a-f]{32}$/, `${name}: request id`);
  assert.deepEqual(JSON.parse(answer.body), { error: { name, info: status === 503 ? { layer: 'nginx' } : {} } });
}

const host = 'Host: cdn.test\r\nConnection: close\r\n';

test('every answer nginx makes itself is the JSON error shape with a request id', async () => {
  const cases = [
    ['a request without Host', 'GET /x HTTP/1.1\r\nConnection: close\r\n\r\n', 400, 'bad_request'],
    ['a request line nginx cannot parse', 'GET /x HTTP/1.1 junk\r\n\r\n', 400, 'bad_request'],
    ['PURGE from the public side', `PURGE /x HTTP/1.1\r\n${host}\r\n`, 405, 'method_not_allowed'],
    [
      'a webhook body past its limit',
      `POST /hooks/avatar HTTP/1.1\r\n${host}Content-Length: 100000\r\n\r\n`,
      413,
      'payload_too_large',
    ],
    ['a URI past the header buffers', `GET /${'a'.repeat(9000)} HTTP/1.1\r\n${host}\r\n`, 414, 'uri_too_long'],
    [
      'a header past the header buffers',
      `GET /x HTTP/1.1\r\n${host}X-Big: ${'b'.repeat(9000)}\r\n\r\n`,
      431,
      'request_header_too_large',
    ],
    [
      'a chunked upload (no length)',
      `POST /upload HTTP/1.1\r\n${host}Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n`,
      411,
      'length_required',
    ],
    [
      'an obfuscated Transfer-Encoding',
      `POST /upload HTTP/1.1\r\n${host}Transfer-Encoding: xchunked\r\n\r\n`,
      501,
      'not_implemented',
    ],
    ['HTTP/2.0 on an HTTP/1 port', `GET /x HTTP/2.0\r\n${host}\r\n`, 505, 'http_version_not_supported'],
    ['the error locations themselves', `GET /.errors/bad_request HTTP/1.1\r\n${host}\r\n`, 404, 'not_found'],
  ];
  for (const [what, request, status, name] of cases) {
    // nginx refuses it before the body: without the half-close its lingering close would wait 5 s for one
    const answer = /** @type {any} */ (await exchange([String(request)], { halfClose: status === 413 }));
    assertJsonError(answer, Number(status), String(name));
    process.stdout.write(`# ${what}: ${status} ${name} (${Math.round(answer.ms)} ms)\n`);
  }
  assertJsonError(
    /** @type {any} */ (
      await exchange([`GET /x HTTP/1.1\r\n${host}\r\n`], { port: Number(stack.env.NGINX_TLS_PORT), halfClose: true })
    ),
    400,
    'http_request_to_https_port',
  );
});

test("nginx's 503 when an upstream is down is JSON with Retry-After, and it is never cached", async () => {
  await stack.ctl('stop', 'purge-service');
  try {
    const answer = /** @type {any} */ (
      await exchange([`POST /hooks/avatar HTTP/1.1\r\n${host}Content-Length: 2\r\n\r\n{}`])
    );
    assertJsonError(answer, 503, 'service_unavailable');
    assert.equal(answer.headers['retry-after'], '5');
    assert.equal(answer.headers['cache-control'], 'no-store');
  } finally {
    await stack.start('purge-service');
  }
});

test("slow clients are cut off by the explicit timeouts, not the defaults' 60 s", async () => {
  // headers trickling in: the connection is closed at the header timeout (2 s here), no answer owed
  const headers = /** @type {any} */ (
    await exchange(
      [
        'GET /x HTTP/1.1\r\n',
        'Host: cdn.test\r\n',
        'X-Slow: 1\r\n',
        'X-Slow: 2\r\n',
        'X-Slow: 3\r\n',
        'X-Slow: 4\r\n',
        'X-Slow: 5\r\n',
      ],
      { pauseMs: 1500 },
    )
  );
  assert.equal(headers.status, 0);
  assert.ok(headers.ms > 1500 && headers.ms < 10_000, `closed after ${headers.ms} ms`);
  // a body that stops: a JSON 408 at the body timeout (2 s here), and the connection closed
  const uploadHead = `POST /upload HTTP/1.1\r\n${host}Authorization: Bearer nginx-token\r\nContent-Type: multipart/form-data; boundary=x\r\nContent-Length: 100000\r\n\r\n--x\r\n`;
  const body = /** @type {any} */ (await exchange([uploadHead]));
  assertJsonError(body, 408, 'request_timeout');
  assert.ok(body.ms > 1500 && body.ms < 10_000, `cut off after ${body.ms} ms`);
  // a body that never pauses for long but trickles (a byte every 300 ms, under NGINX_UPLOAD_MIN_RATE's
  // 4096 bytes a second): a JSON 408 once the 2 s of grace are spent, where the pause timeout alone would
  // have let it hold its upload slot for 100,000 × 0.3 s
  const trickle = /** @type {any} */ (
    await exchange([uploadHead, ...Array.from({ length: 60 }, () => 'x')], { pauseMs: 300 })
  );
  assertJsonError(trickle, 408, 'request_timeout');
  assert.ok(trickle.ms > 1800 && trickle.ms < 10_000, `cut off after ${trickle.ms} ms`);
});

/**
 * One HTTP/2 request on the TLS port. @param {Record<string, string | number>} headers @param {Buffer} [body]
 * @returns {Promise<{ status: number, body: string }>}
 */
async function http2Request(headers, body) {
  const { connect } = await import('node:http2');
  const session = connect(`https://127.0.0.1:${stack.env.NGINX_TLS_PORT}`, { rejectUnauthorized: false });
  try {
    return await new Promise((resolve, reject) => {
      const request = session.request(headers);
      let status = 0;
      let text = '';
      request.on('response', (received) => {
        status = Number(received[':status']);
      });
      request.on('data', (chunk) => {
        text += chunk;
      });
      request.on('end', () => resolve({ status, body: text }));
      request.on('error', reject);
      request.end(body);
    });
  } finally {
    session.close();
  }
}

test('an upload at a normal rate passes through the body reader whole, over HTTP/1.1 and HTTP/2', async () => {
  const image = await solid(640, 480, 'png');
  const form = new FormData();
  form.append('image_file', new Blob([new Uint8Array(image)], { type: 'image/png' }), 'whole.png');
  const encoded = new Response(form);
  const type = String(encoded.headers.get('content-type'));
  const bytes = Buffer.from(await encoded.arrayBuffer());
  const headers = { authorization: 'Bearer nginx-token', 'content-type': type, 'content-length': bytes.length };
  const answers = [
    await fetch(`${stack.base}/upload`, {
      method: 'POST',
      headers: { ...headers, 'content-length': String(bytes.length) },
      body: bytes,
    }).then(async (response) => ({ status: response.status, body: await response.text() })),
    await http2Request({ ':method': 'POST', ':path': '/upload', ...headers }, bytes),
  ];
  for (const answer of answers) {
    assert.equal(answer.status, 200, answer.body);
    const original = await fetch(new URL(new URL(JSON.parse(answer.body).url).pathname, stack.base));
    assert.equal(original.status, 200);
    assert.deepEqual(Buffer.from(await original.arrayBuffer()), image, 'the original is the bytes sent');
  }
});

test('the TLS listener serves HTTP/2 and HTTP/1.1 with the same answers', async () => {
  const port = Number(stack.env.NGINX_TLS_PORT);
  const alpn = await new Promise((resolve, reject) => {
    const socket = tls.connect(
      { port, host: '127.0.0.1', rejectUnauthorized: false, ALPNProtocols: ['h2', 'http/1.1'] },
      () => {
        resolve(socket.alpnProtocol);
        socket.end();
      },
    );
    socket.on('error', reject);
  });
  assert.equal(alpn, 'h2');
  const { connect } = await import('node:http2');
  const session = connect(`https://127.0.0.1:${port}`, { rejectUnauthorized: false });
  try {
    const answer = await new Promise((resolve, reject) => {
      const request = session.request({ ':path': '/healthz' });
      let body = '';
      /** @type {Record<string, any>} */
      let headers = {};
      request.on('response', (received) => {
        headers = received;
      });
      request.on('data', (chunk) => {
        body += chunk;
      });
      request.on('end', () => resolve({ headers, body }));
      request.on('error', reject);
    });
    assert.equal(/** @type {any} */ (answer).headers[':status'], 200);
    assert.equal(JSON.parse(/** @type {any} */ (answer).body).ok, true);
    assert.match(/** @type {any} */ (answer).headers['x-request-id'], /^[0-9a-f]{32}$/);
  } finally {
    session.close();
  }
  const http1 = /** @type {any} */ (await exchange([`GET /healthz HTTP/1.1\r\n${host}\r\n`], { port, secure: true }));
  assert.equal(http1.status, 200);
});

test('an upload that would be refused whatever its body is refused before a byte of it is read', async () => {
  const hex = 'ab'.repeat(65);
  const cases = [
    ['a wrong token', `POST /upload HTTP/1.1\r\n${host}Authorization: Bearer wrong\r\n`, 401, 'unauthorized'],
    ['no token', `POST /upload HTTP/1.1\r\n${host}`, 401, 'unauthorized'],
    ['a malformed signature', `POST /alice/zz HTTP/1.1\r\n${host}`, 400, 'invalid_signature'],
    ['an invalid account', `POST /A_B/${hex} HTTP/1.1\r\n${host}`, 400, 'invalid_account'],
  ];
  for (const [what, head, status, name] of cases) {
    // a 30 MB body announced, none sent: the answer comes anyway, and the connection is closed
    const answer = /** @type {any} */ (
      await exchange([`${head}Content-Type: multipart/form-data; boundary=x\r\nContent-Length: 31000000\r\n\r\n`], {
        halfClose: true,
      })
    );
    assert.equal(answer.status, status, `${what}: ${answer.status} ${answer.body}`);
    assert.equal(JSON.parse(answer.body).error.name, name, String(what));
    assert.match(answer.headers['x-request-id'] || '', /^[0-9a-f]{32}$/);
    assert.equal(answer.headers['cache-control'], 'no-store');
    assert.ok(answer.ms < 5000, `${what}: answered in ${Math.round(answer.ms)} ms without the body`);
    if (status === 401) assert.equal(answer.headers['www-authenticate'], 'Bearer');
  }
});

test('a body on a GET, HEAD or OPTIONS is refused at once, not read', async () => {
  for (const method of ['GET', 'HEAD', 'OPTIONS']) {
    const answer = /** @type {any} */ (
      await exchange([`${method} /x HTTP/1.1\r\n${host}Content-Length: 100000\r\n\r\nab`], {
        pauseMs: 8000,
        halfClose: true,
      })
    );
    assert.equal(answer.status, 400, method);
    assert.ok(answer.ms < 5000, `${method}: ${Math.round(answer.ms)} ms`);
    if (method !== 'HEAD') assert.equal(JSON.parse(answer.body).error.name, 'body_not_allowed');
  }
});

test('an upload body has a total deadline: sent above the minimum rate but past NGINX_UPLOAD_DEADLINE_S, a JSON 408', async () => {
  const head = `POST /upload HTTP/1.1\r\n${host}Authorization: Bearer nginx-token\r\nContent-Type: multipart/form-data; boundary=x\r\nContent-Length: 200000\r\n\r\n`;
  // 8 KB a second: twice the minimum rate, 25 s for the whole body; the deadline is 5 s
  const chunks = [head, ...Array.from({ length: 24 }, () => 'x'.repeat(8192))];
  const answer = /** @type {any} */ (await exchange(chunks, { pauseMs: 1000 }));
  assertJsonError(answer, 408, 'request_timeout');
  assert.ok(answer.ms > 4000 && answer.ms < 9000, `cut off after ${Math.round(answer.ms)} ms`);
});

test("ecency's /webp/ prefix redirects within this host only: no open redirect, a JSON body", async () => {
  const moved = /** @type {any} */ (
    await exchange([
      `GET /webp/DQmWQzjgaD82ozKv3hX3HmRmobw8RY3eMtvsG16GVkasFo3/a.png?format=webp HTTP/1.1\r\n${host}\r\n`,
    ])
  );
  assert.equal(moved.status, 301);
  assert.equal(moved.headers.location, '/DQmWQzjgaD82ozKv3hX3HmRmobw8RY3eMtvsG16GVkasFo3/a.png?format=webp');
  assert.equal(JSON.parse(moved.body).error.name, 'moved_permanently');
  for (const path of [
    '/webp//evil.example/x.png',
    '/webp/%5Cevil.example/x',
    '/webp/%2F%2Fevil.example/x',
    '/webp/\\evil.example/x',
    '/webp/',
  ]) {
    const answer = /** @type {any} */ (await exchange([`GET ${path} HTTP/1.1\r\n${host}\r\n`]));
    assert.equal(answer.headers.location, undefined, `${path}: no redirect (${answer.status})`);
    assertJsonError(answer, 404, 'not_found');
  }
});

test('client addresses: X-Forwarded-For is believed from a trusted proxy only', async () => {
  const trusted = /** @type {any} */ (
    await exchange([`GET /healthz HTTP/1.1\r\n${host}X-Forwarded-For: 203.0.113.7\r\n\r\n`])
  );
  // 127.0.0.2 is loopback but not in NGINX_TRUSTED_PROXIES (127.0.0.1/32 here): its header is not believed
  const untrusted = /** @type {any} */ (
    await exchange([`GET /healthz HTTP/1.1\r\n${host}X-Forwarded-For: 198.51.100.9\r\n\r\n`], {
      localAddress: '127.0.0.2',
    })
  );
  const line = (/** @type {string} */ id) =>
    stack
      .log('nginx-access.log')
      .split('\n')
      .find((entry) => entry.includes(id)) || '';
  await waitFor(
    async () => line(trusted.headers['x-request-id']) && line(untrusted.headers['x-request-id']),
    5000,
    'access log flush',
  );
  assert.match(line(trusted.headers['x-request-id']), / 203\.0\.113\.7 "GET \/healthz"/);
  assert.match(line(untrusted.headers['x-request-id']), / 127\.0\.0\.2 "GET \/healthz"/);
});

test('ALLOWED_SIZES and MAX_DIMENSION: every size asked is one of the made ones, one transform and one varnish object each', async () => {
  const form = new FormData();
  form.append('image_file', new Blob([new Uint8Array(await solid(2000, 1000, 'png'))]), 'wide.png');
  const uploaded = await fetch(`${stack.base}/upload`, {
    method: 'POST',
    headers: { authorization: 'Bearer nginx-token' },
    body: form,
  });
  assert.equal(uploaded.status, 200);
  const { url } = /** @type {{ url: string }} */ (await uploaded.json());
  const { base58Url } = await import('@stack/lib');
  const base = `${stack.base}/p/${base58Url.encode(url)}`;
  const transforms = () =>
    metricValue(`http://127.0.0.1:${stack.env.ORIGIN_METRICS_PORT}/metrics`, 'origin_transforms_total');
  const beforeTransforms = await transforms();
  const beforeObjects = (await stack.varnishStats())('MAIN.n_object');
  // width asked → width made (2:1 source, so the height is half): the next allowed size up, the largest past
  // them all, and sizes past the cap (1200) as the cap, itself past the largest allowed size
  /** @type {Array<[number | string, number]>} */
  const cases = [
    [1, 100],
    [50, 100],
    ['099', 100],
    ['100px', 100],
    [101, 300],
    ['250.7', 300],
    [300, 300],
    [301, 1000],
    [999, 1000],
    [1000, 1000],
    [1001, 1000],
    [5000, 1000],
    ['99999999999999999999', 1000],
  ];
  for (const [asked, made] of cases) {
    const response = await fetch(`${base}?width=${asked}&mode=fit`);
    assert.equal(response.status, 200, `width=${asked}`);
    const image = await decode(Buffer.from(await response.arrayBuffer()));
    assert.deepEqual([image.width, image.height], [made, made / 2], `width=${asked} is made ${made} wide`);
  }
  assert.equal((await transforms()) - beforeTransforms, 3, 'one transform per made size');
  assert.equal((await stack.varnishStats())('MAIN.n_object') - beforeObjects, 3, 'one varnish object per made size');
  // the legacy form redirects straight to the made size
  const legacy = await fetch(`${stack.base}/150x0/${url}`, { redirect: 'manual' });
  assert.equal(legacy.status, 301);
  assert.match(String(legacy.headers.get('location')), /[?&]width=300(&|$)/);
});

test('an idle kept-alive connection is closed by the side that sends on it: nginx before varnish, varnish before haproxy', async () => {
  // an upload sent on a connection the other end is closing is lost (nginx does not resend a POST: a 502); so
  // nginx drops its idle connections to varnish before varnish's timeout_idle (VARNISH_IDLE_S, 6 s here), and
  // varnish its idle ones to haproxy (VARNISH_BACKEND_IDLE_S, 2 s here) before haproxy's keep-alive (12 s)
  const before = await stack.varnishStats();
  const started = Date.now();
  const form = new FormData();
  form.append('image_file', new Blob([new Uint8Array(await solid(64, 48, 'png'))]), 'idle.png');
  const uploaded = await fetch(`${stack.base}/upload`, {
    method: 'POST',
    headers: { authorization: 'Bearer nginx-token' },
    body: form,
  });
  assert.equal(uploaded.status, 200);
  await uploaded.json();
  // haproxy's frontends hold no connection of varnish's (the probes' own close at once) well before its 12 s
  const held = async () =>
    (await stack.haproxyStats())
      .filter((row) => row.svname === 'FRONTEND' && row.pxname.startsWith('fe_'))
      .reduce((sum, row) => sum + Number(row.scur), 0);
  await waitFor(async () => (await held()) === 0, 8000, "varnish's idle connections to haproxy closed by varnish");
  // nginx's idle connection to varnish is closed from nginx's end (a remote close to varnish), 4 s after its
  // request, and varnish ends none for idling (its counter a moment late: read 2 s past varnish's 6 s)
  await waitFor(
    async () => (await stack.varnishStats())('MAIN.sc_rem_close') > before('MAIN.sc_rem_close'),
    8000,
    "nginx's idle connection to varnish closed by nginx",
  );
  await new Promise((resolve) => setTimeout(resolve, Math.max(0, started + 8000 - Date.now())));
  const after = await stack.varnishStats();
  assert.equal(after('MAIN.sc_rx_close_idle') - before('MAIN.sc_rx_close_idle'), 0, 'varnish closed none for idling');
});
