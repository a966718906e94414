// bench/purge: webhook → varnish invalidated latency at 100 events/s (measured from outside: the time
// until varnish answers the new redirect), and the drain rate of a 10,000-event backlog.
//   node bench/purge.js [--quick]
import fs from 'node:fs';
import { Redis } from 'ioredis';
import { Pool } from 'undici';
import { sign } from '../purge-service/src/signature.js';
import { waitFor } from '../test/support/ports.js';
import { startStack } from '../test/support/stack.js';
import { machine, percentile, writeReport } from './lib.js';

const quick = process.argv.includes('--quick');
const EVENTS = quick ? 200 : 1000;

export async function benchPurge() {
  const stack = await startStack({ PURGE_HMAC_KEYS: 'bench-key', NGINX_RATE_LIMIT: '1000000', NGINX_RATE_BURST: '1000000', LOG_LEVEL: 'warn' });
  const redis = new Redis(Number(stack.env.REDIS_PORT), '127.0.0.1');
  const varnish = new Pool(`http://127.0.0.1:${stack.env.VARNISH_PORT}`, { connections: 64 });
  const location = async (/** @type {string} */ account) => {
    const response = await varnish.request({ method: 'GET', path: `/u/${account}/avatar` });
    await response.body.dump();
    return String(response.headers.location);
  };
  try {
    const accounts = Array.from({ length: EVENTS }, (_, i) => `purge-${i}`);
    const setup = redis.pipeline();
    for (const account of accounts) setup.hset(`avatar:local:${account}`, 'avatar', `https://img.example/${account}-1.png`);
    await setup.exec();
    for (const account of accounts) await location(account); // cached in varnish, and the resolver
    const latencies = [];
    const started = performance.now();
    await Promise.all(accounts.map(async (account, i) => {
      await new Promise((resolve) => setTimeout(resolve, i * 10 - (performance.now() - started))); // 100 events/s
      const before = await location(account);
      await redis.hset(`avatar:local:${account}`, 'avatar', `https://img.example/${account}-2.png`);
      const body = JSON.stringify({ account, kind: 'avatar' });
      const timestamp = String(Math.floor(Date.now() / 1000));
      const sent = performance.now();
      const response = await fetch(`${stack.base}/hooks/avatar`, { method: 'POST', body, headers: { 'x-timestamp': timestamp, 'x-signature': `sha256=${sign('bench-key', timestamp, Buffer.from(body))}` } });
      if (response.status !== 202) throw new Error(`webhook answered ${response.status}`);
      while ((await location(account)) === before) await new Promise((resolve) => setTimeout(resolve, 2));
      latencies.push(performance.now() - sent);
    }));

    await stack.ctl('stop', 'purge-service');
    const backlog = redis.pipeline();
    for (let i = 0; i < 10_000; i += 1) backlog.xadd('purge:events', '*', 'account', `drain-${i}`, 'kind', 'both', 'source', 'bench', 'at', String(Date.now()));
    await backlog.exec();
    const drainStart = performance.now();
    await stack.ctl('start', 'purge-service');
    await waitFor(async () => (await redis.xlen('purge:events')) === 0, 300_000, 'drain');
    const drainSeconds = (performance.now() - drainStart) / 1000;
    const result = { events: EVENTS, p50_ms: percentile(latencies, 0.5), p99_ms: percentile(latencies, 0.99), max_ms: Math.max(...latencies), drainSeconds, drainRate: 10_000 / drainSeconds };
    return {
      ...result,
      sections: [
        { heading: 'Webhook → varnish answers the new avatar, at 100 events/s (target p99 ≤ 250 ms)', text: `${EVENTS} events for distinct cached accounts; each timed from sending the signed webhook through nginx until varnish answers the new redirect (polled every 2 ms).`,
          table: { columns: ['events', 'p50 ms', 'p99 ms', 'max ms'], rows: [[EVENTS, result.p50_ms, result.p99_ms, result.max_ms]] } },
        { heading: 'Draining a 10,000-event backlog (target ≥ 1,000 events/s to varnish)', text: 'Queued while the purge service was stopped, then drained by one worker (resolver cache + xkey and URL purges on varnish; no CDN configured). The time includes the service start.',
          table: { columns: ['events', 'seconds', 'events/s'], rows: [[10_000, drainSeconds, result.drainRate]] } },
      ],
    };
  } finally {
    await varnish.close();
    redis.disconnect();
    await stack.stop();
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const result = await benchPurge();
  const file = writeReport('purge', { title: 'bench/purge', command: `node bench/purge.js${quick ? ' --quick' : ''}`, machine: await machine(), sections: result.sections, data: result });
  process.stdout.write(`${fs.readFileSync(file, 'utf8')}\n`);
}
