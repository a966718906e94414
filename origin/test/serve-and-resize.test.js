import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import sharp from 'sharp';
import { base58Url } from '@stack/lib';
import { animated, decode, meanDifference, oriented, photo, solid } from '../../test/support/images.js';
import { keptAlive } from '../../test/support/kept-alive.js';
import { metricValue } from '../../test/support/metrics.js';
import { waitFor } from '../../test/support/ports.js';
import { startOrigin, tokenUpload } from './harness.js';

/** @type {Awaited<ReturnType<typeof startOrigin>>} */
let origin;
/** @type {string} */
let photoUrl;

before(async () => {
  origin = await startOrigin();
  // a real photograph, 2560×1600 (the file's name says otherwise)
  photoUrl = origin.site.add('path.jpg', fs.readFileSync(photo('Path', '1920x1080')));
});
after(() => origin.stop());

/** @param {string} url @param {RequestInit} [init] */
async function image(url, init) {
  const response = await fetch(url, init);
  const body = Buffer.from(await response.arrayBuffer());
  assert.equal(response.status, 200, `${url}: ${body.toString().slice(0, 200)}`);
  return { response, body, info: await decode(body) };
}

test('health answers on /healthz, /.well-known/healthcheck.json and /', async () => {
  for (const route of ['/healthz', '/.well-known/healthcheck.json', '/']) {
    const response = await fetch(origin.base + route);
    assert.equal(response.status, 200);
    const body = /** @type {any} */ (await response.json());
    assert.equal(body.ok, true);
    assert.match(body.version, /^\d+\.\d+\.\d+/);
    assert.ok(Date.parse(body.date));
  }
});

test('an uploaded original is served with its sniffed type, a strong ETag, 304 and HEAD', async () => {
  const png = await solid(64, 48, 'png');
  const upload = await tokenUpload(origin.base, png, 'lies.jpg');
  assert.equal(upload.status, 200);
  const { url } = /** @type {any} */ (await upload.json());
  assert.match(url, new RegExp(`^${origin.base}/D[1-9A-HJ-NP-Za-km-z]+/lies\\.jpg$`));
  const key = new URL(url).pathname.split('/')[1];

  const response = await fetch(`${origin.base}/${key}/any-name.gif`);
  assert.equal(response.status, 200);
  assert.equal(response.headers.get('content-type'), 'image/png');
  assert.equal(response.headers.get('cache-control'), 'public, max-age=31536000, immutable');
  assert.equal(response.headers.get('etag'), `"${key}"`);
  assert.equal(response.headers.get('xkey'), `img:${key}`);
  assert.deepEqual(Buffer.from(await response.arrayBuffer()), png);

  const again = await fetch(`${origin.base}/${key}`, {
    headers: { 'if-none-match': `"${key}"`, 'cache-control': 'max-age=0' },
  });
  assert.equal(again.status, 304);
  const head = await fetch(`${origin.base}/${key}`, { method: 'HEAD' });
  assert.equal(head.status, 200);
  assert.equal(head.headers.get('content-length'), String(png.length));
  assert.equal((await head.arrayBuffer()).byteLength, 0);
});

test('fit keeps the aspect ratio inside the box and encodes the asked format', async () => {
  for (const format of ['jpeg', 'webp', 'avif', 'png']) {
    const { response, info } = await image(origin.proxied(photoUrl, { width: 512, height: 512, mode: 'fit', format }));
    assert.equal(info.format, format === 'avif' ? 'heif' : format);
    assert.equal(response.headers.get('content-type'), `image/${format}`);
    assert.deepEqual([info.width, info.height], [512, 320]);
    assert.equal(response.headers.get('cache-control'), 'public, max-age=31536000, immutable');
    assert.match(response.headers.get('xkey') || '', /^img:[0-9a-f]{64}$/);
  }
});

/**
 * The first 8 values (zigzag order) of a JPEG's luminance quantisation table, from its DQT segment.
 * @param {Buffer} jpeg
 */
