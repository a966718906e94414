// Generated from the declarations by npm run env-example: each service's settings as loadConfig gives them.

/** The settings every service declares alike. */
export type SharedConfig = {
  /** pino log level */
  LOG_LEVEL: "fatal" | "error" | "warn" | "info" | "debug" | "trace" | "silent";
  /** Redis for caches, quotas and the purge queue (with REDIS_SENTINELS: only its password and database number count) */
  REDIS_URL: string;
  /** Redis ACL user; the native stack and compose give each service a user of its own (with a password derived from REDIS_PASSWORD) and set this; empty: the default user */
  REDIS_USERNAME: string;
  /** Redis's and the sentinels' password (requirepass); the native stack generates one into STACK_DIR/secrets when empty, a fleet shares one (secrets.env) */
  REDIS_PASSWORD: string;
  /** password of the services' metrics ports and Prometheus (user `metrics`, HTTP basic auth): any local user reaches a loopback port; the native stack generates one into STACK_DIR/secrets when empty, a fleet shares one (secrets.env); empty on a service run by hand: its metrics open */
  METRICS_PASSWORD: string;
  /** Redis Sentinel addresses (host:port list): the master is asked of them and followed across a failover; empty: REDIS_URL's server */
  REDIS_SENTINELS: string[];
  /** the master's name in the sentinels' configuration */
  REDIS_MASTER_NAME: string;
  /** replicas that must hold a purge or takedown event before it is acknowledged (WAIT); 0: the master's own disk (appendfsync always) only; 1 with a replica: an acknowledged event survives a failover */
  REDIS_ACK_REPLICAS: number;
  /** longest wait for those replicas; then a 503 (the event may still be applied: purges are idempotent) */
  REDIS_ACK_TIMEOUT_MS: number;
  /** seconds a Node service keeps serving after SIGTERM while its /healthz answers 404 (haproxy's soft stop: no new requests, those in flight finish), so haproxy and a Service's endpoints leave it before it stops listening (the chart sets 10: a deleted pod costs no request); 0: it stops listening at once (one box: `down` stops everything) */
  SHUTDOWN_DRAIN_S: number;
  /** the public base URL users reach (nginx or the CDN in front of it) */
  PUBLIC_URL: string;
  /** Hive API nodes (JSON-RPC), tried in turn */
  HIVE_API_URLS: string[];
  /** timeout of one Hive API call */
  HIVE_API_TIMEOUT_MS: number;
  /** image proxies whose /p/ and WxH URLs are unwrapped to the original they wrap (for serving and for takedown entries) */
  UNWRAP_HOSTS: string[];
  /** image hosts this one takes over from, that serve /<key>/<name> the images.hive.blog way (e.g. https://images.hive.blog): the origin asks them in turn for an upload key its store lacks and stores the bytes only if they make the key (Hive keys are content addresses); their /<key>/<name> URLs count as uploads of this host everywhere (serving, avatars, takedowns); empty: a missing key is a 404 */
  UPSTREAM_IMAGE_HOSTS: string[];
  /** each node reloads the takedown list on every change notice, and checks its version this often besides */
  TAKEDOWN_POLL_MS: number;
  /** sources whose served URLs are remembered in Redis for takedowns (oldest forgotten first): the CDN purge of a takedown names these URLs */
  SERVED_SOURCES_MAX: number;
  /** served URLs remembered per source (sizes, formats, spellings) */
  SERVED_PATHS_PER_SOURCE: number;
  /** Cache-Control of a 451 (short, so that an unblock shows in browsers too; shared caches are purged) */
  CACHE_CONTROL_TAKEDOWN: string;
  /** Redis stream of purge events (webhooks, admin updates, chain follower) */
  PURGE_STREAM: string;
};

