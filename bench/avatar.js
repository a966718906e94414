// bench/avatar: redirects per second and p50/p99 with the mappings known (direct to the resolver, and
// through the stack), and upstream calls per 1,000 distinct-account misses (hive source, local node).
//   node bench/avatar.js [--quick]
import '../lib/src/node-version.js';
import fs from 'node:fs';
import path from 'node:path';
import { Redis } from 'ioredis';
import { hiveAccount, startResolver } from '../avatar-resolver/test/harness.js';
import { startStack } from '../test/support/stack.js';
import { drive, machine, wrk, wrkRow, writeReport } from './lib.js';

const quick = process.argv.includes('--quick');
const script = path.join(import.meta.dirname, 'avatar-accounts.lua');

export async function benchAvatar() {
  const stack = await startStack({
    // wrk measures the resolver on its port
    INTERNAL_SOCKETS: 'false',
    NGINX_RATE_LIMIT: '1000000',
    NGINX_RATE_BURST: '1000000',
    VARNISH_MISS_LIMIT: '0',
    LOG_LEVEL: 'warn',
  });
  let direct;
  let edge;
  try {
    const redis = new Redis(stack.redisUrl);
    const pipeline = redis.pipeline();
    for (let i = 0; i < 1000; i += 1)
      pipeline.hset(`avatar:local:bench-${i}`, 'avatar', `https://img.example/bench-${i}.png`);
    await pipeline.exec();
    redis.disconnect();
    direct = [];
    edge = [];
    // one short warm-up of each path first: the first seconds measure V8's JIT, not the service
    wrk({ url: `http://127.0.0.1:${stack.env.AVATAR_RESOLVER_PORT}`, connections: 32, seconds: 2, script });
    wrk({ url: stack.base, connections: 32, seconds: 2, script });
    for (let repeat = 0; repeat < (quick ? 1 : 3); repeat += 1) {
      direct.push(
        wrk({
          url: `http://127.0.0.1:${stack.env.AVATAR_RESOLVER_PORT}`,
          connections: 32,
          seconds: quick ? 3 : 8,
          script,
        }),
      );
      edge.push(wrk({ url: stack.base, connections: 32, seconds: quick ? 3 : 8, script }));
    }
  } finally {
    await stack.stop();
  }
  const resolver = await startResolver({ AVATAR_SOURCE: 'hive', LOG_LEVEL: 'warn' });
  let misses;
  try {
    for (let i = 0; i < 1000; i += 1)
      resolver.hive.setAccount(
        hiveAccount(`miss-${i}`, { profile: { profile_image: `https://img.example/m${i}.png` } }),
      );
    const result = await drive({
      origin: resolver.base,
      concurrency: 64,
      paths: Array.from({ length: 1000 }, (_, i) => `/u/miss-${i}/avatar`),
    });
    misses = { ...result, upstream_calls: resolver.hive.calls.length };
  } finally {
    await resolver.stop();
  }
  return {
    direct,
    edge,
    misses,
    sections: [
      {
        heading: 'Redirects with the mapping known (targets: ≥ 5,000/s direct, p99 ≤ 10 ms)',
        text: `\`${direct[0].command}\`: 1,000 accounts in Redis (local source), random per wrk thread; 302s count as non-2xx in wrk.`,
        table: {
          columns: [
            'path',
            'redirects/s min / median / max',
            'p50 ms',
            'p99 ms min / median / max',
            '302s (wrk non-2xx)',
          ],
          rows: [
            wrkRow('direct to the resolver (varnish bypassed)', direct),
            wrkRow('through nginx → varnish → haproxy', edge),
          ],
        },
      },
      {
        heading: 'Upstream calls per 1,000 distinct-account misses (target ≤ 50)',
        text: '1,000 accounts never seen, 64 concurrent clients, hive source against a local JSON-RPC node.',
        table: {
          columns: ['misses', 'upstream calls', 'seconds', 'p99 ms'],
          rows: [[1000, misses.upstream_calls, misses.seconds, misses.p99_ms]],
        },
      },
    ],
  };
}

if (import.meta.main) {
  const result = await benchAvatar();
  const file = writeReport('avatar', {
    title: 'bench/avatar',
    command: `node bench/avatar.js${quick ? ' --quick' : ''}`,
    machine: await machine(),
    sections: result.sections,
    data: result,
  });
  process.stdout.write(`${fs.readFileSync(file, 'utf8')}\n`);
}
