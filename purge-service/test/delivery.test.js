// How purges are delivered, against a real stack and a CDN stand-in that enforces Cloudflare's limits:
// events coalesced per account, the order resolver → varnish → CDN with the acknowledgement only after all,
// at most 30 URLs a call within the plan's rate, a 429's Retry-After honoured, a crashed consumer's events
// claimed, and the dead-letters CLI.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { promisify } from 'node:util';
import { Redis } from 'ioredis';
import { base58Url } from '@stack/lib';
import { startCloudflare } from '../../test/support/cloudflare.js';
import { waitFor } from '../../test/support/ports.js';
import { root } from '../../test/support/processes.js';
import { startStack } from '../../test/support/stack.js';

const run = promisify(execFile);

/** @type {Awaited<ReturnType<typeof startStack>>} */
let stack;
/** @type {Awaited<ReturnType<typeof startCloudflare>>} */
let cloudflare;
/** @type {Redis} */
let redis;

// the CDN's plan: 5 calls a second, 3 in a burst; the service is set a little under it (4/s, burst 2)
before(async () => {
  cloudflare = await startCloudflare({ maxFiles: 30, callsPerSecond: 5, burst: 3, retryAfterS: 2 });
  stack = await startStack({
    PURGE_HMAC_KEYS: 'delivery-key',
    CLOUDFLARE_API_BASE: cloudflare.base,
    CLOUDFLARE_ZONE_ID: 'zone-d',
    CLOUDFLARE_API_TOKEN: 'cf-token',
    CLOUDFLARE_URLS_PER_CALL: '30',
    CLOUDFLARE_CALLS_PER_SECOND: '4',
    CLOUDFLARE_BURST: '2',
    PURGE_RETRY_BASE_MS: '100',
    PURGE_RETRY_MAX_MS: '1000',
    PURGE_MAX_ATTEMPTS: '20',
    PURGE_CLAIM_IDLE_MS: '1000',
  });
  redis = new Redis(stack.redisUrl);
});
after(async () => {
  redis?.disconnect();
  await stack?.stop();
  await cloudflare?.close();
});

/** Queues events straight into the stream, as the webhook and the chain follower do. @param {string[]} accounts */
async function queue(accounts, kind = 'both') {
  const pipeline = redis.pipeline();
  for (const account of accounts)
    pipeline.xadd('purge:events', '*', 'account', account, 'kind', kind, 'source', 'test', 'at', String(Date.now()));
  await pipeline.exec();
}

const purgedCount = (/** @type {string} */ url) => cloudflare.purged().filter((file) => file === url).length;
const drained = async () => (await redis.xlen('purge:events')) === 0;

/** Where /u/<account>/avatar points through varnish, and whether varnish had it. @param {string} account */
async function avatarTarget(account) {
  const response = await fetch(`${stack.base}/u/${account}/avatar`, { redirect: 'manual' });
  return { location: response.headers.get('location'), cache: response.headers.get('x-cache') };
}

test('events for one account waiting together are coalesced into one purge', async () => {
  await stack.ctl('stop', 'purge-service');
  await queue(Array(25).fill('coalesced'), 'avatar');
  await queue(['coalesced'], 'cover');
  await stack.start('purge-service');
  await waitFor(drained, 15_000, 'the events processed');
  const base = `${stack.base}/u/coalesced`;
  assert.equal(purgedCount(`${base}/avatar`), 1, 'one purge of the avatar for 26 events');
  assert.equal(purgedCount(`${base}/cover`), 1, 'an avatar and a cover change make one purge of both');
});

test('the resolver, then varnish, then the CDN; the event is acknowledged only once all three succeeded', async () => {
  await redis.hset('avatar:local:ordered', 'avatar', 'https://img.example/ordered-1.png');
  // cached by varnish: asked until a hit (on a busy machine haproxy may answer a first ask with a 503, which
  // varnish does not keep), the cached redirect's target the old one
  let old = await avatarTarget('ordered');
  await waitFor(
    async () => {
      old = await avatarTarget('ordered');
      return old.cache === 'HIT';
    },
    15_000,
    'the avatar redirect cached by varnish',
  );
  assert.ok(old.location?.includes(base58Url.encode('https://img.example/ordered-1.png')), `${old.location}`);
  await redis.hset('avatar:local:ordered', 'avatar', 'https://img.example/ordered-2.png');
  // the resolver keeps the old mapping in memory (the change above queued no purge): only the purge evicts it
  const direct = async () =>
    (await stack.direct('resolver', '/u/ordered/avatar', { redirect: 'manual' })).headers.get('location');
  assert.equal(await direct(), old.location);
  /** @type {Array<{ resolver: string | null, varnish: { location: string | null, cache: string | null } }>} */
  const seenByCdn = [];
  cloudflare.onCall(async (files) => {
    if (files.includes(`${stack.base}/u/ordered/avatar`))
      seenByCdn.push({ resolver: await direct(), varnish: await avatarTarget('ordered') });
  });
  cloudflare.failAlways(500);
  try {
    await queue(['ordered']);
    await waitFor(async () => seenByCdn.length >= 2, 10_000, 'the CDN asked twice');
    assert.equal(await redis.xlen('purge:events'), 1, 'not acknowledged while the CDN fails');
    assert.equal(/** @type {any} */ (await redis.xpending('purge:events', 'purgers'))[0], 1, 'pending in the group');
  } finally {
    cloudflare.failAlways(0);
  }
  await waitFor(drained, 10_000, 'acknowledged once the CDN succeeded');
  cloudflare.onCall(async () => {});
  // when the CDN was first asked, the inner layers were done: the resolver's copy gone, varnish fetching anew
  const fresh = base58Url.encode('https://img.example/ordered-2.png');
  assert.ok(
    seenByCdn[0].resolver?.includes(fresh),
    "the resolver's cached mapping was evicted before the CDN was asked",
  );
  assert.ok(seenByCdn[0].varnish.location?.includes(fresh), 'varnish answered the new avatar before the CDN was asked');
  assert.equal(purgedCount(`${stack.base}/u/ordered/avatar`), 1);
  assert.equal(await redis.xlen('purge:dead'), 0);
});

