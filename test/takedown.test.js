// Takedowns through the real stack: an image served and cached in every form (variants, a legacy URL, an
// avatar redirect to it) is a 451 through the edge within 2 s of a block, the CDN is asked to purge every URL
// it was served under, nothing is made again; lists from a watched file and a polled URL; accounts; a purge
// service killed right after a block; bad input to the admin API and the CLI.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { promisify } from 'node:util';
import { secp256k1 } from '@noble/curves/secp256k1.js';
import { base58Url } from '@stack/lib';
import { challengeHash } from '../origin/src/keys.js';
import { startCloudflare } from './support/cloudflare.js';
import { hiveSignature, keyAuthority } from './support/hive-keys.js';
import { startHiveNode } from './support/hive-node.js';
import { startImageServer } from './support/image-server.js';
import { decode, photo, solid } from './support/images.js';
import { metricValue } from './support/metrics.js';
import { waitFor } from './support/ports.js';
import { root } from './support/processes.js';
import { startStack } from './support/stack.js';

const run = promisify(execFile);
const ADMIN = 'takedown-admin-token';
/** @type {Awaited<ReturnType<typeof startStack>>} */
let stack;
/** @type {Awaited<ReturnType<typeof startImageServer>>} */
let site;
/** @type {Awaited<ReturnType<typeof startHiveNode>>} */
let hive;
/** @type {Awaited<ReturnType<typeof startCloudflare>>} */
let cloudflare;
/** @type {http.Server} */
let listServer;
let remoteList = '{}';
let listFile = '';
const posting = secp256k1.keygen();

before(async () => {
  site = await startImageServer();
  hive = await startHiveNode();
  cloudflare = await startCloudflare();
  hive.setAccount({
    name: 'bob',
    posting: keyAuthority(posting.publicKey),
    active: keyAuthority(posting.publicKey),
    json_metadata: '',
    posting_json_metadata: '',
  });
  listServer = http.createServer((_req, res) =>
    res.writeHead(200, { 'content-type': 'application/json' }).end(remoteList),
  );
  await new Promise((resolve) => listServer.listen(0, '127.0.0.1', () => resolve(undefined)));
  // the purge service reads it as its own user (image-cdn-purge): the directory must let it in
  listFile = path.join(fs.mkdtempSync('/tmp/takedown-list-'), 'blocked.json');
  fs.chmodSync(path.dirname(listFile), 0o755);
  fs.writeFileSync(listFile, '{}');
  stack = await startStack({
    FETCH_ALLOW_PRIVATE_HOSTS: '127.0.0.1',
    HIVE_API_URLS: hive.url,
    PURGE_ADMIN_TOKEN: ADMIN,
    AVATAR_ADMIN_TOKEN: ADMIN,
    CLOUDFLARE_API_BASE: cloudflare.base,
    CLOUDFLARE_ZONE_ID: 'zone-1',
    CLOUDFLARE_API_TOKEN: 'cf-token',
    CLOUDFLARE_CALLS_PER_SECOND: '1000',
    TAKEDOWN_FILES: listFile,
    TAKEDOWN_FILE_POLL_MS: '500',
    TAKEDOWN_LIST_URLS: `http://127.0.0.1:${/** @type {import('node:net').AddressInfo} */ (listServer.address()).port}/blocked.json`,
    TAKEDOWN_LIST_POLL_S: '1',
  });
});
after(async () => {
  await stack?.stop();
  await site?.close();
  await hive?.close();
  await cloudflare?.close();
  listServer?.close();
  if (listFile) fs.rmSync(path.dirname(listFile), { recursive: true, force: true });
});

