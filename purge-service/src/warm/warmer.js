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
import { countWarmBytes } from '@stack/lib';
import { ensureGroup, fieldsOf } from '../purge/stream.js';
import { askEdge } from './ask.js';
import { warmUrl } from './posts.js';
import { warmRefusal } from './refusal.js';

/** @typedef {Array<[string, string[]]>} WarmEntries  stream entries: [id, [field, value, …]] */

/**
 * The warmer: reads the stream in a consumer group (a crash leaves its entry pending, taken up again at
 * start), one post at a time, the newest first.
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

  /** One stream entry warmed (or skipped), then acknowledged. @param {string} id @param {string[]} fields */
  async function warmOne(id, fields = []) {
    const entry = fieldsOf(fields);
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
    await ensureGroup(redis, config.WARM_STREAM, config.WARM_GROUP);
    let from = '0';
    /** @type {WarmEntries} */
    const backlog = [];
    while (running) {
      try {
        const entries = await readEntries(reader, config, consumer, from, backlog.length === 0);
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

/** The metric's reason for an edge answer other than 200 or 451. @param {number} status */
function failureReason(status) {
  if (status === 429 || status === 503) return 'busy';
  return status === 0 ? 'error' : `status_${status}`;
}

/**
 * Entries of the warm stream for `consumer`: its own pending ones first (a crash's, from `from`), then new
 * ones (`from` '>'), waiting up to a second for one when `wait`.
 * @param {import('ioredis').Redis} reader @param {import('@stack/lib/src/config-types.js').PurgeServiceConfig} config
 * @param {string} consumer @param {string} from @param {boolean} wait
 * @returns {Promise<WarmEntries>}
 */
async function readEntries(reader, config, consumer, from, wait) {
  const { WARM_GROUP: group, WARM_STREAM: stream } = config;
  const answer = /** @type {any} */ (
    from === '>' && wait
      ? await reader.xreadgroup('GROUP', group, consumer, 'COUNT', 100, 'BLOCK', 1000, 'STREAMS', stream, from)
      : await reader.xreadgroup('GROUP', group, consumer, 'COUNT', 100, 'STREAMS', stream, from)
  );
  return answer?.[0]?.[1] || [];
}
