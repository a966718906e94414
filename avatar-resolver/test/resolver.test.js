import assert from 'node:assert/strict';
import http from 'node:http';
import { after, before, test } from 'node:test';
import { base58Url, sha256Hex } from '@stack/lib';
import { metricValue } from '../../test/support/metrics.js';
import { waitFor } from '../../test/support/ports.js';
import { hiveAccount, startResolver } from './harness.js';

/** @type {Awaited<ReturnType<typeof startResolver>>} */
let resolver;

before(async () => {
  // a batch window wider than the default 10 ms: on a busy machine 200 requests from one client arrive
  // spread over far more than 10 ms, and the test is about batching and de-duplication, not arrival times
  resolver = await startResolver({
    AVATAR_BREAKER_FAILURES: '2',
    AVATAR_BREAKER_COOLDOWN_MS: '3000',
    AVATAR_BATCH_WAIT_MS: '100',
  });
  resolver.hive.setAccount(
    hiveAccount('alice', {
      profile: { profile_image: 'https://img.example/alice.png', cover_image: 'https://img.example/alice-cover.jpg' },
    }),
  );
  resolver.hive.setAccount(
    hiveAccount(
      'posting',
      { profile: { profile_image: 'https://img.example/old.png' } },
      { profile: { version: 2, profile_image: 'https://img.example/new.png' } },
    ),
  );
  resolver.hive.setAccount(
    hiveAccount(
      'noversion',
      { profile: { profile_image: 'https://img.example/json.png' } },
      { profile: { profile_image: 'https://img.example/unversioned.png' } },
    ),
  );
  resolver.hive.setAccount(
    hiveAccount('badurl', { profile: { profile_image: 'javascript:alert(1)', cover_image: 'ipfs://Qm' } }),
  );
  resolver.hive.setAccount(hiveAccount('garbage', '{not json', 'nor this'));
  for (let i = 0; i < 50; i += 1)
    resolver.hive.setAccount(hiveAccount(`user-${i}`, { profile: { profile_image: `https://img.example/u${i}.png` } }));
});
after(() => resolver.stop());

/** Where a 302 points: the decoded source and its size. @param {Response} response */
function target(response) {
  assert.equal(response.status, 302);
  const location = new URL(response.headers.get('location') || '', 'http://x');
  if (!location.pathname.startsWith('/p/')) return { path: location.pathname };
  return {
    url: base58Url.decode(location.pathname.slice(3)),
    width: location.searchParams.get('width'),
    height: location.searchParams.get('height'),
  };
}

test('avatar sizes and the cover redirect to the origin resize URL, with cache headers', async () => {
  const cases = [
    ['/u/alice/avatar', '128'],
    ['/u/alice/avatar/small', '64'],
    ['/u/alice/avatar/medium', '128'],
    ['/u/alice/avatar/large', '512'],
  ];
  for (const [path, size] of cases) {
    const response = await resolver.get(path);
    assert.deepEqual(target(response), { url: 'https://img.example/alice.png', width: size, height: size });
    assert.equal(
      response.headers.get('cache-control'),
      'public, max-age=600, s-maxage=86400, stale-while-revalidate=60',
    );
    // the account's tag, and the image's (a takedown of that image evicts the redirect too)
    assert.equal(response.headers.get('xkey'), `avatar:alice img:${sha256Hex('https://img.example/alice.png')}`);
    assert.match(response.headers.get('server-timing') || '', /^lookup;dur=[\d.]+;desc="(upstream|memory|redis)"$/);
  }
  assert.deepEqual(target(await resolver.get('/u/alice/cover')), {
    url: 'https://img.example/alice-cover.jpg',
    width: '1344',
    height: '240',
  });
  const memory = await resolver.get('/u/alice/avatar');
  assert.match(memory.headers.get('server-timing') || '', /desc="memory"/);
});

test('posting_json_metadata wins only with profile.version; non-http(s) images give the default', async () => {
  assert.equal(target(await resolver.get('/u/posting/avatar')).url, 'https://img.example/new.png');
  assert.equal(target(await resolver.get('/u/noversion/avatar')).url, 'https://img.example/json.png');
  assert.deepEqual(target(await resolver.get('/u/badurl/avatar')), { path: '/u/-/default.svg' });
  assert.deepEqual(target(await resolver.get('/u/badurl/cover')), { path: '/u/-/default.svg' });
  assert.deepEqual(target(await resolver.get('/u/garbage/avatar')), { path: '/u/-/default.svg' });
  const svg = await resolver.get('/u/-/default.svg');
  assert.equal(svg.headers.get('content-type'), 'image/svg+xml; charset=utf-8');
});

