// What the warmer reads out of a post (#41): the images a frontend will show, in the order it asks for
// them, each once; the edge URLs it asks for each, as condenser and ecency build them; and the warmer taking a
// queued post off its stream (real Redis, a stand-in edge).
import assert from 'node:assert/strict';
import http from 'node:http';
import { test } from 'node:test';
import { base58Url, createRegistry, loadConfig } from '@stack/lib';
import { settings } from '../src/config.js';
import { createPurgeMetrics } from '../src/metrics.js';
import { imagesOf, warmPost, warmUrl } from '../src/warm/posts.js';
import { createWarmer } from '../src/warm/warmer.js';
import { waitFor } from '../../test/support/ports.js';
import { startRedis } from '../../test/support/processes.js';

test("json_metadata.image first, then the body's markdown, <img> and bare image links, each once", () => {
  const body = [
    'Intro ![alt](https://img.example/b.jpg "title") and text',
    '<p><img class="x" src="https://img.example/c.png" /></p>',
    'A bare link: https://img.example/d.webp?size=2 and a page https://example.com/page.html',
    'Again ![](https://img.example/a.jpg) and [a link](https://example.com/not-an-image)',
    'javascript: ![x](javascript:alert(1)) and ftp ![y](ftp://host/e.jpg)',
  ].join('\n');
  const urls = imagesOf({
    body,
    json_metadata: JSON.stringify({ image: ['https://img.example/a.jpg', 42, 'not a url'], tags: ['x'] }),
  });
  assert.deepEqual(urls, [
    'https://img.example/a.jpg',
    'https://img.example/b.jpg',
    'https://img.example/c.png',
    'https://img.example/d.webp?size=2',
  ]);
});

test("metadata that is not JSON, an empty body, an edit's patch: no crash, the URLs it names", () => {
  assert.deepEqual(imagesOf({ body: '', json_metadata: '{not json' }), []);
  assert.deepEqual(imagesOf({}), []);
  const patch = '@@ -1,3 +1,40 @@\n-old\n+![new](https://img.example/new.jpg)\n';
  assert.deepEqual(imagesOf({ body: patch, json_metadata: '' }), ['https://img.example/new.jpg']);
});

test("the warm URLs are the frontends': the legacy path with the URL as it is, /p/ with it encoded", () => {
  const url = 'https://img.example/a b.jpg';
  assert.equal(
    warmUrl('http://127.0.0.1:8080', '/768x0/{url}', 'https://img.example/a.jpg'),
    'http://127.0.0.1:8080/768x0/https://img.example/a.jpg',
  );
  assert.equal(
    warmUrl('http://e', '/p/{base58}?format=match&mode=fit', url),
    `http://e/p/${base58Url.encode(url)}?format=match&mode=fit`,
  );
});

/**
 * A warmer (not started) on `redis`, asking the stand-in `edge`; all three stopped after the test.
 * @param {import('node:test').TestContext} t @param {Awaited<ReturnType<typeof startRedis>>} redis
 * @param {http.Server} edge @param {import('@stack/lib/src/config-types.js').PurgeServiceConfig} config
 */
function warmerOf(t, redis, edge, config) {
  const registry = createRegistry('purge-service');
  const metrics = createPurgeMetrics(registry, {
    redis: redis.client,
    stream: config.PURGE_STREAM,
    group: config.PURGE_GROUP,
    deadStream: config.PURGE_DEAD_STREAM,
  });
  const logger = /** @type {any} */ ({ warn() {}, debug() {}, error() {}, info() {} });
  const warmer = createWarmer({ redis: redis.client, config, logger, metrics });
  t.after(async () => {
    await warmer.stop();
    edge.close();
    await redis.stop();
  });
  return { warmer, registry };
}