function luminanceTable(jpeg) {
  let at = 2;
  while (at < jpeg.length) {
    const marker = jpeg.readUInt16BE(at);
    if (marker === 0xffdb && (jpeg[at + 4] & 0x0f) === 0) return [...jpeg.subarray(at + 5, at + 13)];
    at += 2 + jpeg.readUInt16BE(at + 2);
  }
  throw new Error('no luminance table');
}

/** libjpeg's standard (Annex K) luminance table at `quality`, first 8 values in zigzag order. @param {number} quality */
function standardTable(quality) {
  const scale = quality < 50 ? 5000 / quality : 200 - quality * 2;
  return [16, 11, 12, 14, 12, 10, 16, 14].map((base) =>
    Math.min(255, Math.max(1, Math.floor((base * scale + 50) / 100))),
  );
}

test('JPEG is baseline with the standard tables; JPEG_PROGRESSIVE=true makes it progressive; JPEG_TRELLIS=true trades encode time for a smaller file of the same picture', async () => {
  const trellis = await startOrigin({ JPEG_TRELLIS: 'true' });
  const progressive = await startOrigin({ JPEG_PROGRESSIVE: 'true' });
  try {
    const variant = async (/** @type {typeof origin} */ server) =>
      image(
        server.proxied(server.site.add('path.jpg', fs.readFileSync(photo('Path', '1920x1080'))), {
          width: 512,
          height: 512,
          mode: 'fit',
          format: 'jpeg',
        }),
      );
    const plain = await image(origin.proxied(photoUrl, { width: 512, height: 512, mode: 'fit', format: 'jpeg' }));
    const [small, drawn] = [await variant(trellis), await variant(progressive)];
    const scans = [];
    for (const { body } of [plain, small, drawn]) {
      const meta = await sharp(body).metadata();
      scans.push(meta.isProgressive);
      assert.deepEqual([meta.width, meta.height], [512, 320]);
    }
    assert.deepEqual(scans, [false, true, true]);
    assert.deepEqual(luminanceTable(plain.body), standardTable(80));
    assert.deepEqual(luminanceTable(drawn.body), standardTable(80));
    assert.notDeepEqual(luminanceTable(small.body), standardTable(80)); // trellis goes with mozjpeg's own table
    // progressive scans: the same pixels in a file a little smaller
    assert.ok(
      drawn.body.length < plain.body.length,
      `progressive ${drawn.body.length} B, baseline ${plain.body.length} B`,
    );
    assert.ok(
      small.body.length < plain.body.length * 0.95,
      `trellis ${small.body.length} B, plain ${plain.body.length} B`,
    );
    // the same picture: each decoding stays close to the photograph resized and not encoded
    const reference = await sharp(photo('Path', '1920x1080')).resize(512, 512, { fit: 'inside' }).raw().toBuffer();
    const [a, b, c] = await Promise.all(
      [plain.body, small.body, drawn.body].map((body) => sharp(body).raw().toBuffer()),
    );
    assert.ok(a.equals(c), 'progressive and baseline decode to the same pixels');
    const [plainError, trellisError] = [a, b].map((pixels) => meanDifference(pixels, reference));
    // about 4.1 each here (chroma subsampling and q80); a broken encode or a wrong size is far off
    assert.ok(
      plainError < 5 && Math.abs(trellisError - plainError) < 0.5,
      `mean differences: plain ${plainError}, trellis ${trellisError}`,
    );
  } finally {
    await Promise.all([trellis.stop(), progressive.stop()]);
  }
});

test('colour profiles: an sRGB-tagged source keeps its colours, a Display P3 one is converted to sRGB', async () => {
  const colour = { r: 192, g: 64, b: 32 };
  const pixel = async (/** @type {Buffer} */ data) => [
    ...(await sharp(data).removeAlpha().extract({ left: 8, top: 8, width: 1, height: 1 }).raw().toBuffer()),
  ];
  for (const profile of ['srgb', 'p3']) {
    // withIccProfile converts the pixels into the profile's space and tags them: both show the same colour
    const source = await sharp({ create: { width: 32, height: 32, channels: 3, background: colour } })
      .withIccProfile(profile)
      .png()
      .toBuffer();
    const stored = await pixel(await sharp(source, { ignoreIcc: true }).png().toBuffer());
    if (profile === 'p3') assert.ok(Math.abs(stored[0] - colour.r) > 8, `P3 numbers differ from sRGB ones: ${stored}`);
    const { body } = await image(
      origin.proxied(origin.site.add(`tagged-${profile}.png`, source), { width: 16, height: 16, format: 'png' }),
    );
    const shown = await pixel(body);
    assert.ok(
      shown.every((value, i) => Math.abs(value - [colour.r, colour.g, colour.b][i]) <= 3),
      `${profile}: ${shown}`,
    );
    assert.equal((await sharp(body).metadata()).icc, undefined);
  }
});