test('an unknown account is a 404, negatively cached: asked twice, the upstream hears once', async () => {
  const before = resolver.hive.calls.length;
  for (let i = 0; i < 2; i += 1) {
    const response = await resolver.get('/u/nobody/avatar');
    assert.equal(response.status, 404);
    assert.equal(/** @type {any} */ (await response.json()).error.name, 'no_such_account');
    assert.equal(response.headers.get('cache-control'), 'public, max-age=60');
  }
  assert.equal(resolver.hive.calls.length - before, 1);
  // remembered, for a short while: -2 (no key) or -1 (no expiry) would both be wrong
  const ttl = await resolver.redis.client.ttl('avatar:map:nobody');
  assert.ok(ttl > 0 && ttl <= 60, `negative entry TTL ${ttl}`);
});

test('invalid names and sizes are 400s and never reach the upstream', async () => {
  const before = resolver.hive.calls.length;
  for (const path of [
    '/u/Alice/avatar',
    '/u/ab/avatar',
    '/u/a_b_c/avatar',
    '/u/abcdefghijklmnopq/avatar',
    '/u/..%2f..%2fetc/avatar',
    '/u/Alice/avatar/huge',
    '/u/alice/cover/small',
  ]) {
    const response = await resolver.get(path);
    assert.equal(response.status, 400, path);
    assert.match(/** @type {any} */ (await response.json()).error.name, /^invalid_/);
  }
  assert.equal(resolver.hive.calls.length, before);
});

test("another size or a trailing slash is a permanent redirect to the avatar's one URL, without asking the upstream", async () => {
  const before = resolver.hive.calls.length;
  for (const [path, location] of [
    ['/u/alice/avatar/huge', '/u/alice/avatar'],
    ['/u/alice/avatar/64x64', '/u/alice/avatar'],
    ['/u/alice/avatar/constructor', '/u/alice/avatar'],
    ['/u/alice/avatar/', '/u/alice/avatar'],
    ['/u/alice/avatar/small/', '/u/alice/avatar/small'],
  ]) {
    const response = await resolver.get(path);
    assert.equal(response.status, 301, path);
    assert.equal(response.headers.get('location'), location, path);
    assert.equal(response.headers.get('cache-control'), 'public, max-age=86400', path);
  }
  assert.equal(resolver.hive.calls.length, before);
});

test('every spelling of an avatar URL is answered alike: redirects, 404s, 400s, request ids and metrics', async () => {
  // one writer (avatar-route.js) for the canonical form and the same URL with its account's first letter
  // percent-escaped
  /** @param {Response} response */
  const shape = (response) => {
    const headers = Object.fromEntries(
      [...response.headers].filter(([name]) => !['date', 'x-request-id'].includes(name)),
    );
    headers['server-timing'] = (headers['server-timing'] || '')
      .replace(/dur=[\d.]+/, 'dur=N')
      .replace(/desc="\w+"/, 'desc="S"');
    return { status: response.status, headers };
  };
  const metric = (/** @type {string} */ route, /** @type {string} */ status) =>
    metricValue(resolver.metricsUrl, 'http_request_duration_seconds_count', { route, status });
  /** @type {Array<[string, number]>} */
  const cases = [
    ['/u/alice/avatar/small', 302],
    ['/u/alice/cover', 302],
    ['/u/nobody/avatar', 404],
    ['/u/a..b/avatar', 400],
  ];
  for (const [path, status] of cases) {
    const route = path.includes('cover') ? 'cover' : 'avatar';
    const counted = await metric(route, String(status));
    const plain = await resolver.get(path, { headers: { 'x-request-id': 'plain-1' } });
    const escaped = path.replace(/^\/u\/(.)/, (_match, first) => `/u/%${first.charCodeAt(0).toString(16)}`);
    const spelled = await resolver.get(escaped, { headers: { 'x-request-id': 'escaped-1' } });
    assert.equal(plain.status, status, path);
    assert.deepEqual(shape(plain), shape(spelled), path);
    assert.deepEqual(
      [plain.headers.get('x-request-id'), spelled.headers.get('x-request-id')],
      ['plain-1', 'escaped-1'],
    );
    assert.equal(await plain.text(), await spelled.text(), path);
    assert.equal((await metric(route, String(status))) - counted, 2, `${path}: both counted`);
  }
  const head = await resolver.get('/u/alice/avatar', { method: 'HEAD' });
  assert.equal(head.status, 302);
  assert.equal(await head.text(), '');
  const slashed = await resolver.get('/u/alice/avatar/small/');
  assert.deepEqual([slashed.status, slashed.headers.get('location')], [301, '/u/alice/avatar/small']);
  const broken = await resolver.get('/u/%E0%A4%A/avatar', { headers: { 'x-request-id': 'broken-1' } });
  assert.equal(broken.status, 400);
  assert.equal(broken.headers.get('x-request-id'), 'broken-1');
  assert.equal(/** @type {any} */ (await broken.json()).error.name, 'invalid_path');
  const elsewhere = await resolver.get('/u/alice/banner');
  assert.equal(elsewhere.status, 404);
  assert.equal(/** @type {any} */ (await elsewhere.json()).error.name, 'not_found');
});