export type OriginConfig = SharedConfig & {
  /** address the origin listens on */
  ORIGIN_HOST: string;
  /** port of the origin */
  ORIGIN_PORT: number;
  /** Unix socket the origin listens on instead of its host and port (the native stack's haproxy reaches it there, INTERNAL_SOCKETS); empty: TCP */
  ORIGIN_SOCKET: string;
  /** Prometheus metrics port of the origin (kept off the public path) */
  ORIGIN_METRICS_PORT: number;
  /** which remote images /p/ proxies: off, every public one; chain, those a post or comment on the Hive chain references (recorded by the chain follower, HIVE_FOLLOW), as images.hive.blog does; haf, those a HAF proxy-whitelist service at PROXY_WHITELIST_URL vouches for. Others are a 403 (no-store); uploads, PROXY_WHITELIST_HOSTS and a preview token's requests pass; a check that fails lets the image through */
  PROXY_WHITELIST: "off" | "chain" | "haf";
  /** uploads and cached originals (a file each) and variants (segment files) live here; put it on a journaled filesystem: ext4 without a journal makes each new file pass over the inodes freed in the last minutes, which costs the origin CPU once the originals cache evicts */
  DATA_DIR: string;
  /** where uploads are kept: fs (DATA_DIR/uploads, one origin) or s3 (a bucket every origin shares; DATA_DIR keeps a bounded copy of what was read, in the originals cache) */
  STORE: "fs" | "s3";
  /** S3 API endpoint (R2: https://<account>.r2.cloudflarestorage.com, Ceph RGW, MinIO, Garage); empty: AWS S3 of S3_REGION, or in the native stack the embedded versitygw */
  S3_ENDPOINT: string;
  /** S3 region (R2: auto) */
  S3_REGION: string;
  /** bucket of the uploads (it must exist: the origin refuses to start without it) */
  S3_BUCKET: string;
  /** prefix of the object keys (e.g. uploads/ to share a bucket) */
  S3_PREFIX: string;
  /** bucket in the path (endpoint/bucket/key: MinIO, Ceph, Garage, versitygw) instead of the host name (AWS virtual-hosted style) */
  S3_FORCE_PATH_STYLE: boolean;
  /** S3 access key; empty: the AWS SDK's own chain (AWS_ACCESS_KEY_ID, a profile, the instance or pod role); the native stack generates one for its embedded versitygw */
  S3_ACCESS_KEY_ID: string;
  /** S3 secret key */
  S3_SECRET_ACCESS_KEY: string;
  /** longest S3 operation, retries and a download's body included (connect at most 3 s of it); then a 503 store_unavailable */
  S3_TIMEOUT_MS: number;
  /** tries of an S3 request (the SDK's retries with backoff) */
  S3_MAX_ATTEMPTS: number;
  /** largest accepted upload (nginx client_max_body_size follows it) */
  UPLOAD_MAX_BYTES: number;
  /** Bearer tokens accepted by POST /upload (comma separated); empty disables it */
  UPLOAD_TOKENS: string[];
  /** what a stored upload keeps of its metadata: location removes GPS and other location data, the owner's name, serial numbers and the maker note from EXIF, XMP and IPTC, in place (the pixels and every other byte as uploaded; a file that cannot be edited so is stored as a clean re-encode); all keeps only the orientation and the colour profile; none stores the bytes as uploaded. The key is always the uploaded bytes' */
  UPLOAD_METADATA: "location" | "all" | "none";
  /** Hive uploads whose signature did not verify (or named no account) one client address may send in ten minutes; past it its uploads are refused before their body is read (a 429), so forged uploads cannot make this origin call the Hive API for each */
  UPLOAD_FAILURES_PER_CLIENT: number;
  /** distinct uploads per Hive account over a rolling week (a retried upload of the same bytes counts once); past it a 429 saying when the oldest ages out */
  UPLOAD_QUOTA_PER_WEEK: number;
  /** uploads waiting for their check decode (one decode per core at once); past it a 503 with Retry-After */
  UPLOAD_CHECKS_QUEUE_MAX: number;
  /** this site's Hivesigner app account: POST /hs/<access token> uploads are taken from users who authorised it; empty: off (404) */
  HIVESIGNER_APP: string;
  /** Hivesigner, asked who an access token belongs to (/api/me) */
  HIVESIGNER_API_URL: string;
  /** a takedown also deletes the stored upload (off: it is kept, unserved, as a court may ask for evidence) */
  TAKEDOWN_DELETE_UPLOADS: boolean;
  /** lifetime of an editor preview token (POST /proxy-auth, as images.hive.blog) */
  PREVIEW_TOKEN_TTL_S: number;
  /** how far a /proxy-auth timestamp may be from this server's clock */
  PREVIEW_CLOCK_SKEW_S: number;
  /** longest one upstream image host may take to answer a missing upload */
  UPSTREAM_TIMEOUT_MS: number;
  /** uploads pulled from one upstream image host at once; past it the next upstream is asked, or a 503 */
  UPSTREAM_CONCURRENCY: number;
  /** how long a key every upstream image host answered 404 for is a 404 here without asking again (short: an upload made on the old host while both serve reaches it soon) */
  UPSTREAM_MISSING_TTL_S: number;
  /** failures in a row (errors, timeouts; not a 404) after which an upstream image host is not asked for UPSTREAM_BREAKER_COOLDOWN_MS */
  UPSTREAM_BREAKER_FAILURES: number;
  /** how long a failing upstream image host is left alone */
  UPSTREAM_BREAKER_COOLDOWN_MS: number;
  /** largest remote original fetched */
  FETCH_MAX_BYTES: number;
  /** connect timeout of a remote fetch */
  FETCH_CONNECT_TIMEOUT_MS: number;
  /** time to the response headers, and the longest pause between body chunks */
  FETCH_RESPONSE_TIMEOUT_MS: number;
  /** a remote fetch, all included */
  FETCH_TOTAL_TIMEOUT_MS: number;
  /** redirects followed (each target re-checked) */
  FETCH_MAX_REDIRECTS: number;
  /** host names or addresses allowed although private or loopback (tests, intranets) */
  FETCH_ALLOW_PRIVATE_HOSTS: string[];
  /** User-Agent of remote fetches */
  FETCH_USER_AGENT: string;
  /** largest source image (pixels, all frames), read from the header before decoding */
  MAX_INPUT_PIXELS: number;
  /** decode HEIC (HEVC in HEIF: the iPhone's photographs) with the system's libavcodec (FFmpeg, Debian's libavcodec59) or, for what it does not take, libheif and libde265 (libheif1, libde265-0), in a transform worker; off: a HEIC is a 400 unsupported_format, for an operator who must avoid HEVC (its patents are licensed in some countries; each decoder is one more parser of hostile files) */
  HEIC_DECODE: boolean;
  /** decoded pixels kept in memory so that the sizes and formats the frontends ask of one picture share one decode (each still image's, upright, shrunk by a power of two to at least KEPT_PIXELS_WIDTH: 12 MB for a 2560-px photograph; with up to one and a half times that of its variants' resized pixels, from which the other formats of their sizes are encoded without a resize); least recently used out first. 0 (the default): a decode per reader's variant (the warmer's share theirs: WARM_KEPT_PIXELS), better on a day's mix of sizes (bench/day, 2 cores, two runs each: kept on, 2-3 % more CPU a transform, the misses' p50 twice as long, more 503s); 128mb pays where each picture is asked in the frontends' whole set of sizes at once (bench/post: a page load's set 910 -> 750 ms of CPU) */
  KEPT_PIXELS_BYTES: number;
  /** the warmer's variants of one picture share one decode whatever KEPT_PIXELS_BYTES: the warmer asks all of a new post's sizes one after another, and its worker keeps the picture's pixels itself (up to two pictures and 64 MB a warm worker, a minute; a warm worker for every 4 cores): bench/post 2026-11-29, the warmer's set 690 -> 510 ms of CPU; false: a decode per variant there too */
  WARM_KEPT_PIXELS: boolean;
  /** how long a picture's decoded pixels are kept after their decode (the frontends ask for a new image's variants within seconds of each other) */
  KEPT_PIXELS_TTL_S: number;
  /** the width a picture's pixels are kept at (condenser's 2x, the widest a frontend asks): a variant wider than that (or taller than their height) is decoded from the original as before */
  KEPT_PIXELS_WIDTH: number;
  /** with PROXY_WHITELIST=haf: the HAF proxy-whitelist service (PostgREST) asked POST /whitelist/check {"url"} for each remote image not known yet */
  PROXY_WHITELIST_URL: string;
  /** with PROXY_WHITELIST: hosts whose images pass unchecked (YouTube's thumbnails: frontends build their URLs, no post holds them) */
  PROXY_WHITELIST_HOSTS: string[];
  /** with PROXY_WHITELIST=haf: the longest whitelist check; past it (or on any failure) the image is let through and counted (origin_whitelist_checks_total{result="failed_open"}) */
  PROXY_WHITELIST_TIMEOUT_MS: number;
  /** most frames a variant of an animation makes; past it, or past MAX_INPUT_PIXELS with each frame's pixels and 1,000 more for its overhead, a resize makes the first frames within both and a request the original satisfies (0x0) gets the original (X-Served-Original: animation_past_budget); never a reason to refuse an upload */
  MAX_FRAMES: number;
  /** requested width and height are capped at this */
  MAX_DIMENSION: number;
  /** when set, the only widths and heights made (pixels, each at most MAX_DIMENSION): a requested size becomes the next listed one up, the largest past them all, so an image has at most this many sizes per dimension; varnish keys on the same. Hive frontends use 64,128,240,512,640,768,1024,1280,1344,1536 and their pixel-ratio multiples; empty: any size up to MAX_DIMENSION */
  ALLOWED_SIZES: string[];
  /** box width when a request gives no size */
  DEFAULT_WIDTH: number;
  /** box height when a request gives no size */
  DEFAULT_HEIGHT: number;
  /** transforms at once; 0: 2 × the cores the origin may use (its CPU affinity, within its cgroup CPU quota: a container or pod limit) */
  TRANSFORM_CONCURRENCY: number;
  /** transforms waiting; past it an immediate 503 with Retry-After; 0: sixteen for each transform slot (64 on 2 cores, 512 on 16: the same wait in time on any machine) */
  TRANSFORM_QUEUE_MAX: number;
  /** queue depth from which avif/auto are encoded as cheaper WebP with a short Cache-Control; 0: two for each transform slot (8 on 2 cores) */
  TRANSFORM_DEGRADE_DEPTH: number;
  /** longest a variant not yet cached takes (/p/), fetch, queue and transform included: then a JSON 503 request_timeout (the work goes on and is cached); keep it under HAPROXY_SERVER_TIMEOUT_S so the origin answers first */
  REQUEST_TIMEOUT_S: number;
  /** longest transform; a transform in a worker process (TRANSFORM_WORKER_PIXELS) is killed then and its slot is free at once */
  TRANSFORM_TIMEOUT_S: number;
  /** largest variant, in pixels of all its frames (a 400 past it): what one request may cost in the encoder */
  MAX_OUTPUT_PIXELS: number;
  /** largest AVIF variant, in pixels of all its frames: an AVIF encode costs several times a WebP's per pixel (bench/effort); a larger one negotiated (format=auto or match) is made in WebP, one asked for as format=avif is a 400 */
  AVIF_MAX_PIXELS: number;
  /** variants past this many pixels, and every AVIF, are made in a worker process that is killed at TRANSFORM_TIMEOUT_S (libvips cannot stop inside an encoder); smaller ones in the origin's own threads */
  TRANSFORM_WORKER_PIXELS: number;
  /** transform worker processes at once (AVIFs, HEIC sources, variants past TRANSFORM_WORKER_PIXELS): a transform past them waits in its slot for one; 0: one a core the origin may use (an AVIF encode keeps its core busy: on 2 cores one a core made as many AVIFs a second as one a slot, at 38 % less memory, 2026-11-27) */
  TRANSFORM_WORKERS: number;
  /** glibc malloc arenas (MALLOC_ARENA_MAX) of each transform worker process: it makes one transform at a time, so two; 0: the origin's own (one a core). At 16 cores two held 26–28 % less memory (PSS) than one a core for as many AVIFs a second (bench/FINDINGS.md, 2026-11-27) */
  TRANSFORM_WORKER_ARENAS: number;
  /** a transform worker process idle this long ends, unless it is the last one alive (each holds the memory of its largest encode, ~170 MB after a 2000-px AVIF; starting one costs ~120 ms); 0: kept until the origin stops */
  TRANSFORM_WORKER_IDLE_S: number;
  /** libvips threads per transform; 0: cores ÷ transforms running (a lone transform gets every core, a full house one each) */
  TRANSFORM_THREADS: number;
  /** event loops (worker threads) that drive the origin's own transforms, apart from the one serving requests; 0: one for each 16 cores past the first 16 the origin may use (none up to 16: the request path's loop drives those, measured in docs/queue.md); -1: none */
  TRANSFORM_LOOPS: number;
  /** niceness of the threads that transform (all but the event loop), so the request path keeps the CPU under a flood of transforms; 0 leaves them alone */
  TRANSFORM_NICE: number;
  /** requests whose box fits in this many pixels (avatars, thumbnails) go ahead in the queue */
  SMALL_BOX: number;
  /** disk kept for originals (LRU): fetched remote ones and, with STORE=s3, uploads read from the bucket */
  ORIGINALS_CACHE_BYTES: number;
  /** disk kept for warmed posts' originals, made from even when their host is gone (each content once; past it the oldest kept go first); 0: none kept */
  WARM_ARCHIVE_BYTES: number;
  /** disk kept for encoded variants (LRU; segment files of a 32nd of it, at most 64 MB) */
  VARIANTS_CACHE_BYTES: number;
  /** how long "not found / not an image" is remembered */
  FAILURE_TTL_PERMANENT_S: number;
  /** how long timeouts, 5xx and connection errors are remembered */
  FAILURE_TTL_TRANSIENT_S: number;
  /** decode JPEG originals with the system's libjpeg-turbo (Debian: libturbojpeg0) and encode their JPEG variants with it and their WebP variants with its libwebp (libwebp7) instead of the slower builds inside sharp, in the origin and in its transform workers: the very bytes sharp makes for less CPU each (docs/encoding.md); auto: those found, on: both or no start, off: sharp alone */
  SYSTEM_CODECS: "auto" | "on" | "off";
  /** JPEG quality (mozjpeg's libjpeg with the standard quantisation tables and optimised Huffman tables) */
  JPEG_QUALITY: number;
  /** progressive JPEG (drawn coarse to fine while it loads): about 1.5% fewer bytes for 5-10% more CPU per variant (bench/effort); off: baseline */
  JPEG_PROGRESSIVE: boolean;
  /** mozjpeg trellis quantisation and scan optimisation: 11% smaller files at the same quality setting (about 4% at equal SSIM) for 4× the encode time */
  JPEG_TRELLIS: boolean;
  /** WebP quality */
  WEBP_QUALITY: number;
  /** WebP encoder effort (0-6; 1 when degraded under a deep queue): bench/effort. Every effort is encoded by the system libwebp where it is used (docs/encoding.md) */
  WEBP_EFFORT: number;
  /** AVIF quality (68: the SSIM of the origin's JPEG q80 at 640–768 px, a fifth fewer bytes; 50 was visibly below it) */
  AVIF_QUALITY: number;
  /** AVIF encoder effort (0-9): 3 makes the same bytes as 4 for under a third of the CPU (bench/effort) */
  AVIF_EFFORT: number;
  /** format=match (the default, what condenser's /WxH/ and ecency's URLs ask) negotiated from Accept as auto is: AVIF or WebP (an animation as animated WebP, a screenshot or drawing as lossless WebP) to a client that takes them, the source's format to one that does not (a crawler, curl); false: always the source's format */
  NEGOTIATE_MATCH: boolean;
  /** transform slots that must be free for a warmer's transform (X-Warm: 1, the purge service's WARM) to start: it waits in a lane behind every reader's transform and runs beside their slots, at the lowest CPU priority */
  WARM_FREE_SLOTS: number;
  /** CPU priority (niceness) of the warmer's transform worker: 19, the lowest, takes only what readers and every other program leave; lower it (never below TRANSFORM_NICE) where the machine is never idle and warming must still progress */
  WARM_NICE: number;
  /** warmer's transforms running at once, each on one thread in a worker process of its own: the share of the CPU warming may take from readers; 0: a quarter of the cores the origin may use, at least one (one on 2 cores, four on 16) */
  WARM_TRANSFORMS: number;
  /** a warmer's transform starts only while the share of the last second in which some task waited for a CPU (Linux PSI, /proc/pressure/cpu) is at most this many percent; 0: no such gate */
  WARM_MAX_CPU_PRESSURE: number;
  /** warmer's transforms waiting at once; past it, or while the queue is deep (TRANSFORM_DEGRADE_DEPTH), a 429 warm_deferred the warmer retries later; 0: two for each warm transform, at least 8 (the warmer sends two for each) */
  WARM_QUEUE_MAX: number;
  /** format=auto for an AVIF browser: while its AVIF is not made yet, answer at once in WebP (CACHE_CONTROL_FIRST_ANSWER) and make the AVIF in the background on idle capacity; false: the first visitor waits for the AVIF encode */
  AUTO_AVIF_FIRST_ANSWER: boolean;
  /** AVIF encodes behind first answers running at once, in the slots readers leave (one starts only while no reader waits); 0: half the cores the origin may use, at least one (one on 2 cores: the share of the machine the later AVIFs may take stays the same on a bigger one) */
  BACKGROUND_ENCODES: number;
  /** AVIF encodes waiting for idle capacity; past it (or when the transform queue is full) they are dropped and asked again by the next request */
  BACKGROUND_ENCODES_MAX: number;
  /** whether the CDN in front keeps one copy per Accept (honours Vary: Accept, e.g. Cloudflare with "Vary for Images"); false: format=auto answers carry CDN-Cache-Control and Cloudflare-CDN-Cache-Control: no-store, so a CDN never serves an AVIF to a browser that cannot decode it (varnish still caches one per Accept class) */
  CDN_VARY_ACCEPT: boolean;
  /** Cache-Control of originals and variants */
  CACHE_CONTROL_IMMUTABLE: string;
  /** Cache-Control of 4xx answers (negative caching) */
  CACHE_CONTROL_NEGATIVE: string;
  /** Cache-Control of a format=auto first answer in WebP while its AVIF is made: short, so varnish asks again once the AVIF can be there */
  CACHE_CONTROL_FIRST_ANSWER: string;
  /** Cache-Control of a variant degraded under load */
  CACHE_CONTROL_DEGRADED: string;
};

