import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { connectRedis, createLogger, redisReady } from '../src/index.js';
import { freePort, waitFor } from '../../test/support/ports.js';
import { startProcess } from '../../test/support/processes.js';

/** @type {ReturnType<typeof startProcess>} */
let server;
let port = 0;

before(async () => {
  port = await freePort();
  server = startProcess('redis-server', [
    '--port',
    String(port),
    '--bind',
    '127.0.0.1',
    '--save',
    '',
    '--appendonly',
    'no',
    '--requirepass',
    'p@ss word',
  ]);
  await waitFor(
    async () => (await ask({ REDIS_URL: `redis://127.0.0.1:${port}/0`, REDIS_PASSWORD: 'p@ss word' })) === 'PONG',
    10_000,
    'redis',
  );
});
after(() => server?.stop());

/** PING through connectRedis with these settings: PONG, or the error's message. @param {Record<string, string>} settings */
async function ask(settings) {
  const redis = connectRedis({ REDIS_SENTINELS: [], ...settings }, createLogger('redis-test', 'silent'));
  try {
    await redisReady(redis, 2000);
    return await redis.ping();
  } catch (err) {
    return String(/** @type {Error} */ (err).message);
  } finally {
    redis.disconnect();
  }
}

test("the Redis password comes from REDIS_PASSWORD, else from REDIS_URL; REDIS_PASSWORD wins over the URL's", async () => {
  assert.equal(await ask({ REDIS_URL: `redis://127.0.0.1:${port}/0`, REDIS_PASSWORD: 'p@ss word' }), 'PONG');
  assert.equal(
    await ask({ REDIS_URL: `redis://:${encodeURIComponent('p@ss word')}@127.0.0.1:${port}/0`, REDIS_PASSWORD: '' }),
    'PONG',
  );
  assert.equal(await ask({ REDIS_URL: `redis://:wrong@127.0.0.1:${port}/0`, REDIS_PASSWORD: 'p@ss word' }), 'PONG');
  assert.doesNotMatch(
    await ask({ REDIS_URL: `redis://127.0.0.1:${port}/0`, REDIS_PASSWORD: '' }),
    /^PONG$/,
    'without one: refused',
  );
});

/** How a command ended and after how long. @param {() => Promise<unknown>} command */
async function timed(command) {
  const started = performance.now();
  const error = await command().then(
    () => '',
    (/** @type {Error} */ err) => err.message,
  );
  return { error, ms: performance.now() - started };
}

test('a stalled Redis (SIGSTOP) costs one command its timeout, the next fail at once, and all is well after', async (t) => {
  const stalledPort = await freePort();
  const stalled = startProcess('redis-server', [
    ...['--port', String(stalledPort), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'],
  ]);
  const redis = connectRedis(
    { REDIS_SENTINELS: [], REDIS_URL: `redis://127.0.0.1:${stalledPort}/0` },
    createLogger('redis-test', 'silent'),
  );
  t.after(async () => {
    redis.disconnect();
    stalled.child.kill('SIGCONT');
    await stalled.stop();
  });
  await waitFor(async () => (await redis.set('k', 'v').catch(() => null)) === 'OK', 10_000, 'redis');
  stalled.child.kill('SIGSTOP');
  const first = await timed(() => redis.get('k'));
  assert.match(first.error, /timed out/);
  assert.ok(first.ms > 1500, `the first command waited its timeout (${first.ms} ms)`);
  // without a new connection each of these waited its 2 s too, for as long as the stall lasted
  for (let i = 0; i < 5; i += 1) {
    const next = await timed(() => redis.get('k'));
    assert.notEqual(next.error, '', 'Redis is stopped: no answer');
    // refused while the client connects again, not left to time out (the time: a sanity bound, under it)
    assert.doesNotMatch(next.error, /timed out/, `command ${i + 2}`);
    assert.ok(next.ms < 1500, `command ${i + 2} failed in ${next.ms} ms, not after its 2 s timeout`);
    await new Promise((resolve) => setTimeout(resolve, 300));
  }
  stalled.child.kill('SIGCONT');
  await waitFor(async () => (await redis.get('k').catch(() => null)) === 'v', 15_000, 'answers once Redis runs');
});