/** The takedown admin API. @param {string} method @param {string} route @param {unknown} [body] */
const admin = (method, route, body) =>
  fetch(`http://127.0.0.1:${stack.env.PURGE_SERVICE_PORT}/admin/takedowns${route}`, {
    method,
    headers: { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
  });
/** @param {string} account @param {string} avatar */
const setAvatar = async (account, avatar) => {
  const response = await stack.direct('resolver', `/admin/accounts/${account}`, {
    method: 'PUT',
    headers: { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json' },
    body: JSON.stringify({ avatar }),
  });
  assert.equal(response.status, 200);
};
const edge = (/** @type {string} */ route) => fetch(`${stack.base}${route}`, { redirect: 'manual' });
const transforms = () =>
  metricValue(`http://127.0.0.1:${stack.env.ORIGIN_METRICS_PORT}/metrics`, 'origin_transforms_total');
/** @param {Response} response */
const errorName = async (response) => /** @type {any} */ (await response.json()).error.name;
/** Every route answers 451 through the edge. @param {string[]} routes */
const allTakenDown = async (routes) =>
  (await Promise.all(routes.map(async (route) => (await edge(route)).status))).every((status) => status === 451);

test('a block takes an image down everywhere within 2 s: variants, legacy URL, avatar redirect, CDN; an unblock brings it back', async () => {
  const url = site.add('report.jpg', fs.readFileSync(photo('Path', '1920x1080')));
  const p = `/p/${base58Url.encode(url)}`;
  const routes = [
    `${p}?width=100&height=100`,
    `${p}?width=200&format=webp`,
    `${p}?width=300&height=300`,
    `/120x0/${url}`,
  ];
  await setAvatar('carol', url);
  for (const route of routes) {
    assert.equal((await edge(route)).status, route.startsWith('/120x0') ? 301 : 200, route);
    assert.equal((await edge(route)).headers.get('x-cache'), 'HIT', `${route} cached`);
  }
  const avatar = await edge('/u/carol/avatar');
  assert.match(avatar.headers.get('location') || '', /^\/p\//, "carol's avatar is the image");
  const made = await transforms();

  const started = Date.now();
  // the URL as a report names it: with a query of its own, which does not count
  const block = await admin('POST', '', {
    kind: 'url',
    value: `${url}?utm_source=report`,
    reason: 'DMCA notice',
    reference: 'case-17',
    by: 'legal@example',
  });
  assert.equal(block.status, 202);
  assert.deepEqual(
    /** @type {any} */ (await block.json()).changes.map((/** @type {any} */ c) => c.action),
    ['block'],
  );
  await waitFor(() => allTakenDown(routes), 2000, 'every URL of the image answers 451 through the edge');
  const taken = Date.now() - started;
  const answer = await edge(routes[0]);
  assert.equal(answer.status, 451);
  assert.equal(await errorName(answer), 'unavailable_for_legal_reasons');
  assert.equal(answer.headers.get('cache-control'), 'public, max-age=60');
  await waitFor(
    async () => (await edge('/u/carol/avatar')).headers.get('location') === '/u/-/default.svg',
    2000,
    "carol's avatar redirect goes to the default",
  );
  // the CDN was asked for every URL the image was served under, in the client's own spelling too
  const base = stack.env.PUBLIC_URL || `http://127.0.0.1:${stack.env.NGINX_PORT}`;
  await waitFor(
    async () => routes.every((route) => cloudflare.purged().includes(base + route)),
    5000,
    'the CDN purge of every variant URL',
  );
  assert.ok(cloudflare.purged().includes(`${base}/u/carol/avatar`), 'and of the avatar redirect that named it');
  assert.equal(await transforms(), made, 'nothing was transformed again');
  const audit = /** @type {any} */ (await (await admin('GET', '/audit')).json()).audit;
  assert.deepEqual(
    { ...audit[0], id: undefined, at: undefined },
    {
      id: undefined,
      at: undefined,
      action: 'block',
      kind: 'url',
      value: new URL(url).host + new URL(url).pathname,
      source: 'admin',
      by: 'legal@example',
      reason: 'DMCA notice',
      reference: 'case-17',
      effective: true,
    },
  );

  const unblock = await admin('DELETE', '', { kind: 'url', value: url, reason: 'counter-notice', by: 'legal@example' });
  assert.equal(unblock.status, 202);
  await waitFor(
    async () =>
      (await Promise.all(routes.map(async (route) => (await edge(route)).status))).every(
        (status) => status === 200 || status === 301,
      ),
    2000,
    'every URL served again',
  );
  const back = await decode(Buffer.from(await (await edge(routes[0])).arrayBuffer()));
  assert.deepEqual([back.width, back.height], [100, 100]);
  await waitFor(
    async () => /^\/p\//.test((await edge('/u/carol/avatar')).headers.get('location') || ''),
    2000,
    "carol's avatar is the image again",
  );
  process.stdout.write(`# blocked everywhere in ${taken} ms\n`);
});

test("a block written to the watched file, and one in a polled list (ecency's shape), take effect without a restart", async () => {
  const fromFile = site.add('file-listed.png', await solid(300, 200, 'png'), 'image/png');
  const fromList = site.add('url-listed.png', await solid(300, 200, 'png', '#2040c0'), 'image/png');
  const routes = [fromFile, fromList].map((url) => `/p/${base58Url.encode(url)}?width=64&height=64`);
  for (const route of routes) assert.equal((await edge(route)).status, 200);
  fs.writeFileSync(`${listFile}.tmp`, JSON.stringify({ images: [fromFile] }));
  fs.renameSync(`${listFile}.tmp`, listFile); // as an editor saves it
  await waitFor(async () => (await edge(routes[0])).status === 451, 5000, "the watched file's block");
  remoteList = JSON.stringify({ images: [fromList], accounts: [], updated: new Date().toISOString() });
  await waitFor(async () => (await edge(routes[1])).status === 451, 5000, "the polled list's block");
  const listed = /** @type {any} */ (await (await admin('GET', '')).json()).entries;
  assert.ok(listed.some((/** @type {any} */ e) => e.source?.startsWith('file:') && e.kind === 'url'));
  assert.ok(listed.some((/** @type {any} */ e) => e.source?.startsWith('list:') && e.kind === 'url'));
  // a file that stops being JSON keeps its entries; one without the entry unblocks it
  fs.writeFileSync(listFile, '{"images": [');
  await new Promise((resolve) => setTimeout(resolve, 1500));
  assert.equal((await edge(routes[0])).status, 451, 'a broken file unblocks nothing');
  fs.writeFileSync(listFile, '{}');
  remoteList = '{"images": []}';
  await waitFor(
    async () => (await edge(routes[0])).status === 200 && (await edge(routes[1])).status === 200,
    5000,
    'both unblocked',
  );
});

test('a pattern covers every source it matches that was served, at the CDN too', async () => {
  const urls = await Promise.all(
    ['secret-1.png', 'secret-2.png'].map(async (name, i) =>
      site.add(name, await solid(120 + i, 80, 'png'), 'image/png'),
    ),
  );
  const routes = urls.map((url) => `/p/${base58Url.encode(url)}?width=50`);
  for (const route of routes) assert.equal((await edge(route)).status, 200);
  assert.equal(
    (await admin('POST', '', { kind: 'pattern', value: '/img/secret-\\d+\\.png$', reason: 'leak', by: 'ops' })).status,
    202,
  );
  await waitFor(() => allTakenDown(routes), 2000, 'both sources taken down');
  const base = `http://127.0.0.1:${stack.env.NGINX_PORT}`;
  await waitFor(
    async () => routes.every((route) => cloudflare.purged().includes(base + route)),
    5000,
    'the CDN purge of both',
  );
  assert.equal(
    (await admin('DELETE', '', { kind: 'pattern', value: '/img/secret-\\d+\\.png$', by: 'ops' })).status,
    202,
  );
  await waitFor(async () => (await edge(routes[0])).status === 200, 2000, 'unblocked');
});

test('a blocked account: its avatar redirect goes to the default, its uploads and new uploads are 451; unblocked, all back', async () => {
  const bytes = fs.readFileSync(photo('Path', '1920x1080'));
  const upload = async () => {
    const form = new FormData();
    form.append('image_file', new Blob([new Uint8Array(bytes)]), 'bob.jpg');
    return fetch(
      `${stack.base}/bob/${hiveSignature(challengeHash().update(bytes).digest(), posting.secretKey).toString('hex')}`,
      { method: 'POST', body: form },
    );
  };
  const first = await upload();
  assert.equal(first.status, 200);
  const own = new URL(/** @type {any} */ (await first.json()).url).pathname;
  await setAvatar('bob', site.add('bob.png', await solid(200, 200, 'png', '#40c020'), 'image/png'));
  assert.match((await edge('/u/bob/avatar')).headers.get('location') || '', /^\/p\//);
  assert.equal((await edge(own)).status, 200);
  assert.equal((await edge(own)).headers.get('x-cache'), 'HIT');

  assert.equal((await admin('POST', '', { kind: 'account', value: '@bob', reason: 'spam', by: 'ops' })).status, 202);
  await waitFor(
    async () =>
      (await edge('/u/bob/avatar')).headers.get('location') === '/u/-/default.svg' && (await edge(own)).status === 451,
    2000,
    "bob's avatar is the default and his upload a 451",
  );
  const again = await upload();
  assert.equal(again.status, 451);
  assert.equal(await errorName(again), 'unavailable_for_legal_reasons');

  assert.equal((await admin('DELETE', '', { kind: 'account', value: 'bob', by: 'ops' })).status, 202);
  await waitFor(
    async () =>
      /^\/p\//.test((await edge('/u/bob/avatar')).headers.get('location') || '') && (await edge(own)).status === 200,
    2000,
    'bob is back',
  );
  assert.equal((await upload()).status, 200);
});

test('the purge service SIGKILLed while a block (from the CLI) is being purged: the restarted one completes it', async () => {
  const url = site.add('killed.jpg', fs.readFileSync(photo('Path', '1920x1080')));
  const route = `/p/${base58Url.encode(url)}?width=90&height=90`;
  assert.equal((await edge(route)).status, 200);
  assert.equal((await edge(route)).headers.get('x-cache'), 'HIT');
  // the CDN holds its answer: the purge service is in the middle of the takedown when it dies
  let asked = 0;
  cloudflare.onCall(async () => {
    asked += 1;
    await new Promise((resolve) => setTimeout(resolve, 3000));
  });
  const env = { ...process.env, REDIS_URL: stack.redisUrl, PUBLIC_URL: `http://127.0.0.1:${stack.env.NGINX_PORT}` };
  const { stdout } = await run(
    path.join(root, 'purge-service/bin/purge-service'),
    ['takedown', 'block', 'url', url, '--reason', 'CSAM report', '--reference', 'cf-123'],
    { env },
  );
  assert.equal(JSON.parse(stdout).changes[0].action, 'block');
  await waitFor(async () => asked > 0, 5000, 'the purge reached the CDN');
  await stack.kill('purge-service');
  cloudflare.onCall(async () => {});
  const base = `http://127.0.0.1:${stack.env.NGINX_PORT}`;
  assert.ok(!cloudflare.purged().includes(base + route), 'the CDN purge had not completed');
  await stack.start('purge-service');
  await waitFor(
    async () => cloudflare.purged().includes(base + route),
    60_000,
    'the restarted purge service asked the CDN again',
  );
  assert.equal((await edge(route)).status, 451);
  const audit = /** @type {any} */ (await (await admin('GET', '/audit?count=1')).json()).audit;
  assert.equal(audit[0].reference, 'cf-123');
});

test('bad input to the admin API and the CLI is a 400 (or 401, 413), never a crash', async () => {
  const cases = [
    [{ kind: 'pattern', value: '([unclosed', reason: 'r', by: 'b' }, 400, 'invalid_takedown'],
    [{ kind: 'account', value: 'Not An Account!', reason: 'r', by: 'b' }, 400, 'invalid_takedown'],
    [{ kind: 'colour', value: 'red', reason: 'r', by: 'b' }, 400, 'invalid_takedown'],
    [{ kind: 'url', value: 'javascript:alert(1)', reason: 'r', by: 'b' }, 400, 'invalid_takedown'],
    [{ kind: 'key', value: 'x', reason: 'r', by: 'b' }, 400, 'invalid_takedown'],
    [{ kind: 'domain', value: 'exa mple', reason: 'r', by: 'b' }, 400, 'invalid_takedown'],
    [{ kind: 'url', value: 'https://a.example/x.jpg', by: 'b' }, 400, 'invalid_parameter'],
    [{ kind: 'url', value: 'https://a.example/x.jpg', reason: 'r' }, 400, 'invalid_parameter'],
    [
      {
        entries: Array.from({ length: 10001 }, (_, i) => ({ kind: 'domain', value: `d${i}.example` })),
        reason: 'r',
        by: 'b',
      },
      400,
      'too_many_entries',
    ],
    [{ entries: 'all', reason: 'r', by: 'b' }, 400, 'invalid_takedown'],
    ['{not json', 400, 'invalid_json'],
    [JSON.stringify({ kind: 'url', value: 'x'.repeat(2 * 1024 * 1024) }), 413, 'payload_too_large'],
  ];
  for (const [body, status, name] of cases) {
    const response = await admin('POST', '', body);
    assert.equal(response.status, status, JSON.stringify(body).slice(0, 80));
    assert.equal(await errorName(response), name);
  }
  const anonymous = await fetch(`http://127.0.0.1:${stack.env.PURGE_SERVICE_PORT}/admin/takedowns`);
  assert.equal(anonymous.status, 401);
  const publicPath = await fetch(`${stack.base}/admin/takedowns`, { headers: { authorization: `Bearer ${ADMIN}` } });
  assert.notEqual(publicPath.status, 200, 'the admin API is not on the public path');
  for (const args of [
    ['takedown', 'block', 'pattern', '(', '--reason', 'r'],
    ['takedown', 'block', 'account', 'UPPER', '--reason', 'r'],
    ['takedown', 'block', 'url', 'https://a.example/x.jpg'],
  ]) {
    const failed = await run(path.join(root, 'purge-service/bin/purge-service'), args, {
      env: { ...process.env, REDIS_URL: stack.redisUrl },
    }).then(
      () => null,
      (err) => err,
    );
    assert.ok(failed, `${args.join(' ')} fails`);
    assert.equal(failed.code, 2);
    assert.equal(
      JSON.parse(failed.stderr).error.info.kind ?? 'none',
      args[3] === 'https://a.example/x.jpg' ? 'none' : args[2],
    );
  }
  assert.equal((await fetch(`http://127.0.0.1:${stack.env.PURGE_SERVICE_PORT}/healthz`)).status, 200, 'still serving');
  const entries = /** @type {any} */ (await (await admin('GET', '')).json()).entries;
  assert.deepEqual(
    entries.filter((/** @type {any} */ e) => e.reason === 'r' || e.by === 'b'),
    [],
    'nothing was blocked by any of it',
  );
});
