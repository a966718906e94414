// Grace through the real stack: an object past its TTL and past the short grace a healthy backend gets
// (VARNISH_GRACE_HEALTHY_S, 2 s here) is served stale while its backend is down (VARNISH_GRACE_SICK_S, a day),
// instead of an error; once the backend is back it is fetched fresh. Avatar redirects are the objects here,
// with a 1 s shared lifetime so they expire in the test.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { metricValue } from './support/metrics.js';
import { waitFor } from './support/ports.js';
import { startStack } from './support/stack.js';

/** @type {Awaited<ReturnType<typeof startStack>>} */
let stack;

before(async () => {
  stack = await startStack({
    CACHE_CONTROL_REDIRECT: 'public, max-age=1, s-maxage=1',
    VARNISH_GRACE_HEALTHY_S: '2',
    AVATAR_ADMIN_TOKEN: 'grace-admin',
  });
});
after(() => stack?.stop());

const avatar = (/** @type {string} */ account) => fetch(`${stack.base}/u/${account}/avatar`, { redirect: 'manual' });

test('an expired avatar redirect is served from grace while the resolver is down, and fetched fresh once it is back', async () => {
  const put = await stack.direct('resolver', `/admin/accounts/graceful`, {
    method: 'PUT',
    headers: { authorization: 'Bearer grace-admin', 'content-type': 'application/json' },
    body: JSON.stringify({ avatar: 'https://img.example/old.png' }),
  });
  assert.equal(put.status, 200);
  const purgeMetrics = `http://127.0.0.1:${stack.env.PURGE_SERVICE_METRICS_PORT}/metrics`;
  await waitFor(
    async () => (await metricValue(purgeMetrics, 'purge_queue_length')) === 0,
    5000,
    'the admin change purged',
  );
  const first = await avatar('graceful');
  assert.equal(first.status, 302);
  assert.equal(first.headers.get('x-cache'), 'MISS');
  const location = first.headers.get('location');

  // 1 s of TTL plus the healthy grace of 2 s: from here on only the sick-backend branch may serve it
  await new Promise((resolve) => setTimeout(resolve, 4_500));
  await stack.ctl('stop', 'avatar-resolver');
  try {
    await waitFor(
      async () => (await stack.backendHealth('avatars')) === 'sick',
      20_000,
      'varnish sees the avatars backend sick',
    );
    const stale = await avatar('graceful');
    assert.equal(stale.status, 302);
    assert.equal(stale.headers.get('location'), location);
    assert.equal(stale.headers.get('x-cache'), 'HIT');
    assert.ok(Number(stale.headers.get('age')) >= 3, `served stale: Age ${stale.headers.get('age')}`);
    const unknown = await avatar('never-resolved');
    assert.equal(unknown.status, 503, 'nothing cached for it: a clean error');
    assert.equal(unknown.headers.get('cache-control'), 'no-store');
    assert.equal(/** @type {any} */ (await unknown.json()).error.name, 'service_unavailable');
  } finally {
    await stack.start('avatar-resolver');
  }
  // the mapping changes while the cached redirect is stale: back to healthy, the next answer is the new one
  const change = await stack.direct('resolver', `/admin/accounts/graceful`, {
    method: 'PUT',
    headers: { authorization: 'Bearer grace-admin', 'content-type': 'application/json' },
    body: JSON.stringify({ avatar: 'https://img.example/new.png' }),
  });
  assert.equal(change.status, 200);
  await waitFor(
    async () => (await stack.backendHealth('avatars')) === 'healthy',
    20_000,
    'varnish sees the avatars backend healthy',
  );
  await waitFor(
    async () => (await avatar('graceful')).headers.get('location') !== location,
    5000,
    'the fresh redirect',
  );
});