test('cover crops to exactly the box; a missing dimension keeps the aspect ratio; no size gives the default box', async () => {
  let { info } = await image(origin.proxied(photoUrl, { width: 300, height: 300 }));
  assert.deepEqual([info.format, info.width, info.height], ['jpeg', 300, 300]);
  ({ info } = await image(origin.proxied(photoUrl, { width: 640 })));
  assert.deepEqual([info.width, info.height], [640, 400]);
  ({ info } = await image(origin.proxied(photoUrl, { height: 100 })));
  assert.deepEqual([info.width, info.height], [160, 100]);
  ({ info } = await image(origin.proxied(photoUrl)));
  assert.deepEqual([info.width, info.height], [1280, 800]);
});

test('never enlarges: a small source stays its size, and cover keeps the asked aspect ratio', async () => {
  const small = origin.site.add('small.png', await solid(100, 50, 'png'), 'image/png');
  let { info } = await image(origin.proxied(small, { width: 400, mode: 'fit' }));
  assert.deepEqual([info.format, info.width, info.height], ['png', 100, 50]);
  ({ info } = await image(origin.proxied(small, { width: 200, height: 200 })));
  assert.deepEqual([info.width, info.height], [50, 50]);
  ({ info } = await image(origin.proxied(small, { width: 99999, height: 20000, mode: 'fit' })));
  assert.deepEqual([info.width, info.height], [100, 50], 'sizes past the cap are capped, then never enlarged');
  ({ info } = await image(origin.proxied(small, { width: 99999, height: 8000 })));
  assert.deepEqual([info.width, info.height], [50, 50], 'a capped cover box is 8000×8000: square');
});

test('format=auto picks avif > webp > jpeg from Accept and varies on it; the first AVIF answer is a WebP at once', async () => {
  const url = origin.proxied(photoUrl, { width: 200, format: 'auto' });
  const avifAccept = { accept: 'image/avif,image/webp,*/*' };
  const fallbacks = await metricValue(origin.metricsUrl, 'origin_fallback_answers_total');
  // not made yet: answered in WebP, briefly cached, and the AVIF is made in the background
  const first = await image(url, { headers: avifAccept });
  assert.equal(first.info.format, 'webp');
  assert.equal(first.response.headers.get('cache-control'), 'public, max-age=30, s-maxage=30');
  assert.equal((await metricValue(origin.metricsUrl, 'origin_fallback_answers_total')) - fallbacks, 1);
  await waitFor(
    async () => (await metricValue(origin.metricsUrl, 'origin_background_encodes_total', { result: 'done' })) >= 1,
    10_000,
    'the AVIF made in the background',
  );
  const cases = [
    [avifAccept.accept, 'heif', 'image/avif'],
    ['image/webp,*/*', 'webp', 'image/webp'],
    ['*/*', 'jpeg', 'image/jpeg'],
  ];
  for (const [accept, decoded, type] of cases) {
    const { response, info } = await image(url, { headers: { accept } });
    assert.equal(info.format, decoded, accept);
    assert.equal(response.headers.get('content-type'), type);
    assert.equal(response.headers.get('cache-control'), 'public, max-age=31536000, immutable');
    assert.equal(response.headers.get('vary'), 'Accept');
    // a CDN that ignores Vary (CDN_VARY_ACCEPT=false, the default) is told not to keep any of them
    assert.equal(response.headers.get('cdn-cache-control'), 'no-store');
    assert.equal(response.headers.get('cloudflare-cdn-cache-control'), 'no-store');
  }
  assert.equal(
    (await image(origin.proxied(photoUrl, { width: 200, format: 'webp' }))).response.headers.get('cdn-cache-control'),
    null,
    'only negotiated answers',
  );
});