export type AvatarResolverConfig = SharedConfig & {
  /** address the avatar-resolver listens on */
  AVATAR_RESOLVER_HOST: string;
  /** port of the avatar-resolver */
  AVATAR_RESOLVER_PORT: number;
  /** Unix socket the avatar-resolver listens on instead of its host and port (the native stack's haproxy reaches it there, INTERNAL_SOCKETS); empty: TCP */
  AVATAR_RESOLVER_SOCKET: string;
  /** Prometheus metrics port of the avatar-resolver (kept off the public path) */
  AVATAR_RESOLVER_METRICS_PORT: number;
  /** where account → image mappings come from */
  AVATAR_SOURCE: "local" | "hive" | "http";
  /** http source: your app's user endpoint, {account} is replaced */
  AVATAR_HTTP_URL: string;
  /** http source: JSON path of the avatar URL */
  AVATAR_HTTP_AVATAR_PATH: string;
  /** http source: JSON path of the cover URL */
  AVATAR_HTTP_COVER_PATH: string;
  /** image for accounts without an avatar; empty: the resolver's built-in silhouette */
  AVATAR_DEFAULT_URL: string;
  /** Bearer token of PUT /admin/accounts/<account> (local source); empty disables it */
  AVATAR_ADMIN_TOKEN: string;
  /** how long a resolved mapping is trusted in Redis (the purge service deletes it on change) */
  AVATAR_CACHE_TTL_S: number;
  /** how long "no such account" is remembered */
  AVATAR_NEGATIVE_TTL_S: number;
  /** in-process LRU entries in front of Redis */
  AVATAR_MEMORY_ENTRIES: number;
  /** in-process LRU lifetime (purges also evict it at once, by Redis pub/sub) */
  AVATAR_MEMORY_TTL_MS: number;
  /** most accounts in one upstream call */
  AVATAR_BATCH_MAX: number;
  /** how long misses wait to be batched together (small next to an upstream round trip) */
  AVATAR_BATCH_WAIT_MS: number;
  /** timeout of one upstream lookup */
  AVATAR_UPSTREAM_TIMEOUT_MS: number;
  /** consecutive upstream failures that open the circuit */
  AVATAR_BREAKER_FAILURES: number;
  /** how long the circuit stays open before one trial call */
  AVATAR_BREAKER_COOLDOWN_MS: number;
  /** prefix of redirect targets; empty: relative /p/… on the host that was asked */
  AVATAR_REDIRECT_BASE: string;
  /** Cache-Control of the 301 from another spelling of an avatar URL (an unknown size, a trailing slash) to its one URL */
  CACHE_CONTROL_SPELLING: string;
  /** Cache-Control of avatar and cover 302s (shared caches are purged on change) */
  CACHE_CONTROL_REDIRECT: string;
  /** Cache-Control of a 302 made from a stale mapping or the default while the upstream is down */
  CACHE_CONTROL_DEGRADED_REDIRECT: string;
  /** Cache-Control of 4xx answers (negative caching) */
  CACHE_CONTROL_NEGATIVE: string;
};

