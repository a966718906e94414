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