test('EXIF orientation is applied and metadata stripped', async () => {
  for (const orientation of [1, 3, 6, 8]) {
    const source = origin.site.add(`o${orientation}.jpg`, await oriented(300, 200, orientation));
    const { body, info } = await image(origin.proxied(source, { width: 1000, height: 1000, mode: 'fit' }));
    const expected = orientation >= 5 ? [200, 300] : [300, 200];
    assert.deepEqual([info.width, info.height], expected, `orientation ${orientation}`);
    assert.equal(info.orientation, undefined, 'no orientation tag left');
    assert.equal(body.includes(Buffer.from('Exif')), false, 'no EXIF block left');
  }
});

test('animated GIF and WebP stay animated at any size', async () => {
  const gif = origin.site.add('anim.gif', await animated(120, 80, 3, 'gif'), 'image/gif');
  let { info } = await image(origin.proxied(gif, { width: 60, mode: 'fit' }));
  assert.deepEqual([info.format, info.frames, info.width, info.height], ['gif', 3, 60, 40]);
  ({ info } = await image(origin.proxied(gif, { width: 60, format: 'webp' })));
  assert.deepEqual([info.format, info.frames, info.width], ['webp', 3, 60]);
  ({ info } = await image(origin.proxied(gif, { width: 50, height: 50, format: 'auto' }), {
    headers: { accept: 'image/avif,image/webp' },
  }));
  assert.deepEqual([info.format, info.frames, info.width, info.height], ['webp', 3, 50, 50]);
  const webp = origin.site.add('anim.webp', await animated(120, 80, 4, 'webp'), 'image/webp');
  ({ info } = await image(origin.proxied(webp, { width: 30 })));
  assert.deepEqual([info.format, info.frames, info.width], ['webp', 4, 30]);
});

test('our own uploads are read from the store, and double-proxied URLs are unwrapped', async () => {
  const upload = await tokenUpload(origin.base, await solid(400, 400, 'jpeg'));
  const { url } = /** @type {any} */ (await upload.json());
  let { info } = await image(origin.proxied(url, { width: 100, height: 100 }));
  assert.deepEqual([info.width, info.height], [100, 100]);

  const inner = origin.site.add('wrapped.jpg', await solid(500, 250, 'jpeg'));
  const wrapped = `https://images.hive.blog/p/${base58Url.encode(inner)}?width=10`;
  ({ info } = await image(origin.proxied(wrapped, { width: 100, mode: 'fit' })));
  assert.deepEqual([info.width, info.height], [100, 50]);
  const legacyWrapped = `https://images.hive.blog/0x0/${inner.replace('/img/', '/img/')}`;
  ({ info } = await image(origin.proxied(legacyWrapped, { width: 50, mode: 'fit' })));
  assert.deepEqual([info.width, info.height], [50, 25]);
  assert.equal(origin.site.hits('/img/wrapped.jpg'), 1, 'the wrapped original was fetched once, directly');
});

test('legacy /WxH/url answers a long-cached 301 to the /p/ form', async () => {
  const response = await fetch(`${origin.base}/640x0/https://example.com/a/b.jpg?x=1`, { redirect: 'manual' });
  assert.equal(response.status, 301);
  const location = new URL(response.headers.get('location') || '', origin.base);
  assert.equal(base58Url.decode(location.pathname.split('/')[2]), 'https://example.com/a/b.jpg?x=1');
  assert.deepEqual(Object.fromEntries(location.searchParams), { format: 'match', mode: 'fit', width: '640' });
  assert.equal(response.headers.get('cache-control'), 'public, max-age=31536000, immutable');
  const merged = await fetch(`${origin.base}/0x100/https:/example.com/c.png`, { redirect: 'manual' });
  const mended = new URL(merged.headers.get('location') || '', origin.base);
  assert.equal(base58Url.decode(mended.pathname.split('/')[2]), 'https://example.com/c.png');
  assert.deepEqual(Object.fromEntries(mended.searchParams), { format: 'match', mode: 'fit', height: '100' });
});

