import { avatarLastKey, enqueuePurge, hiveMapping, recordReferences, unwrapOptions } from '@stack/lib';
import { inRounds } from './rounds.js';
import { imagesOf, warmPost } from './warm/posts.js';

const CURSOR = 'purge:hive:cursor';
const PROFILE_OPS = new Set(['account_update', 'account_update2']);

/**
 * What a block's operations change: account_update / account_update2 whose profile image or cover differs
 * from the last mapping the resolver saw (unknown last mapping: both may have changed).
 * @param {any[]} ops condenser_api.get_ops_in_block's result @param {import('ioredis').Redis} redis
 */
export async function changesIn(ops, redis) {
  /** @type {import('@stack/lib/src/purge-queue.js').PurgeEvent[]} */
  const events = [];
  for (const entry of ops) {
    const [name, body] = entry?.op || [];
    if (!PROFILE_OPS.has(name) || !body?.account) continue;
    if (!body.json_metadata && !body.posting_json_metadata) continue;
    const next = hiveMapping(body);
    const lastText = await redis.get(avatarLastKey(body.account));
    const last = lastText ? JSON.parse(lastText) : null;
    const avatar = !last || last.avatar !== next.avatar;
    const cover = !last || last.cover !== next.cover;
    if (!avatar && !cover) continue;
    const kind = avatar && cover ? 'both' : avatar ? 'avatar' : 'cover';
    events.push({
      account: body.account,
      kind,
      avatar: next.avatar || undefined,
      cover: next.cover || undefined,
      source: 'hive',
    });
  }
  return events;
}

/**
 * Follows the chain block by block from a stored cursor. The cursor moves only after the block's events
 * are queued, so a restart neither loses nor skips a block (it may repeat one: purges are idempotent).
 * @param {{ hive: { call: (method: string, params: unknown) => Promise<any> }, redis: import('ioredis').Redis,
 *   config: import('@stack/lib/src/config-types.js').PurgeServiceConfig, logger: import('pino').Logger, metrics: ReturnType<typeof import('./metrics.js').createPurgeMetrics> }} deps
 */
export function createFollower({ hive, redis, config, logger, metrics }) {
  const unwrap = unwrapOptions(config);
  async function catchUp() {
    const props = await hive.call('condenser_api.get_dynamic_global_properties', []);
    const head = Number(props.head_block_number);
    const stored = await redis.get(CURSOR);
    let cursor = stored ? Number(stored) : (config.HIVE_FOLLOW_START_BLOCK || head) - 1;
    while (rounds.running() && cursor < head) {
      const block = cursor + 1;
      const ops = await hive.call('condenser_api.get_ops_in_block', [block, false]);
      for (const event of await changesIn(ops || [], redis)) {
        await enqueuePurge(redis, config.PURGE_STREAM, event, { durability: config });
        metrics.received.inc({ source: 'hive', result: 'queued' });
        metrics.queued.inc({ source: 'hive' });
      }
      // the whitelist first: the warmer's requests for a new post's images are then let through
      if (config.PROXY_WHITELIST === 'chain') await recordImages(ops || [], block);
      if (config.WARM) await warmPosts(ops || []);
      await redis.set(CURSOR, String(block));
      metrics.followedBlock.set(block);
      cursor = block;
    }
  }

  /**
   * Every image URL of a block's posts and comments (comment ops: new ones and edits) into the chain's proxy
   * whitelist (PROXY_WHITELIST=chain). @param {any[]} ops @param {number} block
   */
  async function recordImages(ops, block) {
    for (const entry of ops) {
      const [name, body] = entry?.op || [];
      if (name !== 'comment' || !body) continue;
      const added = await recordReferences(redis, imagesOf(body), block, unwrap);
      if (added) metrics.whitelisted.inc(added);
    }
  }

  /** New posts and edits (comment ops) handed to the warmer (warm/). @param {any[]} ops */
  async function warmPosts(ops) {
    for (const entry of ops) {
      const [name, body] = entry?.op || [];
      if (name === 'comment' && body && (await warmPost(redis, config, body)))
        metrics.received.inc({ source: 'hive', result: 'warm' });
    }
  }

  const rounds = inRounds({ work: catchUp, everyMs: config.HIVE_FOLLOW_POLL_MS, logger, what: 'hive follower' });
  return { start: rounds.start, stop: rounds.stop };
}
