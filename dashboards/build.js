// Builds the Grafana dashboards (JSON, for provisioning) from short typed definitions: `node dashboards/build.js`.
// The type annotation checks each dashboard against Grafana's schema (@grafana/schema, the version of the
// Grafana image docker-compose.yml pins) in `tsc`, and the JSON carries that schema's version;
// a test checks the JSON files are current and that every panel's query returns data.
import '../lib/src/node-version.js';
import fs from 'node:fs';
import path from 'node:path';
import { defaultDashboard } from '@grafana/schema';

const DIR = import.meta.dirname;
const DS = { type: 'prometheus', uid: '${datasource}' };
const RATE = '$__rate_interval';

/**
 * @typedef {{ expr: string, legend?: string }} Query
 * @typedef {{ title: string, unit: string, queries: Query[], type?: 'timeseries'|'stat', width?: number, description?: string, max?: number }} PanelSpec
 */

/** @param {PanelSpec} spec @param {number} id @param {{ x: number, y: number }} at @returns {import('@grafana/schema').Panel} */
function panel(spec, id, at) {
  const type = spec.type || 'timeseries';
  return {
    id,
    type,
    title: spec.title,
    description: spec.description,
    datasource: DS,
    gridPos: { x: at.x, y: at.y, w: spec.width || 12, h: type === 'stat' ? 5 : 8 },
    fieldConfig: {
      defaults: { unit: spec.unit, ...(spec.max === undefined ? {} : { min: 0, max: spec.max }) },
      overrides: [],
    },
    options:
      type === 'stat'
        ? {
            reduceOptions: { calcs: ['lastNotNull'], fields: '', values: false },
            colorMode: 'value',
            graphMode: 'area',
          }
        : {
            legend: { displayMode: 'list', placement: 'bottom', showLegend: true },
            tooltip: { mode: 'multi', sort: 'desc' },
          },
    targets: spec.queries.map((query, index) => ({
      refId: String.fromCharCode(65 + index),
      datasource: DS,
      expr: query.expr,
      legendFormat: query.legend || '__auto',
      range: true,
    })),
  };
}

/** @param {string} uid @param {string} title @param {PanelSpec[]} specs @param {{ name: string, query: string } | null} instance @returns {import('@grafana/schema').Dashboard} */
function dashboard(uid, title, specs, instance) {
  /** @type {import('@grafana/schema').Panel[]} */
  const panels = [];
  let x = 0;
  let y = 0;
  let rowHeight = 0;
  specs.forEach((spec, index) => {
    const width = spec.width || 12;
    if (x + width > 24) {
      x = 0;
      y += rowHeight;
      rowHeight = 0;
    }
    const built = panel(spec, index + 1, { x, y });
    panels.push(built);
    x += width;
    rowHeight = Math.max(rowHeight, built.gridPos?.h || 8);
  });
  /** @type {any[]} */
  const variables = [
    { name: 'datasource', label: 'Prometheus', type: 'datasource', query: 'prometheus', current: {}, hide: 0 },
  ];
  if (instance) {
    variables.push({
      name: 'instance',
      label: instance.name,
      type: 'query',
      datasource: DS,
      query: { query: instance.query, refId: 'instance' },
      definition: instance.query,
      includeAll: true,
      multi: true,
      allValue: '.*',
      refresh: 2,
      current: {},
      hide: 0,
    });
  }
  return {
    uid,
    title,
    tags: ['image-cdn-stack'],
    editable: true,
    graphTooltip: 1,
    schemaVersion: /** @type {number} */ (defaultDashboard.schemaVersion),
    version: 1,
    timezone: 'browser',
    time: { from: 'now-1h', to: 'now' },
    refresh: '30s',
    templating: { list: variables },
    annotations: { list: [] },
    panels,
  };
}