test('a second size never refetches the original; a repeated variant comes from the result cache', async () => {
  const url = origin.site.add('twice.jpg', await solid(800, 600, 'jpeg'));
  const before = await metricValue(origin.metricsUrl, 'origin_transforms_total');
  await image(origin.proxied(url, { width: 100 }));
  await image(origin.proxied(url, { width: 200 }));
  const { response } = await image(origin.proxied(url, { width: 200 }));
  assert.equal(origin.site.hits('/img/twice.jpg'), 1);
  assert.equal((await metricValue(origin.metricsUrl, 'origin_transforms_total')) - before, 2);
  assert.equal(response.headers.get('server-timing'), 'cache;desc=hit');
  assert.ok(
    (await metricValue(origin.metricsUrl, 'origin_cache_requests_total', { level: 'variant', result: 'hit' })) >= 1,
  );
  assert.ok(
    (await metricValue(origin.metricsUrl, 'origin_cache_requests_total', { level: 'original', result: 'hit' })) >= 1,
  );
});

test('a variant just answered is in the result cache after a restart: served from disk, not made again', async () => {
  const url = origin.site.add('kept.jpg', await solid(640, 480, 'jpeg'));
  const first = await image(origin.proxied(url, { width: 120 }));
  assert.equal(first.info.width, 120);
  await origin.restart();
  const before = await metricValue(origin.metricsUrl, 'origin_transforms_total');
  const again = await image(origin.proxied(url, { width: 120 }));
  assert.equal(again.response.headers.get('server-timing'), 'cache;desc=hit');
  assert.ok(again.body.equals(first.body));
  assert.equal((await metricValue(origin.metricsUrl, 'origin_transforms_total')) - before, 0);
});

test('a variant answer carries Server-Timing and the request id it was given', async () => {
  const url = origin.site.add('timing.jpg', await solid(300, 300, 'jpeg'));
  const response = await fetch(origin.proxied(url, { width: 64 }), { headers: { 'x-request-id': 'req-abc-123' } });
  assert.equal(response.status, 200);
  assert.equal(response.headers.get('x-request-id'), 'req-abc-123');
  assert.match(response.headers.get('server-timing') || '', /fetch;dur=[\d.]+.*transform;dur=[\d.]+/);
});

test('a variant answers GET, HEAD and conditional GET alike, new or cached, in any spelling of its URL', async () => {
  const url = origin.site.add('alike.jpg', await solid(400, 300, 'jpeg'));
  const target = origin.proxied(url, { width: 80 });
  const answered = (/** @type {string} */ status) =>
    metricValue(origin.metricsUrl, 'http_request_duration_seconds_count', { route: 'proxy', status });
  const [ok, notModified] = [await answered('200'), await answered('304')];

  const head = await fetch(target, { method: 'HEAD' }); // a new variant, made for a HEAD
  assert.equal(head.status, 200);
  assert.equal(head.headers.get('content-type'), 'image/jpeg');
  assert.equal((await head.arrayBuffer()).byteLength, 0);
  const length = Number(head.headers.get('content-length'));
  const first = await image(target);
  assert.equal(first.body.length, length);
  assert.equal(first.info.width, 80);
  // cached, from disk once the write lands: the same bytes and headers
  await new Promise((resolve) => setTimeout(resolve, 200));
  const made = await metricValue(origin.metricsUrl, 'origin_transforms_total');
  const cached = await image(target);
  // the same bytes a fresh encode would give: what proves the cache is that nothing was made
  assert.equal(cached.response.headers.get('server-timing'), 'cache;desc=hit');
  assert.equal((await metricValue(origin.metricsUrl, 'origin_transforms_total')) - made, 0);
  assert.ok(cached.body.equals(first.body));
  assert.equal(cached.response.headers.get('content-length'), String(length));
  assert.equal(cached.response.headers.get('etag'), first.response.headers.get('etag'));
  assert.equal(cached.response.headers.get('cache-control'), 'public, max-age=31536000, immutable');
  assert.equal(cached.response.headers.get('xkey'), first.response.headers.get('xkey'));
  const cachedHead = await fetch(target, { method: 'HEAD' });
  assert.equal(cachedHead.headers.get('content-length'), String(length));

  const etag = first.response.headers.get('etag') || '';
  // (fetch adds Cache-Control: no-cache to a conditional request unless it has one)
  const conditional = await fetch(target, { headers: { 'if-none-match': etag, 'cache-control': 'max-age=0' } });
  assert.equal(conditional.status, 304);
  // a filename with percent-escapes after the encoded URL: the same variant
  const spelled = new URL(target);
  spelled.pathname += '/caf%C3%A9.jpg';
  const escaped = await image(spelled.toString());
  assert.ok(escaped.body.equals(first.body));

  assert.equal((await answered('200')) - ok, 5);
  assert.equal((await answered('304')) - notModified, 1);
});

