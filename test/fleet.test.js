// needs the whole-stack tier's built tools (versitygw, helm, kube-score, Podman): run once they are built
// The multi-node layout on one machine (./infra/stack fleet, infra/fleet.js): machines a, b and c on their
// own loopback addresses, each a native stack from the same settings and templates: two edges (nginx,
// varnish, haproxy), two origins sharing one S3 bucket, two resolvers, two purge services, a Redis master and
// its replica, three sentinels. Talked to only through the machines' addresses, as separate hosts would be.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { promisify } from 'node:util';
import { base58Url } from '@stack/lib';
import { sign } from '../purge-service/src/signature.js';
import { decode, solid } from './support/images.js';
import { fleetOn } from './support/fleet.js';
import { root as ROOT } from './support/processes.js';
import { metricValue, metricsAuth } from './support/metrics.js';
import { waitFor } from './support/ports.js';
import { tokenUpload } from './support/upload.js';

const run = promisify(execFile);
// not 127.0.1.x, which `./infra/stack fleet up` uses by default: a person's fleet keeps running
const [A, B, C] = ['127.0.3.1', '127.0.3.2', '127.0.3.3'];
const { dir, env, fleet, redisPassword, remove } = fleetOn([A, B, C], {
  UPLOAD_TOKENS: 'fleet-token',
  AVATAR_ADMIN_TOKEN: 'fleet-admin',
  PURGE_HMAC_KEYS: 'fleet-hmac',
  METRICS_PASSWORD: 'fleet-metrics',
});

/** supervisorctl on one machine. @param {string} machine @param {...string} args */
const ctl = (machine, ...args) =>
  run('supervisorctl', ['-c', path.join(dir, machine, 'conf/supervisord.conf'), ...args]);
/** A Redis command on a host (port 6379, or a sentinel's 26379). @param {string} host @param {number} port @param {...string} args */
const redis = async (host, port, ...args) =>
  (
    await run('redis-cli', ['-h', host, '-p', String(port), '--raw', ...args], {
      env: { ...process.env, REDISCLI_AUTH: redisPassword() },
    })
  ).stdout.trim();

before(() => fleet('up'), { timeout: 900_000 });
after(() => {
  fleet('down');
  remove();
});

/** @param {string} url */
async function get(url) {
  const response = await fetch(url, { redirect: 'manual' });
  const body = Buffer.from(await response.arrayBuffer());
  return {
    status: response.status,
    body,
    node: response.headers.get('x-served-by'),
    cache: response.headers.get('x-cache'),
    location: response.headers.get('location'),
  };
}

/** An upload through an edge: its URL. @param {string} edge @param {Buffer} body @param {string} name */
async function upload(edge, body, name) {
  const uploaded = await tokenUpload(`http://${edge}:8080`, body, name, 'fleet-token');
  assert.equal(uploaded.status, 200, await uploaded.clone().text());
  return /** @type {{ url: string }} */ (await uploaded.json()).url;
}

test('fleet: an upload through one edge is served by the other; URLs spread over both varnish nodes, each made once', async () => {
  const original = await solid(400, 300, 'png');
  const url = await upload(B, original, 'fleet.png');
  const key = new URL(url).pathname;
  assert.deepEqual(
    (await get(`http://${A}:8080${key}`)).body,
    original,
    'stored in the shared bucket, served by the other machine',
  );

  const urls = Array.from({ length: 24 }, (_, i) => `/p/${base58Url.encode(url)}?width=${50 + i}`);
  /** @type {Map<string, string>} */
  const holder = new Map();
  for (const [i, pathname] of urls.entries()) {
    const first = await get(`http://${i % 2 ? A : B}:8080${pathname}`);
    assert.equal(first.status, 200);
    assert.equal((await decode(first.body)).width, 50 + i);
    holder.set(pathname, String(first.node));
  }
  assert.deepEqual(new Set(holder.values()), new Set(['a', 'b']), 'both varnish nodes hold some');
  for (const pathname of urls) {
    for (const edge of [A, B]) {
      const again = await get(`http://${edge}:8080${pathname}`);
      assert.deepEqual(
        [again.cache, again.node],
        ['HIT', holder.get(pathname)],
        `${pathname} through ${edge}: one node holds it for both edges`,
      );
    }
  }
});

test('fleet: three sentinels agree on a master with its replica; avatar changes and signed webhooks through either edge purge both varnish nodes', async () => {
  for (const host of [A, B, C])
    assert.equal((await redis(host, 26379, 'sentinel', 'get-master-addr-by-name', 'images')).split('\n')[0], A);
  // Redis and the sentinels are on the machines' addresses: they answer only with the fleet's password
  for (const [host, port] of [
    [A, 6379],
    [B, 6379],
    [A, 26379],
    [C, 26379],
  ]) {
    const { stdout } = await run('redis-cli', ['-h', String(host), '-p', String(port), 'ping']);
    assert.match(stdout, /NOAUTH/, `${host}:${port} without the password`);
  }
  await waitFor(
    async () => /num-other-sentinels\n2\n/.test(await redis(A, 26379, 'sentinel', 'master', 'images')),
    30_000,
    'each sentinel knowing the two others',
  );
  assert.match(
    await redis(A, 6379, 'info', 'replication'),
    new RegExp(`slave0:ip=${B.replace(/\./g, '\\.')},port=6379,state=online`),
  );
  await purgedEverywhere('fleet1', A);
});

