// What one request may cost (#37, finding 2): a small file that declares 7000×7000 asked for large AVIFs
// once held every transform slot for a minute. Variants are bounded by their pixels (AVIF's budget lower),
// and a costly transform past TRANSFORM_TIMEOUT_S is killed with its worker, its slot free at once.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import sharp from 'sharp';
import { decode } from '../../test/support/images.js';
import { metricValue } from '../../test/support/metrics.js';
import { jsonError, startOrigin, tokenUpload } from './harness.js';

/** @type {Awaited<ReturnType<typeof startOrigin>>} */
let origin;
/** One slot, a short timeout, AVIF budgets out of the way: a slow AVIF encode holds the only slot. */
/** @type {Awaited<ReturnType<typeof startOrigin>>} */
let single;

before(async () => {
  [origin, single] = await Promise.all([
    startOrigin(),
    startOrigin({
      TRANSFORM_CONCURRENCY: '1',
      TRANSFORM_TIMEOUT_S: '1',
      AVIF_EFFORT: '6',
      AVIF_MAX_PIXELS: '100000000',
    }),
  ]);
});
after(() => Promise.all([origin?.stop(), single?.stop()]));

/** A photograph-like JPEG. @param {number} width @param {number} height */
const noise = (width, height) =>
  sharp({
    create: { width, height, channels: 3, background: '#808080', noise: { type: 'gaussian', mean: 128, sigma: 40 } },
  })
    .jpeg({ quality: 90 })
    .toBuffer();

test('a small file of high declared resolution: large AVIFs are made in WebP or refused, large variants refused', async () => {
  // 7000×7000 of one colour: 150 KB, 49 MP
  const flat = await sharp({ create: { width: 7000, height: 7000, channels: 3, background: '#6080a0' } })
    .png({ compressionLevel: 9 })
    .toBuffer();
  const url = origin.site.add('flat.png', flat);
  const chrome = 'image/avif,image/webp,image/apng,image/*,*/*;q=0.8';
  const negotiated = await fetch(origin.proxied(url, { width: 4000, format: 'auto' }), { headers: { accept: chrome } });
  assert.equal(negotiated.status, 200);
  const made = await decode(Buffer.from(await negotiated.arrayBuffer()));
  assert.deepEqual([made.format, made.width, made.height], ['webp', 4000, 4000], 'past AVIF_MAX_PIXELS (4 MP): WebP');
  const named = await fetch(origin.proxied(url, { width: 4000, format: 'avif' }));
  assert.equal(named.status, 400);
  assert.deepEqual((await jsonError(named)).name, 'output_too_large');
  const huge = await fetch(origin.proxied(url, { width: 7000, format: 'jpeg' }));
  assert.equal(huge.status, 400, 'past MAX_OUTPUT_PIXELS (25 MP)');
  assert.equal((await jsonError(huge)).info.limit_pixels, 25_000_000);
  const small = await fetch(origin.proxied(url, { width: 1500, format: 'avif' }));
  assert.equal(small.status, 200);
  assert.equal((await decode(Buffer.from(await small.arrayBuffer()))).format, 'heif', 'within its budget: AVIF');
});

test('a costly transform past TRANSFORM_TIMEOUT_S gives its slot back at once: the next request does not wait for it', async () => {
  const upload = await tokenUpload(single.base, await noise(3000, 2000), 'slow.jpg');
  const { url } = /** @type {any} */ (await upload.json());
  const other = await tokenUpload(single.base, await noise(300, 200), 'quick.jpg');
  const { url: quickUrl } = /** @type {any} */ (await other.json());
  const kills = await metricValue(single.metricsUrl, 'origin_transform_worker_kills_total');
  // an AVIF of 6 MP at effort 6 takes several seconds here; its one slot is the only one
  const slow = fetch(single.proxied(url, { width: 3000, height: 2000, format: 'avif' }));
  await new Promise((resolve) => setTimeout(resolve, 200));
  const started = performance.now();
  const quick = await fetch(single.proxied(quickUrl, { width: 64, format: 'jpeg' }));
  const waited = performance.now() - started;
  assert.equal(quick.status, 200);
  const answer = await slow;
  assert.equal(answer.status, 503);
  assert.equal((await jsonError(answer)).name, 'transform_timeout');
  // the slot was free at the 1 s deadline (a sanity bound far under the encode's own time)
  assert.ok(waited < 2500, `the next request waited ${Math.round(waited)} ms for the slot`);
  assert.equal((await metricValue(single.metricsUrl, 'origin_transform_worker_kills_total')) - kills, 1);
});