test('200 concurrent requests for 50 distinct accounts make a handful of upstream calls', async () => {
  const before = resolver.hive.calls.length;
  const responses = await Promise.all(Array.from({ length: 200 }, (_, i) => resolver.get(`/u/user-${i % 50}/avatar`)));
  responses.forEach((response, i) => assert.equal(target(response).url, `https://img.example/u${i % 50}.png`));
  const calls = resolver.hive.calls.slice(before);
  assert.ok(calls.length <= 10, `${calls.length} upstream calls`);
  const asked = calls.flatMap((call) => call.params[0]);
  assert.equal(new Set(asked).size, 50);
  assert.equal(asked.length, 50, 'no account asked twice');
  assert.ok((await metricValue(resolver.metricsUrl, 'resolver_upstream_batch_size_sum')) >= 50);
});

test('a purge published on the invalidation channel evicts the in-process copy at once', async () => {
  resolver.hive.setAccount(hiveAccount('frank', { profile: { profile_image: 'https://img.example/frank-1.png' } }));
  assert.equal(target(await resolver.get('/u/frank/avatar')).url, 'https://img.example/frank-1.png');
  resolver.hive.setAccount(hiveAccount('frank', { profile: { profile_image: 'https://img.example/frank-2.png' } }));
  assert.equal(target(await resolver.get('/u/frank/avatar')).url, 'https://img.example/frank-1.png', 'cached');
  await resolver.redis.client.del('avatar:map:frank');
  await resolver.redis.client.publish('avatar:invalidate', 'frank');
  await new Promise((resolve) => setTimeout(resolve, 50));
  assert.equal(target(await resolver.get('/u/frank/avatar')).url, 'https://img.example/frank-2.png');
});

test('upstream down: the last known mapping is served with a short Cache-Control, else the default avatar', async () => {
  assert.equal(target(await resolver.get('/u/user-1/avatar')).url, 'https://img.example/u1.png');
  await resolver.redis.client.del('avatar:map:user-1');
  await resolver.redis.client.publish('avatar:invalidate', 'user-1');
  resolver.hive.setAccount(hiveAccount('fresh', { profile: { profile_image: 'https://img.example/fresh.png' } }));
  resolver.hive.setDown(true);
  try {
    await new Promise((resolve) => setTimeout(resolve, 50));
    const stale = await resolver.get('/u/user-1/avatar');
    assert.equal(target(stale).url, 'https://img.example/u1.png');
    assert.equal(stale.headers.get('cache-control'), 'public, max-age=60, s-maxage=60');
    assert.match(stale.headers.get('server-timing') || '', /desc="stale"/);
    const unknown = await resolver.get('/u/fresh/avatar');
    assert.deepEqual(target(unknown), { path: '/u/-/default.svg' });
    assert.equal(unknown.headers.get('cache-control'), 'public, max-age=60, s-maxage=60');
    // the breaker opened after two failures: further misses do not even try the upstream
    const calls = resolver.hive.calls.length;
    for (const name of ['fresh', 'user-2x', 'other-one'])
      assert.equal((await resolver.get(`/u/${name}/avatar`)).status, 302);
    assert.equal(resolver.hive.calls.length, calls);
    assert.equal(await metricValue(resolver.metricsUrl, 'resolver_breaker_state'), 1);
    assert.ok((await metricValue(resolver.metricsUrl, 'resolver_lookups_total', { source: 'stale' })) >= 1);
  } finally {
    resolver.hive.setDown(false);
  }
});