test('a refused variant is a JSON error with the request id and the negative Cache-Control', async () => {
  const url = origin.site.add('refused.jpg', await solid(100, 100, 'jpeg'));
  const response = await fetch(origin.proxied(url, { width: '-40' }), { headers: { 'x-request-id': 'req-bad-1' } });
  assert.equal(response.status, 400);
  assert.equal(response.headers.get('x-request-id'), 'req-bad-1');
  assert.equal(response.headers.get('content-type'), 'application/json; charset=utf-8');
  assert.match(response.headers.get('cache-control') || '', /max-age=\d+/);
  assert.deepEqual(/** @type {any} */ (await response.json()).error.info.name, 'width');
  // a filename that is no percent-encoding: the same JSON error, from the same writer
  const broken = new URL(origin.proxied(url, { width: 40 }));
  broken.pathname += '/%E0%A4%A.jpg';
  const malformed = await fetch(broken, { headers: { 'x-request-id': 'req-bad-2' } });
  assert.equal(malformed.status, 400);
  assert.equal(malformed.headers.get('x-request-id'), 'req-bad-2');
  assert.equal(/** @type {any} */ (await malformed.json()).error.name, 'invalid_path');
});

test('a cached variant whose bytes are gone from disk is made again, read whole or sent as a range', async () => {
  const url = origin.site.add('deleted.jpg', await solid(500, 400, 'jpeg'));
  const target = origin.proxied(url, { width: 90 });
  const first = await image(target);
  const segments = () =>
    fs
      .readdirSync(path.join(origin.dataDir, 'variants'))
      .filter((name) => name.endsWith('.pack'))
      .map((name) => path.join(origin.dataDir, 'variants', name));
  const made = () => metricValue(origin.metricsUrl, 'origin_transforms_total');

  for (const file of segments()) fs.truncateSync(file, 0); // cut by hand: a whole read comes short
  let before = await made();
  const again = await image(target);
  assert.ok(again.body.equals(first.body));
  assert.equal((await made()) - before, 1);

  for (const file of segments()) fs.rmSync(file); // deleted by hand: a range is sent from the file, which is gone
  before = await made();
  const ranged = await fetch(target, { headers: { range: 'bytes=0-' } });
  assert.ok(ranged.ok, String(ranged.status));
  assert.ok(Buffer.from(await ranged.arrayBuffer()).equals(first.body));
  assert.equal((await made()) - before, 1);
  // made again into a file of its own: the next range is sent from it, not made once more
  const part = async () => {
    const answer = await fetch(target, { headers: { range: 'bytes=0-9' } });
    return answer.status === 206 && Buffer.from(await answer.arrayBuffer()).equals(first.body.subarray(0, 10));
  };
  await waitFor(part, 10_000, 'a range of the variant made again');
  assert.equal((await made()) - before, 1);
});