test('the warmer takes a queued post off its stream, asks the edge for every path and Accept, and acknowledges it', async (t) => {
  const redis = await startRedis();
  /** @type {string[]} */
  const asked = [];
  let busy = 1; // the first answer is a 429 the warmer waits out
  const edge = http.createServer((req, res) => {
    if (busy-- > 0) return res.writeHead(429, { 'retry-after': '0' }).end();
    asked.push(`${req.url} ${req.headers.accept} ${req.headers['x-warm']}`);
    res.writeHead(200, { 'content-type': 'image/webp' }).end('pixels');
  });
  await new Promise((resolve) => edge.listen(0, '127.0.0.1', () => resolve(undefined)));
  const address = /** @type {import('node:net').AddressInfo} */ (edge.address());
  const config = /** @type {import('@stack/lib/src/config-types.js').PurgeServiceConfig} */ (
    loadConfig(settings, { WARM_EDGE_URL: `http://127.0.0.1:${address.port}`, WARM_CONCURRENCY: '1' })
  );
  const { warmer, registry } = warmerOf(t, redis, edge, config);
  warmer.start();
  const image = 'https://img.example/first.jpg';
  await warmPost(redis.client, config, { author: 'alice', permlink: 'p', body: `![](${image})` });
  await waitFor(
    async () => (await redis.client.xpending(config.WARM_STREAM, config.WARM_GROUP))[0] === 0 && asked.length > 0,
    10_000,
    'the post acknowledged',
  );
  const paths = [...config.WARM_THUMBNAIL_PATHS, ...config.WARM_PATHS].map((path) => warmUrl('', path, image));
  const expected = paths.flatMap((path) => config.WARM_ACCEPTS.map((accept) => `${path} ${accept} 1`));
  assert.deepEqual(asked, expected);
  const warmed = (await registry.getSingleMetric('purge_warm_images_total')?.get())?.values.find(
    (value) => value.labels.result === 'warmed',
  );
  assert.equal(warmed?.value, 1);
});

test("the warmer asks for WARM_CONCURRENCY images at once across posts of one image, the newest post's first", async (t) => {
  const redis = await startRedis();
  /** @type {string[]} */
  const asked = [];
  let inFlight = 0;
  let most = 0;
  // each answer takes 300 ms: long enough for every hand to be asking at once
  const edge = http.createServer((req, res) => {
    asked.push(String(req.url));
    most = Math.max(most, ++inFlight);
    setTimeout(() => {
      inFlight -= 1;
      res.writeHead(200, { 'content-type': 'image/webp' }).end('pixels');
    }, 300);
  });
  await new Promise((resolve) => edge.listen(0, '127.0.0.1', () => resolve(undefined)));
  const address = /** @type {import('node:net').AddressInfo} */ (edge.address());
  const config = /** @type {import('@stack/lib/src/config-types.js').PurgeServiceConfig} */ (
    loadConfig(settings, {
      WARM_EDGE_URL: `http://127.0.0.1:${address.port}`,
      WARM_CONCURRENCY: '3',
      WARM_ACCEPTS: 'image/webp',
      WARM_PATHS: '/768x0/{url}',
      WARM_THUMBNAIL_PATHS: '',
    })
  );
  const { warmer } = warmerOf(t, redis, edge, config);
  // five posts of one image each, queued before the warmer starts: read together, the newest taken first
  const images = Array.from({ length: 5 }, (_, i) => `https://img.example/post-${i}.jpg`);
  for (const [i, image] of images.entries())
    await warmPost(redis.client, config, { author: `writer${i}`, permlink: 'p', body: `![](${image})` });
  warmer.start();
  await waitFor(
    async () => asked.length === 5 && (await redis.client.xpending(config.WARM_STREAM, config.WARM_GROUP))[0] === 0,
    10_000,
    'every post warmed and acknowledged',
  );
  assert.equal(most, 3, 'images asked for at once');
  assert.equal(asked[0], warmUrl('', '/768x0/{url}', images[4]), 'the newest post first');
  assert.deepEqual([...asked].sort(), images.map((image) => warmUrl('', '/768x0/{url}', image)).sort());
});
