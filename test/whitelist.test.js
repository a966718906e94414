// #49: the chain's proxy whitelist (PROXY_WHITELIST=chain) through the whole stack, as images.hive.blog proxies
// only what the chain references: the chain follower (following a stand-in Hive node) records every image a post
// or comment names; a URL referenced in a block is served, one never referenced is a 403 that varnish never
// keeps, served as soon as a later block references it; a preview token opens an unknown URL for its holder
// alone (private, no-store); our own uploads pass; the operator's CLI adds, imports, backfills and checks.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { promisify } from 'node:util';
import { base58Url } from '@stack/lib';
import { startHiveNode } from './support/hive-node.js';
import { startImageServer } from './support/image-server.js';
import { solid } from './support/images.js';
import { metricValue } from './support/metrics.js';
import { waitFor } from './support/ports.js';
import { issuePreviewToken } from './support/preview-token.js';
import { root } from './support/processes.js';
import { startStack } from './support/stack.js';
import { tokenUpload } from './support/upload.js';

const run = promisify(execFile);

/** @type {Awaited<ReturnType<typeof startHiveNode>>} */
let hive;
/** @type {Awaited<ReturnType<typeof startImageServer>>} */
let site;
/** @type {Awaited<ReturnType<typeof startStack>>} */
let stack;
/** @type {ReturnType<Awaited<ReturnType<typeof startHiveNode>>['chain']>} */
let chain;

/** A block holding one post whose body names these images. @param {string[]} urls @param {number} [at] */
function publish(urls, at) {
  const body = urls.map((url, i) => `![${i}](${url})`).join('\n\n');
  chain.publish([{ author: 'alice', permlink: `p${at ?? Date.now()}`, body }], at);
}

before(async () => {
  hive = await startHiveNode();
  chain = hive.chain(100);
  site = await startImageServer();
  stack = await startStack({
    PROXY_WHITELIST: 'chain',
    HIVE_API_URLS: hive.url,
    HIVE_FOLLOW: 'true',
    HIVE_FOLLOW_START_BLOCK: '101',
    HIVE_FOLLOW_POLL_MS: '200',
    FETCH_ALLOW_PRIVATE_HOSTS: '127.0.0.1',
    UPLOAD_TOKENS: 'whitelist',
  });
});
after(async () => {
  await stack?.stop();
  await Promise.all([hive?.close(), site?.close()]);
});

/** A new image on the local site: its URL. @param {string} name */
const image = async (name) => site.add(name, await solid(160, 100, 'jpeg'));
/** The edge's /p/ URL of `url`. @param {string} url @param {string} [extra] */
const proxied = (url, extra = '') => `${stack.base}/p/${base58Url.encode(url)}?width=100${extra}`;
/** @param {string} url */
const status = async (url) => {
  const response = await fetch(url);
  await response.arrayBuffer();
  return response.status;
};
/** The purge service's CLI with this stack's Redis and URL. @param {string[]} args */
const cli = async (args) =>
  JSON.parse(
    (
      await run(path.join(root, 'purge-service/bin/purge-service'), ['whitelist', ...args], {
        env: { ...process.env, REDIS_URL: stack.redisUrl, PUBLIC_URL: stack.base, HIVE_API_URLS: hive.url },
      })
    ).stdout,
  );

test('a URL referenced in a block is served; one never referenced is a 403 varnish never keeps, served once a block references it', async () => {
  const [posted, later] = [await image('posted.jpg'), await image('later.jpg')];
  publish([posted]);
  await waitFor(async () => (await status(proxied(posted))) === 200, 30_000, 'the referenced image served');
  for (let i = 0; i < 2; i += 1) {
    const refused = await fetch(proxied(later));
    assert.equal(refused.status, 403);
    assert.equal(refused.headers.get('cache-control'), 'no-store');
    assert.notEqual(refused.headers.get('x-cache'), 'HIT', 'a 403 is never served from varnish');
    assert.equal(/** @type {any} */ (await refused.json()).error.name, 'not_whitelisted');
  }
  assert.equal(site.hits('/img/later.jpg'), 0, 'an unknown URL is never fetched');
  // condenser's legacy URL of it: redirected, then the same 403
  assert.equal(await status(`${stack.base}/640x0/${later}`), 403);
  publish([later]);
  await waitFor(async () => (await status(proxied(later))) === 200, 30_000, 'served once a block references it');
  assert.equal(await status(`${stack.base}/640x0/${later}`), 200);
  assert.ok(
    (await metricValue(
      `http://127.0.0.1:${stack.env.PURGE_SERVICE_METRICS_PORT}/metrics`,
      'purge_whitelisted_sources_total',
    )) >= 2,
  );
});

test('a preview token opens an unknown URL for its holder alone: private, no-store, never kept; our own uploads pass', async () => {
  const draft = await image('draft.jpg');
  const token = await issuePreviewToken(stack.redisUrl);
  for (let i = 0; i < 2; i += 1) {
    const preview = await fetch(proxied(draft, `&token=${token}`));
    await preview.arrayBuffer();
    assert.equal(preview.status, 200);
    assert.equal(preview.headers.get('cache-control'), 'private, no-store');
    assert.notEqual(preview.headers.get('x-cache'), 'HIT');
  }
  assert.equal(await status(proxied(draft)), 403, 'without the token: refused, the private answer shared with no one');
  // condenser's editor appends the token to its legacy URL: carried through the redirect, which no one else gets
  const editor = await fetch(`${stack.base}/768x0/${draft}?token=${token}`);
  await editor.arrayBuffer();
  assert.deepEqual([editor.status, editor.headers.get('cache-control')], [200, 'private, no-store']);
  assert.equal(await status(`${stack.base}/768x0/${draft}`), 403, 'the same legacy URL without the token');
  const upload = await tokenUpload(stack.base, await solid(90, 60, 'png'), 'own.png', 'whitelist');
  const { url } = /** @type {{ url: string }} */ (await upload.json());
  assert.equal(await status(proxied(url)), 200, 'an upload of ours needs no whitelist');
});

test("the operator's CLI: add, import a list, backfill a block range from before the follower, check", async () => {
  const [added, listed, old] = [await image('added.jpg'), await image('listed.jpg'), await image('old.jpg')];
  assert.equal((await cli(['check', added])).whitelisted, false);
  assert.equal((await cli(['add', added])).added, 1);
  assert.deepEqual([(await cli(['check', added])).whitelisted, await status(proxied(added))], [true, 200]);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'whitelist-'));
  try {
    const list = path.join(dir, 'urls.txt');
    fs.writeFileSync(list, `${listed}\n\nnot a url\n`);
    assert.equal((await cli(['import', list])).added, 1);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
  assert.equal(await status(proxied(listed)), 200);
  publish([old], 50); // a block before HIVE_FOLLOW_START_BLOCK: the follower never reads it
  assert.equal(await status(proxied(old)), 403);
  assert.deepEqual(await cli(['backfill', '--from', '49', '--to', '51']), { from: 49, to: 51, added: 1 });
  assert.equal(await status(proxied(old)), 200);
  assert.equal((await cli(['check', old])).block, 50);
});
