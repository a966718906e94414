// Ready before the first reader (#41), on a whole stack following the local Hive node stand-in: a block
// with a new post naming three images on a local image site is warmed without any reader (the originals
// fetched, the frontends' first variants made and in varnish), so the first reader's requests are cache
// hits that never reach the origin; with the image site gone they are still served. A post with 200 images,
// a burst of posts and a blocked image: the caps hold and the blocked one is never fetched.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { base58Url } from '@stack/lib';
import { processTree } from '../lib/src/process-tree.js';
import { startHiveNode } from './support/hive-node.js';
import { startImageServer } from './support/image-server.js';
import { decode, photo, solid } from './support/images.js';
import { metricValue } from './support/metrics.js';
import { waitFor } from './support/ports.js';
import { startStack } from './support/stack.js';

const CHROME = 'image/avif,image/webp,image/apng,image/svg+xml,image/*,*/*;q=0.8';

/** @type {Awaited<ReturnType<typeof startHiveNode>>} */
let hive;
/** @type {Awaited<ReturnType<typeof startImageServer>>} */
let site;
/** @type {Awaited<ReturnType<typeof startStack>>} */
let stack;
/** @type {ReturnType<Awaited<ReturnType<typeof startHiveNode>>['chain']>} */
let chain;
/** Publishes a block holding these comment ops. @param {Array<Record<string, unknown>>} comments */
const publish = (comments) => chain.publish(comments);

before(async () => {
  hive = await startHiveNode();
  chain = hive.chain(100);
  site = await startImageServer();
  stack = await startStack({
    HIVE_API_URLS: hive.url,
    HIVE_FOLLOW: 'true',
    HIVE_FOLLOW_START_BLOCK: '101',
    HIVE_FOLLOW_POLL_MS: '200',
    WARM: 'true',
    // below readers (TRANSFORM_NICE 10) as 19 is, but enough above every other program's 0 that the warming
    // of this test goes on while the machine is busy with other work (19 gets ~1 % of a core beside two
    // busy programs: its three images would take minutes)
    WARM_NICE: '12',
    FETCH_ALLOW_PRIVATE_HOSTS: '127.0.0.1',
    WARM_MAX_IMAGES_PER_POST: '5',
    WARM_IMAGES_PER_MINUTE: '30',
    WARM_SKIP_AUTHORS: 'spammer',
    PURGE_ADMIN_TOKEN: 'admin-token',
  });
});

after(async () => {
  await stack?.stop();
  await Promise.all([hive?.close(), site?.close()]);
});

const purgeMetrics = () => `http://127.0.0.1:${stack.env.PURGE_SERVICE_METRICS_PORT}/metrics`;
const originMetrics = () => `http://127.0.0.1:${stack.env.ORIGIN_METRICS_PORT}/metrics`;
/** @param {string} result @param {string} [reason] */
const warmed = (result, reason) =>
  metricValue(purgeMetrics(), 'purge_warm_images_total', reason === undefined ? { result } : { result, reason });

/** A reader's request as condenser builds it (the legacy URL, its redirect followed), Chrome's Accept. @param {string} url */
async function read(url) {
  const redirect = await fetch(`${stack.base}/768x0/${url}`, { redirect: 'manual', headers: { accept: CHROME } });
  assert.equal(redirect.status, 301);
  const response = await fetch(new URL(redirect.headers.get('location') || '', stack.base), {
    headers: { accept: CHROME },
  });
  const body = Buffer.from(await response.arrayBuffer());
  return { redirect, response, body };
}