test('the upstream back: after the cooldown one trial call closes the breaker, and mappings are fresh and long-lived again', async () => {
  resolver.hive.setAccount(
    hiveAccount('recovered', { profile: { profile_image: 'https://img.example/recovered.png' } }),
  );
  // the breaker opened in the test before; within AVATAR_BREAKER_COOLDOWN_MS (3 s) it lets one call through
  await waitFor(
    async () => target(await resolver.get('/u/recovered/avatar')).url === 'https://img.example/recovered.png',
    10_000,
    'a fresh mapping',
  );
  assert.equal(await metricValue(resolver.metricsUrl, 'resolver_breaker_state'), 0, 'closed');
  const answer = await resolver.get('/u/recovered/avatar/large');
  assert.equal(answer.headers.get('cache-control'), 'public, max-age=600, s-maxage=86400, stale-while-revalidate=60');
  resolver.hive.setAccount(hiveAccount('recovered-too', { profile: { profile_image: 'https://img.example/too.png' } }));
  assert.equal(
    target(await resolver.get('/u/recovered-too/avatar')).url,
    'https://img.example/too.png',
    'the next miss goes upstream at once',
  );
});

test("the http source reads the operator's JSON endpoint at the configured paths", async () => {
  const users = http.createServer((req, res) => {
    if (req.url === '/api/users/carol')
      return res
        .writeHead(200, { 'content-type': 'application/json' })
        .end(
          JSON.stringify({ data: { pic: 'https://cdn.example/carol.webp', banner: 'https://cdn.example/banner.jpg' } }),
        );
    return res.writeHead(404).end('{}');
  });
  await new Promise((resolve) => users.listen(0, '127.0.0.1', () => resolve(null)));
  const { port } = /** @type {import('node:net').AddressInfo} */ (users.address());
  const other = await startResolver({
    AVATAR_SOURCE: 'http',
    AVATAR_HTTP_URL: `http://127.0.0.1:${port}/api/users/{account}`,
    AVATAR_HTTP_AVATAR_PATH: 'data.pic',
    AVATAR_HTTP_COVER_PATH: 'data.banner',
  });
  try {
    assert.equal(target(await other.get('/u/carol/avatar/small')).url, 'https://cdn.example/carol.webp');
    assert.equal(target(await other.get('/u/carol/cover')).url, 'https://cdn.example/banner.jpg');
    assert.equal((await other.get('/u/dave/avatar')).status, 404);
  } finally {
    await other.stop();
    users.close();
  }
});

test('the local source: the admin API needs its token, writes the mapping, evicts caches and queues a purge', async () => {
  const local = await startResolver({ AVATAR_SOURCE: 'local', AVATAR_DEFAULT_URL: 'https://img.example/default.png' });
  try {
    const body = JSON.stringify({ avatar: 'https://img.example/erin-1.png' });
    const headers = { 'content-type': 'application/json' };
    assert.equal((await local.get('/admin/accounts/erin', { method: 'PUT', headers, body })).status, 401);
    assert.equal(
      (
        await local.get('/admin/accounts/erin', {
          method: 'PUT',
          headers: { ...headers, authorization: 'Bearer wrong' },
          body,
        })
      ).status,
      401,
    );
    const auth = { ...headers, authorization: 'Bearer admin-secret' };
    assert.deepEqual(
      target(await local.get('/u/erin/avatar')),
      { url: 'https://img.example/default.png', width: '128', height: '128' },
      'no mapping yet: the configured default',
    );
    const bad = await local.get('/admin/accounts/erin', {
      method: 'PUT',
      headers: auth,
      body: JSON.stringify({ avatar: 'file:///etc/passwd' }),
    });
    assert.equal(bad.status, 400);
    assert.equal((await local.get('/admin/accounts/erin', { method: 'PUT', headers: auth, body })).status, 200);
    assert.equal(target(await local.get('/u/erin/avatar')).url, 'https://img.example/erin-1.png');
    const second = await local.get('/admin/accounts/erin', {
      method: 'PUT',
      headers: auth,
      body: JSON.stringify({ avatar: 'https://img.example/erin-2.png' }),
    });
    assert.equal(
      target(await local.get('/u/erin/avatar')).url,
      'https://img.example/erin-2.png',
      'the in-process copy was evicted',
    );
    const events = await local.redis.client.xrange('purge:events', '-', '+');
    assert.equal(events.length, 2);
    assert.deepEqual(
      events.map(([, fields]) => fields.slice(0, 6)),
      [
        ['account', 'erin', 'kind', 'avatar', 'source', 'admin'],
        ['account', 'erin', 'kind', 'avatar', 'source', 'admin'],
      ],
    );
    assert.equal(/** @type {any} */ (await second.json()).purge, events[1][0]);
  } finally {
    await local.stop();
  }
});
