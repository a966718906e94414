import { readFileSync } from 'node:fs';
import path from 'node:path';
import {
  StartupError,
  connectRedis,
  createHiveClient,
  createTakedownList,
  redisReady,
  runService,
  countWarmBytes,
  transformQueueMax,
  transformSlots,
  usableCores,
  warmQueueMax,
  warmTransforms,
} from '@stack/lib';
import { createApp } from './app.js';
import { DiskLru } from './cache/disk-lru.js';
import { FailureCache } from './cache/failures.js';
import { PackCache } from './cache/pack-cache.js';
import { loadSystemCodecs } from './codecs.js';
import { settings } from './config.js';
import { createFetcher } from './originals/fetch.js';
import { createPullThrough } from './originals/pull-through.js';
import { createArchive } from './originals/archive.js';
import { createOriginals } from './originals/index.js';
import { createHiveAuth } from './uploads/hive-auth.js';
import { createHivesignerAuth } from './uploads/hivesigner.js';
import { createImages } from './images.js';
import { createOriginMetrics } from './metrics.js';
import { lowerWorkerPriority } from './workers/nice.js';
import { TransformQueue } from './queue.js';
import { createSingleFlight } from './single-flight.js';
import { createStore } from './store/index.js';
import { allowedSizes } from './options.js';
import { createGuard, listenForEvictions } from './takedown.js';
import { createWhitelist } from './whitelist.js';

const version = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')).version;

/** @typedef {import('@stack/lib/src/config-types.js').OriginConfig} OriginConfig */
/** @typedef {import('./metrics.js').OriginMetrics} OriginMetrics */

/** What the settings must hold before anything starts. @param {OriginConfig} config */
function checkSettings(config) {
  try {
    allowedSizes(config);
  } catch (err) {
    throw new StartupError(/** @type {Error} */ (err).message, { cause: err });
  }
  if (config.PROXY_WHITELIST === 'haf' && !config.PROXY_WHITELIST_URL)
    throw new StartupError('PROXY_WHITELIST=haf needs PROXY_WHITELIST_URL: the HAF proxy-whitelist service to ask');
}

/**
 * The disk caches: the originals' LRU and the result cache (variants).
 * @param {OriginConfig} config @param {import('pino').Logger} logger @param {OriginMetrics} metrics
 */
async function openCaches(config, logger, metrics) {
  const originalsCache = new DiskLru(path.join(config.DATA_DIR, 'originals'), config.ORIGINALS_CACHE_BYTES);
  const variants = new PackCache(path.join(config.DATA_DIR, 'variants'), config.VARIANTS_CACHE_BYTES, {
    warn: (details, message) => logger.warn(details, message),
  });
  await variants.dirLock.waitForStale((holder) =>
    logger.warn({ holder }, 'variant cache: held by a process elsewhere; waiting for its lock to go stale'),
  );
  variants.init();
  metrics.watchResultCache(variants);
  await originalsCache.init();
  return { originalsCache, variants };
}

/**
 * The transform queue (its slots, its bound, the warmer's lane: docs/queue.md) and the upload checks' own
 * (one slot per core, a bounded waiting list: never behind transforms).
 * @param {OriginConfig} config @param {OriginMetrics} metrics
 */
function createQueues(config, metrics) {
  const concurrency = transformSlots(config);
  metrics.concurrency.set(concurrency);
  const maxQueued = transformQueueMax(config, concurrency);
  metrics.queueMax.set(maxQueued);
  const queue = new TransformQueue({
    concurrency,
    maxQueued,
    keepFree: config.WARM_FREE_SLOTS,
    laterMax: warmQueueMax(config),
    laterConcurrency: warmTransforms(config),
    onChange: (q) => {
      metrics.queueDepth.set(q.depth);
      metrics.inFlight.set(q.running);
    },
  });
  const checks = new TransformQueue({
    concurrency: usableCores(),
    maxQueued: config.UPLOAD_CHECKS_QUEUE_MAX,
    refusal: { reason: 'upload_checks_full', retryAfterS: 5 },
  });
  return { queue, checks };
}

/**
 * The fetchers: remote originals', and the upstream image hosts' a missing upload is pulled from (their own
 * time bound). @param {OriginConfig} config
 */
function createFetchers(config) {
  const common = {
    maxRedirects: config.FETCH_MAX_REDIRECTS,
    allowedHosts: config.FETCH_ALLOW_PRIVATE_HOSTS,
    userAgent: config.FETCH_USER_AGENT,
  };
  const remote = createFetcher({
    ...common,
    maxBytes: config.FETCH_MAX_BYTES,
    connectTimeoutMs: config.FETCH_CONNECT_TIMEOUT_MS,
    responseTimeoutMs: config.FETCH_RESPONSE_TIMEOUT_MS,
    totalTimeoutMs: config.FETCH_TOTAL_TIMEOUT_MS,
  });
  const upstream = createFetcher({
    ...common,
    maxBytes: config.UPLOAD_MAX_BYTES,
    connectTimeoutMs: Math.min(config.FETCH_CONNECT_TIMEOUT_MS, config.UPSTREAM_TIMEOUT_MS),
    responseTimeoutMs: Math.min(config.FETCH_RESPONSE_TIMEOUT_MS, config.UPSTREAM_TIMEOUT_MS),
    totalTimeoutMs: config.UPSTREAM_TIMEOUT_MS,
  });
  return { remote, upstream, close: async () => Promise.all([remote.close(), upstream.close()]) };
}

