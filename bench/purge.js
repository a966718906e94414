// bench/purge: webhook → every varnish node answers the new avatar, at 100 events/s (measured from outside:
// the time until each node answers the new redirect), with one varnish node and with two (the fan-out);
// three runs of each; and the drain rate of a 10,000-event backlog.
//   node bench/purge.js [--quick]
import fs from 'node:fs';
import { Redis } from 'ioredis';
import { Pool } from 'undici';
import { sign } from '../purge-service/src/signature.js';
import { freePort, waitFor } from '../test/support/ports.js';
import { startStack } from '../test/support/stack.js';
import { machine, percentile, spread, writeReport } from './lib.js';

const quick = process.argv.includes('--quick');
const EVENTS = quick ? 200 : 1000;
const RUNS = quick ? 1 : 3;

/**
 * One stack, with one varnish node or two (the second started from the same rendered VCL).
 * @param {number} nodes
 */
async function startBench(nodes) {
  const portA = await freePort();
  const portB = await freePort();
  const settings = { PURGE_HMAC_KEYS: 'bench-key', NGINX_RATE_LIMIT: '1000000', NGINX_RATE_BURST: '1000000', LOG_LEVEL: 'warn', VARNISH_PORT: String(portA) };
  const stack = await startStack(nodes > 1 ? { ...settings, EDGE_VARNISH_NODES: `127.0.0.1:${portA},127.0.0.1:${portB}` } : settings);
  /** @type {ReturnType<typeof import('../test/support/processes.js').startProcess> | null} */
  let second = null;
  if (nodes > 1) second = await stack.startVarnish('node-b', portB, 'malloc,256M');
  const pools = [portA, portB].slice(0, nodes).map((port) => new Pool(`http://127.0.0.1:${port}`, { connections: 64 }));
  return {
    stack,
    pools,
    async stop() {
      await Promise.all(pools.map((pool) => pool.close()));
      await second?.stop();
      await stack.stop();
    },
  };
}

/** Where a node sends an account's avatar now. @param {Pool} pool @param {string} account */
async function location(pool, account) {
  const response = await pool.request({ method: 'GET', path: `/u/${account}/avatar` });
  await response.body.dump();
  return String(response.headers.location);
}

/**
 * EVENTS avatar changes at 100 a second, each timed from the signed webhook until every node answers the
 * new redirect (polled every 2 ms). @param {Awaited<ReturnType<typeof startBench>>} bench @param {number} run
 */
async function fanOut(bench, run) {
  const { stack, pools } = bench;
  const redis = new Redis(Number(stack.env.REDIS_PORT), '127.0.0.1');
  try {
    const accounts = Array.from({ length: EVENTS }, (_, i) => `p${run}n${i}`);
    const setup = redis.pipeline();
    for (const account of accounts) setup.hset(`avatar:local:${account}`, 'avatar', `https://img.example/${account}-1.png`);
    await setup.exec();
    // cached on every node (each asked directly: the edge would put each account on one)
    for (const account of accounts) for (const pool of pools) await location(pool, account);
    const latencies = [];
    const started = performance.now();
    await Promise.all(accounts.map(async (account, i) => {
      await new Promise((resolve) => setTimeout(resolve, Math.max(0, i * 10 - (performance.now() - started)))); // 100 events/s
      const before = await Promise.all(pools.map((pool) => location(pool, account)));
      await redis.hset(`avatar:local:${account}`, 'avatar', `https://img.example/${account}-2.png`);
      const body = JSON.stringify({ account, kind: 'avatar' });
      const timestamp = String(Math.floor(Date.now() / 1000));
      const sent = performance.now();
      const response = await fetch(`${stack.base}/hooks/avatar`, { method: 'POST', body, headers: { 'x-timestamp': timestamp, 'x-signature': `sha256=${sign('bench-key', timestamp, Buffer.from(body))}` } });
      if (response.status !== 202) throw new Error(`webhook answered ${response.status}`);
      await Promise.all(pools.map(async (pool, node) => {
        while ((await location(pool, account)) === before[node]) await new Promise((resolve) => setTimeout(resolve, 2));
      }));
      latencies.push(performance.now() - sent);
    }));
    return { p50_ms: percentile(latencies, 0.5), p99_ms: percentile(latencies, 0.99), max_ms: Math.max(...latencies) };
  } finally {
    redis.disconnect();
  }
}

