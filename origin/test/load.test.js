import assert from 'node:assert/strict';
import fs from 'node:fs';
import { after, before, test } from 'node:test';
import { decode, photo, solid } from '../../test/support/images.js';
import { metricValue } from '../../test/support/metrics.js';
import { waitFor } from '../../test/support/ports.js';
import { jsonError, startOrigin, tokenUpload } from './harness.js';

/** @type {Awaited<ReturnType<typeof startOrigin>>} */
let origin;
/** @type {string} */
let big;

before(async () => {
  origin = await startOrigin({ TRANSFORM_CONCURRENCY: '1', TRANSFORM_QUEUE_MAX: '4', TRANSFORM_DEGRADE_DEPTH: '1' });
  big = origin.site.add('big.jpg', fs.readFileSync(photo('Autumn', '2560x1600')));
  assert.equal((await fetch(origin.proxied(big, { width: 10 }))).status, 200, 'original fetched and cached');
});
after(() => origin.stop());

/** @param {() => Promise<boolean>} check */
async function waitUntil(check) {
  for (let i = 0; i < 500 && !(await check()); i += 1)
    await new Promise((resolve) => {
      setTimeout(resolve, 5);
    });
}

test('20 concurrent requests for one new variant share one fetch and one transform', async () => {
  const url = origin.site.add('shared.jpg', await solid(1200, 800, 'jpeg'));
  const slow = `${origin.site.base}/slow/300/shared.jpg`;
  const before = await metricValue(origin.metricsUrl, 'origin_transforms_total');
  const joinsBefore = await metricValue(origin.metricsUrl, 'origin_single_flight_joins_total', { kind: 'transform' });
  const responses = await Promise.all(
    Array.from({ length: 20 }, () => fetch(origin.proxied(slow, { width: 300, height: 200 }))),
  );
  const bodies = await Promise.all(responses.map(async (response) => Buffer.from(await response.arrayBuffer())));
  assert.deepEqual(
    responses.map((response) => response.status),
    Array(20).fill(200),
  );
  assert.ok(bodies.every((body) => body.equals(bodies[0])));
  assert.equal(origin.site.hits('/slow/300/shared.jpg'), 1, 'one fetch');
  assert.equal((await metricValue(origin.metricsUrl, 'origin_transforms_total')) - before, 1, 'one transform');
  assert.equal(
    (await metricValue(origin.metricsUrl, 'origin_single_flight_joins_total', { kind: 'transform' })) - joinsBefore,
    19,
  );
  assert.ok(url);
});

test('past the queue bound the answer is an immediate 503 with Retry-After, and the service recovers', async () => {
  const started = performance.now();
  const responses = await Promise.all(
    Array.from({ length: 12 }, (_, i) =>
      fetch(origin.proxied(big, { width: 900 + i, format: 'webp' })).then(async (response) => ({
        response,
        ms: performance.now() - started,
        body: await response.arrayBuffer(),
      })),
    ),
  );
  const rejected = responses.filter(({ response }) => response.status === 503);
  const served = responses.filter(({ response }) => response.status === 200);
  assert.equal(served.length + rejected.length, 12);
  assert.ok(rejected.length >= 5, `${rejected.length} rejected`);
  assert.ok(served.length >= 5, `${served.length} served (1 running + 4 queued)`);
  for (const { response, body } of rejected) {
    assert.equal(response.headers.get('retry-after'), '2');
    assert.equal(response.headers.get('cache-control'), 'no-store');
    assert.equal(JSON.parse(Buffer.from(body).toString()).error.name, 'overloaded');
  }
  const slowestRejection = Math.max(...rejected.map(({ ms }) => ms));
  const fastestServed = Math.min(...served.map(({ ms }) => ms));
  assert.ok(slowestRejection < fastestServed, 'rejections come before any queued work finishes');
  assert.ok(
    (await metricValue(origin.metricsUrl, 'origin_rejections_total', { reason: 'overloaded' })) >= rejected.length,
  );
  const after = await fetch(origin.proxied(big, { width: 77 }));
  assert.equal(after.status, 200);
});

test('with the queue full, a duplicate of a queued variant is refused too: joiners hold a queue place', async () => {
  // varnish sends duplicates while an earlier 503 for the URL is hit-for-miss: they must not pile up here
  const asked = Array.from({ length: 5 }, (_, i) => origin.proxied(big, { width: 2000 + i, format: 'png' }));
  const pending = asked.map((url) =>
    fetch(url).then(async (response) => ({ status: response.status, body: await response.arrayBuffer() })),
  );
  await waitUntil(async () => (await metricValue(origin.metricsUrl, 'origin_queue_depth')) === 4);
  const duplicate = await fetch(asked[4]);
  assert.equal(duplicate.status, 503);
  assert.equal(/** @type {any} */ (await duplicate.json()).error.info.reason, 'transform_queue_full');
  assert.deepEqual(
    (await Promise.all(pending)).map((answer) => answer.status),
    [200, 200, 200, 200, 200],
  );
  assert.equal((await fetch(asked[4])).status, 200, 'made once, then served from the variant cache');
});

