import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { base58Url } from '@stack/lib';
import { animated, decode, pngBomb, solid } from '../../test/support/images.js';
import { keptAlive } from '../../test/support/kept-alive.js';
import { metricValue } from '../../test/support/metrics.js';
import { jsonError, startOrigin, tokenUpload } from './harness.js';

/** @type {Awaited<ReturnType<typeof startOrigin>>} */
let origin;

before(async () => {
  origin = await startOrigin({ UPLOAD_MAX_BYTES: '1mb', MAX_FRAMES: '20' });
});
after(() => origin.stop());

/** @param {string} url @param {number} status @param {string} name @param {RequestInit} [init] */
async function expectError(url, status, name, init) {
  const response = await fetch(url, init);
  assert.equal(response.status, status, `${url} → ${response.status}`);
  assert.match(response.headers.get('content-type') || '', /^application\/json/);
  const error = await jsonError(response);
  assert.equal(error.name, name, `${url}: ${JSON.stringify(error)}`);
  return response;
}

async function stillServing() {
  const response = await fetch(`${origin.base}/healthz`);
  assert.equal(response.status, 200, `the origin still serves\n${origin.output()}`);
}

test('corrupt, truncated, empty, HTML and SVG sources are 400s, negatively cached', async () => {
  const jpeg = await solid(400, 300, 'jpeg');
  const png = await solid(400, 300, 'png');
  const flipped = Buffer.from(jpeg);
  for (let i = 200; i < flipped.length - 10; i += 37) flipped[i] ^= 0xff;
  const cases = [
    ['truncated.jpg', jpeg.subarray(0, Math.floor(jpeg.length / 2)), 'invalid_image'],
    ['truncated.png', png.subarray(0, 60), 'invalid_image'],
    ['flipped.jpg', flipped, 'invalid_image'],
    ['empty.jpg', Buffer.alloc(0), 'invalid_image'],
    ['page.html', Buffer.from('<!doctype html><html><body>hi</body></html>'), 'invalid_image'],
    [
      'drawing.svg',
      Buffer.from(
        '<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"><image href="http://169.254.169.254/x"/></svg>',
      ),
      'unsupported_format',
    ],
  ];
  for (const [name, body, error] of cases) {
    const url = origin.site.add(String(name), /** @type {Buffer} */ (body));
    const response = await expectError(origin.proxied(url, { width: 100 }), 400, String(error));
    assert.equal(response.headers.get('cache-control'), 'public, max-age=60');
  }
  await stillServing();
});

test('decompression bombs are refused before decoding; an animation past the frame budget is made from its first frames', async () => {
  const bomb = origin.site.add('bomb.png', await pngBomb(50000, 50000), 'image/png');
  await expectError(origin.proxied(bomb, { width: 100 }), 400, 'image_too_large');
  // 25 frames, MAX_FRAMES 20: a resize makes the first 20 (a browser shows a valid animation, never a 400)
  const frames = origin.site.add('frames.gif', await animated(16, 16, 25, 'gif'), 'image/gif');
  const resized = await fetch(origin.proxied(frames, { width: 8 }));
  assert.equal(resized.status, 200);
  const made = await decode(Buffer.from(await resized.arrayBuffer()));
  assert.deepEqual([made.format, made.width, made.frames], ['gif', 8, 20]);
  await stillServing();
});

test('bad parameters are 400s naming the parameter', async () => {
  const url = origin.site.add('ok.jpg', await solid(100, 100, 'jpeg'));
  for (const [query, name] of [
    [{ width: '-5' }, 'width'],
    [{ height: '-1e9' }, 'height'],
    [{ mode: 'zoom' }, 'mode'],
    [{ format: 'bmp' }, 'format'],
    [{ format: 'JPEG' }, 'format'],
  ]) {
    const response = await fetch(origin.proxied(url, /** @type {any} */ (query)));
    assert.equal(response.status, 400, JSON.stringify(query));
    const error = await jsonError(response);
    assert.deepEqual([error.name, error.info.name], ['invalid_parameter', name]);
  }
});

test('sizes are read as images.hive.blog reads them: the leading whole number, or no size at all', async () => {
  const url = origin.site.add('sizes.jpg', await solid(400, 200, 'jpeg'));
  for (const [width, expected] of [
    ['100.7', 100],
    ['100px', 100],
    [' 100', 100],
    ['abc', 400],
    ['', 400],
    ['0', 400],
    ['1e9', 1],
    ['9999999999999', 400],
    [['50', '80'], 50],
  ]) {
    const search = new URLSearchParams({ mode: 'fit', format: 'jpg' });
    for (const value of [width].flat()) search.append('width', String(value));
    const response = await fetch(`${origin.proxied(url)}?${search}`);
    assert.equal(response.status, 200, JSON.stringify(width));
    const image = await decode(Buffer.from(await response.arrayBuffer()));
    assert.deepEqual([image.format, image.width], ['jpeg', expected], JSON.stringify(width));
  }
});