/** The system codecs (SYSTEM_CODECS), logged. @param {OriginConfig} config @param {import('pino').Logger} logger */
function systemCodecs(config, logger) {
  let codecs;
  try {
    codecs = loadSystemCodecs(config.SYSTEM_CODECS);
  } catch (err) {
    throw new StartupError(/** @type {Error} */ (err).message, { cause: err });
  }
  logger.info(
    { libraries: codecs.libraries, setting: config.SYSTEM_CODECS },
    codecs.libraries.length
      ? 'system codecs for JPEG originals'
      : 'no system codecs: sharp decodes and encodes everything',
  );
  return codecs;
}

/**
 * The archive of warmed posts' originals (within WARM_ARCHIVE_BYTES); the warmer's fetches count in its
 * day's bytes (WARM_MAX_BYTES_PER_DAY), as its variants do.
 * @param {OriginConfig} config @param {import('ioredis').Redis} redis @param {OriginMetrics} metrics
 * @param {import('pino').Logger} logger
 */
function warmArchive(config, redis, metrics, logger) {
  return createArchive(config.DATA_DIR, {
    maxBytes: config.WARM_ARCHIVE_BYTES,
    onChange: (bytes) => metrics.archiveBytes.set(bytes),
    onEvict: () => metrics.archiveEvictions.inc(),
    onKept: (bytes) => {
      countWarmBytes(redis, bytes).catch((err) =>
        logger.warn({ err: err.message }, "a warm fetch's bytes not counted"),
      );
    },
  });
}

/** Who an upload is from: a Hive signature's account, a Hivesigner token's (when HIVESIGNER_APP). @param {OriginConfig} config */
function uploadAuth(config) {
  const hive = createHiveClient({ urls: config.HIVE_API_URLS, timeoutMs: config.HIVE_API_TIMEOUT_MS });
  const verifyHivesigner = config.HIVESIGNER_APP
    ? createHivesignerAuth({
        apiUrl: config.HIVESIGNER_API_URL,
        app: config.HIVESIGNER_APP,
        timeoutMs: config.HIVE_API_TIMEOUT_MS,
      })
    : null;
  return { verifySignature: createHiveAuth(hive), verifyHivesigner };
}

await runService({
  name: 'origin',
  settings,
  async build({ config: loaded, logger, registry }) {
    const config = /** @type {OriginConfig} */ (loaded);
    checkSettings(config);
    const metrics = createOriginMetrics(registry);
    const redis = connectRedis(config, logger);
    await redisReady(redis, 2000);
    const { originalsCache, variants } = await openCaches(config, logger, metrics);
    const store = createStore({ config, cache: originalsCache, logger, metrics });
    await store.init();
    const { queue, checks } = createQueues(config, metrics);
    const fetchers = createFetchers(config);
    const failures = new FailureCache(redis, {
      permanentTtl: config.FAILURE_TTL_PERMANENT_S,
      transientTtl: config.FAILURE_TTL_TRANSIENT_S,
    });
    const flight = createSingleFlight((kind) => metrics.joins.inc({ kind }));
    const codecs = systemCodecs(config, logger);
    const pullThrough = createPullThrough({ config, store, fetcher: fetchers.upstream, failures, metrics, logger });
    const archive = warmArchive(config, redis, metrics, logger);
    const originals = createOriginals({
      config,
      store,
      cache: originalsCache,
      failures,
      fetcher: fetchers.remote,
      flight,
      metrics,
      logger,
      pullThrough,
      archive,
    });
    const images = createImages({
      config,
      store,
      originals,
      variants,
      queue,
      flight,
      metrics,
      logger,
      codecs,
    });
    const priority = lowerWorkerPriority({
      nice: config.TRANSFORM_NICE,
      onError: (err) => logger.debug({ err }, 'worker priority'),
    });
    const takedowns = createTakedownList({ redis, logger, service: 'origin', pollMs: config.TAKEDOWN_POLL_MS });
    await takedowns.ready;
    const guard = createGuard({ takedowns, redis, config, logger });
    const whitelist = createWhitelist({ config, redis, metrics, logger });
    const evictions = listenForEvictions({ redis, images, store, config, logger });
    const auth = uploadAuth(config);
    const app = createApp({
      config,
      logger,
      registry,
      images,
      store,
      checks,
      metrics,
      redis,
      ...auth,
      guard,
      whitelist,
      version,
    });
    return {
      app,
      // a held restart (lib/src/service.js): the variant cache's directory is one process's at a time; the
      // requests this process still answers make their variants without it (uncached)
      handover: () => variants.close(),
      async close() {
        priority.stop();
        await takedowns.close();
        evictions.close();
        await fetchers.close();
        images.close();
        variants.close();
        redis.disconnect();
      },
    };
  },
});