test("at most 30 URLs a call, within the CDN's rate: nothing refused, every URL purged once", async () => {
  const accounts = Array.from({ length: 40 }, (_, i) => `bulk-${i}`);
  const from = cloudflare.calls.length;
  await stack.ctl('stop', 'purge-service');
  await queue(accounts);
  await stack.start('purge-service');
  await waitFor(drained, 30_000, 'the 40 accounts purged');
  const calls = cloudflare.calls.slice(from);
  assert.deepEqual(
    calls.filter((call) => call.status !== 200).map((call) => call.status),
    [],
    'no call refused (400 past 30 URLs, 429 past the rate)',
  );
  assert.ok(
    calls.every((call) => call.files.length <= 30),
    `URLs a call: ${calls.map((call) => call.files.length)}`,
  );
  assert.ok(calls.length >= 7, `200 URLs in ${calls.length} calls`);
  for (const account of accounts) assert.equal(purgedCount(`${stack.base}/u/${account}/cover`), 1, account);
  // the token bucket (4/s, burst 2): in any stretch of time t at most 2 + 4·t calls, i.e. calls i and j are at
  // least (j − i − 2) × 250 ms apart (a call made late leaves its successor less to wait: that is the bucket)
  const tooClose = [];
  for (let i = 0; i < calls.length; i += 1) {
    for (let j = i + 3; j < calls.length; j += 1) {
      if (calls[j].at - calls[i].at < (j - i - 2) * 250 - 20)
        tooClose.push(`${i}→${j}: ${calls[j].at - calls[i].at} ms`);
    }
  }
  assert.deepEqual(tooClose, [], `calls at ${calls.map((call) => call.at - calls[0].at)} ms`);
});

test("a 429's Retry-After is honoured, even past the longest backoff", async () => {
  cloudflare.failNext(429, 1);
  const from = cloudflare.calls.length;
  await queue(['patient']);
  await waitFor(async () => purgedCount(`${stack.base}/u/patient/avatar`) === 1, 10_000, 'the purge after the 429');
  const [refused, next] = cloudflare.calls.slice(from);
  assert.equal(refused.status, 429);
  // Retry-After: 2 (s) while PURGE_RETRY_MAX_MS is 1000
  assert.ok(next.at - refused.at >= 1900, `asked again after ${next.at - refused.at} ms`);
});

test("a crashed consumer's pending events are claimed and purged", async () => {
  await stack.ctl('stop', 'purge-service');
  await queue(['orphan']);
  // another worker reads the event and dies before acknowledging it
  const read = /** @type {any} */ (
    await redis.xreadgroup('GROUP', 'purgers', 'crashed-worker', 'COUNT', 10, 'STREAMS', 'purge:events', '>')
  );
  assert.equal(read[0][1].length, 1);
  await stack.start('purge-service');
  await waitFor(
    async () => purgedCount(`${stack.base}/u/orphan/avatar`) === 1,
    15_000,
    'the orphan claimed after PURGE_CLAIM_IDLE_MS',
  );
  await waitFor(drained, 5000, 'acknowledged');
  assert.equal(/** @type {any} */ (await redis.xpending('purge:events', 'purgers'))[0], 0);
});

test('the dead-letters CLI lists what failed and replays it', async () => {
  const dead = [
    ['account', 'lost-1', 'kind', 'avatar', 'failed_target', 'cdn'],
    ['account', 'lost-2', 'kind', 'both', 'failed_target', 'varnish'],
  ];
  for (const fields of dead) await redis.xadd('purge:dead', '*', ...fields, 'original_id', '1-0', 'error', 'test');
  const cli = (/** @type {string[]} */ ...args) =>
    run('sh', [
      '-c',
      `set -a; . "${stack.dir}/env"; . "${stack.dir}/secrets/all.env"; set +a; exec "${path.join(root, 'purge-service/bin/purge-service')}" "$@"`,
      'cli',
      ...args,
    ]);
  const listed = (await cli('dead-letters', 'list')).stdout
    .trim()
    .split('\n')
    .map((line) => JSON.parse(line));
  assert.deepEqual(
    listed.map((letter) => [letter.account, letter.failed_target]),
    [
      ['lost-1', 'cdn'],
      ['lost-2', 'varnish'],
    ],
  );
  assert.equal((await cli('dead-letters', 'replay')).stdout.trim(), 'replayed 2');
  assert.equal(await redis.xlen('purge:dead'), 0);
  await waitFor(
    async () => purgedCount(`${stack.base}/u/lost-1/avatar`) === 1 && purgedCount(`${stack.base}/u/lost-2/cover`) === 1,
    10_000,
    'the replayed purges',
  );
  await assert.rejects(
    cli('dead-letters', 'forget'),
    (/** @type {any} */ err) => err.code === 2 && /usage/.test(err.stderr),
  );
});
