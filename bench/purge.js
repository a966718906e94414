// bench/purge: webhook → every varnish node answers the new avatar, at 100 events/s (measured from outside:
// the time until each node answers the new redirect), with one varnish node, with two in one stack (the
// fan-out) and in the fleet layout (two machines); three runs of each; and the drain rate of a 10,000-event
// backlog.
//   node bench/purge.js [--quick]
import '../lib/src/node-version.js';
import fs from 'node:fs';
import { Redis } from 'ioredis';
import { Pool } from 'undici';
import { sign } from '../purge-service/src/signature.js';
import { fleetOn } from '../test/support/fleet.js';
import { freePort, waitFor } from '../test/support/ports.js';
import { startStack } from '../test/support/stack.js';
import { machine, percentile, quiet, spread, writeReport } from './lib.js';

const quick = process.argv.includes('--quick');
const EVENTS = quick ? 200 : 1000;
const RUNS = quick ? 1 : 3;

/**
 * @typedef {{ nodes: Pool[], edges: Pool[], redis: Redis, hmac: string, stack?: Awaited<ReturnType<typeof startStack>>, stop: () => Promise<void> }} Layout
 * nodes: each varnish node, asked directly; edges: the nginx the webhooks go through (in turn); redis: the master
 */

/**
 * One stack, with one varnish node or two (the second started from the same rendered VCL).
 * @param {number} count @returns {Promise<Layout>}
 */
async function startBench(count) {
  const portA = await freePort();
  const portB = await freePort();
  const settings = {
    PURGE_HMAC_KEYS: 'bench-key',
    NGINX_RATE_LIMIT: '1000000',
    NGINX_RATE_BURST: '1000000',
    VARNISH_MISS_LIMIT: '0',
    LOG_LEVEL: 'warn',
    VARNISH_PORT: String(portA),
  };
  const stack = await startStack(
    count > 1 ? { ...settings, EDGE_VARNISH_NODES: `127.0.0.1:${portA},127.0.0.1:${portB}` } : settings,
  );
  /** @type {ReturnType<typeof import('../test/support/processes.js').startProcess> | null} */
  let second = null;
  if (count > 1) second = await stack.startVarnish('node-b', portB, 'malloc,256M');
  const nodes = [portA, portB].slice(0, count).map((port) => new Pool(`http://127.0.0.1:${port}`, { connections: 64 }));
  const edges = [new Pool(stack.base, { connections: 16 })];
  const redis = new Redis(stack.redisUrl);
  return {
    nodes,
    edges,
    redis,
    stack,
    hmac: 'bench-key',
    async stop() {
      redis.disconnect();
      await Promise.all([...nodes, ...edges].map((pool) => pool.close()));
      await second?.stop();
      await stack.stop();
    },
  };
}

/**
 * The multi-node layout (`./infra/stack fleet`, on its own loopback addresses): two edge machines, each
 * with its nginx, varnish node and purge service; webhooks through either edge; Redis master + replica, so
 * a webhook is answered only once the replica holds its event (REDIS_ACK_REPLICAS=1).
 * @returns {Promise<Layout>}
 */
async function startFleet() {
  const hosts = ['127.0.5.1', '127.0.5.2', '127.0.5.3'];
  const { fleet, redisPassword, remove } = fleetOn(
    hosts,
    { PURGE_HMAC_KEYS: 'bench-key', NGINX_RATE_LIMIT: '1000000', NGINX_RATE_BURST: '1000000', VARNISH_MISS_LIMIT: '0' },
    { timeoutMs: 900_000 },
  );
  fleet('up');
  // three machines share this box's two cores: the first run starts once all of them are done starting
  // (on separate machines each would have its own cores for that)
  await quiet();
  const [a, b] = hosts;
  const nodes = [a, b].map((host) => new Pool(`http://${host}:6081`, { connections: 64 }));
  const edges = [a, b].map((host) => new Pool(`http://${host}:8080`, { connections: 16 }));
  const redis = new Redis(6379, a, { password: redisPassword() });
  return {
    nodes,
    edges,
    redis,
    hmac: 'bench-key',
    async stop() {
      redis.disconnect();
      await Promise.all([...nodes, ...edges].map((pool) => pool.close()));
      fleet('down');
      remove();
    },
  };
}