export type PurgeServiceConfig = SharedConfig & {
  /** address the purge-service listens on */
  PURGE_SERVICE_HOST: string;
  /** port of the purge-service */
  PURGE_SERVICE_PORT: number;
  /** Unix socket the purge-service listens on instead of its host and port (the native stack's haproxy reaches it there, INTERNAL_SOCKETS); empty: TCP */
  PURGE_SERVICE_SOCKET: string;
  /** Prometheus metrics port of the purge-service (kept off the public path) */
  PURGE_SERVICE_METRICS_PORT: number;
  /** which remote images /p/ proxies: off, every public one; chain, those a post or comment on the Hive chain references (recorded by the chain follower, HIVE_FOLLOW), as images.hive.blog does; haf, those a HAF proxy-whitelist service at PROXY_WHITELIST_URL vouches for. Others are a 403 (no-store); uploads, PROXY_WHITELIST_HOSTS and a preview token's requests pass; a check that fails lets the image through */
  PROXY_WHITELIST: "off" | "chain" | "haf";
  /** webhook HMAC-SHA256 keys, comma separated (several during a rotation); empty refuses every webhook */
  PURGE_HMAC_KEYS: string[];
  /** webhook X-Timestamp must be this close to now; a signature is accepted once within it */
  PURGE_TIMESTAMP_TOLERANCE_S: number;
  /** Bearer token of the dead-letter admin endpoints; empty disables them */
  PURGE_ADMIN_TOKEN: string;
  /** consumer group of the purge stream */
  PURGE_GROUP: string;
  /** this worker's consumer name: keep it stable so a restart resumes its own pending events; empty: the host name */
  PURGE_CONSUMER: string;
  /** stream of events that failed every attempt */
  PURGE_DEAD_STREAM: string;
  /** events read at once; events for one account in a batch are coalesced into one purge */
  PURGE_BATCH: number;
  /** batches purged at once (a slow CDN does not stall varnish purges of later batches) */
  PURGE_CONCURRENCY: number;
  /** attempts per target before the events go to the dead-letter stream */
  PURGE_MAX_ATTEMPTS: number;
  /** first retry delay (doubles each attempt, with jitter) */
  PURGE_RETRY_BASE_MS: number;
  /** longest retry delay */
  PURGE_RETRY_MAX_MS: number;
  /** pending events of another (crashed) consumer idle this long are claimed */
  PURGE_CLAIM_IDLE_MS: number;
  /** varnish nodes (host:port), or unix:<path> of a node's purge socket; a name resolving to several addresses purges each; the native stack: its varnish's purge socket (STACK_DIR/run/purge/varnish.sock) */
  PURGE_VARNISH_NODES: string[];
  /** how often purges a varnish node missed (it was down or refused) are sent to it again, oldest first */
  PURGE_NODE_RETRY_MS: number;
  /** a missed purge older than this is dropped (a node away that long restarts with an empty cache) */
  PURGE_NODE_MAX_AGE_S: number;
  /** soft-purge xkeys (objects stay for grace) instead of removing them */
  PURGE_XKEY_SOFT: boolean;
  /** timeout of one purge call to varnish or the CDN */
  PURGE_TIMEOUT_MS: number;
  /** public bases whose avatar URLs are purged at the CDN; empty: PUBLIC_URL */
  CDN_PURGE_BASES: string[];
  /** Cloudflare API base (tests point it at a local server) */
  CLOUDFLARE_API_BASE: string;
  /** Cloudflare zone; empty: no CDN purge */
  CLOUDFLARE_ZONE_ID: string;
  /** Cloudflare API token with Cache Purge permission */
  CLOUDFLARE_API_TOKEN: string;
  /** URLs per purge call (the plan's limit) */
  CLOUDFLARE_URLS_PER_CALL: number;
  /** purge calls per second (token bucket matching the plan's rate limit) */
  CLOUDFLARE_CALLS_PER_SECOND: number;
  /** purge calls allowed in a burst */
  CLOUDFLARE_BURST: number;
  /** JSON lists files ({"images","keys","urls","domains","patterns","accounts"}: arrays) whose entries are blocked; edits take effect without a restart */
  TAKEDOWN_FILES: string[];
  /** how often the takedown files are checked besides file-change notices */
  TAKEDOWN_FILE_POLL_MS: number;
  /** remote lists polled for takedowns (the same JSON shape; ecency's images/accounts/domains lists read as they are) */
  TAKEDOWN_LIST_URLS: string[];
  /** how often each remote list is fetched (a failed fetch keeps its last entries) */
  TAKEDOWN_LIST_POLL_S: number;
  /** largest takedown file or remote list read */
  TAKEDOWN_LIST_MAX_BYTES: number;
  /** entries in one admin call (a file or a list may hold more) */
  TAKEDOWN_MAX_ENTRIES: number;
  /** largest admin API body */
  TAKEDOWN_BODY_MAX_BYTES: number;
  /** audit records kept (oldest trimmed first) */
  TAKEDOWN_AUDIT_MAX: number;
  /** a takedown purge waits at most this long for every live node to hold the new list (so nothing re-caches what the purge removed) */
  TAKEDOWN_SETTLE_TIMEOUT_MS: number;
  /** follow the Hive chain: account_update(2) ops that change a profile image queue purges */
  HIVE_FOLLOW: boolean;
  /** first block when no cursor is stored; 0: the head block */
  HIVE_FOLLOW_START_BLOCK: number;
  /** with HIVE_FOLLOW: each new post's and edit's images are fetched, kept and made in the sizes the frontends ask first (WARM_PATHS) as it is published, on the origin's idle capacity, so the first reader gets cache hits */
  WARM: boolean;
  /** where the warmer asks for images, as a reader would (the native stack and compose set it to their nginx) */
  WARM_EDGE_URL: string;
  /** the URLs the frontends ask for each image of a post ({url}: as it is, {base58}: encoded): condenser's post body (768x0), ecency's (format=match, fit) */
  WARM_PATHS: string[];
  /** the URLs the feeds ask for a post's first image (its thumbnail): condenser's 256x512 */
  WARM_THUMBNAIL_PATHS: string[];
  /** images warmed at once, of one post or of the newest few (the origin still makes their variants behind every reader's, WARM_TRANSFORMS at once); 0: two for each of the origins' warm transforms (ORIGIN_SERVERS at render; else from this machine's cores, as an origin here would have them: two on 2 cores, eight on 16). Set it where the origins run on other machines than the purge service */
  WARM_CONCURRENCY: number;
  /** a post older than this when the warmer reaches it (a backlog after downtime, a burst) is left to its readers */
  WARM_MAX_AGE_S: number;
  /** the Accept classes each URL is warmed for (negotiated answers vary by Accept) */
  WARM_ACCEPTS: string[];
  /** images of one post warmed (json_metadata.image first, then the body's); the rest is left to its readers */
  WARM_MAX_IMAGES_PER_POST: number;
  /** images of one author warmed in an hour */
  WARM_AUTHOR_IMAGES_PER_HOUR: number;
  /** images warmed in a minute, every author together (past it they are skipped: readers make them) */
  WARM_IMAGES_PER_MINUTE: number;
  /** bytes warmed a day (UTC): the variants made and the originals the origin fetched for them (WARM_ARCHIVE_BYTES bounds what it keeps); past it warming stops until the next day */
  WARM_MAX_BYTES_PER_DAY: number;
  /** authors whose posts are never warmed */
  WARM_SKIP_AUTHORS: string[];
  /** image hosts (and their subdomains) never warmed */
  WARM_SKIP_DOMAINS: string[];
  /** how long one image waits for the origin's idle capacity (its 429 warm_deferred) before it is left to its readers */
  WARM_DEFER_MAX_S: number;
  /** one warm request, all included */
  WARM_TIMEOUT_MS: number;
  /** Redis stream of posts to warm */
  WARM_STREAM: string;
  /** posts the warm stream keeps (oldest trimmed first when the warmer lags) */
  WARM_STREAM_MAX: number;
  /** consumer group of the warmers (several purge services share the posts) */
  WARM_GROUP: string;
  /** how often the head block is polled (Hive makes a block every 3 s) */
  HIVE_FOLLOW_POLL_MS: number;
};
