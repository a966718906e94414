// Redis with Sentinel: a master, a replica and three sentinels (real redis-server processes). The purge
// service finds the master through the sentinels and acknowledges a webhook only once a replica holds its
// event (REDIS_ACK_REPLICAS=1). The master is SIGKILLed under a stream of signed webhooks: the sentinels
// promote the replica, the old master comes back as a replica, webhooks resume, and every webhook answered
// 202 is purged at the CDN (the fake Cloudflare API: the one thing outside).
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { Redis } from 'ioredis';
import { connectRedis, createLogger, subscribe } from '../lib/src/index.js';
import { sign } from '../purge-service/src/signature.js';
import { startCloudflare } from './support/cloudflare.js';
import { freePort, waitFor } from './support/ports.js';
import { startProcess, startService } from './support/processes.js';

const MASTER = 'edge';
/** @type {string} */
let dir;
/** @type {Record<string, { port: number, args: string[], proc: ReturnType<typeof startProcess> }>} */
const servers = {};
/** @type {Array<ReturnType<typeof startProcess>>} */
const sentinels = [];
/** @type {number[]} */
const sentinelPorts = [];
/** @type {Awaited<ReturnType<typeof startCloudflare>>} */
let cloudflare;
/** @type {Awaited<ReturnType<typeof startService>>} */
let purge;
let purgePort = 0;

/** A redis-server on its own port and directory, AOF fsynced always. @param {string} name @param {string[]} [extra] */
async function startServer(name, extra = []) {
  const port = await freePort();
  fs.mkdirSync(path.join(dir, name));
  const args = [
    '--port',
    String(port),
    '--bind',
    '127.0.0.1',
    '--dir',
    path.join(dir, name),
    '--save',
    '',
    '--appendonly',
    'yes',
    '--appendfsync',
    'always',
    ...extra,
  ];
  servers[name] = { port, args, proc: startProcess('redis-server', args) };
  return port;
}

/** @param {number} port */
const client = (port) => {
  const redis = new Redis(port, '127.0.0.1', { maxRetriesPerRequest: 1, retryStrategy: () => 100, lazyConnect: true });
  redis.on('error', () => {});
  return redis;
};

/** A command's answer on a port, or null when it does not answer. @param {number} port @param {string[]} command */
async function ask(port, command) {
  const redis = client(port);
  try {
    await redis.connect();
    return await redis.call(command[0], ...command.slice(1));
  } catch {
    return null;
  } finally {
    redis.disconnect();
  }
}

