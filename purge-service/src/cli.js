// purge-service dead-letters list [count] | replay [count]: the operator's view of what failed.
import { connectRedis, createLogger, loadConfig } from '@stack/lib';
import { settings } from './config.js';
import { deadLetters } from './dead-letters.js';

const [, , topic, action, count = '100'] = process.argv;
if (topic !== 'dead-letters' || !['list', 'replay'].includes(action)) {
  process.stderr.write('usage: purge-service dead-letters list|replay [count]\n');
  process.exit(2);
}
const config = loadConfig(settings);
const redis = connectRedis(config.REDIS_URL, createLogger('purge-cli', 'warn'));
await new Promise((resolve) => redis.once('ready', resolve));
const letters = deadLetters(redis, /** @type {any} */ (config));
if (action === 'list') {
  for (const letter of await letters.list(Number(count))) process.stdout.write(`${JSON.stringify(letter)}\n`);
} else {
  process.stdout.write(`replayed ${await letters.replay(Number(count))}\n`);
}
redis.disconnect();
