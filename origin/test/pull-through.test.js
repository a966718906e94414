// Pull-through from the image hosts a stack takes over from (#36), on one origin with real Redis and local
// upstream hosts: a key only an upstream holds is served (original, /p/ of the upstream's URL) and stored;
// bytes that do not make the key are refused with a 502 and never stored, the next upstream is asked; a
// burst for one key is one upstream fetch; a key no upstream has is a 404 remembered a while; a blocked key
// is a 451 without asking anyone; a hanging upstream is a 503 in UPSTREAM_TIMEOUT_MS while stored images
// keep being served, and its breaker opens.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { Redis } from 'ioredis';
import sharp from 'sharp';
import { TAKEDOWN_KEYS, TAKEDOWN_CHANNEL, base58Url, entryField } from '@stack/lib';
import { startUpstreamHost } from '../../test/support/upstream-host.js';
import { metricValue } from '../../test/support/metrics.js';
import { waitFor } from '../../test/support/ports.js';
import { keyOf } from '../src/keys.js';
import { jsonError, startOrigin, tokenUpload } from './harness.js';

/** A small distinct JPEG: `seed` picks its colour. @param {number} seed */
const jpeg = (seed) =>
  sharp({
    create: {
      width: 320,
      height: 200,
      channels: 3,
      background: { r: seed % 256, g: (seed * 7) % 256, b: (seed * 13) % 256 },
    },
  })
    .jpeg()
    .toBuffer();

/** Where the fs store keeps `key` (exists only once stored). @param {string} dataDir @param {string} key */
const storedFiles = (dataDir, key) =>
  fs
    .readdirSync(path.join(dataDir, 'uploads'), { recursive: true })
    .map(String)
    .filter((file) => file.endsWith(key));