before(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sentinel-'));
  const masterPort = await startServer('a');
  await startServer('b', ['--replicaof', '127.0.0.1', String(masterPort)]);
  for (let i = 0; i < 3; i += 1) {
    const port = await freePort();
    const conf = path.join(dir, `sentinel-${i}.conf`);
    fs.writeFileSync(
      conf,
      [
        `port ${port}`,
        'bind 127.0.0.1',
        `dir ${dir}`,
        `sentinel monitor ${MASTER} 127.0.0.1 ${masterPort} 2`,
        // the stack's own down-after (infra/render/redis.js): with 1 s, on a busy machine, the replica was refused as a
        // candidate (-failover-abort-no-good-slave) at every retry
        `sentinel down-after-milliseconds ${MASTER} 3000`,
        `sentinel failover-timeout ${MASTER} 5000`,
        '',
      ].join('\n'),
    );
    sentinelPorts.push(port);
    sentinels.push(startProcess('redis-server', [conf, '--sentinel']));
  }
  await waitFor(
    async () => String(await ask(servers.b.port, ['INFO', 'replication'])).includes('master_link_status:up'),
    20_000,
    'the replica in sync',
  );
  // every sentinel knows the other two (a failover needs a majority of them to agree) and the replica: a
  // sentinel learns of it from the master's INFO, every 10 s, and one that has not when the master dies has
  // no replica to promote, ever (a CI run: "the sentinels' view of the replica: [[],[],[]]")
  await waitFor(
    async () => {
      for (const port of sentinelPorts) {
        const info = /** @type {string[] | null} */ (await ask(port, ['SENTINEL', 'MASTER', MASTER]));
        if (!info || Number(info[info.indexOf('num-other-sentinels') + 1]) !== 2) return false;
        if (Number(info[info.indexOf('num-slaves') + 1]) < 1) return false;
      }
      return true;
    },
    30_000,
    'the sentinels aware of each other and of the replica',
  );
  cloudflare = await startCloudflare();
  purgePort = await freePort();
  purge = await startService(
    'purge-service/bin/purge-service',
    {
      REDIS_URL: 'redis://ignored:1/0',
      REDIS_SENTINELS: sentinelPorts.map((port) => `127.0.0.1:${port}`).join(','),
      REDIS_MASTER_NAME: MASTER,
      REDIS_ACK_REPLICAS: '1',
      REDIS_ACK_TIMEOUT_MS: '500',
      PURGE_SERVICE_PORT: String(purgePort),
      PURGE_SERVICE_METRICS_PORT: String(await freePort()),
      PURGE_HMAC_KEYS: 'sentinel-key',
      PURGE_VARNISH_NODES: '',
      PUBLIC_URL: 'http://cdn.example',
      PURGE_CLAIM_IDLE_MS: '1000',
      PURGE_RETRY_BASE_MS: '100',
      PURGE_RETRY_MAX_MS: '1000',
      CLOUDFLARE_API_BASE: cloudflare.base,
      CLOUDFLARE_ZONE_ID: 'zone-s',
      CLOUDFLARE_API_TOKEN: 'cf-token',
      CLOUDFLARE_CALLS_PER_SECOND: '1000',
      CLOUDFLARE_BURST: '100',
    },
    purgePort,
  );
});
after(async () => {
  await purge?.stop();
  await cloudflare?.close();
  for (const proc of [...sentinels, ...Object.values(servers).map((server) => server.proc)]) await proc.stop();
  fs.rmSync(dir, { recursive: true, force: true });
});

/** A signed webhook: its status (0 when it got no answer). @param {string} account */
async function webhook(account) {
  const body = JSON.stringify({ account, kind: 'avatar' });
  const timestamp = String(Math.floor(Date.now() / 1000));
  const headers = {
    'content-type': 'application/json',
    'x-timestamp': timestamp,
    'x-signature': `sha256=${sign('sentinel-key', timestamp, Buffer.from(body))}`,
  };
  const response = await fetch(`http://127.0.0.1:${purgePort}/hooks/avatar`, {
    method: 'POST',
    body,
    headers,
    signal: AbortSignal.timeout(5000),
  }).catch(() => null);
  await response?.arrayBuffer();
  return response?.status || 0;
}