test('an upload is checked and stored at once while the transform queue is full: its decode never waits behind transforms', async () => {
  const asked = Array.from({ length: 5 }, (_, i) => origin.proxied(big, { width: 2100 + i, format: 'png' }));
  const pending = asked.map((url) =>
    fetch(url).then(async (response) => ({ status: response.status, at: performance.now() })),
  );
  await waitUntil(async () => (await metricValue(origin.metricsUrl, 'origin_queue_depth')) === 4);
  const image = await solid(640, 480, 'png', '#123456');
  const response = await tokenUpload(origin.base, image, 'busy.png');
  const at = performance.now();
  assert.equal(response.status, 200);
  assert.equal(await metricValue(origin.metricsUrl, 'origin_queue_depth'), 4, 'not queued with the transforms');
  const stored = await fetch(/** @type {any} */ (await response.json()).url);
  assert.deepEqual(Buffer.from(await stored.arrayBuffer()), image);
  const transforms = await Promise.all(pending);
  assert.deepEqual(
    transforms.map((answer) => answer.status),
    [200, 200, 200, 200, 200],
  );
  assert.ok(transforms.filter((answer) => answer.at > at).length >= 4, 'stored before the queued transforms were done');
});

test('under a deep queue, avif is encoded as WebP with a short Cache-Control', async () => {
  const responses = await Promise.all(
    Array.from({ length: 4 }, (_, i) => fetch(origin.proxied(big, { width: 700 + i, format: 'avif' }))),
  );
  const kinds = await Promise.all(
    responses.map(async (response) => ({
      status: response.status,
      cacheControl: response.headers.get('cache-control'),
      info: await decode(Buffer.from(await response.arrayBuffer())),
    })),
  );
  assert.ok(kinds.every((kind) => kind.status === 200));
  const degraded = kinds.filter((kind) => kind.info.format === 'webp');
  assert.ok(degraded.length >= 1, 'some were degraded');
  assert.ok(
    kinds.some((kind) => kind.info.format === 'heif'),
    'the first was not',
  );
  for (const kind of degraded) assert.equal(kind.cacheControl, 'public, max-age=60, s-maxage=300');
  assert.ok((await metricValue(origin.metricsUrl, 'origin_degraded_total')) >= degraded.length);
});

test('format=auto: the AVIF behind a first answer is made only on idle capacity; under a full queue it is dropped, never run', async () => {
  const background = (/** @type {string} */ result) =>
    metricValue(origin.metricsUrl, 'origin_background_encodes_total', { result });
  const idle = async () =>
    (await metricValue(origin.metricsUrl, 'origin_queue_depth')) === 0 &&
    (await metricValue(origin.metricsUrl, 'origin_transforms_in_flight')) === 0 &&
    (await metricValue(origin.metricsUrl, 'origin_background_encodes')) === 0;
  await waitFor(idle, 60_000, 'idle, no background encode left');
  const [doneBefore, droppedBefore] = [await background('done'), await background('dropped')];
  const avifsBefore = await metricValue(origin.metricsUrl, 'origin_transforms_total', { format: 'avif' });
  // a flood that fills the one slot and the four queue places, and a format=auto request among it
  const flood = Array.from({ length: 10 }, (_, i) =>
    fetch(origin.proxied(big, { width: 1000 + i, format: 'jpeg' })).then((r) => r.arrayBuffer()),
  );
  await waitFor(async () => (await metricValue(origin.metricsUrl, 'origin_queue_depth')) >= 3, 30_000, 'a deep queue');
  const auto = await fetch(origin.proxied(big, { width: 640, format: 'auto' }), {
    headers: { accept: 'image/avif,image/webp' },
  });
  await Promise.all(flood);
  // while the queue was busy no AVIF ran: what was asked waited or was dropped
  assert.equal(
    (await metricValue(origin.metricsUrl, 'origin_transforms_total', { format: 'avif' })) - avifsBefore,
    0,
    'no AVIF made under load',
  );
  if (auto.status === 200) assert.equal((await decode(Buffer.from(await auto.arrayBuffer()))).format, 'webp');
  // once idle, a request that gets the fallback again asks for the AVIF, which is then made
  await waitFor(idle, 60_000, 'idle again');
  const again = await fetch(origin.proxied(big, { width: 640, format: 'auto' }), {
    headers: { accept: 'image/avif,image/webp' },
  });
  assert.equal(again.status, 200);
  await waitFor(async () => (await background('done')) > doneBefore, 60_000, 'the AVIF made');
  assert.equal((await background('done')) - doneBefore, 1);
  assert.equal((await metricValue(origin.metricsUrl, 'origin_transforms_total', { format: 'avif' })) - avifsBefore, 1);
  const avif = await fetch(origin.proxied(big, { width: 640, format: 'auto' }), {
    headers: { accept: 'image/avif,image/webp' },
  });
  assert.equal((await decode(Buffer.from(await avif.arrayBuffer()))).format, 'heif');
  process.stdout.write(
    `# background encodes: done +${(await background('done')) - doneBefore}, dropped +${(await background('dropped')) - droppedBefore}\n`,
  );
});

test('small requests (avatars, thumbnails) go ahead of large ones in the queue', async () => {
  /** @type {string[]} */
  const finished = [];
  // PNG encodes of 1500 px are slow enough that the large ones are still queued when the small one comes
  const request = (/** @type {string} */ name, /** @type {number} */ width) =>
    fetch(origin.proxied(big, { width, format: 'png' })).then((response) => {
      assert.equal(response.status, 200);
      finished.push(name);
    });
  const first = request('large-0', 1500);
  await new Promise((resolve) => setTimeout(resolve, 30));
  const large = [request('large-1', 1501), request('large-2', 1502)];
  await new Promise((resolve) => setTimeout(resolve, 30));
  const small = request('small', 128);
  await Promise.all([first, ...large, small]);
  assert.ok(finished.indexOf('small') < finished.indexOf('large-1'), finished.join(' '));
});