test("fleet: machine a's Prometheus scrapes every component of both edge machines", async () => {
  /** @type {string[]} */
  let down = [];
  await waitFor(
    async () => {
      const { data } = await (
        await fetch(`http://${A}:9090/api/v1/targets?state=active`, { headers: metricsAuth('fleet-metrics') })
      ).json();
      down = data.activeTargets
        .filter((/** @type {any} */ target) => target.health !== 'up')
        .map((/** @type {any} */ target) => `${target.scrapeUrl}: ${target.lastError}`);
      return data.activeTargets.length === 18 && !down.length;
    },
    60_000,
    'every target up',
  ).catch((err) => {
    throw new Error(`${err.message}: ${down.join('; ')}`);
  });
});

test(
  'fleet: the Redis master stopped: the sentinels promote the replica, the old master returns as its replica, purges go on',
  { timeout: 180_000 },
  async (t) => {
    const stoppedAt = Date.now();
    /** Each step's time in the report. @param {string} step */
    const took = (step) =>
      t.diagnostic(`${step} ${((Date.now() - stoppedAt) / 1000).toFixed(1)} s after the master was stopped`);
    await ctl('a', 'stop', 'redis');
    await waitFor(
      async () => (await redis(C, 26379, 'sentinel', 'get-master-addr-by-name', 'images')).split('\n')[0] === B,
      90_000,
      'b promoted',
    ).catch(async (err) => {
      // what each sentinel made of the replica (its flags say why it was not promoted), and what they logged
      const views = await Promise.all(
        [A, B, C].map((host) => redis(host, 26379, 'sentinel', 'replicas', 'images').catch((error) => String(error))),
      );
      const logs = ['a', 'b', 'c'].map(
        (machine) =>
          `${machine}: ${fs.readFileSync(path.join(dir, machine, 'logs/redis-sentinel.log'), 'utf8').slice(-1500)}`,
      );
      throw new Error(
        `${err.message}; the sentinels' view of the replica: ${JSON.stringify(views)}; their logs: ${logs.join('\n')}`,
      );
    });
    took('b promoted');
    await ctl('a', 'start', 'redis');
    await waitFor(
      async () => /role:slave/.test(await redis(A, 6379, 'info', 'replication').catch(() => '')),
      60_000,
      'a back as a replica of b',
    );
    await waitFor(
      async () => /connected_slaves:1/.test(await redis(B, 6379, 'info', 'replication')),
      30_000,
      'b has its replica',
    );
    took('a back as its replica');
    await purgedEverywhere('fleet2', B);
    took('purges through the new master');
  },
);

test('fleet: an origin hung (SIGSTOP): the misses already waiting on it are made by the other origin', async () => {
  const madeByB = () => metricValue(`http://${B}:9800/metrics`, 'origin_transforms_total', {}, 'fleet-metrics');
  // haproxy sends every variant of one source to one origin (its path's hash): sources until three are b's
  /** @type {string[]} */
  const onB = [];
  for (let i = 0; i < 40 && onB.length < 3; i += 1) {
    const url = await upload(A, await solid(300 + i, 200, 'jpeg'), `hung-${i}.jpg`);
    const before = await madeByB();
    assert.equal((await get(`http://${A}:8080/p/${base58Url.encode(url)}?width=60`)).status, 200);
    if ((await madeByB()) > before) onB.push(url);
  }
  assert.equal(onB.length, 3, 'three sources whose variants origin b makes');
  const pid = Number((await ctl('b', 'pid', 'origin')).stdout.trim());
  assert.ok(pid > 0);
  process.kill(pid, 'SIGSTOP');
  /** @type {Array<{ status: number, width: number, ms: number }>} */
  let answers = [];
  try {
    answers = await Promise.all(
      onB.map(async (url) => {
        const started = performance.now();
        const answer = await get(`http://${A}:8080/p/${base58Url.encode(url)}?width=120`);
        const width = answer.status === 200 ? Number((await decode(answer.body)).width) : 0;
        return { status: answer.status, width, ms: performance.now() - started };
      }),
    );
  } finally {
    process.kill(pid, 'SIGCONT');
  }
  assert.deepEqual(
    answers.map((answer) => [answer.status, answer.width]),
    onB.map(() => [200, 120]),
    `every miss sent to the hung origin made by the other: ${JSON.stringify(answers)}`,
  );
  for (const answer of answers) assert.ok(answer.ms < 30_000, `${answer.ms} ms, not haproxy's 60 s server timeout`);
});