test('a range past a cached variant is a 416 naming its length, and its keep-alive connection answers the next request', async () => {
  // an origin of its own: the test before deleted the result cache's segments by hand
  const own = await startOrigin();
  const target = own.proxied(own.site.add('ranged.jpg', fs.readFileSync(photo('Path', '1280x800'))), {
    width: 300,
  });
  const whole = Buffer.from(await (await fetch(target)).arrayBuffer());
  // a range is sent from the result cache's file, once it is written there
  const cached = async () => (await fetch(target, { headers: { range: 'bytes=0-0' } })).status === 206;
  await waitFor(cached, 10_000, 'the variant in the result cache');
  const { ask, agent } = keptAlive();
  const get = (/** @type {Record<string, string>} */ headers) => ask('GET', target, headers);
  try {
    for (const range of ['bytes=999999-', 'bytes=-0']) {
      const refused = await get({ range });
      assert.equal(refused.status, 416, range);
      assert.equal(refused.headers['content-range'], `bytes */${whole.length}`);
      assert.equal(JSON.parse(refused.body.toString()).error.name, 'range_not_satisfiable');
      const next = await get({});
      assert.equal(next.status, 200);
      assert.ok(next.body.equals(whole));
    }
    const part = await get({ range: 'bytes=0-9' });
    assert.deepEqual([part.status, part.body], [206, whole.subarray(0, 10)]);
  } finally {
    agent.destroy();
    await own.stop();
  }
});

test('a range past an upload is a JSON 416 naming its length, and its keep-alive connection answers the next request', async () => {
  const bytes = await solid(200, 100, 'png');
  const { url } = /** @type {{ url: string }} */ (await (await tokenUpload(origin.base, bytes, 'ranged.png')).json());
  const { ask, agent } = keptAlive();
  const get = (/** @type {Record<string, string>} */ headers) =>
    ask('GET', origin.base + new URL(url).pathname, headers);
  try {
    const refused = await get({ range: 'bytes=999999-' });
    assert.equal(refused.status, 416);
    assert.equal(refused.headers['content-range'], `bytes */${bytes.length}`);
    assert.match(String(refused.headers['content-type']), /^application\/json/);
    assert.equal(JSON.parse(refused.body.toString()).error.name, 'range_not_satisfiable');
    const next = await get({});
    assert.deepEqual([next.status, next.headers['content-type']], [200, 'image/png']);
    assert.ok(next.body.equals(bytes));
  } finally {
    agent.destroy();
  }
});

test('a cached original whose file was deleted by hand is fetched again, not taken for a bad image', async () => {
  // without kept pixels, which would make the next variant without the file (kept-pixels.js)
  const alone = await startOrigin({ KEPT_PIXELS_BYTES: '0' });
  try {
    const url = alone.site.add('gone.jpg', await solid(600, 400, 'jpeg'));
    await image(alone.proxied(url, { width: 100 }));
    const id = createHash('sha256').update(new URL(url).toString()).digest('hex');
    const file = path.join(alone.dataDir, 'originals', id.slice(0, 2), `${id}.bin`);
    assert.ok(fs.existsSync(file), 'the original is cached');
    fs.rmSync(file);
    const again = await image(alone.proxied(url, { width: 120 }));
    assert.equal(again.info.width, 120);
    assert.equal(alone.site.hits('/img/gone.jpg'), 2);
  } finally {
    await alone.stop();
  }
});

test("under a run root whose name starts with a dot (up's .run): uploads and a cached variant's range are served", async () => {
  // Express 5's send answered a 404 for any file through a dot-directory: `up` served no upload at all
  const top = fs.mkdtempSync(path.join(os.tmpdir(), 'dotted-'));
  const parent = path.join(top, '.run');
  fs.mkdirSync(parent);
  const dotted = await startOrigin({}, { dataParent: parent });
  try {
    const bytes = await solid(120, 80, 'png');
    const { url } = /** @type {{ url: string }} */ (await (await tokenUpload(dotted.base, bytes, 'dot.png')).json());
    const back = await fetch(dotted.base + new URL(url).pathname);
    assert.equal(back.status, 200);
    assert.ok(Buffer.from(await back.arrayBuffer()).equals(bytes));
    const variant = dotted.proxied(url, { width: 60 });
    await fetch(variant).then((response) => response.arrayBuffer());
    const ranged = await fetch(variant, { headers: { range: 'bytes=0-9' } });
    assert.equal(ranged.status, 206);
    assert.equal((await ranged.arrayBuffer()).byteLength, 10);
  } finally {
    await dotted.stop();
    fs.rmSync(top, { recursive: true, force: true });
  }
});
