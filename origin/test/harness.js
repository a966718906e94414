import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { base58Url } from '@stack/lib';
import { ROOT } from '../../infra/resolve.js';
import { startHiveNode } from '../../test/support/hive-node.js';
import { startImageServer } from '../../test/support/image-server.js';
import { TEST_METRICS_PASSWORD } from '../../test/support/metrics.js';
import { freePort } from '../../test/support/ports.js';
import { startRedis, startService } from '../../test/support/processes.js';

/**
 * A real origin process with real Redis, a local image site and a local Hive node.
 * @param {Record<string, string>} [env] extra settings
 * @param {{ dataParent?: string, through?: string[] }} [options] where its data directory is made (default: the
 *   system's temp directory); a command it is started through (e.g. taskset -c 0)
 */
export async function startOrigin(env = {}, { dataParent = os.tmpdir(), through = [] } = {}) {
  const { redis, site, hive, port, metricsPort, dataDir, base, settings } = await originParts(env, dataParent);
  let proc = await startService('origin/bin/origin', settings, port, through);
  return {
    base,
    site,
    hive,
    redis,
    dataDir,
    metricsUrl: `http://127.0.0.1:${metricsPort}/metrics`,
    /** The /p/ URL of `url` with the given query. @param {string} url @param {Record<string, string | number>} [query] */
    proxied(url, query = {}) {
      const search = new URLSearchParams(Object.entries(query).map(([k, v]) => [k, String(v)]));
      return `${base}/p/${base58Url.encode(url)}${search.size ? `?${search}` : ''}`;
    },
    async restart() {
      await proc.stop();
      proc = await startService('origin/bin/origin', settings, port, through);
    },
    async kill() {
      await proc.kill();
    },
    async start() {
      proc = await startService('origin/bin/origin', settings, port, through);
    },
    output: () => proc.output(),
    pid: () => /** @type {number} */ (proc.child.pid),
    async stop() {
      await proc.stop();
      await closeParts({ redis, site, hive, dataDir });
    },
  };
}

/**
 * Stops what originParts started and removes its data directory (the origin itself is the caller's to stop).
 * @param {Pick<Awaited<ReturnType<typeof originParts>>, 'redis' | 'site' | 'hive' | 'dataDir'>} parts
 */
export async function closeParts({ redis, site, hive, dataDir }) {
  await Promise.all([redis.stop(), site.close(), hive.close()]);
  fs.rmSync(dataDir, { recursive: true, force: true });
}

/**
 * What an origin runs with: real Redis, a local image site and Hive node, free ports, a data directory under
 * `dataParent`, and its settings (`env` over the tests' own). @param {Record<string, string>} env @param {string} dataParent
 */
export async function originParts(env, dataParent) {
  const redis = await startRedis();
  const site = await startImageServer();
  const hive = await startHiveNode();
  const port = await freePort();
  const metricsPort = await freePort();
  const dataDir = fs.mkdtempSync(path.join(dataParent, 'origin-'));
  const base = `http://127.0.0.1:${port}`;
  /** @type {Record<string, string>} */
  const settings = {
    ORIGIN_PORT: String(port),
    ORIGIN_METRICS_PORT: String(metricsPort),
    REDIS_URL: redis.url,
    DATA_DIR: dataDir,
    PUBLIC_URL: base,
    FETCH_ALLOW_PRIVATE_HOSTS: '127.0.0.1',
    HIVE_API_URLS: hive.url,
    UPLOAD_TOKENS: 'test-token',
    METRICS_PASSWORD: TEST_METRICS_PASSWORD,
    // one compile cache for every test's origin (each has a data directory of its own, where bin/origin would
    // keep it): written once, read by the others; origin/test/compile-cache.test.js tries bin/origin's own. Under
    // node_modules/.cache, where tools keep theirs: only who can write the code it caches can write it (a fixed
    // name in the shared temporary directory could be made first by another user), and it outlives the run
    NODE_COMPILE_CACHE: path.join(ROOT, 'node_modules', '.cache', 'origin-test-compile-cache'),
    ...env,
  };
  return { redis, site, hive, port, metricsPort, dataDir, base, settings };
}

export { tokenUpload } from '../../test/support/upload.js';

/** The transform options the origin's tests use (the production defaults are the config's), overridden where a test needs. */
export const TRANSFORM_OPTIONS = {
  maxPixels: 50_000_000,
  timeoutS: 60,
  jpegQuality: 80,
  jpegProgressive: false,
  jpegTrellis: false,
  webpQuality: 80,
  webpEffort: 4,
  avifQuality: 50,
  avifEffort: 3,
};

/** @param {Response} response */
export async function jsonError(response) {
  const body = /** @type {any} */ (await response.json());
  return body.error;
}
