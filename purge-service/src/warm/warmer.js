// Ready before the first reader (#41): the chain follower (../hive-follow.js) hands each `comment` operation
// (new posts and edits) to warmPost (posts.js), which queues the image URLs the frontends will show on a
// Redis stream; the warmer takes them from there, newest post first, and asks the edge for each, exactly as the
// frontends will (WARM_PATHS, once per Accept class of WARM_ACCEPTS), with X-Warm: 1. The origin fetches
// and keeps the original under every rule of a request (limits, SSRF, takedowns: a blocked source is a 451
// before any fetch) and makes the variant behind every reader's transform, beside their slots, at the
// lowest CPU priority (a 429 while it is busy, which the warmer waits out: ask.js); varnish keeps what
// comes back, so the first reader's request is a hit. Bounded (refusal.js):
// images per post, per author an hour, all authors a minute, bytes a day, authors and domains skipped
// (WARM_SKIP_*), each URL once a day, posts older than WARM_MAX_AGE_S left to their readers.
import os from 'node:os';
import { countWarmBytes, warmConcurrency } from '@stack/lib';
import { ensureGroup, fieldsOf } from '../purge/stream.js';
import { askEdge } from './ask.js';
import { warmUrl } from './posts.js';
import { warmRefusal } from './refusal.js';

/** @typedef {Array<[string, string[]]>} WarmEntries  stream entries: [id, [field, value, …]] */
/** @typedef {{ id: string, author: string, images: Array<{ url: string, first: boolean }>, left: number }} Post */

/**
 * The warmer: reads the stream in a consumer group (a crash leaves its entry pending, taken up again at
 * start), the newest post first, several images at once.
 * @param {{ redis: import('ioredis').Redis, config: import('@stack/lib/src/config-types.js').PurgeServiceConfig, logger: import('pino').Logger,
 *   metrics: ReturnType<typeof import('../metrics.js').createPurgeMetrics> }} deps
 */