/** A 10,000-event backlog queued while the purge service is stopped, then drained. @param {Awaited<ReturnType<typeof startStack>>} stack */
async function drain(stack) {
  const redis = new Redis(Number(stack.env.REDIS_PORT), '127.0.0.1');
  try {
    await stack.ctl('stop', 'purge-service');
    const backlog = redis.pipeline();
    for (let i = 0; i < 10_000; i += 1) backlog.xadd('purge:events', '*', 'account', `drain-${i}`, 'kind', 'both', 'source', 'bench', 'at', String(Date.now()));
    await backlog.exec();
    const drainStart = performance.now();
    await stack.ctl('start', 'purge-service');
    await waitFor(async () => (await redis.xlen('purge:events')) === 0, 300_000, 'drain');
    return (performance.now() - drainStart) / 1000;
  } finally {
    redis.disconnect();
  }
}

export async function benchPurge() {
  /** @type {Record<number, Array<{ p50_ms: number, p99_ms: number, max_ms: number }>>} */
  const runs = { 1: [], 2: [] };
  let drainSeconds = 0;
  for (const nodes of [1, 2]) {
    const bench = await startBench(nodes);
    try {
      for (let run = 0; run < RUNS; run += 1) runs[nodes].push(await fanOut(bench, run));
      if (nodes === 1) drainSeconds = await drain(bench.stack);
    } finally {
      await bench.stop();
    }
  }
  const row = (/** @type {number} */ nodes) => {
    const p99 = spread(runs[nodes].map((run) => run.p99_ms));
    const p50 = spread(runs[nodes].map((run) => run.p50_ms));
    return [nodes, EVENTS, RUNS, `${Math.round(p50.median)} (${Math.round(p50.min)}–${Math.round(p50.max)})`,
      `${Math.round(p99.median)} (${Math.round(p99.min)}–${Math.round(p99.max)})`, runs[nodes].map((run) => Math.round(run.p99_ms)).join(', '),
      Math.round(Math.max(...runs[nodes].map((run) => run.max_ms)))];
  };
  const result = { events: EVENTS, runs, drainSeconds, drainRate: 10_000 / drainSeconds };
  return {
    ...result,
    sections: [
      { heading: 'Webhook → every varnish node answers the new avatar, at 100 events/s (target p99 ≤ 100 ms in each run)',
        text: `${EVENTS} events for distinct accounts cached on every node; each timed from sending the signed webhook through nginx until every node answers the new redirect (each polled directly every 2 ms). One varnish node, then two (the purge service purges each). ${RUNS} runs each; median (min–max).`,
        table: { columns: ['varnish nodes', 'events', 'runs', 'p50 ms', 'p99 ms', 'p99 of each run', 'max ms'], rows: [row(1), row(2)] } },
      { heading: 'Draining a 10,000-event backlog (target ≥ 1,000 events/s to varnish)', text: 'Queued while the purge service was stopped, then drained by one worker (resolver cache + xkey and URL purges on varnish; no CDN configured). The time includes the service start.',
        table: { columns: ['events', 'seconds', 'events/s'], rows: [[10_000, drainSeconds, result.drainRate]] } },
    ],
  };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const result = await benchPurge();
  const file = writeReport('purge', { title: 'bench/purge', command: `node bench/purge.js${quick ? ' --quick' : ''}`, machine: await machine(), sections: result.sections, data: result });
  process.stdout.write(`${fs.readFileSync(file, 'utf8')}\n`);
  process.exit(0);
}
