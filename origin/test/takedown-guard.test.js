// The origin's takedown guard on its own, over a real Redis holding the list as the purge service writes it:
// blocked keys, URLs in any spelling, domains and uploaders' accounts are a 451 tagged for purging; the rest
// passes. (The whole-stack test proves the path through every layer; this one fails fast on the guard.)
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import pino from 'pino';
import { Redis } from 'ioredis';
import { TAKEDOWN_KEYS, createTakedownList, entryField } from '@stack/lib';
import { createGuard } from '../src/takedown.js';
import { startRedis } from '../../test/support/processes.js';

const KEY = 'DQmWQzjgaD82ozKv3hX3HmRmobw8RY3eMtvsG16GVkasFo3';
const OTHER = 'DQmYwAPJzv5CZsnA625s3Xf2nemtYgPpHdWEz79ojWnPbdG';
const config = { SERVED_SOURCES_MAX: 1000, SERVED_PATHS_PER_SOURCE: 8, CACHE_CONTROL_TAKEDOWN: 'public, max-age=60' };
const logger = pino({ level: 'silent' });

/** @type {Awaited<ReturnType<typeof startRedis>>} */
let redis;
/** @type {Redis} */
let client;
/** @type {ReturnType<typeof createTakedownList>} */
let takedowns;
/** @type {ReturnType<typeof createGuard>} */
let guard;

before(async () => {
  redis = await startRedis();
  client = new Redis(redis.url);
  /** @type {import('@stack/lib/src/takedowns.js').TakedownEntry[]} */
  const entries = [
    { kind: 'key', value: KEY },
    { kind: 'url', value: 'img.example/bad.jpg' },
    { kind: 'domain', value: 'evil.example' },
    { kind: 'account', value: 'mallory' },
  ];
  await client.hset(TAKEDOWN_KEYS.all, ...entries.flatMap((entry) => [entryField(entry), '1']));
  await client.hset(TAKEDOWN_KEYS.owners, OTHER, 'mallory');
  await client.incr(TAKEDOWN_KEYS.version);
  takedowns = createTakedownList({ redis: client, logger, service: 'origin-test', pollMs: 60_000 });
  await takedowns.ready;
  guard = createGuard({ takedowns, redis: client, config: /** @type {any} */ (config), logger });
});

after(async () => {
  await takedowns.close();
  client.disconnect();
  await redis.stop();
});

/** @param {import('@stack/lib/src/sources.js').Source} source */
async function refusal(source) {
  return guard.check(source).then(
    () => null,
    (err) => err,
  );
}

test('a blocked key, URL (any spelling), domain or uploader is a 451 tagged with the source', async () => {
  const cases = [
    { id: KEY, uploadKey: KEY },
    { id: 'a', url: 'https://img.example/bad.jpg?v=2' },
    { id: 'b', url: 'HTTP://IMG.EXAMPLE/bad.jpg' },
    { id: 'c', url: 'https://cdn.evil.example/x.png' },
    { id: OTHER, uploadKey: OTHER },
  ];
  for (const source of cases) {
    const err = await refusal(/** @type {any} */ (source));
    assert.ok(err, `${JSON.stringify(source)} refused`);
    assert.equal(err.status, 451);
    assert.equal(err.name, 'unavailable_for_legal_reasons');
    assert.equal(err.headers.xkey, `img:${source.id}`, 'tagged so that an unblock purges the 451');
    assert.equal(err.headers['Cache-Control'], 'public, max-age=60');
  }
});

test('what is not blocked passes: other URLs, a suffix that is not a subdomain, other keys', async () => {
  for (const source of [
    { id: 'd', url: 'https://img.example/good.jpg' },
    { id: 'e', url: 'https://notevil.example/x.png' },
    { id: 'DQmZ', uploadKey: 'DQmZKP4gXcPwZXdxyPVkB8xgY6JmvsdKoLYp8mEHpL8C5Vn' },
  ]) {
    assert.equal(await refusal(/** @type {any} */ (source)), null, JSON.stringify(source));
  }
});

test("a new upload is refused by its key or its uploader's account", () => {
  assert.equal(guard.blockedUpload(KEY, 'alice')?.kind, 'key');
  assert.equal(guard.blockedUpload(OTHER, 'mallory')?.kind, 'account');
  assert.equal(guard.blockedUpload(OTHER, 'alice'), null);
  assert.equal(guard.blockedUpload(OTHER, null), null);
});

test('the served-paths record keeps the spellings served most recently: junk asked once cannot push the real one out', async () => {
  const source = { id: 'c0ffee', url: 'https://img.example/photo.jpg' };
  for (let i = 0; i < 100; i += 1) guard.served(source, [`/p/junk?cb=${i}`]);
  await new Promise((resolve) => setTimeout(resolve, 50));
  guard.served(source, ['/p/real?width=640']);
  /** @type {string[]} */
  let paths = [];
  for (let tries = 0; tries < 50 && !paths.includes('/p/real?width=640'); tries += 1) {
    await new Promise((resolve) => setTimeout(resolve, 20));
    paths = await client.zrange(`takedown:served:paths:${source.id}`, '0', '-1');
  }
  assert.ok(paths.includes('/p/real?width=640'), 'the real spelling is recorded');
  assert.equal(paths.length, config.SERVED_PATHS_PER_SOURCE, 'bounded per source');
});