test('bad proxy URLs: not base58, not http(s), not a URL', async () => {
  await expectError(`${origin.base}/p/0OIl`, 400, 'invalid_url');
  for (const target of [
    'javascript:alert(1)',
    'file:///etc/passwd',
    'ftp://example.com/a.jpg',
    'data:image/png;base64,AAAA',
    'just text',
  ]) {
    await expectError(`${origin.base}/p/${base58Url.encode(target)}`, 400, 'invalid_url');
  }
  await expectError(`${origin.base}/100x100/javascript:alert(1)`, 400, 'invalid_url', { redirect: 'manual' });
});

test('SSRF: loopback, private, link-local and metadata targets are refused in every spelling, redirects included', async () => {
  const targets = [
    'http://127.0.0.2/a.jpg',
    'http://10.0.0.1/a.jpg',
    'http://169.254.169.254/latest/meta-data/',
    'http://[::1]/a.jpg',
    'http://[::ffff:127.0.0.2]/a.jpg',
    'http://0x7f.0.0.2/a.jpg',
    'http://2130706434/a.jpg',
    'http://localhost/a.jpg',
    'http://192.168.0.1/a.jpg',
    'http://100.64.1.1/',
    'http://[fe80::1]/',
    'http://0.0.0.0/',
  ];
  for (const target of targets) await expectError(origin.proxied(target, { width: 10 }), 403, 'forbidden_target');
  const viaRedirect = `${origin.site.base}/to?url=${encodeURIComponent('http://169.254.169.254/latest/meta-data/')}`;
  await expectError(origin.proxied(viaRedirect, { width: 10 }), 403, 'forbidden_target');
  const viaName = `${origin.site.base}/to?url=${encodeURIComponent('http://localhost:1/x.jpg')}`;
  await expectError(origin.proxied(viaName, { width: 10 }), 403, 'forbidden_target');
});

test('redirects are followed up to the limit, each re-checked', async () => {
  origin.site.add('hop.jpg', await solid(50, 50, 'jpeg'));
  const ok = await fetch(origin.proxied(`${origin.site.base}/redirect/3/hop.jpg`, { width: 20 }));
  assert.equal(ok.status, 200);
  await expectError(origin.proxied(`${origin.site.base}/redirect/6/hop.jpg`, { width: 20 }), 400, 'too_many_redirects');
});

test('upstream 404 is remembered long and 5xx briefly: a second request never reaches the upstream', async () => {
  for (const [code, status, name] of /** @type {Array<[number, number, string]>} */ ([
    [404, 404, 'upstream_not_found'],
    [500, 502, 'upstream_error'],
  ])) {
    const url = `${origin.site.base}/status/${code}`;
    const first = await expectError(origin.proxied(url, { width: 10 }), status, name);
    const second = await expectError(origin.proxied(url, { width: 20 }), status, name);
    assert.equal(origin.site.hits(`/status/${code}`), 1, `status ${code} fetched once`);
    assert.equal(first.headers.get('cache-control'), status >= 500 ? 'no-store' : 'public, max-age=60');
    assert.equal(second.headers.get('cache-control'), status >= 500 ? 'no-store' : 'public, max-age=60');
    const ttl = await origin.redis.client.ttl(`origin:fail:${(await import('@stack/lib')).sha256Hex(url)}`);
    assert.ok(code === 404 ? ttl > 3600 : ttl > 0 && ttl <= 120, `ttl ${ttl} for ${code}`);
  }
  assert.ok(
    (await metricValue(origin.metricsUrl, 'origin_cache_requests_total', { level: 'failure', result: 'hit' })) >= 2,
  );
});

test('keys with path tricks are 404s; unknown methods 405; all JSON', async () => {
  for (const path of [
    '/..%2f..%2fetc%2fpasswd',
    '/%2e%2e/%2e%2e/etc/passwd',
    '/DQm..%00/x',
    '/favicon.ico',
    `/${'D'.repeat(300)}`,
  ]) {
    await expectError(origin.base + path, 404, 'not_found');
  }
  // not valid percent-encoding: the client's mistake, never a 500
  for (const path of ["/%93'4", '/%E0%A4%A/x', '/p/%ZZ']) await expectError(origin.base + path, 400, 'invalid_path');
  const response = await expectError(`${origin.base}/p/abc`, 405, 'method_not_allowed', { method: 'DELETE' });
  assert.equal(response.headers.get('allow'), 'GET, HEAD, POST');
  await stillServing();
});

