// purge-service dead-letters list [count] | replay [count]: the operator's view of what failed.
// purge-service takedown block|unblock <kind> <value> --reason "…" [--reference "…"] [--by "…"]
// purge-service takedown list | audit [count]
// purge-service whitelist backfill --from <block> --to <block> | import <file> | add <url>… | check <url>
import fs from 'node:fs';
import { parseArgs } from 'node:util';
import {
  HttpError,
  WHITELIST_KEY,
  connectRedis,
  createHiveClient,
  createLogger,
  loadConfig,
  recordReferences,
  resolveSource,
  unwrapOptions,
} from '@stack/lib';
import { settings } from './config.js';
import { deadLetters } from './dead-letters.js';
import { createTakedownStore, entriesOfBody } from './takedowns.js';
import { imagesOf } from './warm/posts.js';

const USAGE =
  'usage: purge-service dead-letters list|replay [count]\n' +
  '       purge-service takedown block|unblock <key|url|domain|pattern|account> <value> --reason "…" [--reference "…"] [--by "…"]\n' +
  '       purge-service takedown list | audit [count]\n' +
  '       purge-service whitelist backfill --from <block> --to <block> | import <file> | add <url>… | check <url>\n';

/** @param {string} text @param {number} [code] @returns {never} */
function fail(text, code = 2) {
  process.stderr.write(text);
  process.exit(code);
}

const { values: options, positionals } = (() => {
  try {
    return parseArgs({
      allowPositionals: true,
      options: {
        reason: { type: 'string' },
        reference: { type: 'string' },
        by: { type: 'string' },
        from: { type: 'string' },
        to: { type: 'string' },
      },
    });
  } catch (err) {
    return fail(`${/** @type {Error} */ (err).message}\n${USAGE}`);
  }
})();
const [topic, action, ...rest] = positionals;
const known =
  (topic === 'dead-letters' && ['list', 'replay'].includes(action)) ||
  (topic === 'takedown' && ['block', 'unblock', 'list', 'audit'].includes(action)) ||
  (topic === 'whitelist' && ['backfill', 'import', 'add', 'check'].includes(action));
if (!known) fail(USAGE);

const config = loadConfig(settings);
const redis = connectRedis(config, createLogger('purge-cli', 'fatal'));
// Redis refusing (a wrong password, none given) or away: said at once, not waited on for ever
await new Promise((resolve) => {
  redis.once('ready', resolve);
  redis.once('error', (err) =>
    fail(
      `purge-service: Redis at ${config.REDIS_URL}: ${err.message} (the stack's settings: . $STACK_DIR/env and $STACK_DIR/secrets/all.env)\n`,
      1,
    ),
  );
});
/** @param {unknown} value */
const print = (value) => process.stdout.write(`${JSON.stringify(value)}\n`);
try {
  if (topic === 'whitelist') await whitelist(action, rest);
  else if (topic === 'dead-letters') {
    const letters = deadLetters(redis, /** @type {any} */ (config));
    if (action === 'list') for (const letter of await letters.list(Number(rest[0] || 100))) print(letter);
    else process.stdout.write(`replayed ${await letters.replay(Number(rest[0] || 100))}\n`);
  } else {
    const store = createTakedownStore({
      redis,
      config: /** @type {import('@stack/lib/src/config-types.js').PurgeServiceConfig} */ (config),
    });
    if (action === 'list') for (const entry of await store.list()) print(entry);
    else if (action === 'audit') for (const record of await store.audit(Number(rest[0]) || 100)) print(record);
    else {
      if (rest.length !== 2) fail(USAGE);
      if (action === 'block' && !options.reason?.trim())
        throw new HttpError(400, 'invalid_parameter', { name: 'reason', reason: 'required: --reason' });
      const entries = entriesOfBody({ kind: rest[0], value: rest[1] }, store.unwrap, 1);
      const by = options.by || process.env.SUDO_USER || process.env.USER || 'cli';
      print(
        await store.apply({
          mode: action === 'block' ? 'add' : 'remove',
          source: 'admin',
          entries,
          by,
          reason: options.reason || '',
          reference: options.reference || '',
        }),
      );
    }
  }
} catch (err) {
  if (!(err instanceof HttpError)) throw err;
  redis.disconnect();
  fail(`${JSON.stringify(err)}\n`, 2);
}
redis.disconnect();

/**
 * The chain's proxy whitelist by hand (PROXY_WHITELIST=chain): the images of the posts and comments of a block
 * range (what the follower records as it goes, for blocks before it started), a file of URLs (one a line),
 * URLs given, or whether a URL is there. @param {string} action @param {string[]} args
 */
async function whitelist(action, args) {
  const unwrap = unwrapOptions(config);
  if (action === 'check') {
    if (args.length !== 1) fail(USAGE);
    const { id } = resolveSource(args[0], unwrap);
    const block = await redis.hget(WHITELIST_KEY, id);
    return print({
      url: args[0],
      source: id,
      whitelisted: block !== null,
      block: block === null ? null : Number(block),
    });
  }
  if (action === 'backfill') return print(await backfill(unwrap));
  const urls = action === 'add' ? args : fs.readFileSync(args[0] || fail(USAGE), 'utf8').split(/\r?\n/);
  const added = await recordReferences(redis, urls.map((url) => url.trim()).filter(Boolean), 0, unwrap);
  return print({ urls: urls.filter((url) => url.trim()).length, added });
}

/** The images of every comment op from --from to --to (inclusive), block by block. @param {import('@stack/lib/src/sources.js').UnwrapOptions} unwrap */
async function backfill(unwrap) {
  const [from, to] = [Number(options.from), Number(options.to)];
  if (!Number.isInteger(from) || !Number.isInteger(to) || from < 1 || to < from) fail(USAGE);
  const hive = createHiveClient({ urls: config.HIVE_API_URLS, timeoutMs: config.HIVE_API_TIMEOUT_MS });
  let added = 0;
  for (let block = from; block <= to; block += 1) {
    const ops = (await hive.call('condenser_api.get_ops_in_block', [block, false])) || [];
    for (const entry of ops) {
      const [name, body] = entry?.op || [];
      if (name === 'comment' && body) added += await recordReferences(redis, imagesOf(body), block, unwrap);
    }
  }
  return { from, to, added };
}