describe('pull-through from upstream image hosts', () => {
  /** @type {Awaited<ReturnType<typeof startUpstreamHost>>} */
  let liar;
  /** @type {Awaited<ReturnType<typeof startUpstreamHost>>} */
  let honest;
  /** @type {Awaited<ReturnType<typeof startOrigin>>} */
  let origin;

  before(async () => {
    liar = await startUpstreamHost('liar');
    honest = await startUpstreamHost('honest');
    liar.lie(await jpeg(999));
    origin = await startOrigin({
      UPSTREAM_IMAGE_HOSTS: `${liar.base},${honest.base}`,
      TAKEDOWN_POLL_MS: '100',
      FAILURE_TTL_TRANSIENT_S: '0',
    });
  });

  let stopped = false;
  after(async () => {
    if (!stopped) await origin?.stop();
    await Promise.all([liar?.close(), honest?.close()]);
  });

  test("a key only an upstream holds: the liar refused (counted), the honest host's bytes served and stored", async () => {
    const body = await jpeg(1);
    const key = keyOf(body);
    honest.hold(key, body);
    assert.deepEqual(storedFiles(origin.dataDir, key), []);
    const first = await fetch(`${origin.base}/${key}/photo.jpg`);
    assert.equal(first.status, 200);
    assert.equal(first.headers.get('x-pulled-from'), honest.base);
    assert.deepEqual(Buffer.from(await first.arrayBuffer()), body);
    assert.equal(liar.hits(key), 1, 'the liar was asked first');
    assert.equal(
      await metricValue(origin.metricsUrl, 'origin_pull_through_total', { upstream: liar.base, result: 'mismatch' }),
      1,
    );
    assert.equal(
      await metricValue(origin.metricsUrl, 'origin_pull_through_total', { upstream: honest.base, result: 'stored' }),
      1,
    );
    assert.equal(storedFiles(origin.dataDir, key).length, 1, 'stored in the fs store');
    const again = await fetch(`${origin.base}/${key}/photo.jpg`);
    assert.equal(again.status, 200);
    assert.equal(again.headers.get('x-pulled-from'), null, 'served from the store');
    await again.arrayBuffer();
    assert.equal(honest.hits(key), 1, 'not asked again');
  });

  test("the upstream's own /p/ and legacy URLs name the upload: resized from the pulled copy", async () => {
    const body = await jpeg(2);
    const key = keyOf(body);
    honest.hold(key, body);
    const upstreamUrl = `${honest.base}/${key}/photo.jpg`;
    const resized = await fetch(`${origin.base}/p/${base58Url.encode(upstreamUrl)}?width=100&format=png`);
    assert.equal(resized.status, 200, await resized.clone().text());
    assert.match(
      String(resized.headers.get('xkey')),
      new RegExp(`img:${key}`),
      'tagged as the upload, so its purges reach it',
    );
    const meta = await sharp(Buffer.from(await resized.arrayBuffer())).metadata();
    assert.deepEqual([meta.format, meta.width], ['png', 100]);
    const legacy = await fetch(`${origin.base}/100x0/${upstreamUrl}`);
    assert.equal(legacy.status, 200);
    assert.equal((await sharp(Buffer.from(await legacy.arrayBuffer())).metadata()).width, 100);
    assert.equal(honest.hits(key), 1, 'one pull for both');
    assert.equal(storedFiles(origin.dataDir, key).length, 1);
  });

  test('only wrong bytes upstream: a 502 JSON error, nothing stored', async () => {
    const key = keyOf(await jpeg(3));
    const response = await fetch(`${origin.base}/${key}/photo.jpg`);
    assert.equal(response.status, 502);
    assert.equal((await jsonError(response)).name, 'upstream_mismatch');
    assert.deepEqual(storedFiles(origin.dataDir, key), []);
    assert.equal(honest.hits(key), 1, 'the honest host was asked, and had nothing');
  });

  test('50 concurrent requests for one missing key: one fetch from each upstream', async () => {
    const body = await jpeg(4);
    const key = keyOf(body);
    honest.hold(key, body);
    const answers = await Promise.all(
      Array.from({ length: 50 }, () =>
        fetch(`${origin.base}/${key}/photo.jpg`).then(async (response) => ({
          status: response.status,
          bytes: Buffer.from(await response.arrayBuffer()),
        })),
      ),
    );
    assert.deepEqual(
      answers.map((answer) => answer.status),
      Array(50).fill(200),
    );
    assert.ok(answers.every((answer) => answer.bytes.equals(body)));
    assert.equal(honest.hits(key), 1);
    assert.equal(liar.hits(key), 1);
  });

  test('a key no upstream has: a 404, remembered (not asked again at once)', async () => {
    liar.lie(Buffer.alloc(0));
    const key = keyOf(await jpeg(5));
    const honestOnly = await startOrigin({ UPSTREAM_IMAGE_HOSTS: honest.base });
    try {
      const first = await fetch(`${honestOnly.base}/${key}/photo.jpg`);
      assert.equal(first.status, 404);
      assert.equal((await jsonError(first)).name, 'not_found');
      const second = await fetch(`${honestOnly.base}/${key}/photo.jpg`);
      assert.equal(second.status, 404);
      await second.arrayBuffer();
      assert.equal(honest.hits(key), 1);
    } finally {
      await honestOnly.stop();
    }
  });

  test('a blocked key: a 451, and no upstream was asked', async () => {
    const body = await jpeg(6);
    const key = keyOf(body);
    honest.hold(key, body);
    const redis = new Redis(origin.redis.url);
    try {
      await redis.hset(TAKEDOWN_KEYS.all, entryField({ kind: 'key', value: key }), '1');
      const version = await redis.incr(TAKEDOWN_KEYS.version);
      await redis.publish(TAKEDOWN_CHANNEL, 'changed');
      // the origin reports the list version it holds: asked before, it would have pulled the key
      await waitFor(
        async () =>
          Object.values(await redis.hgetall(TAKEDOWN_KEYS.seen)).some((seen) => seen.startsWith(`${version} `)),
        10_000,
        'the takedown in force',
      );
    } finally {
      redis.disconnect();
    }
    const original = await fetch(`${origin.base}/${key}/photo.jpg`);
    assert.equal(original.status, 451);
    await original.arrayBuffer();
    const proxied = await fetch(`${origin.base}/p/${base58Url.encode(`${honest.base}/${key}/x.jpg`)}?width=64`);
    assert.equal(proxied.status, 451);
    assert.equal(honest.hits(key) + liar.hits(key), 0);
    assert.deepEqual(storedFiles(origin.dataDir, key), []);
  });

  test('the log names the upstream that lied (read once the origin has stopped and flushed it)', async () => {
    await origin.stop();
    stopped = true;
    const lines = origin
      .output()
      .split('\n')
      .filter((line) => line.includes('do not make the key'));
    assert.ok(lines.length >= 1, origin.output().slice(-2000));
    assert.ok(lines.every((line) => line.includes(liar.base)));
  });
});