test('the master SIGKILLed under signed webhooks: sentinel fails over, webhooks resume, every one answered 202 is purged', async () => {
  /** @type {Array<{ account: string, status: number, at: number }>} */
  const sent = [];
  let stop = false;
  let n = 0;
  const stream = (async () => {
    while (!stop) {
      const account = `sentinel-${n++}`;
      sent.push({ account, status: await webhook(account), at: Date.now() });
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  })();
  await waitFor(async () => sent.filter((hook) => hook.status === 202).length >= 20, 20_000, 'webhooks flowing');
  const killedAt = Date.now();
  await servers.a.proc.kill();
  // the sentinels promote the replica; the old master, back on its port, is made a replica of it
  await waitFor(
    async () => String(await ask(servers.b.port, ['INFO', 'replication'])).includes('role:master'),
    60_000,
    'the replica promoted',
  ).catch(async (err) => {
    // what the sentinels made of the replica (its flags say why it was not promoted)
    const views = await Promise.all(sentinelPorts.map((port) => ask(port, ['SENTINEL', 'REPLICAS', MASTER])));
    throw new Error(
      `${err.message}; the sentinels' view of the replica: ${JSON.stringify(views)}; ${sentinels[0].output().slice(-1500)}`,
    );
  });
  servers.a.proc = startProcess('redis-server', servers.a.args);
  await waitFor(
    async () => String(await ask(servers.a.port, ['INFO', 'replication'])).includes('master_link_status:up'),
    60_000,
    'the old master back as a replica',
  );
  await waitFor(
    async () => sent.filter((hook) => hook.at > killedAt + 1000 && hook.status === 202).length >= 20,
    60_000,
    'webhooks answered 202 again after the failover',
  );
  stop = true;
  await stream;
  const acknowledged = sent.filter((hook) => hook.status === 202);
  for (const { status } of sent.filter((hook) => hook.status !== 202))
    assert.equal(status, 503, 'a webhook not acknowledged is a 503 the sender retries');
  assert.ok(
    sent.some((hook) => hook.status === 503),
    'some webhooks met the failover',
  );
  const purged = () => new Set(cloudflare.purged());
  await waitFor(
    async () => acknowledged.every(({ account }) => purged().has(`http://cdn.example/u/${account}/avatar`)),
    60_000,
    'every acknowledged webhook purged',
  );
  const missing = acknowledged.filter(({ account }) => !purged().has(`http://cdn.example/u/${account}/avatar`));
  assert.deepEqual(missing, []);
  assert.ok(acknowledged.length >= 40, `${acknowledged.length} webhooks acknowledged, all purged`);
});

test('with the replica gone, a webhook is refused (503) rather than acknowledged on the master alone', async () => {
  let n = 0;
  const replica = String(await ask(servers.a.port, ['INFO', 'replication'])).includes('role:slave') ? 'a' : 'b';
  await servers[replica].proc.kill();
  try {
    await waitFor(
      async () => (await webhook(`alone-${n++}`)) === 503,
      10_000,
      'a 503 while no replica holds the event',
    );
  } finally {
    servers[replica].proc = startProcess('redis-server', servers[replica].args);
  }
  await waitFor(async () => (await webhook(`again-${n++}`)) === 202, 60_000, '202 once the replica is back');
});

test('the master stalled (SIGSTOP, as a network cut leaves it): the sentinels fail over and the clients follow', async (t) => {
  const redis = connectRedis(
    {
      REDIS_URL: 'redis://ignored:1/0',
      REDIS_SENTINELS: sentinelPorts.map((port) => `127.0.0.1:${port}`),
      REDIS_MASTER_NAME: MASTER,
    },
    createLogger('sentinel-test', 'silent'),
  );
  /** @type {string[]} */
  const heard = [];
  const listener = subscribe(redis, 'sentinel-test', (message) => heard.push(message), 500);
  t.after(() => {
    listener.disconnect();
    redis.disconnect();
  });
  /** Published on the master until the subscriber hears it. @param {string} message */
  const heardOnce = async (message) => {
    await redis.publish('sentinel-test', message).catch(() => 0);
    return heard.includes(message);
  };
  await waitFor(() => heardOnce('before'), 20_000, 'the subscriber hears the master');
  const at = /** @type {string[]} */ (await ask(sentinelPorts[0], ['SENTINEL', 'GET-MASTER-ADDR-BY-NAME', MASTER]));
  const stalled = Number(at[1]) === servers.a.port ? 'a' : 'b';
  const promoted = stalled === 'a' ? 'b' : 'a';
  servers[stalled].proc.child.kill('SIGSTOP');
  try {
    await waitFor(
      async () => String(await ask(servers[promoted].port, ['INFO', 'replication'])).includes('role:master'),
      60_000,
      'the replica promoted',
    );
    // the client's connection to the stalled master stays open: without a new connection after a timed-out
    // command it never asked the sentinels again while the stall lasted
    await waitFor(
      async () => (await redis.set('after-the-stall', '1').catch(() => null)) === 'OK',
      30_000,
      'the client writing to the new master while the old one is stalled',
    );
    await waitFor(() => heardOnce('after'), 30_000, 'the subscriber hearing the new master');
    assert.equal(await ask(servers[promoted].port, ['GET', 'after-the-stall']), '1');
  } finally {
    servers[stalled].proc.child.kill('SIGCONT');
  }
  await waitFor(
    async () => String(await ask(servers[stalled].port, ['INFO', 'replication'])).includes('master_link_status:up'),
    60_000,
    'the old master back as a replica',
  );
});