/** The niceness of each transform worker process of this stack's origin. */
async function transformWorkerNices() {
  const nices = [];
  for (const pid of processTree(await stack.servicePid('origin')).slice(1)) {
    try {
      if (!fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('transform-worker.js')) continue;
      // /proc/<pid>/stat: the fields after the command's closing parenthesis; the nice is the 17th
      nices.push(Number(fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ')[16]));
    } catch {
      // the process ended meanwhile
    }
  }
  return nices;
}

test("a new post's three images are warmed before anyone reads it: the first reader gets cache hits", async () => {
  const names = ['Path', 'Autumn', 'Kite'];
  names.forEach((name) => site.add(`${name}.jpg`, fs.readFileSync(photo(name, '1280x800'))));
  const [a, b, c] = names.map((name) => `${site.base}/img/${name}.jpg`);
  publish([
    {
      author: 'alice',
      permlink: 'first',
      json_metadata: JSON.stringify({ image: [a, c] }),
      body: `Hello\n\n![b](${b})\n\n<img src="${a}">`,
    },
  ]);
  await waitFor(async () => (await warmed('warmed')) === 3, 180_000, 'three images warmed');
  assert.equal(await warmed('failed'), 0);
  for (const name of names) assert.equal(site.hits(`/img/${name}.jpg`), 1, `${name}: fetched once`);

  const before = await metricValue(originMetrics(), 'origin_cache_requests_total', { level: 'variant' });
  for (const url of [a, b, c]) {
    const { redirect, response, body } = await read(url);
    assert.equal(redirect.headers.get('x-cache'), 'HIT', 'the redirect was warmed');
    assert.equal(response.status, 200);
    assert.equal(response.headers.get('x-cache'), 'HIT', `${url}: a hit for the first reader`);
    const info = await decode(body);
    assert.deepEqual([info.format, info.width], ['heif', 768], 'the AVIF, not a first-answer fallback');
    const ecency = await fetch(`${stack.base}/p/${base58Url.encode(url)}?format=match&mode=fit`, {
      headers: { accept: 'image/webp,*/*' },
    });
    assert.equal(ecency.headers.get('x-cache'), 'HIT', "ecency's URL in a WebP browser");
    await ecency.arrayBuffer();
  }
  // the feed's thumbnail of the post's first image (json_metadata.image[0])
  const thumb = await fetch(`${stack.base}/256x512/${a}`, { redirect: 'follow', headers: { accept: CHROME } });
  assert.equal(thumb.headers.get('x-cache'), 'HIT', 'the thumbnail was warmed');
  await thumb.arrayBuffer();
  assert.equal(
    await metricValue(originMetrics(), 'origin_cache_requests_total', { level: 'variant' }),
    before,
    "no reader's request reached the origin",
  );
  // the warm transforms ran in the origin's process of the warmer's priority (readers' run at TRANSFORM_NICE)
  const nices = await transformWorkerNices();
  assert.ok(nices.includes(12), `the origin's transform workers' niceness: ${nices}`);

  await site.close();
  const gone = await read(b);
  assert.equal(gone.response.status, 200, 'served with its host gone');
  const other = await fetch(`${stack.base}/p/${base58Url.encode(c)}?width=321`);
  assert.equal(other.status, 200, 'a new size from the kept original');
  assert.equal((await decode(Buffer.from(await other.arrayBuffer()))).width, 321);

  // the originals cache emptied (evicted, a disk swapped): the kept originals are the archive
  const cacheDir = path.join(stack.dir, 'data', 'origin', 'originals');
  for (const file of fs.readdirSync(cacheDir, { recursive: true })) {
    const full = path.join(cacheDir, String(file));
    if (fs.statSync(full).isFile()) fs.rmSync(full);
  }
  const archived = await fetch(`${stack.base}/p/${base58Url.encode(a)}?width=333`);
  assert.equal(archived.status, 200, 'made from the archive, its host gone and its cached copy too');
  assert.equal((await decode(Buffer.from(await archived.arrayBuffer()))).width, 333);
});

test('caps: images per post, all posts a minute; skipped authors; the newest post first; a blocked image is never fetched', async () => {
  site = await startImageServer();
  for (let i = 0; i < 200; i += 1) site.add(`many-${i}.png`, await solid(64 + i, 48, 'png'));
  for (let i = 0; i < 50; i += 1) site.add(`burst-${i}.png`, await solid(40, 30 + i, 'png'));
  site.add('blocked.png', await solid(50, 50, 'png'));
  const blocked = `${site.base}/img/blocked.png`;
  const block = await fetch(`http://127.0.0.1:${stack.env.PURGE_SERVICE_PORT}/admin/takedowns`, {
    method: 'POST',
    headers: { authorization: 'Bearer admin-token', 'content-type': 'application/json' },
    body: JSON.stringify({ entries: [{ kind: 'url', value: blocked }], reason: 'test', by: 'warm test' }),
  });
  assert.ok(block.ok, await block.text());
  const before = {
    warmed: await warmed('warmed'),
    cap: await warmed('skipped', 'post_cap'),
    rate: await warmed('skipped', 'rate'),
  };
  const started = Date.now();

  const many = Array.from({ length: 200 }, (_, i) => `${site.base}/img/many-${i}.png`);
  publish([
    { author: 'bob', permlink: 'many', json_metadata: JSON.stringify({ image: many }), body: '' },
    { author: 'spammer', permlink: 'ad', json_metadata: '{}', body: `![x](${site.base}/img/burst-0.png)` },
  ]);
  publish(
    Array.from({ length: 50 }, (_, i) => ({
      author: `writer${i}`,
      permlink: `p${i}`,
      json_metadata: '{}',
      body: `![x](${site.base}/img/burst-${i}.png)`,
    })),
  );
  // the newest post is warmed first: the blocked image is asked for before the rate is spent
  publish([{ author: 'carol', permlink: 'blocked', json_metadata: JSON.stringify({ image: [blocked] }), body: '' }]);
  await waitFor(
    async () => (await metricValue(purgeMetrics(), 'purge_warm_posts_total')) >= 54,
    180_000,
    'every post gone through',
  );
  const minutes = Math.floor((Date.now() - started) / 60_000) + 1;

  assert.equal((await warmed('skipped', 'post_cap')) - before.cap, 195, 'five images of the 200 at most');
  assert.equal(await warmed('skipped', 'author'), 1);
  assert.equal(await warmed('skipped', 'blocked'), 1);
  assert.equal(site.hits('/img/blocked.png'), 0, 'the blocked image was never fetched');
  const warmedNow = (await warmed('warmed')) - before.warmed;
  const rated = (await warmed('skipped', 'rate')) - before.rate;
  // 5 + 1 blocked + 50 asked for: at most 30 in any minute (the first post's 3 among them, if it was recent)
  assert.ok(warmedNow <= 30 * minutes, `${warmedNow} warmed in ${minutes} minute(s)`);
  assert.equal(warmedNow + rated + 1, 56, 'every image of the posts accounted for');
  if (minutes === 1) assert.ok(rated >= 56 - 30, `${rated} skipped by the rate`);
  const fetched = Array.from({ length: 50 }, (_, i) => site.hits(`/img/burst-${i}.png`)).reduce((sum, n) => sum + n, 0);
  assert.equal(fetched, warmedNow - 5, 'only the warmed burst images were fetched');
});