describe('a hanging upstream image host', () => {
  /** @type {Awaited<ReturnType<typeof startUpstreamHost>>} */
  let hang;
  /** @type {Awaited<ReturnType<typeof startOrigin>>} */
  let origin;

  before(async () => {
    hang = await startUpstreamHost('hang');
    origin = await startOrigin({
      UPSTREAM_IMAGE_HOSTS: hang.base,
      UPSTREAM_TIMEOUT_MS: '1500',
      UPSTREAM_BREAKER_FAILURES: '2',
      UPSTREAM_BREAKER_COOLDOWN_MS: '60000',
      FAILURE_TTL_TRANSIENT_S: '0',
    });
  });

  after(async () => {
    await origin?.stop();
    await hang?.close();
  });

  test('a 503 within UPSTREAM_TIMEOUT_MS, stored images served meanwhile; then its breaker answers at once', async () => {
    const stored = await tokenUpload(origin.base, await jpeg(7));
    assert.equal(stored.status, 200);
    const storedUrl = /** @type {any} */ (await stored.json()).url.replace(/^https?:\/\/[^/]+/, origin.base);
    const missing = keyOf(await jpeg(8));
    const started = performance.now();
    const pending = fetch(`${origin.base}/${missing}/photo.jpg`).then(async (response) => ({
      status: response.status,
      error: await jsonError(response),
      ms: performance.now() - started,
    }));
    // while the pull hangs, the stored image answers as fast as ever (a generous bound for a busy machine)
    let slowest = 0;
    for (let i = 0; i < 20; i += 1) {
      const at = performance.now();
      const response = await fetch(storedUrl);
      assert.equal(response.status, 200);
      await response.arrayBuffer();
      slowest = Math.max(slowest, performance.now() - at);
    }
    assert.ok(slowest < 500, `stored image answered in ${slowest.toFixed(0)} ms while the upstream hung`);
    const answer = await pending;
    assert.equal(answer.status, 503);
    assert.equal(answer.error.name, 'upstream_unavailable');
    assert.ok(answer.ms < 1500 + 2500, `503 after ${answer.ms.toFixed(0)} ms`);
    const second = keyOf(await jpeg(9));
    assert.equal((await fetch(`${origin.base}/${second}/photo.jpg`)).status, 503);
    assert.equal(hang.hits(), 2, 'two hanging requests opened the breaker');
    const at = performance.now();
    const third = await fetch(`${origin.base}/${keyOf(await jpeg(10))}/photo.jpg`);
    assert.equal(third.status, 503);
    assert.ok(performance.now() - at < 1000, 'the open breaker answers without waiting');
    assert.equal(hang.hits(), 2, 'not asked while its breaker is open');
    assert.equal(await metricValue(origin.metricsUrl, 'origin_pull_through_total', { result: 'open' }), 1);
  });
});