test('uploads: 411 without a length, 413 before reading an oversized body, 401 without a token, 400 for a non-image', async () => {
  const http = await import('node:http');
  /** @param {Record<string, string>} headers @param {string | null} body null: send the headers only */
  const post = (headers, body) =>
    new Promise((resolve, reject) => {
      const req = http.request(
        `${origin.base}/upload`,
        {
          method: 'POST',
          headers: {
            authorization: 'Bearer test-token',
            'content-type': 'multipart/form-data; boundary=x',
            ...headers,
          },
        },
        (res) => {
          let text = '';
          res.on('data', (chunk) => (text += chunk));
          res.on('end', () => resolve({ status: res.statusCode, name: JSON.parse(text).error.name }));
        },
      );
      req.on('error', reject);
      if (body === null) req.flushHeaders();
      else req.end(body);
    });
  assert.deepEqual(await post({ 'transfer-encoding': 'chunked' }, '--x--'), { status: 411, name: 'length_required' });
  // 30 MB announced, not one byte sent: the answer comes before the body
  assert.deepEqual(await post({ 'content-length': String(30 * 1024 * 1024) }, null), {
    status: 413,
    name: 'payload_too_large',
  });

  const noToken = await tokenUpload(origin.base, await solid(10, 10, 'png'), 'a.png', 'wrong-token');
  assert.equal(noToken.status, 401);
  const text = await tokenUpload(origin.base, Buffer.from('hello world, not an image'), 'a.jpg');
  assert.equal(text.status, 400);
  assert.equal((await jsonError(text)).name, 'invalid_image');
  // only the header of these is whole: what is stored under a key must decode to the last byte
  const jpeg = await solid(200, 150, 'jpeg');
  const gif = await animated(64, 48, 3, 'gif');
  for (const [name, body] of /** @type {Array<[string, Buffer]>} */ ([
    ['cut.jpg', jpeg.subarray(0, Math.floor(jpeg.length * 0.9))],
    ['cut.gif', gif.subarray(0, Math.floor(gif.length * 0.9))],
  ])) {
    const cut = await tokenUpload(origin.base, body, name);
    assert.equal(cut.status, 400, name);
    assert.deepEqual(await jsonError(cut), { name: 'invalid_image', info: { reason: 'corrupt or truncated image' } });
  }
  await stillServing();
});

test('a form cut short in a part the upload skips is a 400 invalid_body, whoever sends it, and the origin serves on', async () => {
  const pid = origin.pid();
  // a first part that is not the image, its form never closed: busboy fails the skipped part's stream too
  const body = [
    '--cut',
    'Content-Disposition: form-data; name="other"; filename="a.bin"',
    'Content-Type: application/octet-stream',
    '',
    'x'.repeat(1000),
  ].join('\r\n');
  const headers = { 'content-type': 'multipart/form-data; boundary=cut' };
  // the signed Hive upload reads the body before it can check the signature: anyone reaches the parser
  for (const [path, authorization] of [
    [`/hiveio/${'ab'.repeat(65)}`, ''],
    ['/upload', 'Bearer test-token'],
  ]) {
    const answer = await fetch(`${origin.base}${path}`, {
      method: 'POST',
      headers: { ...headers, ...(authorization ? { authorization } : {}) },
      body,
    });
    assert.equal(answer.status, 400, path);
    assert.deepEqual(await jsonError(answer), { name: 'invalid_body', info: { reason: 'malformed multipart' } });
  }
  await stillServing();
  assert.equal(origin.pid(), pid, 'the same origin process');
});

test('an upload refused before its body is read (a form the parser gives up on, a wrong token): its kept-alive connection does not stall', async () => {
  const connection = keptAlive();
  /** @param {string} method @param {string} path @param {Record<string, string | number>} headers @param {Buffer} [body] */
  const ask = async (method, path, headers, body) =>
    (await connection.ask(method, `${origin.base}${path}`, headers, body)).status;
  // a part header the parser refuses, then 300 KB it never reads
  const body = Buffer.concat([Buffer.from('--junk\r\nnot a header\r\n\r\n'), Buffer.alloc(300_000, 120)]);
  const headers = {
    authorization: 'Bearer test-token',
    'content-type': 'multipart/form-data; boundary=junk',
    'content-length': body.length,
  };
  try {
    for (const path of ['/upload', `/hiveio/${'ab'.repeat(65)}`]) {
      assert.equal(await ask('POST', path, headers, body), 400, path);
      assert.equal(await ask('GET', '/healthz', {}), 200, `the request after ${path}`);
    }
    // refused before the form is read at all
    assert.equal(await ask('POST', '/upload', { ...headers, authorization: 'Bearer wrong' }, body), 401);
    assert.equal(await ask('GET', '/healthz', {}), 200, 'the request after the 401');
  } finally {
    connection.agent.destroy();
  }
});