test('fleet restart (new code): machine by machine, every service started again; misses through both edges all answered meanwhile', async () => {
  const url = await upload(A, await solid(500, 400, 'jpeg'), 'restart.jpg');
  const origins = async () =>
    Promise.all(['a', 'b'].map(async (machine) => Number((await ctl(machine, 'pid', 'origin')).stdout.trim())));
  const before = await origins();
  let restarting = true;
  /** @type {Record<string, number>} */
  const statuses = {};
  let width = 300;
  const missing = (async () => {
    while (restarting) {
      const edge = width % 2 ? A : B;
      const { status } = await get(`http://${edge}:8080/p/${base58Url.encode(url)}?width=${width++}`);
      statuses[status] = (statuses[status] || 0) + 1;
      // within one client's miss limit (VARNISH_MISS_LIMIT, 120 in 10 s, should every miss fall on one varnish
      // node), whatever the answers' speed: at 20 ms apart, fast answers through a quick restart made 16 misses
      // a second for each node, and varnish rightly answered 429s (a CI run)
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  })();
  try {
    await run(path.join(ROOT, 'infra/stack'), ['fleet', 'restart'], { env, cwd: ROOT, timeout: 300_000 });
  } finally {
    restarting = false;
    await missing;
  }
  assert.deepEqual(Object.keys(statuses), ['200'], JSON.stringify(statuses));
  assert.ok(statuses['200'] >= 20, `${statuses['200']} misses across the restart`);
  const after = await origins();
  assert.ok(
    after.every((pid, i) => pid > 0 && pid !== before[i]),
    `origins ${before} → ${after}`,
  );
});

/**
 * An account's avatar changed on a resolver's admin API (its own port, never the public path), then a
 * signed webhook through `edge`: each change reaches both varnish nodes, straight to each (the edges would
 * put the URL on one). @param {string} account @param {string} edge
 */
async function purgedEverywhere(account, edge) {
  for (const version of ['old', 'new']) {
    /** @type {string | null} */
    let purge = null;
    await waitFor(
      async () => (purge = await setAvatar(account, `https://img.example/${account}-${version}.png`)) !== null,
      30_000,
      `${account}'s avatar set`,
    );
    // the change's own purge done first: landing after a node had cached the new avatar, it would take it out
    // again (the HIT below a MISS), or later still, do what the webhook is asked to do
    await waitFor(() => acknowledged(String(purge)), 30_000, `the purge of ${account}'s ${version} avatar`);
    for (const node of [A, B]) {
      await waitFor(
        async () =>
          target((await get(`http://${node}:6081/u/${account}/avatar`)).location).includes(`${account}-${version}`),
        15_000,
        `node ${node} answering the ${version} avatar`,
      );
      assert.equal((await get(`http://${node}:6081/u/${account}/avatar`)).cache, 'HIT', `cached on node ${node}`);
    }
  }
  await waitFor(async () => (await webhook(edge, account)) === 202, 30_000, 'the webhook acknowledged');
  for (const node of [A, B])
    await waitFor(
      async () => (await get(`http://${node}:6081/u/${account}/avatar`)).cache === 'MISS',
      15_000,
      `node ${node} purged by the webhook`,
    );
}

/** The image an avatar redirect names (its /p/ URL's base58 part). @param {string | null} location */
const target = (location) => String(base58Url.decode(String(location).split('/')[2]?.split('?')[0] || '') || '');

/** The avatar set on a resolver's admin API: the id of the purge event it queued, null if it failed. @param {string} account @param {string} avatar */
async function setAvatar(account, avatar) {
  const response = await fetch(`http://${A}:8801/admin/accounts/${account}`, {
    method: 'PUT',
    headers: { authorization: 'Bearer fleet-admin', 'content-type': 'application/json' },
    body: JSON.stringify({ avatar }),
  });
  const body = /** @type {{ purge?: string }} */ (await response.json());
  return response.status === 200 && body.purge ? body.purge : null;
}

/**
 * Whether the purge services acknowledged the purge stream's event `id` (every target purged): the group has
 * read past it and it is not pending, on whichever Redis the sentinels name the master. @param {string} id
 */
async function acknowledged(id) {
  const master = (await redis(C, 26379, 'sentinel', 'get-master-addr-by-name', 'images')).split('\n')[0];
  const fields = (await redis(master, 6379, 'xinfo', 'groups', 'purge:events')).split('\n');
  const delivered = fields[fields.indexOf('last-delivered-id') + 1];
  const order = (/** @type {string} */ a, /** @type {string} */ b) => {
    const [x, y] = [a, b].map((one) => one.split('-').map(BigInt));
    return x[0] === y[0] ? Number(x[1] - y[1]) : Number(x[0] - y[0]);
  };
  if (!delivered || order(delivered, id) < 0) return false;
  return (await redis(master, 6379, 'xpending', 'purge:events', 'purgers', id, id, '1')) === '';
}

/** A signed "avatar changed" webhook through an edge's nginx. @param {string} edge @param {string} account */
async function webhook(edge, account) {
  const body = JSON.stringify({ account, kind: 'avatar' });
  const timestamp = String(Math.floor(Date.now() / 1000));
  const response = await fetch(`http://${edge}:8080/hooks/avatar`, {
    method: 'POST',
    body,
    headers: {
      'content-type': 'application/json',
      'x-timestamp': timestamp,
      'x-signature': `sha256=${sign('fleet-hmac', timestamp, Buffer.from(body))}`,
    },
  });
  await response.arrayBuffer();
  return response.status;
}