/** `x or vector(0)`: a rare event that has not happened yet is 0, not "no data". @param {string} expr */
const orZero = (expr) => `(${expr}) or vector(0)`;
/** @param {number} q @param {string} metric @param {string} by @param {string} [selector] */
const quantile = (q, metric, by, selector = '') =>
  `histogram_quantile(${q}, sum by (le, ${by}) (rate(${metric}_bucket${selector}[${RATE}])))`;
const inst = '{instance=~"$instance"}';

export const DASHBOARDS = {
  'overview.json': dashboard(
    'cdn-overview',
    'Image CDN · Overview',
    [
      {
        title: 'Edge requests by route',
        unit: 'reqps',
        queries: [{ expr: `sum by (route) (rate(edge_requests_total[${RATE}]))`, legend: '{{route}}' }],
      },
      {
        title: 'Edge 5xx ratio',
        unit: 'percentunit',
        queries: [
          {
            expr: `${orZero(`sum(rate(edge_requests_total{status_class="5xx"}[${RATE}]))`)} / sum(rate(edge_requests_total[${RATE}]))`,
            legend: '5xx',
          },
        ],
      },
      {
        title: 'Edge latency, images vs avatars (p50 / p95 / p99)',
        unit: 's',
        width: 24,
        queries: [0.5, 0.95, 0.99].map((q) => ({
          expr: quantile(q, 'edge_request_duration_seconds', 'route', '{route=~"image|avatar"}'),
          legend: `{{route}} p${q * 100}`,
        })),
      },
      {
        title: 'Edge p99, cache HIT vs MISS',
        unit: 's',
        queries: [
          {
            expr: quantile(0.99, 'edge_request_duration_seconds', 'route, cache', '{route=~"image|avatar"}'),
            legend: '{{route}} {{cache}}',
          },
        ],
      },
      {
        title: 'Varnish hit ratio',
        unit: 'percentunit',
        type: 'stat',
        width: 4,
        max: 1,
        queries: [{ expr: 'varnish:hit_ratio:rate5m', legend: 'hit ratio' }],
      },
      {
        title: 'Origin queue depth',
        unit: 'none',
        type: 'stat',
        width: 4,
        queries: [{ expr: 'sum(origin_queue_depth)', legend: 'waiting' }],
      },
      {
        title: 'Purge lag',
        unit: 's',
        type: 'stat',
        width: 4,
        description: 'age of the oldest avatar change not yet purged everywhere',
        queries: [{ expr: 'max(purge_lag_seconds)', legend: 'lag' }],
      },
    ],
    null,
  ),
  'origin.json': dashboard(
    'cdn-origin',
    'Image CDN · Origin',
    [
      {
        title: 'Request duration by route (p50, p99)',
        unit: 's',
        queries: [0.5, 0.99].map((q) => ({
          expr: quantile(q, 'http_request_duration_seconds', 'route', `{service="origin",instance=~"$instance"}`),
          legend: `{{route}} p${q * 100}`,
        })),
      },
      {
        title: 'Transform duration by format (p50, p99)',
        unit: 's',
        queries: [0.5, 0.99].map((q) => ({
          expr: quantile(q, 'origin_transform_duration_seconds', 'format', inst),
          legend: `{{format}} p${q * 100}`,
        })),
      },
      {
        title: 'Queue wait (p50, p99)',
        unit: 's',
        queries: [0.5, 0.99].map((q) => ({
          expr: quantile(q, 'origin_queue_wait_seconds', 'instance', inst),
          legend: `p${q * 100}`,
        })),
      },
      {
        title: 'Transforms in flight and waiting',
        unit: 'none',
        queries: [
          { expr: `sum(origin_transforms_in_flight${inst})`, legend: 'in flight' },
          { expr: `sum(origin_queue_depth${inst})`, legend: 'waiting' },
          { expr: `sum(origin_transform_concurrency${inst})`, legend: 'slots' },
          { expr: `sum by (pool) (origin_transform_workers${inst})`, legend: 'worker processes ({{pool}})' },
        ],
      },
      {
        title: 'Rejected requests by reason',
        unit: 'reqps',
        queries: [
          { expr: orZero(`sum by (reason) (rate(origin_rejections_total${inst}[${RATE}]))`), legend: '{{reason}}' },
        ],
      },
      {
        title: 'Cache hit rate by level',
        unit: 'percentunit',
        queries: [
          {
            expr: `sum by (level) (rate(origin_cache_requests_total{result="hit",instance=~"$instance"}[${RATE}])) / sum by (level) (rate(origin_cache_requests_total${inst}[${RATE}]))`,
            legend: '{{level}}',
          },
        ],
      },
      {
        title: 'Kept pixels (one decode per picture) and what decoded and encoded each variant',
        unit: 'reqps',
        queries: [
          {
            expr: orZero(`sum by (result) (rate(origin_kept_pixels_total${inst}[${RATE}]))`),
            legend: '{{result}}',
          },
          // of the hits, those encoded from another format's resized pixels of their size: no resize either
          {
            expr: orZero(`sum(rate(origin_shared_resizes_total${inst}[${RATE}]))`),
            legend: "resize shared by a size's formats",
          },
          {
            expr: orZero(`sum by (decode) (rate(origin_transform_codecs_total${inst}[${RATE}]))`),
            legend: 'decoded by {{decode}}',
          },
          // the system's encoders (libwebp, libjpeg-turbo) or sharp's: a JPEG of a plain JPEG that sharp encodes
          // means this libjpeg-turbo failed its check (origin/src/codecs.js)
          {
            expr: orZero(`sum by (encode) (rate(origin_transform_codecs_total${inst}[${RATE}]))`),
            legend: 'encoded by {{encode}}',
          },
        ],
      },
      {
        title: 'Kept pixels held',
        unit: 'bytes',
        queries: [{ expr: `sum by (holder) (origin_kept_pixels_bytes${inst})`, legend: '{{holder}}' }],
      },
      {
        title: 'Single-flight joins',
        unit: 'reqps',
        queries: [
          {
            expr: orZero(`sum by (kind) (rate(origin_single_flight_joins_total${inst}[${RATE}]))`),
            legend: '{{kind}}',
          },
        ],
      },
      {
        title: 'Fetch errors by reason',
        unit: 'reqps',
        queries: [
          { expr: orZero(`sum by (reason) (rate(origin_fetch_errors_total${inst}[${RATE}]))`), legend: '{{reason}}' },
        ],
      },
      {
        title: 'Process memory (RSS): the origin and its transform workers',
        unit: 'bytes',
        queries: [
          { expr: `process_resident_memory_bytes{service="origin",instance=~"$instance"}`, legend: '{{instance}}' },
          {
            expr: `sum by (instance) (origin_transform_workers_resident_memory_bytes${inst})`,
            legend: '{{instance}} workers',
          },
        ],
      },
      {
        title: 'Event loop lag (p99)',
        unit: 's',
        queries: [
          { expr: `nodejs_eventloop_lag_p99_seconds{service="origin",instance=~"$instance"}`, legend: '{{instance}}' },
        ],
      },
      {
        title: 'Uploads pulled through by upstream and result',
        unit: 'reqps',
        description:
          'UPSTREAM_IMAGE_HOSTS: stored, missing, mismatch (bytes that do not make the key: refused), error, busy, open (its breaker)',
        queries: [
          {
            expr: orZero(`sum by (upstream, result) (rate(origin_pull_through_total${inst}[${RATE}]))`),
            legend: '{{upstream}} {{result}}',
          },
        ],
      },
      {
        title: 'Upstream image host latency (p50, p99)',
        unit: 's',
        queries: [0.5, 0.99].map((q) => ({
          expr: orZero(quantile(q, 'origin_pull_through_duration_seconds', 'upstream', inst)),
          legend: `{{upstream}} p${q * 100}`,
        })),
      },
      {
        title: 'Process starts (crashes, restarts)',
        unit: 'short',
        description:
          'each time the origin process started again (ServiceRestarting warns at 3 in 15 min); on one box the process holding its socket starts a crashed one again at once, so this may be all that shows',
        queries: [
          {
            expr: `changes(process_start_time_seconds{service="origin",instance=~"$instance"}[${RATE}])`,
            legend: '{{instance}}',
          },
        ],
      },
    ],
    { name: 'origin', query: 'label_values(origin_transform_concurrency, instance)' },
  ),
  'avatars.json': dashboard(
    'cdn-avatars',
    'Image CDN · Avatars and purges',
    [
      {
        title: 'Resolver lookup latency by source (p99)',
        unit: 's',
        queries: [{ expr: quantile(0.99, 'resolver_lookup_duration_seconds', 'source', inst), legend: '{{source}}' }],
      },
      {
        title: 'Lookups by source',
        unit: 'reqps',
        queries: [{ expr: `sum by (source) (rate(resolver_lookups_total${inst}[${RATE}]))`, legend: '{{source}}' }],
      },
      {
        title: 'Upstream call latency (p50, p99)',
        unit: 's',
        queries: [0.5, 0.99].map((q) => ({
          expr: quantile(q, 'resolver_upstream_duration_seconds', 'instance', inst),
          legend: `p${q * 100}`,
        })),
      },
      {
        title: 'Accounts per upstream call',
        unit: 'none',
        queries: [
          {
            expr: `sum(rate(resolver_upstream_batch_size_sum${inst}[${RATE}])) / sum(rate(resolver_upstream_batch_size_count${inst}[${RATE}]))`,
            legend: 'mean batch',
          },
        ],
      },
      {
        title: 'Upstream circuit breaker',
        unit: 'none',
        type: 'stat',
        width: 6,
        description: '0 closed, 1 open, 2 half-open',
        queries: [{ expr: `max(resolver_breaker_state${inst})`, legend: 'state' }],
      },
      {
        title: 'Dead letters',
        unit: 'none',
        type: 'stat',
        width: 6,
        queries: [{ expr: 'max(purge_dead_letter_length)', legend: 'dead letters' }],
      },
      {
        title: "New posts' images warmed, by result and reason",
        unit: 'reqps',
        description:
          'WARM: warmed before any reader; skipped (post_cap, author_rate, rate, bytes_cap, author, domain, seen, blocked); failed (busy: no idle capacity at the origin in time)',
        queries: [
          {
            expr: orZero(`sum by (result, reason) (rate(purge_warm_images_total${inst}[${RATE}]))`),
            legend: '{{result}} {{reason}}',
          },
        ],
      },
      {
        title: 'Warm requests at the origin',
        unit: 'reqps',
        description: 'made on idle capacity, or deferred (429: the warmer waits)',
        queries: [
          { expr: orZero(`sum by (result) (rate(origin_warm_requests_total${inst}[${RATE}]))`), legend: '{{result}}' },
        ],
      },
      {
        title: 'Purge events by source',
        unit: 'reqps',
        queries: [
          {
            expr: `sum by (source, result) (rate(purge_events_received_total[${RATE}]))`,
            legend: '{{source}} {{result}}',
          },
        ],
      },
      {
        title: 'Purge latency per target (p99)',
        unit: 's',
        queries: [{ expr: quantile(0.99, 'purge_target_duration_seconds', 'target'), legend: '{{target}}' }],
      },
      {
        title: 'Purge backlog and lag',
        unit: 'none',
        queries: [
          { expr: 'sum(purge_queue_length)', legend: 'queued' },
          { expr: 'sum(purge_pending)', legend: 'pending' },
          { expr: 'max(purge_lag_seconds)', legend: 'lag (s)' },
        ],
      },
      {
        title: 'Purges waiting per varnish node',
        unit: 'none',
        description: 'purges a node missed (down or refusing), sent again as soon as it answers',
        queries: [{ expr: 'max by (node) (purge_node_backlog)', legend: '{{node}}' }],
      },
      {
        title: 'Purge lag per varnish node',
        unit: 's',
        description: 'age of the oldest purge a node has not taken yet',
        queries: [
          { expr: 'max by (node) (purge_node_lag_seconds)', legend: '{{node}}' },
          {
            expr: `sum by (node) (rate(purge_node_retry_failures_total[${RATE}]))`,
            legend: '{{node}} failed retries/s',
          },
        ],
      },
    ],
    { name: 'resolver', query: 'label_values(resolver_breaker_state, instance)' },
  ),
  'edge.json': dashboard(
    'cdn-edge',
    'Image CDN · Edge (nginx, haproxy, varnish)',
    [
      {
        title: 'nginx connections',
        unit: 'none',
        description:
          'active against worker_connections × workers: the headroom before "worker_connections are not enough"',
        queries: ['active', 'reading', 'writing', 'waiting'].map((state) => ({
          expr: `sum(nginx_connections_${state})`,
          legend: state,
        })),
      },
      {
        title: 'haproxy requests per frontend',
        unit: 'reqps',
        queries: [
          {
            expr: `sum by (proxy) (rate(haproxy_frontend_http_requests_total{proxy=~"fe_.*"}[${RATE}]))`,
            legend: '{{proxy}}',
          },
        ],
      },
      {
        title: 'haproxy responses by code',
        unit: 'reqps',
        queries: [
          {
            expr: `sum by (proxy, code) (rate(haproxy_backend_http_responses_total{proxy=~"be_.*"}[${RATE}]))`,
            legend: '{{proxy}} {{code}}',
          },
        ],
      },
      {
        title: 'haproxy queue',
        unit: 'none',
        queries: [{ expr: 'sum by (proxy) (haproxy_backend_current_queue{proxy=~"be_.*"})', legend: '{{proxy}}' }],
      },
      {
        title: 'haproxy average times (images vs avatars)',
        unit: 's',
        queries: ['queue', 'response', 'total'].map((kind) => ({
          expr: `haproxy_backend_${kind}_time_average_seconds{proxy=~"be_.*"}`,
          legend: `{{proxy}} ${kind}`,
        })),
      },
      {
        title: 'haproxy servers up',
        unit: 'none',
        queries: [{ expr: 'haproxy_server_status{state="UP"}', legend: '{{proxy}}/{{server}}' }],
      },
      {
        title: 'varnish lookups',
        unit: 'reqps',
        queries: ['hit', 'miss', 'hitmiss', 'hitpass'].map((kind) => ({
          expr: `sum(rate(varnish_main_cache_${kind}[${RATE}]))`,
          legend: kind,
        })),
      },
      { title: 'varnish objects', unit: 'none', queries: [{ expr: 'sum(varnish_main_n_object)', legend: 'objects' }] },
      {
        title: 'varnish evictions, bans, backend failures',
        unit: 'none',
        queries: [
          { expr: `sum(rate(varnish_main_n_lru_nuked[${RATE}]))`, legend: 'evicted/s' },
          { expr: 'sum(varnish_main_bans)', legend: 'bans' },
          { expr: `sum(rate(varnish_main_backend_fail[${RATE}]))`, legend: 'backend failures/s' },
        ],
      },
      {
        title: 'varnish storage used',
        unit: 'bytes',
        queries: [{ expr: 'sum by (type) (varnish_sma_g_bytes)', legend: '{{type}}' }],
      },
    ],
    null,
  ),
};

if (import.meta.main) {
  for (const [file, board] of Object.entries(DASHBOARDS))
    fs.writeFileSync(path.join(DIR, file), `${JSON.stringify(board, null, 2)}\n`);
}