/** Where a node sends an account's avatar now. @param {Pool} pool @param {string} account */
async function location(pool, account) {
  const response = await pool.request({ method: 'GET', path: `/u/${account}/avatar` });
  await response.body.dump();
  return String(response.headers.location);
}

/** A signed "avatar changed" webhook through an edge; its status. @param {Pool} edge @param {string} hmac @param {string} account */
async function webhook(edge, hmac, account) {
  const body = JSON.stringify({ account, kind: 'avatar' });
  const timestamp = String(Math.floor(Date.now() / 1000));
  const response = await edge.request({
    method: 'POST',
    path: '/hooks/avatar',
    body,
    headers: { 'x-timestamp': timestamp, 'x-signature': `sha256=${sign(hmac, timestamp, Buffer.from(body))}` },
  });
  await response.body.dump();
  return response.statusCode;
}

/**
 * EVENTS avatar changes at 100 a second, each timed from the signed webhook until every node answers the
 * new redirect (polled every 2 ms). The bench's own HTTP clients are warmed first (one refused webhook per
 * edge), so their first connections are not counted as the stack's. @param {Layout} layout @param {string} run
 */
async function fanOut(layout, run) {
  const { nodes, edges, redis, hmac } = layout;
  for (const edge of edges) await webhook(edge, 'not-the-key', 'warm-up');
  const accounts = Array.from({ length: EVENTS }, (_, i) => `p${run}n${i}`);
  const setup = redis.pipeline();
  for (const account of accounts)
    setup.hset(`avatar:local:${account}`, 'avatar', `https://img.example/${account}-1.png`);
  await setup.exec();
  // cached on every node (each asked directly: the edge would put each account on one)
  for (const account of accounts) for (const pool of nodes) await location(pool, account);
  /** @type {Array<[number, number]>} */
  const events = []; // [event index, ms]: where in the run the tail sits
  const started = performance.now();
  await Promise.all(
    accounts.map(async (account, i) => {
      await new Promise((resolve) => setTimeout(resolve, Math.max(0, i * 10 - (performance.now() - started)))); // 100 events/s
      const before = await Promise.all(nodes.map((pool) => location(pool, account)));
      await redis.hset(`avatar:local:${account}`, 'avatar', `https://img.example/${account}-2.png`);
      const sent = performance.now();
      const status = await webhook(edges[i % edges.length], hmac, account);
      if (status !== 202) throw new Error(`webhook answered ${status}`);
      await Promise.all(
        nodes.map(async (pool, node) => {
          while ((await location(pool, account)) === before[node])
            await new Promise((resolve) => setTimeout(resolve, 2));
        }),
      );
      events.push([i, performance.now() - sent]);
    }),
  );
  const latencies = events.map(([, ms]) => ms);
  /** @type {Array<[number, number]>} */
  const slowest = events
    .sort((x, y) => y[1] - x[1])
    .slice(0, 12)
    .map(([i, ms]) => [i, Math.round(ms)]);
  return {
    p50_ms: percentile(latencies, 0.5),
    p99_ms: percentile(latencies, 0.99),
    max_ms: Math.max(...latencies),
    slowest,
  };
}

/** A 10,000-event backlog queued while the purge service is stopped, then drained. @param {Awaited<ReturnType<typeof startStack>>} stack */
async function drain(stack) {
  const redis = new Redis(stack.redisUrl);
  try {
    await stack.ctl('stop', 'purge-service');
    const backlog = redis.pipeline();
    for (let i = 0; i < 10_000; i += 1)
      backlog.xadd(
        'purge:events',
        '*',
        'account',
        `drain-${i}`,
        'kind',
        'both',
        'source',
        'bench',
        'at',
        String(Date.now()),
      );
    await backlog.exec();
    const drainStart = performance.now();
    await stack.ctl('start', 'purge-service');
    await waitFor(async () => (await redis.xlen('purge:events')) === 0, 300_000, 'drain');
    return (performance.now() - drainStart) / 1000;
  } finally {
    redis.disconnect();
  }
}

