// Ready before the first reader (#41): the chain follower (hive-follow.js) hands each `comment` operation
// (new posts and edits) to warmPost, which queues the image URLs the frontends will show on a Redis stream;
// the warmer takes them from there, newest post first, and asks the edge for each, exactly as the
// frontends will (WARM_PATHS, once per Accept class of WARM_ACCEPTS), with X-Warm: 1. The origin fetches
// and keeps the original under every rule of a request (limits, SSRF, takedowns: a blocked source is a 451
// before any fetch) and makes the variant behind every reader's transform, beside their slots, at the
// lowest CPU priority (a 429 while it is busy, which the warmer waits out); varnish keeps what comes back,
// so the first reader's request is a hit. Bounded:
// images per post, per author an hour, all authors a minute, bytes a day, authors and domains skipped
// (WARM_SKIP_*), each URL once a day, posts older than WARM_MAX_AGE_S left to their readers.
import { createHash } from 'node:crypto';
import os from 'node:os';
import { base58Url, countWarmBytes, warmBytesKey } from '@stack/lib';

/** @typedef {{ author: string, permlink: string, urls: string[] }} WarmPost */

const MARKDOWN_IMAGE = /!\[[^\]]*\]\(\s*<?(https?:\/\/[^\s)>]+)>?(?:\s+["'][^"']*["'])?\s*\)/gi;
const HTML_IMAGE = /<img\b[^>]*?\bsrc\s*=\s*["'](https?:\/\/[^"']+)["']/gi;
const BARE_IMAGE =
  /(?:^|[\s(>])(https?:\/\/[^\s<>"')]+?\.(?:jpe?g|png|gif|webp|avif|heic)(?:\?[^\s<>"')]*)?)(?=$|[\s)<"'])/gim;

/**
 * The image URLs a post shows, in the order a frontend would ask for them: json_metadata.image first (the
 * feed thumbnail is its first), then the images of the body (markdown, <img>, bare image links), each once.
 * @param {{ body?: string, json_metadata?: string }} op @returns {string[]}
 */
export function imagesOf(op) {
  /** @type {string[]} */
  const urls = [];
  try {
    const images = JSON.parse(op.json_metadata || '{}')?.image;
    if (Array.isArray(images)) urls.push(...images.filter((url) => typeof url === 'string'));
  } catch {
    // a post's metadata that is not JSON names no image
  }
  const body = String(op.body || '');
  const found = [MARKDOWN_IMAGE, HTML_IMAGE, BARE_IMAGE].flatMap((pattern) =>
    [...body.matchAll(pattern)].map((match) => ({ at: match.index, url: match[1] })),
  );
  urls.push(...found.sort((a, b) => a.at - b.at).map((match) => match.url));
  return [
    ...new Set(urls.map((url) => url.trim()).filter((url) => /^https?:\/\/[^/\s]+/i.test(url) && url.length <= 2000)),
  ];
}

/**
 * Queues a `comment` op's images for the warmer (called by the follower before it moves its cursor, so a
 * restart repeats a block rather than skipping it: each URL is warmed once a day anyway).
 * @param {import('ioredis').Redis} redis @param {import('@stack/lib/src/config-types.js').PurgeServiceConfig} config @param {any} op
 */
export async function warmPost(redis, config, op) {
  const urls = imagesOf(op);
  if (!urls.length || typeof op.author !== 'string') return false;
  await redis.xadd(
    config.WARM_STREAM,
    'MAXLEN',
    '~',
    String(config.WARM_STREAM_MAX),
    '*',
    'author',
    op.author,
    'permlink',
    String(op.permlink || ''),
    'urls',
    JSON.stringify(urls),
  );
  return true;
}

/**
 * The edge URL a frontend asks for `url` with the path template `template` ({url}: as it is, {base58}: encoded).
 * @param {string} edge @param {string} template @param {string} url
 */
export function warmUrl(edge, template, url) {
  return `${edge}${template.replace('{url}', url).replace('{base58}', base58Url.encode(url))}`;
}

/** @param {string} host @param {string[]} domains */
const inDomains = (host, domains) => domains.some((domain) => host === domain || host.endsWith(`.${domain}`));

/**
 * The warmer: reads the stream in a consumer group (a crash leaves its entry pending, taken up again at
 * start), one post at a time, the newest first.
 * @param {{ redis: import('ioredis').Redis, config: import('@stack/lib/src/config-types.js').PurgeServiceConfig, logger: import('pino').Logger,
 *   metrics: ReturnType<typeof import('./metrics.js').createPurgeMetrics> }} deps
 */
export function createWarmer({ redis, config, logger, metrics }) {
  const consumer = `${os.hostname()}:${process.pid}`;
  const reader = redis.duplicate();
  reader.on('error', () => {});
  let running = false;
  /** @type {Promise<void> | null} */
  let loop = null;
  const count = (/** @type {string} */ result, /** @type {string} */ reason = '') =>
    metrics.warmed.inc({ result, reason });

  /**
   * Why an image is not warmed now ('' to warm it): the operator's skips, the rates, the day's bytes, or
   * warmed already today. Counts against the rates only what passes. @param {string} author @param {string} url
   */
  async function skipReason(author, url) {
    let host = '';
    try {
      host = new URL(url).hostname.toLowerCase();
    } catch {
      return 'invalid_url';
    }
    if (inDomains(host, config.WARM_SKIP_DOMAINS)) return 'domain';
    if (Number(await redis.get(warmBytesKey())) >= config.WARM_MAX_BYTES_PER_DAY) return 'bytes_cap';
    const seen = await redis.set(
      `warm:seen:${createHash('sha256').update(url).digest('hex')}`,
      '1',
      'EX',
      86_400,
      'NX',
    );
    if (!seen) return 'seen';
    const hour = Math.floor(Date.now() / 3_600_000);
    const byAuthor = await redis
      .multi()
      .incr(`warm:author:${author}:${hour}`)
      .expire(`warm:author:${author}:${hour}`, 3600)
      .exec();
    if (Number(byAuthor?.[0]?.[1]) > config.WARM_AUTHOR_IMAGES_PER_HOUR) return 'author_rate';
    // every author together: at most WARM_IMAGES_PER_MINUTE in any 60 s (a sliding window)
    const now = Date.now();
    const recent = await redis
      .multi()
      .zremrangebyscore('warm:recent', 0, now - 60_000)
      .zcard('warm:recent')
      .exec();
    if (Number(recent?.[1]?.[1]) >= config.WARM_IMAGES_PER_MINUTE) return 'rate';
    await redis.multi().zadd('warm:recent', now, `${now}:${url}`).expire('warm:recent', 120).exec();
    return '';
  }

  /**
   * One edge URL asked as a frontend would, redirects followed; a 429 (no idle capacity at the origin) is
   * waited out up to WARM_DEFER_MAX_S. The answer's status and its bytes. @param {string} target @param {string} accept
   * @returns {Promise<{ status: number, bytes: number }>}
   */
  async function ask(target, accept) {
    const deadline = Date.now() + config.WARM_DEFER_MAX_S * 1000;
    let url = target;
    for (let hops = 0; hops < 5;) {
      const response = await fetch(url, {
        headers: { accept, 'x-warm': '1', 'user-agent': 'image-cdn-stack warmer' },
        redirect: 'manual',
        signal: AbortSignal.timeout(config.WARM_TIMEOUT_MS),
      });
      const body = await response.arrayBuffer();
      if (response.status >= 300 && response.status < 400 && response.headers.get('location')) {
        url = new URL(/** @type {string} */ (response.headers.get('location')), url).toString();
        hops += 1;
        continue;
      }
      // 429: no room at the origin yet; 503: its deadline passed while the variant waited (still being made)
      const later = response.status === 429 || response.status === 503;
      if (!later || Date.now() >= deadline || !running) return { status: response.status, bytes: body.byteLength };
      await new Promise((resolve) =>
        setTimeout(resolve, Math.max(200, Number(response.headers.get('retry-after')) * 1000 || 1000)),
      );
    }
    return { status: 508, bytes: 0 };
  }

  /**
   * Every path and Accept class of one image (the thumbnail's too for a post's first); its outcome counted.
   * @param {string} author @param {string} url @param {boolean} first
   */
  async function warmImage(author, url, first) {
    const skip = await skipReason(author, url);
    if (skip) return count('skipped', skip);
    let bytes = 0;
    for (const template of first ? [...config.WARM_THUMBNAIL_PATHS, ...config.WARM_PATHS] : config.WARM_PATHS) {
      for (const accept of config.WARM_ACCEPTS) {
        const answer = await ask(warmUrl(config.WARM_EDGE_URL, template, url), accept).catch((err) => ({
          status: 0,
          bytes: 0,
          err,
        }));
        bytes += answer.bytes;
        if (answer.status === 451) return count('skipped', 'blocked');
        if (answer.status !== 200) {
          logger.debug({ url, template, status: answer.status }, 'warm request not answered');
          return count(
            'failed',
            answer.status === 429 || answer.status === 503
              ? 'busy'
              : answer.status === 0
                ? 'error'
                : `status_${answer.status}`,
          );
        }
      }
    }
    await countWarmBytes(redis, bytes);
    return count('warmed');
  }

  /**
   * One post's images, WARM_CONCURRENCY at a time; none of a post older than WARM_MAX_AGE_S (its readers
   * came already). @param {string} author @param {string[]} urls @param {number} publishedAt ms
   */
  async function warmEntry(author, urls, publishedAt) {
    const skipAll = config.WARM_SKIP_AUTHORS.includes(author)
      ? 'author'
      : Date.now() - publishedAt > config.WARM_MAX_AGE_S * 1000
        ? 'stale'
        : '';
    if (skipAll) {
      for (const _url of urls) count('skipped', skipAll);
      return;
    }
    for (const _url of urls.slice(config.WARM_MAX_IMAGES_PER_POST)) count('skipped', 'post_cap');
    const todo = urls.slice(0, config.WARM_MAX_IMAGES_PER_POST).map((url, i) => ({ url, first: i === 0 }));
    const worker = async () => {
      for (let next = todo.shift(); next && running; next = todo.shift()) await warmImage(author, next.url, next.first);
    };
    await Promise.all(Array.from({ length: config.WARM_CONCURRENCY }, worker));
  }

  /**
   * Entries of the stream for this consumer: its own pending ones first (a crash's), then new ones, waiting
   * up to a second for one when `wait`. @param {string} from @param {boolean} wait
   */
  async function read(from, wait) {
    const answer = /** @type {any} */ (
      from !== '>' || !wait
        ? await reader.xreadgroup(
            'GROUP',
            config.WARM_GROUP,
            consumer,
            'COUNT',
            100,
            'STREAMS',
            config.WARM_STREAM,
            from,
          )
        : await reader.xreadgroup(
            'GROUP',
            config.WARM_GROUP,
            consumer,
            'COUNT',
            100,
            'BLOCK',
            1000,
            'STREAMS',
            config.WARM_STREAM,
            from,
          )
    );
    return /** @type {Array<[string, string[]]>} */ (answer?.[0]?.[1] || []);
  }

  /** One stream entry warmed (or skipped), then acknowledged. @param {string} id @param {string[]} fields */
  async function warmOne(id, fields = []) {
    /** @type {Record<string, string>} */
    const entry = {};
    for (let i = 0; i + 1 < fields.length; i += 2) entry[fields[i]] = fields[i + 1];
    try {
      await warmEntry(entry.author, JSON.parse(entry.urls || '[]'), Number(id.split('-')[0]));
    } catch (err) {
      logger.warn({ err: /** @type {Error} */ (err).message, author: entry.author }, 'post not warmed');
    }
    if (running) await redis.xack(config.WARM_STREAM, config.WARM_GROUP, id);
    metrics.warmPosts.inc();
  }

  /**
   * Newest post first: its readers come soonest, while a backlog's (a burst of posts, a restart) came
   * already or come later; every entry read stays pending in the group until it is done, so a crash
   * hands it over again at start.
   */
  async function run() {
    await redis
      .xgroup('CREATE', config.WARM_STREAM, config.WARM_GROUP, '0', 'MKSTREAM')
      .catch((/** @type {Error} */ err) => {
        if (!/BUSYGROUP/.test(err.message)) throw err;
      });
    let from = '0';
    /** @type {Array<[string, string[]]>} */
    const backlog = [];
    while (running) {
      try {
        const entries = await read(from, backlog.length === 0);
        // this consumer's pending entries are read once, from past the last of them read; then new ones
        if (from !== '>') from = entries.length ? entries[entries.length - 1][0] : '>';
        backlog.push(...entries);
      } catch (err) {
        if (running) logger.warn({ err: /** @type {Error} */ (err).message }, 'warm stream not read');
        await new Promise((resolve) => setTimeout(resolve, 1000));
        continue;
      }
      const newest = backlog.pop();
      if (newest && running) await warmOne(...newest);
    }
  }

  return {
    start() {
      running = true;
      loop = run().catch((err) => logger.error({ err }, 'warmer stopped'));
    },
    async stop() {
      running = false;
      reader.disconnect();
      await loop;
    },
  };
}