export function createWarmer({ redis, config, logger, metrics }) {
  const consumer = `${os.hostname()}:${process.pid}`;
  const reader = redis.duplicate();
  reader.on('error', () => {});
  let running = false;
  /** @type {Promise<void> | null} */
  let loop = null;
  const going = () => running;
  const count = (/** @type {string} */ result, /** @type {string} */ reason = '') =>
    metrics.warmed.inc({ result, reason });

  /**
   * Every path and Accept class of one image (the thumbnail's too for a post's first); its outcome counted.
   * @param {string} author @param {string} url @param {boolean} first
   */
  async function warmImage(author, url, first) {
    const refusal = await warmRefusal(redis, config, author, url);
    if (refusal) return count('skipped', refusal);
    let bytes = 0;
    for (const template of first ? [...config.WARM_THUMBNAIL_PATHS, ...config.WARM_PATHS] : config.WARM_PATHS) {
      for (const accept of config.WARM_ACCEPTS) {
        const answer = await askEdge(warmUrl(config.WARM_EDGE_URL, template, url), accept, config, going).catch(() => ({
          status: 0,
          bytes: 0,
        }));
        bytes += answer.bytes;
        if (answer.status === 451) return count('skipped', 'blocked');
        if (answer.status !== 200) {
          logger.debug({ url, template, status: answer.status }, 'warm request not answered');
          return count('failed', failureReason(answer.status));
        }
      }
    }
    await countWarmBytes(redis, bytes);
    return count('warmed');
  }

  /**
   * A post taken off the stream: its images to warm, in order, or none (counted as skipped: its author is
   * skipped, or it is older than WARM_MAX_AGE_S, its readers came already; images past WARM_MAX_IMAGES_PER_POST).
   * @param {string} id @param {string[]} fields @returns {Post}
   */
  function takePost(id, fields = []) {
    const entry = fieldsOf(fields);
    /** @type {string[]} */
    let urls = [];
    try {
      urls = JSON.parse(entry.urls || '[]');
    } catch {
      logger.warn({ author: entry.author }, 'post not warmed: its entry is not JSON');
    }
    const skipAll = config.WARM_SKIP_AUTHORS.includes(entry.author)
      ? 'author'
      : Date.now() - Number(id.split('-')[0]) > config.WARM_MAX_AGE_S * 1000
        ? 'stale'
        : '';
    if (skipAll) {
      for (const _url of urls) count('skipped', skipAll);
      urls = [];
    }
    for (const _url of urls.slice(config.WARM_MAX_IMAGES_PER_POST)) count('skipped', 'post_cap');
    const images = urls.slice(0, config.WARM_MAX_IMAGES_PER_POST).map((url, i) => ({ url, first: i === 0 }));
    return { id, author: entry.author, images, left: images.length };
  }

  /** A post's every image done (warmed, skipped or failed): acknowledged. @param {Post} post */
  async function finish(post) {
    try {
      if (running) await redis.xack(config.WARM_STREAM, config.WARM_GROUP, post.id);
    } catch (err) {
      // left pending: taken up again at the next start
      logger.warn({ err: /** @type {Error} */ (err).message, author: post.author }, 'warmed post not acknowledged');
    }
    metrics.warmPosts.inc();
  }

  /**
   * WARM_CONCURRENCY images at once (two for each warm transform of the origins by default), the newest
   * post's first: its readers come soonest, while a backlog's (a burst of posts, a restart) came already or
   * come later. An image goes to the next free hand, so posts of one image keep every hand busy as a post of
   * many does; a post is acknowledged once each of its images is done, and every entry read stays pending in
   * the group until then, so a crash hands it over again at start.
   */
  async function run() {
    await ensureGroup(redis, config.WARM_STREAM, config.WARM_GROUP);
    const feed = { from: '0', backlog: /** @type {WarmEntries} */ ([]) };
    /** @type {Array<{ post: Post, url: string, first: boolean }>} */
    const images = [];
    /** @type {Promise<void> | null} */
    let reading = null;

    /** New entries on the backlog (one read at a time, whoever asks). */
    const read = () => {
      reading ??= readInto(reader, config, consumer, feed)
        .catch(async (err) => {
          if (running) logger.warn({ err: /** @type {Error} */ (err).message }, 'warm stream not read');
          await new Promise((resolve) => setTimeout(resolve, 1000));
        })
        .finally(() => {
          reading = null;
        });
      return reading;
    };

    /** The next image to warm: the posts' taken first, else the newest post's; null when none came. */
    const next = async () => {
      while (!images.length && running) {
        // what came meanwhile first, so a newer post goes before a backlog's (waits up to a second only when
        // there is no backlog)
        await read();
        if (images.length) break;
        const entry = feed.backlog.pop();
        if (!entry) return null;
        const post = takePost(...entry);
        if (!post.images.length) await finish(post);
        images.push(...post.images.map((image) => ({ post, ...image })));
      }
      return images.shift() ?? null;
    };

    const hand = async () => {
      while (running) {
        const image = await next();
        if (!image || !running) continue;
        try {
          await warmImage(image.post.author, image.url, image.first);
        } catch (err) {
          logger.warn({ err: /** @type {Error} */ (err).message, author: image.post.author }, 'image not warmed');
          count('failed', 'error');
        }
        image.post.left -= 1;
        if (image.post.left === 0) await finish(image.post);
      }
    };
    await Promise.all(Array.from({ length: warmConcurrency(config) }, hand));
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

/** The metric's reason for an edge answer other than 200 or 451. @param {number} status */
function failureReason(status) {
  if (status === 429 || status === 503) return 'busy';
  return status === 0 ? 'error' : `status_${status}`;
}

/**
 * Entries of the warm stream for `consumer` onto `feed.backlog`: its own pending ones first (a crash's, from
 * `feed.from`), then new ones (`from` '>'), waiting up to a second for one when the backlog is empty.
 * @param {import('ioredis').Redis} reader @param {import('@stack/lib/src/config-types.js').PurgeServiceConfig} config
 * @param {string} consumer @param {{ from: string, backlog: WarmEntries }} feed
 */
async function readInto(reader, config, consumer, feed) {
  const { WARM_GROUP: group, WARM_STREAM: stream } = config;
  const { from } = feed;
  const answer = /** @type {any} */ (
    from === '>' && feed.backlog.length === 0
      ? await reader.xreadgroup('GROUP', group, consumer, 'COUNT', 100, 'BLOCK', 1000, 'STREAMS', stream, from)
      : await reader.xreadgroup('GROUP', group, consumer, 'COUNT', 100, 'STREAMS', stream, from)
  );
  /** @type {WarmEntries} */
  const entries = answer?.[0]?.[1] || [];
  // this consumer's pending entries are read once, from past the last of them read; then new ones
  if (from !== '>') feed.from = entries.length ? entries[entries.length - 1][0] : '>';
  feed.backlog.push(...entries);
}