/** Where the fan-out is measured: a label, how many varnish nodes, and how to start it. */
const LAYOUTS = [
  { label: 'one stack, one varnish node', nodes: 1, start: () => startBench(1) },
  { label: 'one stack, two varnish nodes', nodes: 2, start: () => startBench(2) },
  {
    label: 'fleet (./infra/stack fleet): two edge machines, two purge services, Redis replica acknowledged',
    nodes: 2,
    start: startFleet,
  },
];

export async function benchPurge() {
  /** @type {Array<Array<{ p50_ms: number, p99_ms: number, max_ms: number, slowest: Array<[number, number]> }>>} */
  const runs = LAYOUTS.map(() => []);

  let drainSeconds = 0;
  for (const [index, layout] of LAYOUTS.entries()) {
    const bench = await layout.start();
    try {
      for (let run = 0; run < RUNS; run += 1) runs[index].push(await fanOut(bench, `${index}r${run}`));
      if (index === 0 && bench.stack) drainSeconds = await drain(bench.stack);
    } finally {
      await bench.stop();
    }
  }
  const rows = LAYOUTS.map((layout, index) => {
    const p99 = spread(runs[index].map((run) => run.p99_ms));
    const p50 = spread(runs[index].map((run) => run.p50_ms));
    return [
      layout.label,
      layout.nodes,
      EVENTS,
      RUNS,
      `${Math.round(p50.median)} (${Math.round(p50.min)}–${Math.round(p50.max)})`,
      `${Math.round(p99.median)} (${Math.round(p99.min)}–${Math.round(p99.max)})`,
      runs[index].map((run) => Math.round(run.p99_ms)).join(', '),
      Math.round(Math.max(...runs[index].map((run) => run.max_ms))),
      runs[index][0].slowest
        .slice(0, 4)
        .map(([event, ms]) => `#${event}: ${ms}`)
        .join(', '),
    ];
  });
  const result = {
    events: EVENTS,
    layouts: LAYOUTS.map((layout, index) => ({ label: layout.label, runs: runs[index] })),
    drainSeconds,
    drainRate: 10_000 / drainSeconds,
  };
  return {
    ...result,
    sections: [
      {
        heading:
          'Webhook → every varnish node answers the new avatar, at 100 events/s (target p99 ≤ 100 ms in each run)',
        text: `${EVENTS} events for distinct accounts cached on every node; each timed from sending the signed webhook through nginx (in the fleet, through each edge in turn) until every node answers the new redirect (each polled directly every 2 ms). The purge service purges each node. ${RUNS} runs each, the first right after the start (the fleet's once the box is quiet again: its three machines share two cores); median (min–max). The last column says where a run's tail sits: events numbered below ~20 are the first 200 ms after the stack started (its processes' first webhooks and purges), the rest is steady state.`,
        table: {
          columns: [
            'layout',
            'varnish nodes',
            'events',
            'runs',
            'p50 ms',
            'p99 ms',
            'p99 of each run',
            'max ms',
            'slowest events of the first run (#event: ms)',
          ],
          rows,
        },
      },
      {
        heading: 'Draining a 10,000-event backlog (target ≥ 1,000 events/s to varnish)',
        text: 'Queued while the purge service was stopped, then drained by one worker (resolver cache + xkey and URL purges on varnish; no CDN configured). The time includes the service start.',
        table: { columns: ['events', 'seconds', 'events/s'], rows: [[10_000, drainSeconds, result.drainRate]] },
      },
    ],
  };
}

if (import.meta.main) {
  const result = await benchPurge();
  const file = writeReport('purge', {
    title: 'bench/purge',
    command: `node bench/purge.js${quick ? ' --quick' : ''}`,
    machine: await machine(),
    sections: result.sections,
    data: result,
  });
  process.stdout.write(`${fs.readFileSync(file, 'utf8')}\n`);
  process.exit(0);
}
