// purge-service dead-letters list [count] | replay [count]: the operator's view of what failed.
// purge-service takedown block|unblock <kind> <value> --reason "…" [--reference "…"] [--by "…"]
// purge-service takedown list | audit [count]
import { parseArgs } from 'node:util';
import { HttpError, connectRedis, createLogger, loadConfig } from '@stack/lib';
import { settings } from './config.js';
import { deadLetters } from './dead-letters.js';
import { createTakedownStore, entriesOfBody } from './takedowns.js';

const USAGE =
  'usage: purge-service dead-letters list|replay [count]\n' +
  '       purge-service takedown block|unblock <key|url|domain|pattern|account> <value> --reason "…" [--reference "…"] [--by "…"]\n' +
  '       purge-service takedown list | audit [count]\n';

/** @param {string} text @param {number} [code] @returns {never} */
function fail(text, code = 2) {
  process.stderr.write(text);
  process.exit(code);
}

const { values: options, positionals } = (() => {
  try {
    return parseArgs({
      allowPositionals: true,
      options: { reason: { type: 'string' }, reference: { type: 'string' }, by: { type: 'string' } },
    });
  } catch (err) {
    return fail(`${/** @type {Error} */ (err).message}\n${USAGE}`);
  }
})();
const [topic, action, ...rest] = positionals;
const known =
  (topic === 'dead-letters' && ['list', 'replay'].includes(action)) ||
  (topic === 'takedown' && ['block', 'unblock', 'list', 'audit'].includes(action));
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
  if (topic === 'dead-letters') {
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
