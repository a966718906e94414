import { client } from '@stack/lib';

/** @param {import('prom-client').Registry} registry */
export function createResolverMetrics(registry) {
  const registers = [registry];
  return {
    lookups: new client.Counter({
      name: 'resolver_lookups_total',
      help: 'Account lookups by where the answer came from (memory, redis, upstream, stale, default)',
      labelNames: ['source'],
      registers,
    }),
    lookupDuration: new client.Histogram({
      name: 'resolver_lookup_duration_seconds',
      help: 'Time to resolve an account, by source',
      labelNames: ['source'],
      buckets: [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
      registers,
    }),
    upstreamDuration: new client.Histogram({
      name: 'resolver_upstream_duration_seconds',
      help: 'Upstream (Hive API / user endpoint) call time',
      labelNames: ['outcome'],
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5],
      registers,
    }),
    batchSize: new client.Histogram({
      name: 'resolver_upstream_batch_size',
      help: 'Accounts per upstream call',
      buckets: [1, 2, 5, 10, 20, 50, 100],
      registers,
    }),
    upstreamCalls: new client.Counter({
      name: 'resolver_upstream_calls_total',
      help: 'Upstream calls made',
      registers,
    }),
    upstreamErrors: new client.Counter({
      name: 'resolver_upstream_errors_total',
      help: 'Upstream calls that failed or timed out',
      registers,
    }),
    breakerState: new client.Gauge({
      name: 'resolver_breaker_state',
      help: 'Upstream circuit: 0 closed, 1 open, 2 half-open',
      registers,
    }),
    adminUpdates: new client.Counter({
      name: 'resolver_admin_updates_total',
      help: 'Mappings written through the admin API',
      registers,
    }),
  };
}
