// bench/edge: cache-hit throughput and latency through the full edge (nginx → varnish) against varnish
// alone, same run, alternating; and the time from `stack up` to healthy.
//   node bench/edge.js [--quick]
import fs from 'node:fs';
import { solid } from '../test/support/images.js';
import { metricValue } from '../test/support/metrics.js';
import { startStack } from '../test/support/stack.js';
import { machine, spread, wrk, writeReport } from './lib.js';

const quick = process.argv.includes('--quick');

export async function benchEdge() {
  // the per-client rate limit would throttle a load generator on one address: lifted for the measurement
  const stack = await startStack({ UPLOAD_TOKENS: 'bench', NGINX_RATE_LIMIT: '1000000', NGINX_RATE_BURST: '1000000', LOG_LEVEL: 'warn' });
  try {
    const form = new FormData();
    form.append('image_file', new Blob([new Uint8Array(await solid(64, 64, 'png'))]), 'hit.png');
    const { url } = /** @type {any} */ (await (await fetch(`${stack.base}/upload`, { method: 'POST', headers: { authorization: 'Bearer bench' }, body: form })).json());
    const path = new URL(url).pathname;
    await fetch(url);
    const runs = { edge: /** @type {any[]} */ ([]), varnish: /** @type {any[]} */ ([]) };
    const mtail = `http://127.0.0.1:${stack.env.MTAIL_PORT}/metrics`;
    for (let repeat = 0; repeat < (quick ? 1 : 3); repeat += 1) {
      runs.edge.push(wrk({ url: `${stack.base}${path}`, connections: 64, seconds: quick ? 3 : 8 }));
      // mtail (niced) falls behind during a saturating run: let it catch up, or its backlog would load the next one
      await caughtUp(mtail);
      runs.varnish.push(wrk({ url: `http://127.0.0.1:${stack.env.VARNISH_PORT}${path}`, connections: 64, seconds: quick ? 3 : 8 }));
    }
    const edge = spread(runs.edge.map((run) => run.rps));
    const varnish = spread(runs.varnish.map((run) => run.rps));
    const p99 = spread(runs.edge.map((run) => run.p99_ms));
    return {
      upMs: stack.upMs, edge, varnish, ratio: edge.median / varnish.median, edgeP99: p99, runs,
      sections: [
        { heading: 'Cache hits at 64 connections: full edge vs varnish alone (target: ≥ 60%, edge p99 < 5 ms)', text: `Commands: \`${runs.edge[0].command}\` and \`${runs.varnish[0].command}\`, alternating; the object is a 64×64 PNG already in varnish.`,
          table: { columns: ['path', 'req/s min / median / max', 'p50 ms (median run)', 'p99 ms min / median / max', 'non-2xx'], rows: [
            ['nginx → varnish', `${Math.round(edge.min)} / ${Math.round(edge.median)} / ${Math.round(edge.max)}`, spread(runs.edge.map((run) => run.p50_ms)).median, `${p99.min} / ${p99.median} / ${p99.max}`, runs.edge.reduce((sum, run) => sum + run.non2xx, 0)],
            ['varnish alone', `${Math.round(varnish.min)} / ${Math.round(varnish.median)} / ${Math.round(varnish.max)}`, spread(runs.varnish.map((run) => run.p50_ms)).median, (() => { const v = spread(runs.varnish.map((run) => run.p99_ms)); return `${v.min} / ${v.median} / ${v.max}`; })(), runs.varnish.reduce((sum, run) => sum + run.non2xx, 0)],
            ['ratio (medians)', `${Math.round((edge.median / varnish.median) * 100)}%`, '', '', ''],
          ] } },
        { heading: 'Time from `./infra/stack up` to every health check green', text: `${(stack.upMs / 1000).toFixed(1)} s (packages and node_modules already installed).` },
      ],
    };
  } finally {
    await stack.stop();
  }
}

/** Waits until mtail's request count stops moving: it has read the whole access log. @param {string} url */
async function caughtUp(url) {
  let last = -1;
  for (let i = 0; i < 600; i += 1) {
    const count = await metricValue(url, 'edge_requests_total');
    if (count === last) return;
    last = count;
    await new Promise((resolve) => { setTimeout(resolve, 500); });
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const result = await benchEdge();
  const file = writeReport('edge', { title: 'bench/edge', command: `node bench/edge.js${quick ? ' --quick' : ''}`, machine: await machine(), sections: result.sections, data: result });
  process.stdout.write(`${fs.readFileSync(file, 'utf8')}\n`);
}
