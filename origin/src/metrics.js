import { client } from '@stack/lib';

/** Every origin metric, registered once on the service's registry. @param {import('prom-client').Registry} registry */
export function createOriginMetrics(registry) {
  const registers = [registry];
  /** @type {import('./cache/pack-cache.js').PackCache | null} */
  let resultCache = null;
  /** @type {Record<string, import('./workers/pool.js').WorkerPool>} */
  let workerPools = {};
  return {
    /** Reports a result cache's state at every scrape. @param {import('./cache/pack-cache.js').PackCache} cache */
    watchResultCache: (cache) => {
      resultCache = cache;
    },
    /** Reports the transform workers at every scrape, by pool. @param {Record<string, import('./workers/pool.js').WorkerPool>} pools */
    watchWorkers: (pools) => {
      workerPools = pools;
    },
    transformDuration: new client.Histogram({
      name: 'origin_transform_duration_seconds',
      help: 'Time to decode, resize and encode one variant, by output format',
      labelNames: ['format'],
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers,
    }),
    queueWait: new client.Histogram({
      name: 'origin_queue_wait_seconds',
      help: 'Time a transform waited for a slot',
      buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
      registers,
    }),
    fetchDuration: new client.Histogram({
      name: 'origin_fetch_duration_seconds',
      help: 'Time to fetch a remote original',
      buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
      registers,
    }),
    queueDepth: new client.Gauge({ name: 'origin_queue_depth', help: 'Transforms waiting for a slot', registers }),
    inFlight: new client.Gauge({ name: 'origin_transforms_in_flight', help: 'Transforms running now', registers }),
    concurrency: new client.Gauge({
      name: 'origin_transform_concurrency',
      help: 'Configured transform slots',
      registers,
    }),
    queueMax: new client.Gauge({ name: 'origin_queue_max', help: 'Configured queue bound', registers }),
    cache: new client.Counter({
      name: 'origin_cache_requests_total',
      help: 'Cache lookups by level (original, variant, failure) and result (hit, miss)',
      labelNames: ['level', 'result'],
      registers,
    }),
    store: new client.Counter({
      name: 'origin_store_operations_total',
      help: 'Object storage (STORE=s3) requests by operation (get, put) and result (ok, missing, previous_store, exists, error, corrupt)',
      labelNames: ['operation', 'result'],
      registers,
    }),
    joins: new client.Counter({
      name: 'origin_single_flight_joins_total',
      help: 'Requests that joined a fetch or transform already in flight',
      labelNames: ['kind'],
      registers,
    }),
    fetches: new client.Counter({ name: 'origin_fetches_total', help: 'Remote originals fetched', registers }),
    transforms: new client.Counter({
      name: 'origin_transforms_total',
      help: 'Variants made, by output format',
      labelNames: ['format'],
      registers,
    }),
    codecs: new client.Counter({
      name: 'origin_transform_codecs_total',
      help: "Variants made, by what decoded the original (kept: no decode, the pixels kept from an earlier variant; libjpeg-turbo: the system's, for a plain JPEG; libavcodec or libheif: a HEIC; sharp) and what encoded the variant (libwebp or libjpeg-turbo: the system's; sharp)",
      labelNames: ['decode', 'encode'],
      registers,
    }),
    fetchErrors: new client.Counter({
      name: 'origin_fetch_errors_total',
      help: 'Failed remote fetches by reason',
      labelNames: ['reason'],
      registers,
    }),
    bytes: new client.Counter({
      name: 'origin_bytes_total',
      help: 'Image bytes in (fetched, uploaded) and out (variants sent)',
      labelNames: ['direction'],
      registers,
    }),
    rejections: new client.Counter({
      name: 'origin_rejections_total',
      help: 'Requests refused by reason (queue_full, quota, invalid_image, …)',
      labelNames: ['reason'],
      registers,
    }),
    scrubs: new client.Counter({
      name: 'origin_upload_scrubs_total',
      help: 'Uploads by what their metadata needed: scrubbed in place, clean (nothing to remove) or reencoded (could not be edited in place)',
      labelNames: ['result'],
      registers,
    }),
    keptPixels: new client.Counter({
      name: 'origin_kept_pixels_total',
      help: "A source's kept pixels (one decode per picture) asked for a variant, by result: hit (kept already), made (decoded now), joined (another variant was decoding them), alone (a small variant decoded alone at its smaller scale, cheaper than keeping the whole picture), short (the variant needs more than is kept: decoded as before)",
      labelNames: ['result'],
      registers,
    }),
    sharedResizes: new client.Counter({
      name: 'origin_shared_resizes_total',
      help: 'Variants encoded from the resized pixels another format of their size left beside the kept pixels: neither a decode nor a resize (counted also as hits of origin_kept_pixels_total)',
      registers,
    }),
    keptPixelsBytes: new client.Gauge({
      name: 'origin_kept_pixels_bytes',
      help: "Bytes of decoded pixels kept now, by holder: origin (the origin's own, KEPT_PIXELS_BYTES at most), warm_workers (a warm worker's for the warmer's next variants, 64 MB a warm worker at most: WARM_KEPT_PIXELS), with the resized pixels their variants left beside them for the other formats of their sizes",
      labelNames: ['holder'],
      registers,
    }),
    whitelist: new client.Counter({
      name: 'origin_whitelist_checks_total',
      help: 'Remote images checked against the proxy whitelist (PROXY_WHITELIST), by result: listed, unknown (403), blacklisted (451), allowed_host, preview_token, failed_open (the check failed: let through)',
      labelNames: ['result'],
      registers,
    }),
    originalAnswers: new client.Counter({
      name: 'origin_original_answers_total',
      help: "Variants answered with the original's bytes: smaller than what was made, or an animation past the budgets that the original satisfies",
      labelNames: ['reason'],
      registers,
    }),
    warm: new client.Counter({
      name: 'origin_warm_requests_total',
      help: "A warmer's requests (X-Warm) for variants not cached yet: made, or deferred (a 429: no idle capacity)",
      labelNames: ['result'],
      registers,
    }),
    pulls: new client.Counter({
      name: 'origin_pull_through_total',
      help: 'Missing uploads asked of the upstream image hosts, by upstream and result (stored, missing, mismatch: bytes that do not make the key, error, busy, open: its breaker)',
      labelNames: ['upstream', 'result'],
      registers,
    }),
    pullDuration: new client.Histogram({
      name: 'origin_pull_through_duration_seconds',
      help: "Time of one upstream image host's answer for a missing upload",
      labelNames: ['upstream'],
      buckets: [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
      registers,
    }),
    workers: new client.Gauge({
      name: 'origin_transform_workers',
      help: 'Transform worker processes alive, by pool (readers: TRANSFORM_WORKERS at most, one a core by default; warm: WARM_TRANSFORMS, a quarter of the cores by default); one idle for TRANSFORM_WORKER_IDLE_S ends, but the last',
      labelNames: ['pool'],
      registers,
      collect() {
        for (const [pool, workers] of Object.entries(workerPools)) this.set({ pool }, workers.size);
      },
    }),
    workersMemory: new client.Gauge({
      name: 'origin_transform_workers_resident_memory_bytes',
      help: "Resident memory of the transform worker processes, by pool (process_resident_memory_bytes is the origin's own process alone)",
      labelNames: ['pool'],
      registers,
      collect() {
        for (const [pool, workers] of Object.entries(workerPools)) this.set({ pool }, workers.residentBytes());
      },
    }),
    workerKills: new client.Counter({
      name: 'origin_transform_worker_kills_total',
      help: 'Transform workers killed at TRANSFORM_TIMEOUT_S (their slot freed at once)',
      registers,
    }),
    degraded: new client.Counter({
      name: 'origin_degraded_total',
      help: 'Variants encoded cheaper because the queue was deep',
      registers,
    }),
    fallbacks: new client.Counter({
      name: 'origin_fallback_answers_total',
      help: 'format=auto first answers in WebP while their AVIF is made in the background',
      registers,
    }),
    backgroundJobs: new client.Gauge({
      name: 'origin_background_encodes',
      help: 'Background encodes waiting for idle capacity or running',
      registers,
    }),
    background: new client.Counter({
      name: 'origin_background_encodes_total',
      help: 'Background encodes (the AVIF behind a first answer) by result: done, dropped (load, bound), failed',
      labelNames: ['result'],
      registers,
    }),
    cacheIndexBuilding: new client.Gauge({
      name: 'origin_result_cache_index_building',
      help: "1 while the result cache's index is rebuilt after a start (what it lacks yet is made again)",
      registers,
      collect() {
        this.set(resultCache?.building ? 1 : 0);
      },
    }),
    cacheIndexBytes: new client.Gauge({
      name: 'origin_result_cache_index_bytes',
      help: "Memory held by the result cache's index",
      registers,
      collect() {
        this.set(resultCache?.index.bytes ?? 0);
      },
    }),
    cacheBytes: new client.Gauge({
      name: 'origin_result_cache_bytes',
      help: 'Bytes of variants in the result cache on disk',
      registers,
      collect() {
        this.set(resultCache?.totalBytes ?? 0);
      },
    }),
    archiveBytes: new client.Gauge({
      name: 'origin_warm_archive_bytes',
      help: "Bytes of warmed posts' originals kept (each content once), bounded by WARM_ARCHIVE_BYTES",
      registers,
    }),
    archiveEvictions: new client.Counter({
      name: 'origin_warm_archive_evictions_total',
      help: 'Kept originals removed, the oldest first, to keep the archive within WARM_ARCHIVE_BYTES',
      registers,
    }),
    uploads: new client.Counter({
      name: 'origin_uploads_total',
      help: 'Accepted uploads by kind (hive, hivesigner, token)',
      labelNames: ['kind'],
      registers,
    }),
  };
}

/** @typedef {ReturnType<typeof createOriginMetrics>} OriginMetrics */
