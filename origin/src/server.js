import { readFileSync } from 'node:fs';
import path from 'node:path';
import sharp from 'sharp';
import {
  StartupError,
  connectRedis,
  createHiveClient,
  createTakedownList,
  redisReady,
  runService,
  countWarmBytes,
  transformSlots,
  usableCores,
} from '@stack/lib';
import { createApp } from './app.js';
import { DiskLru } from './cache/disk-lru.js';
import { FailureCache } from './cache/failures.js';
import { PackCache } from './cache/pack-cache.js';
import { loadSystemCodecs } from './codecs.js';
import { settings } from './config.js';
import { createFetcher } from './fetch.js';
import { createPullThrough } from './pull-through.js';
import { createArchive } from './archive.js';
import { createOriginals } from './originals.js';
import { createHiveAuth } from './hive-auth.js';
import { createHivesignerAuth } from './hivesigner.js';
import { createImages } from './images.js';
import { createOriginMetrics } from './metrics.js';
import { lowerWorkerPriority } from './nice.js';
import { TransformQueue } from './queue.js';
import { createSingleFlight } from './single-flight.js';
import { createStore } from './store/index.js';
import { allowedSizes } from './options.js';
import { createGuard, listenForEvictions } from './takedown.js';
import { createWhitelist } from './whitelist.js';

const version = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')).version;

// libvips' own operation cache only grows memory here: every variant is cached on disk and by varnish.
sharp.cache(false);

await runService({
  name: 'origin',
  settings,
  async build({ config: loaded, logger, registry }) {
    const config = /** @type {import('@stack/lib/src/config-types.js').OriginConfig} */ (loaded);
    try {
      allowedSizes(config);
    } catch (err) {
      throw new StartupError(/** @type {Error} */ (err).message, { cause: err });
    }
    const metrics = createOriginMetrics(registry);
    const redis = connectRedis(config, logger);
    await redisReady(redis, 2000);
    const originals = new DiskLru(path.join(config.DATA_DIR, 'originals'), config.ORIGINALS_CACHE_BYTES);
    const store = createStore({ config, originals, logger, metrics });
    const variants = new PackCache(path.join(config.DATA_DIR, 'variants'), config.VARIANTS_CACHE_BYTES, {
      warn: (details, message) => logger.warn(details, message),
    });
    variants.init();
    metrics.watchResultCache(variants);
    await originals.init();
    await store.init();
    const concurrency = transformSlots(config);
    metrics.concurrency.set(concurrency);
    metrics.queueMax.set(config.TRANSFORM_QUEUE_MAX);
    const queue = new TransformQueue({
      concurrency,
      maxQueued: config.TRANSFORM_QUEUE_MAX,
      keepFree: config.WARM_FREE_SLOTS,
      laterMax: config.WARM_QUEUE_MAX,
      laterConcurrency: config.WARM_TRANSFORMS,
      onChange: (q) => {
        metrics.queueDepth.set(q.depth);
        metrics.inFlight.set(q.running);
      },
    });
    const fetcher = createFetcher({
      maxBytes: config.FETCH_MAX_BYTES,
      connectTimeoutMs: config.FETCH_CONNECT_TIMEOUT_MS,
      responseTimeoutMs: config.FETCH_RESPONSE_TIMEOUT_MS,
      totalTimeoutMs: config.FETCH_TOTAL_TIMEOUT_MS,
      maxRedirects: config.FETCH_MAX_REDIRECTS,
      allowedHosts: config.FETCH_ALLOW_PRIVATE_HOSTS,
      userAgent: config.FETCH_USER_AGENT,
    });
    const failures = new FailureCache(redis, {
      permanentTtl: config.FAILURE_TTL_PERMANENT_S,
      transientTtl: config.FAILURE_TTL_TRANSIENT_S,
    });
    const flight = createSingleFlight((kind) => metrics.joins.inc({ kind }));
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
    // the upstream image hosts a missing upload is pulled from: their own fetcher, with their own time bound
    const upstreamFetcher = createFetcher({
      maxBytes: config.UPLOAD_MAX_BYTES,
      connectTimeoutMs: Math.min(config.FETCH_CONNECT_TIMEOUT_MS, config.UPSTREAM_TIMEOUT_MS),
      responseTimeoutMs: Math.min(config.FETCH_RESPONSE_TIMEOUT_MS, config.UPSTREAM_TIMEOUT_MS),
      totalTimeoutMs: config.UPSTREAM_TIMEOUT_MS,
      maxRedirects: config.FETCH_MAX_REDIRECTS,
      allowedHosts: config.FETCH_ALLOW_PRIVATE_HOSTS,
      userAgent: config.FETCH_USER_AGENT,
    });
    const pullThrough = createPullThrough({ config, store, fetcher: upstreamFetcher, failures, metrics, logger });
    const sources = createOriginals({
      config,
      store,
      cache: originals,
      failures,
      fetcher,
      flight,
      metrics,
      logger,
      pullThrough,
      archive: createArchive(config.DATA_DIR, {
        maxBytes: config.WARM_ARCHIVE_BYTES,
        onChange: (bytes) => metrics.archiveBytes.set(bytes),
        onEvict: () => metrics.archiveEvictions.inc(),
        // the warmer's fetches count in its day's bytes (WARM_MAX_BYTES_PER_DAY), as its variants do
        onKept: (bytes) => {
          countWarmBytes(redis, bytes).catch((err) =>
            logger.warn({ err: err.message }, "a warm fetch's bytes not counted"),
          );
        },
      }),
    });
    const images = createImages({
      config,
      store,
      originals: sources,
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
    const hive = createHiveClient({ urls: config.HIVE_API_URLS, timeoutMs: config.HIVE_API_TIMEOUT_MS });
    const verifySignature = createHiveAuth(hive);
    const verifyHivesigner = config.HIVESIGNER_APP
      ? createHivesignerAuth({
          apiUrl: config.HIVESIGNER_API_URL,
          app: config.HIVESIGNER_APP,
          timeoutMs: config.HIVE_API_TIMEOUT_MS,
        })
      : null;
    // an upload's check decode has slots of its own (one per core) and a bounded waiting list: never behind transforms
    const checks = new TransformQueue({
      concurrency: usableCores(),
      maxQueued: config.UPLOAD_CHECKS_QUEUE_MAX,
      refusal: { reason: 'upload_checks_full', retryAfterS: 5 },
    });
    const takedowns = createTakedownList({ redis, logger, service: 'origin', pollMs: config.TAKEDOWN_POLL_MS });
    await takedowns.ready;
    const guard = createGuard({ takedowns, redis, config, logger });
    if (config.PROXY_WHITELIST === 'haf' && !config.PROXY_WHITELIST_URL)
      throw new StartupError('PROXY_WHITELIST=haf needs PROXY_WHITELIST_URL: the HAF proxy-whitelist service to ask');
    const whitelist = createWhitelist({ config, redis, metrics, logger });
    const evictions = listenForEvictions({ redis, images, store, config, logger });
    const app = createApp({
      config,
      logger,
      registry,
      images,
      store,
      checks,
      metrics,
      redis,
      verifySignature,
      verifyHivesigner,
      guard,
      whitelist,
      version,
    });
    return {
      app,
      async close() {
        priority.stop();
        await takedowns.close();
        evictions.close();
        await fetcher.close();
        await upstreamFetcher.close();
        images.close();
        variants.close();
        redis.disconnect();
      },
    };
  },
});
