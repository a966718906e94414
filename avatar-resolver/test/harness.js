import { startHiveNode } from '../../test/support/hive-node.js';
import { freePort } from '../../test/support/ports.js';
import { startRedis, startService } from '../../test/support/processes.js';

/** An account as condenser_api.get_accounts returns it. @param {string} name @param {any} [json] @param {any} [posting] */
export function hiveAccount(name, json = {}, posting = '') {
  return {
    name,
    json_metadata: typeof json === 'string' ? json : JSON.stringify(json),
    posting_json_metadata: typeof posting === 'string' ? posting : JSON.stringify(posting),
  };
}

/** A real resolver process with real Redis and a local Hive node. @param {Record<string, string>} [env] */
export async function startResolver(env = {}) {
  const redis = await startRedis();
  const hive = await startHiveNode();
  const port = await freePort();
  const metricsPort = await freePort();
  const settings = {
    AVATAR_RESOLVER_PORT: String(port),
    AVATAR_RESOLVER_METRICS_PORT: String(metricsPort),
    REDIS_URL: redis.url,
    HIVE_API_URLS: hive.url,
    AVATAR_SOURCE: 'hive',
    AVATAR_ADMIN_TOKEN: 'admin-secret',
    ...env,
  };
  const proc = await startService('avatar-resolver/bin/avatar-resolver', settings, port);
  return {
    base: `http://127.0.0.1:${port}`,
    metricsUrl: `http://127.0.0.1:${metricsPort}/metrics`,
    redis,
    hive,
    /** @param {string} path @param {RequestInit} [init] */
    get: (path, init) => fetch(`http://127.0.0.1:${port}${path}`, { redirect: 'manual', ...init }),
    async stop() {
      await proc.stop();
      await Promise.all([redis.stop(), hive.close()]);
    },
  };
}
