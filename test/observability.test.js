import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { base58Url } from '@stack/lib';
import { DASHBOARDS } from '../dashboards/build.js';
import { sign } from '../purge-service/src/signature.js';
import { metricsAuth } from './support/metrics.js';
import { solid } from './support/images.js';
import { waitFor } from './support/ports.js';
import { root } from './support/processes.js';
import { startStack } from './support/stack.js';

/** @type {Awaited<ReturnType<typeof startStack>>} */
let stack;

/** One round of the traffic a site sees: uploads, image hits and misses, avatars, a bad request, a purge webhook. */
async function mixedTraffic(round) {
  const form = new FormData();
  form.append('image_file', new Blob([new Uint8Array(await solid(400 + round, 300, 'jpeg'))]), 'photo.jpg');
  const upload = await fetch(`${stack.base}/upload`, {
    method: 'POST',
    headers: { authorization: 'Bearer obs-token' },
    body: form,
  });
  const { url } = /** @type {any} */ (await upload.json());
  for (let i = 0; i < 3; i += 1) await (await fetch(url)).arrayBuffer();
  for (const query of ['width=100', 'width=100', 'width=64&format=auto', 'width=200&format=webp']) {
    await (
      await fetch(`${stack.base}/p/${base58Url.encode(url)}?${query}`, { headers: { accept: 'image/avif,image/webp' } })
    ).arrayBuffer();
  }
  await (await fetch(`${stack.base}/p/${base58Url.encode('http://127.0.0.1:1/nothing.jpg')}?width=10`)).arrayBuffer();
  await stack.direct('resolver', `/admin/accounts/obs-user`, {
    method: 'PUT',
    headers: { authorization: 'Bearer obs-admin', 'content-type': 'application/json' },
    body: JSON.stringify({ avatar: url }),
  });
  for (const path of ['/u/obs-user/avatar', '/u/obs-user/avatar', '/u/obs-user/avatar/small', '/u/other-user/cover']) {
    await (await fetch(stack.base + path, { redirect: 'manual' })).arrayBuffer();
  }
  const body = JSON.stringify({ account: 'obs-user', kind: 'both' });
  const timestamp = String(Math.floor(Date.now() / 1000));
  await fetch(`${stack.base}/hooks/avatar`, {
    method: 'POST',
    body,
    headers: { 'x-timestamp': timestamp, 'x-signature': `sha256=${sign('obs-key', timestamp, Buffer.from(body))}` },
  });
}

/** @param {string} expr */
async function query(expr) {
  const response = await fetch(
    `http://127.0.0.1:${stack.env.PROMETHEUS_PORT}/api/v1/query?query=${encodeURIComponent(expr)}`,
    { headers: metricsAuth() },
  );
  const body = /** @type {any} */ (await response.json());
  assert.equal(body.status, 'success', `${expr}: ${body.error}`);
  return /** @type {Array<{ metric: Record<string, string>, value: [number, string] }>} */ (body.data.result);
}

/** Every query of every panel, as Grafana would send it over the last minutes. */
function panelQueries() {
  return Object.entries(DASHBOARDS).flatMap(([file, board]) =>
    (board.panels || []).flatMap((panel) =>
      /** @type {any[]} */ (/** @type {any} */ (panel).targets || []).map((/** @type {any} */ target) => ({
        where: `${file} › ${panel.title}`,
        expr: target.expr.replaceAll('$__rate_interval', '1m').replaceAll('$instance', '.*'),
      })),
    ),
  );
}

/**
 * Waits until every target was scraped `count` times since `since` (ms; scrapes 5 s apart), then (`rules`)
 * until the recording rules were evaluated after that: the time the data takes to be there, not a sleep.
 * @param {number} since @param {number} count @param {boolean} [rules]
 */
async function scrapedSince(since, count, rules = false) {
  const after = since + (count - 1) * 5000;
  const times = async (/** @type {string} */ expr) =>
    (await query(`timestamp(${expr})`)).map((series) => Number(series.value[1]) * 1000);
  await waitFor(
    async () => {
      const scrapes = await times('up');
      return scrapes.length >= 8 && Math.min(...scrapes) >= after;
    },
    30_000,
    `every target scraped ${count} times since the traffic`,
  );
  if (!rules) return;
  const scraped = Math.max(...(await times('up')));
  await waitFor(
    async () => {
      const evaluations = await times('route:edge_request_duration_seconds:p99');
      return evaluations.length >= 2 && Math.min(...evaluations) >= scraped;
    },
    30_000,
    'the recording rules evaluated after those scrapes',
  );
}

