// Switching over from an existing image host (#36), two whole stacks on loopback: the upstream (127.0.0.2,
// its own STACK_DIR and ports) holds uploads the first stack does not; through the first stack's edge, the
// original, a /p/ variant of the upstream's URL, a legacy /WxH/ URL of its own and an avatar whose image lives
// only upstream all answer right; the first stack's store then holds them, and with the upstream stopped
// they are still served, new sizes included.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { base58Url } from '@stack/lib';
import { decode, photo } from './support/images.js';
import { metricValue } from './support/metrics.js';
import { freePort, waitFor } from './support/ports.js';
import { startStack } from './support/stack.js';

const UPSTREAM_ADDRESS = '127.0.0.2';

/** @type {Awaited<ReturnType<typeof startStack>>} */
let upstream;
/** @type {Awaited<ReturnType<typeof startStack>>} */
let stack;
let upstreamBase = '';
/** @type {Record<'original' | 'variant' | 'avatar' | 'listed', { key: string, url: string, bytes: Buffer }>} */
const uploads = /** @type {any} */ ({});

before(async () => {
  const port = await freePort();
  upstreamBase = `http://${UPSTREAM_ADDRESS}:${port}`;
  // UPLOAD_METADATA=none: the upstream keeps uploads as sent, as images.hive.blog does, so its bytes make their
  // keys (a host that scrubbed them serves bytes no key can vouch for: those are refused as mismatched)
  upstream = await startStack({
    LISTEN_ADDRESS: UPSTREAM_ADDRESS,
    NGINX_BIND: UPSTREAM_ADDRESS,
    NGINX_PORT: String(port),
    PUBLIC_URL: upstreamBase,
    UPLOAD_TOKENS: 'upstream-token',
    UPLOAD_METADATA: 'none',
  });
  for (const [name, wallpaper] of /** @type {const} */ ([
    ['original', 'Path'],
    ['variant', 'Autumn'],
    ['avatar', 'Kite'],
    ['listed', 'BytheWater'],
  ])) {
    const form = new FormData();
    form.append('image_file', new Blob([new Uint8Array(fs.readFileSync(photo(wallpaper, '1280x800')))]), `${name}.jpg`);
    const response = await fetch(`${upstreamBase}/upload`, {
      method: 'POST',
      headers: { authorization: 'Bearer upstream-token' },
      body: form,
    });
    assert.equal(response.status, 200, await response.clone().text());
    const { url } = /** @type {{ url: string }} */ (await response.json());
    const bytes = Buffer.from(await (await fetch(url)).arrayBuffer());
    uploads[name] = { key: new URL(url).pathname.split('/')[1], url, bytes };
  }
  stack = await startStack({
    UPSTREAM_IMAGE_HOSTS: upstreamBase,
    FETCH_ALLOW_PRIVATE_HOSTS: UPSTREAM_ADDRESS,
    AVATAR_ADMIN_TOKEN: 'admin-token',
  });
});

after(async () => {
  await stack?.stop();
  await upstream?.stop();
});

/** The files of the first stack's fs store named `key`. @param {string} key */
const storedFiles = (key) =>
  fs
    .readdirSync(path.join(stack.dir, 'data', 'origin', 'uploads'), { recursive: true })
    .map(String)
    .filter((file) => file.endsWith(key));

test("the upstream's uploads answer through the first stack's edge, and land in its store", async () => {
  const { original, variant, avatar } = uploads;
  for (const { key } of [original, variant, avatar]) assert.deepEqual(storedFiles(key), [], 'not stored before');
  const hostFiles = fs
    .readdirSync(path.join(upstream.dir, 'data', 'origin', 'uploads'), { recursive: true })
    .map(String);
  for (const { key } of [original, variant, avatar])
    assert.ok(
      hostFiles.some((file) => file.endsWith(key)),
      'the upstream holds it',
    );

  const served = await fetch(`${stack.base}/${original.key}/photo.jpg`);
  assert.equal(served.status, 200);
  assert.deepEqual(Buffer.from(await served.arrayBuffer()), original.bytes, "the upstream's bytes, unchanged");

  const resized = await fetch(`${stack.base}/p/${base58Url.encode(variant.url)}?width=300&format=webp`);
  assert.equal(resized.status, 200);
  const small = await decode(Buffer.from(await resized.arrayBuffer()));
  assert.deepEqual([small.format, small.width], ['webp', 300]);
  const legacy = await fetch(`${stack.base}/640x0/${stack.base}/${variant.key}/photo.jpg`);
  assert.equal(legacy.status, 200);
  assert.equal((await decode(Buffer.from(await legacy.arrayBuffer()))).width, 640);

  const put = await stack.direct('resolver', `/admin/accounts/alice`, {
    method: 'PUT',
    headers: { authorization: 'Bearer admin-token', 'content-type': 'application/json' },
    body: JSON.stringify({ avatar: avatar.url }),
  });
  assert.equal(put.status, 200);
  const redirect = await fetch(`${stack.base}/u/alice/avatar/small`, { redirect: 'manual' });
  assert.equal(redirect.status, 302);
  const face = await fetch(new URL(redirect.headers.get('location') || '', stack.base));
  assert.equal(face.status, 200);
  const faceInfo = await decode(Buffer.from(await face.arrayBuffer()));
  assert.deepEqual([faceInfo.width, faceInfo.height], [64, 64]);

  for (const { key } of [original, variant, avatar]) assert.equal(storedFiles(key).length, 1, `${key} stored`);
  const metrics = `http://127.0.0.1:${stack.env.ORIGIN_METRICS_PORT}/metrics`;
  assert.equal(await metricValue(metrics, 'origin_pull_through_total', { result: 'stored' }), 3);
});

test("./infra/stack backfill: a listed upload is pulled into the store through the origin's own socket", async () => {
  const { listed } = uploads;
  assert.deepEqual(storedFiles(listed.key), [], 'not stored before');
  const file = path.join(stack.dir, 'keys.txt');
  fs.writeFileSync(file, `${listed.url}\n`);
  const { stdout, stderr } = await stack.stack(['backfill', file]);
  assert.match(stderr, /through \/.*\/run\/origin\/origin\.sock/, 'the origin asked on its socket');
  assert.equal(JSON.parse(stdout.trim().split('\n').pop() || '{}').stored, 1);
  assert.equal(storedFiles(listed.key).length, 1);
});

test('with the upstream stopped, the pulled uploads are still served, new sizes too', async () => {
  await upstream.stop();
  await waitFor(
    async () =>
      !(await fetch(`${upstreamBase}/healthz`).then(
        () => true,
        () => false,
      )),
    10_000,
    'the upstream down',
  );
  const { original, variant } = uploads;
  const direct = await stack.direct('origin', `/${original.key}/photo.jpg`);
  assert.equal(direct.status, 200, 'the origin answers from its own store');
  assert.equal(direct.headers.get('x-pulled-from'), null);
  assert.deepEqual(Buffer.from(await direct.arrayBuffer()), original.bytes);
  const fresh = await fetch(`${stack.base}/p/${base58Url.encode(variant.url)}?width=123`);
  assert.equal(fresh.status, 200, 'a size never asked before, made from the stored copy');
  assert.equal((await decode(Buffer.from(await fresh.arrayBuffer()))).width, 123);
});
