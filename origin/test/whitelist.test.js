// #49: the proxy whitelist (PROXY_WHITELIST) at the origin, against a stand-in HAF proxy-whitelist service
// (PROXY_WHITELIST=haf): a whitelisted URL is served, an unknown one is a 403 no cache keeps, a blacklisted one
// a 451 for a day; our own uploads, PROXY_WHITELIST_HOSTS and a preview token pass (the token's answer private);
// the service down lets images through, counted. The chain's list (PROXY_WHITELIST=chain) is held through the
// whole stack in test/whitelist.test.js.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { startHafWhitelist } from '../../test/support/haf-whitelist.js';
import { solid } from '../../test/support/images.js';
import { metricValue } from '../../test/support/metrics.js';
import { issuePreviewToken } from '../../test/support/preview-token.js';
import { startOrigin, tokenUpload } from './harness.js';

/** @type {Awaited<ReturnType<typeof startOrigin>>} */
let origin;
/** @type {Awaited<ReturnType<typeof startHafWhitelist>>} */
let haf;
before(async () => {
  haf = await startHafWhitelist();
  origin = await startOrigin({
    PROXY_WHITELIST: 'haf',
    PROXY_WHITELIST_URL: haf.url,
    PROXY_WHITELIST_TIMEOUT_MS: '500',
    PROXY_WHITELIST_HOSTS: 'localhost',
    FETCH_ALLOW_PRIVATE_HOSTS: '127.0.0.1,localhost',
  });
});
after(async () => {
  await origin?.stop();
  await haf?.close();
});

/** @param {string} url @param {Record<string, string | number>} [query] */
async function get(url, query = { width: 50 }) {
  const response = await fetch(origin.proxied(url, query));
  return { response, body: await response.text() };
}

/** A new image on the local site: its URL. @param {string} name */
const image = async (name) => origin.site.add(name, await solid(120, 80, 'jpeg'));

/** @param {string} result */
const checks = (result) => metricValue(origin.metricsUrl, 'origin_whitelist_checks_total', { result });

test('whitelisted: served; unknown: a 403 no cache keeps; blacklisted: a 451 for a day; none of them fetched first', async () => {
  const [listed, unknown, blacklisted] = [await image('listed.jpg'), await image('unknown.jpg'), await image('bl.jpg')];
  haf.set(listed, 'whitelisted');
  haf.set(blacklisted, 'blacklisted');
  assert.equal((await get(listed)).response.status, 200);
  const refused = await get(unknown);
  assert.equal(refused.response.status, 403);
  assert.equal(refused.response.headers.get('cache-control'), 'no-store');
  assert.equal(JSON.parse(refused.body).error.name, 'not_whitelisted');
  const gone = await get(blacklisted);
  assert.equal(gone.response.status, 451);
  assert.equal(gone.response.headers.get('cache-control'), 'public, max-age=86400');
  assert.deepEqual(
    [origin.site.hits('/img/unknown.jpg'), origin.site.hits('/img/bl.jpg')],
    [0, 0],
    'nothing the whitelist refused was fetched',
  );
  // once the chain references it (the service says so), served at once: the 403 was kept nowhere
  haf.set(unknown, 'whitelisted');
  assert.equal((await get(unknown)).response.status, 200);
});

test('our own uploads, PROXY_WHITELIST_HOSTS and a preview token pass; the token privately, and only with it', async () => {
  const upload = await tokenUpload(origin.base, await solid(90, 60, 'png'), 'own.png');
  const { url } = /** @type {{ url: string }} */ (await upload.json());
  assert.equal((await get(url)).response.status, 200, 'an upload of ours');
  const local = origin.site.add('via-localhost.jpg', await solid(60, 40, 'jpeg')).replace('127.0.0.1', 'localhost');
  assert.equal((await get(local)).response.status, 200, 'a host of PROXY_WHITELIST_HOSTS, not asked about');
  assert.ok(!haf.asked.includes(local));
  const draft = await image('draft.jpg');
  const token = await issuePreviewToken(origin.redis.url);
  const preview = await get(draft, { width: 50, token });
  assert.equal(preview.response.status, 200);
  assert.equal(preview.response.headers.get('cache-control'), 'private, no-store');
  assert.equal((await get(draft, { width: 50, token: 'ab'.repeat(24) })).response.status, 403, 'an unknown token');
  assert.equal((await get(draft)).response.status, 403, 'without the token');
  assert.ok((await checks('preview_token')) >= 1);
});

test('the whitelist service down: images are let through, and counted', async () => {
  const before = await checks('failed_open');
  haf.setDown(true);
  try {
    assert.equal((await get(await image('while-down.jpg'))).response.status, 200);
  } finally {
    haf.setDown(false);
  }
  assert.equal((await checks('failed_open')) - before, 1);
});