before(async () => {
  stack = await startStack({ UPLOAD_TOKENS: 'obs-token', AVATAR_ADMIN_TOKEN: 'obs-admin', PURGE_HMAC_KEYS: 'obs-key' });
  await mixedTraffic(1);
  await scrapedSince(Date.now(), 1);
  await mixedTraffic(2);
  // two scrapes after the second round, so that a series the second round created first (the origin's
  // failure-cache hits) has the two samples a rate needs
  await scrapedSince(Date.now(), 2, true);
});
after(() => stack?.stop());

test('every scrape target is up', async () => {
  const targets = await query('up');
  const jobs = Object.fromEntries(targets.map((series) => [series.metric.job, series.value[1]]));
  for (const job of ['haproxy', 'varnish', 'nginx', 'redis', 'mtail', 'origin', 'avatar-resolver', 'purge-service'])
    assert.equal(jobs[job], '1', job);
});

test('the edge p99 histograms for images and for avatars are both there', async () => {
  const routes = (await query('route:edge_request_duration_seconds:p99')).map((series) => series.metric.route);
  assert.ok(routes.includes('image'), routes.join());
  assert.ok(routes.includes('avatar'), routes.join());
  const caches = (await query('sum by (cache) (edge_requests_total{route="image"})')).map(
    (series) => series.metric.cache,
  );
  assert.ok(caches.includes('HIT') && caches.includes('MISS'), caches.join());
});

test('every panel of every dashboard returns data', async () => {
  const empty = [];
  const queries = panelQueries();
  assert.ok(queries.length >= 35, `${queries.length} queries`);
  for (const { where, expr } of queries) {
    const result = await query(expr);
    if (!result.length) empty.push(`${where}: ${expr}`);
  }
  assert.deepEqual(empty, [], 'panels without data');
});

test('every recording rule returns data', async () => {
  const rules = fs.readFileSync(path.join(root, 'monitoring/rules/recording.yml'), 'utf8');
  const records = [...rules.matchAll(/- record: (\S+)/g)].map((match) => match[1]);
  assert.ok(records.length >= 10);
  const empty = [];
  for (const record of records) if (!(await query(record)).length) empty.push(record);
  assert.deepEqual(empty, []);
});

test('the dashboards are current, carry units and template variables, and fit the provisioning layout', async () => {
  for (const [file, board] of Object.entries(DASHBOARDS)) {
    const onDisk = JSON.parse(fs.readFileSync(path.join(root, 'dashboards', file), 'utf8'));
    assert.deepEqual(onDisk, JSON.parse(JSON.stringify(board)), `${file} is stale: node dashboards/build.js`);
    assert.ok(
      onDisk.templating.list.some((/** @type {any} */ variable) => variable.type === 'datasource'),
      `${file}: datasource variable`,
    );
    for (const panel of onDisk.panels) {
      assert.ok(panel.fieldConfig.defaults.unit, `${file} › ${panel.title}: unit`);
      for (const target of panel.targets)
        assert.ok(
          !/\[\d+[smh]\]/.test(target.expr) || target.expr.includes(':'),
          `${file} › ${panel.title}: use $__rate_interval`,
        );
    }
  }
  const uids = Object.values(DASHBOARDS).map((board) => board.uid);
  assert.equal(new Set(uids).size, uids.length);
  const provider = fs.readFileSync(path.join(root, 'dashboards/provisioning/dashboards/image-cdn-stack.yml'), 'utf8');
  assert.match(provider, /path: \/var\/lib\/grafana\/dashboards/);
  const compose = fs.readFileSync(path.join(root, 'docker-compose.yml'), 'utf8');
  assert.match(compose, /\.\/dashboards:\/var\/lib\/grafana\/dashboards/);
  assert.match(compose, /\.\/dashboards\/provisioning:\/etc\/grafana\/provisioning/);
});
